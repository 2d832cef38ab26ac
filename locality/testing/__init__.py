"""Code that checks the library rather than serves a job: what the tests and benchmarks run beside it.

Nothing in ``locality`` imports this package, and no job or command runs it
(as ``pyspark.testing`` or ``numpy.testing`` beside their libraries); it is left
out of the wheel (``pyproject.toml``), so an installed ``locality`` holds only
what runs:

- :mod:`locality.testing.simulation`: a simulated cluster that applies
  migration plans to live keyed state with Caneill et al.'s protocol, the
  proof that a plan loses and duplicates nothing (``tests/test_simulation.py``);
- :mod:`locality.testing.lossy_counting`: Manku and Motwani's lossy counting
  and Gedik's sliding emulation of it, the frequent-key finder of Gedik's
  hybrid partitioning, measured beside the Space-Saving sketch the jobs use
  (``tests/test_rebalance_gedik.py``, ``benchmarks/bench_rebalance_gedik.py``).
"""
