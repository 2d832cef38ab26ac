"""The defaults that several layers share, each written once.

The command line shows them (``--alpha  [default: 1.03]``), the jobs'
parameters and the library's functions take them as their defaults, so
changing one here changes it everywhere at once. A default that belongs to
one function alone stays in its signature. ``tests/test_defaults.py`` fails
when one of these values is written again as a literal default, or when an
option, a job's parameter and the library's parameter behind it default to
different values.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_HASH",
    "DEFAULT_CAPACITY",
    "DEFAULT_THETA_MAX",
    "DEFAULT_STATE_WEIGHT",
    "DEFAULT_DECAY",
    "DEFAULT_MIN_GAIN",
    "DEFAULT_MAX_IMBALANCE",
    "DEFAULT_HORIZON",
    "DEFAULT_MIN_BLENDED_WEIGHT",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_SEED",
    "DEFAULT_INSTANCES_PER_SERVER",
    "DEFAULT_GRAPH_STATS_BACKEND",
    "DEFAULT_PERIOD",
    "DEFAULT_TS",
    "DEFAULT_REPLAY_MODE",
    "DEFAULT_REBALANCE_EVERY",
    "DEFAULT_REBALANCE_FORECAST",
    "DEFAULT_REBALANCE_HISTORY",
    "DEFAULT_SPLIT_MERGE",
    "DEFAULT_CHECK_SERVERS",
    "DEFAULT_SWITCH_TIMEOUT",
]

#: The balance bound alpha: the most an instance may carry, as a multiple of its fair share of its operator's load
#: (:mod:`locality.imbalance`; Caneill et al., Middleware 2016).
DEFAULT_ALPHA = 1.03
#: The engine whose hash places the keys without a table entry (``--hash``, :data:`locality.hashing.ENGINES`).
DEFAULT_HASH = "kafka"
#: Counters per Space-Saving sketch in the jobs: exact on every shared trace (their distinct keys and pairs fit).
DEFAULT_CAPACITY = 100_000
#: The skew rebalancers' bound theta_max: the most max |load - fair| / fair may be after a run (Fang et al., HPDC 2017).
DEFAULT_THETA_MAX = 0.08
#: The locality-aware rebalancers' local hops one unit of migrated state is worth (``--state-weight``). Measured on
#: the IRA and flights replays (benchmarks/RESULTS.md): lower moves more state for little locality, higher loses
#: locality.
DEFAULT_STATE_WEIGHT = 1.0
#: Weight of a window one period older than the latest, when the online job blends its history. Measured on the
#: weekly flights and tweet replays (benchmarks/RESULTS.md): decayed history beats the paper's reset to the latest
#: window. 0 forgets (the latest window alone).
DEFAULT_DECAY = 0.85
#: Hops made local over the window per unit of state moved needed to publish
#: (:func:`locality.reconfiguration.decide`). On the weekly flights replay (with DEFAULT_MAX_IMBALANCE) it publishes
#: 27 of 52 weeks and keeps 60.1% locality (60.4% publishing every week), moving 11.5% of the state per
#: reconfiguration instead of 25.6% (benchmarks/RESULTS.md).
DEFAULT_MIN_GAIN = 0.1
#: Imbalance of the tables in force on the window above which the online job publishes whatever the gain.
DEFAULT_MAX_IMBALANCE = 1.10
#: How long a rebalancing run's moves are expected to serve (until the next reconfiguration): a day, less than the
#: weekly replay's average (half a week), so that production errs on the side of moving less.
DEFAULT_HORIZON = "1D"
#: Pairs and keys whose blended weight falls below this are dropped from a blended history (decayed history would
#: otherwise grow without bound; at decay 0.85 a pair seen once is dropped 15 windows later).
DEFAULT_MIN_BLENDED_WEIGHT = 0.1
#: Seconds a writer of a store waits for another writer to finish before giving up (``--lock-timeout``).
DEFAULT_LOCK_TIMEOUT = 300.0
#: Seconds a writer's lease of a store lasts unless renewed (renewed every third of it): how long a writer that
#: died on another host blocks the next one (on its own host, a dead writer frees the lease at once)
DEFAULT_LEASE_SECONDS = 60.0
#: The seed of every seeded choice (METIS, the generators, a shuffle) when the caller gives none (``--seed``).
DEFAULT_SEED = 0
#: Instances of each operator on each server of a uniform topology (``--instances-per-server``).
DEFAULT_INSTANCES_PER_SERVER = 1
#: Where the offline job computes the key graph's statistics (``--graph-stats-backend``,
#: :mod:`pipelines.graph_backend`): ``auto`` picks by the graph's size.
DEFAULT_GRAPH_STATS_BACKEND = "auto"
#: The length of a replay's windows (``--period``): a week, the paper's reconfiguration period.
DEFAULT_PERIOD = "7D"
#: The timestamp column of a timed trace (the replay's ``--ts``).
DEFAULT_TS = "ts"
#: How a replay routes its windows (``--mode``, :data:`locality.replay.MODES`): reconfigured every window.
DEFAULT_REPLAY_MODE = "online"
#: How often a replay's rebalancer runs within a window (``--rebalance-every``, ``RebalancePolicy.every``): once a
#: day, whichever rebalancer. Every 6 hours, Mixed loses next-week locality and moves more state for the same balance
#: on the weekly flights, and ``local`` balances the IRA weeks better but moves more of their state
#: (benchmarks/RESULTS.md, "One home per default"); the default stays on the side of state, as the state weight's
#: does, and ``--rebalance-every 6h`` (or ``1h``) asks for the tighter balance (docs/design-choices.md).
DEFAULT_REBALANCE_EVERY = "1D"
#: The window rebalancer's forecast of each key's next-interval load (``--rebalance-forecast``,
#: :func:`locality.forecast.parse_forecast`): the mean of the intervals it reads.
DEFAULT_REBALANCE_FORECAST = "mean"
#: How far back the window rebalancer's forecast reads (``--rebalance-history``); at least one interval.
DEFAULT_REBALANCE_HISTORY = "2D"
#: How an operator combines a split key's partial states (``--split-merge``, :data:`locality.migration.SPLIT_MERGES`):
#: folded into the key's instance when the split ends, their moves counted, the side of state.
DEFAULT_SPLIT_MERGE = "fold"
#: Servers a dataset check routes on (``locality datasets --check``, :func:`locality.datasets.check.card_figures`).
DEFAULT_CHECK_SERVERS = 6
#: Seconds each phase of a Flink switch (stop, rewrite, restart) may take (``--timeout``).
DEFAULT_SWITCH_TIMEOUT = 300.0
