"""The analyses behind ``notebooks/``, one module per question they answer.

- :mod:`~locality.analysis.traces`: what the trace looks like (reading, halves,
  key skew, pair concentration, per-window key loads);
- :mod:`~locality.analysis.sweeps`: what routing reaches on it as a parameter
  varies (servers, pairs kept, balance stages, table cost, windows of a
  replay, skew rebalancers), beside hash routing;
- :mod:`~locality.analysis.figures`: the figures of both, matplotlib object API
  (never ``pyplot``), hash routing drawn beside every result.

Everything is computed by the library; these modules loop over parameters and
gather figures. Every name is importable from ``locality.analysis`` itself, as
the notebooks do (``from locality import analysis``).
"""

from locality.analysis import figures, sweeps, traces
from locality.analysis.figures import *  # noqa: F403  (networkx's layout: each module's __all__ is re-exported)
from locality.analysis.sweeps import *  # noqa: F403
from locality.analysis.traces import *  # noqa: F403

__all__ = [*traces.__all__, *sweeps.__all__, *figures.__all__]
