"""The Spark jobs of locality: thin drivers around the library.

Each job reads a trace with Spark, calls :mod:`locality` per partition
(sketching) and on the driver (partitioning, routing), and writes into the
configuration store. ``run(spark, params)`` does the work with a session it is
given; only ``main(argv)`` (and the ``locality`` CLI) build a session.
"""
