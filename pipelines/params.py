"""The jobs' parameters: one set shared by the nightly and the online job, each job's own beside it.

Every parameter is checked once, when its dataclass is built (the boundary:
the CLI, ``spark-submit``, a notebook), with messages that name it; the jobs'
``run`` are :func:`~locality._validation.boundary` functions, so the library
steps they call take the parameters as checked. The defaults are
:mod:`locality.defaults`'.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, asdict, dataclass
from datetime import datetime

from locality._validation import (
    check_duration,
    check_integer,
    check_interval,
    check_option,
    check_wait,
)
from locality.defaults import (
    DEFAULT_ALPHA,
    DEFAULT_CAPACITY,
    DEFAULT_DECAY,
    DEFAULT_HASH,
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MAX_IMBALANCE,
    DEFAULT_MIN_GAIN,
    DEFAULT_STATE_WEIGHT,
    DEFAULT_THETA_MAX,
)
from locality.engine_sketches import SketchSelection, SketchWindow
from locality.errors import InvalidParameterError
from locality.hashing import ENGINES
from locality.optimizer import check_optimizer_parameters
from locality.rebalance import check_locality_aware, check_rebalance_bounds, check_split_options, check_table_method
from locality.schedule import point_of
from locality.store import ConfigStore, fingerprint
from locality.time_range import parse_time
from locality.topology import Topology
from pipelines.graph_backend import BACKENDS
from pipelines.trace import TraceSpec, input_identity

__all__ = ["JobParams", "OfflineParams", "OnlineParams"]


@dataclass(frozen=True)
class JobParams:
    """What both jobs take: the trace, how to count it, how to partition and route it, the store's lock.

    ``alpha`` bounds every operator's instance loads; ``hash`` names the
    engine whose hash places the keys without an entry; ``capacity`` is the
    counters per Space-Saving sketch (unless ``exact``); ``top_pairs`` keeps
    the heaviest pairs of each hop in the graph; ``max_entries`` caps each
    table; ``seed`` is METIS's; ``lock_timeout`` how long to wait for another
    writer of the store. ``trace`` is None only for an online run on the
    engines' sketches (:class:`OnlineParams`' ``sketches``).
    """

    trace: TraceSpec | None
    _: KW_ONLY
    alpha: float = DEFAULT_ALPHA
    hash: str = DEFAULT_HASH
    capacity: int = DEFAULT_CAPACITY
    exact: bool = False
    top_pairs: int | None = None
    max_entries: int | None = None
    seed: int = 0
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT

    #: How the checks name the job.
    _OWNER = "the job"

    def __post_init__(self) -> None:
        owner = self._OWNER
        check_optimizer_parameters(owner, alpha=self.alpha, seed=self.seed, max_entries=self.max_entries)
        check_wait(self.lock_timeout, "lock_timeout", owner)
        check_option(self.hash, "hash", owner, ENGINES)
        check_integer(self.capacity, "capacity", owner, lower=1)
        if self.top_pairs is not None:
            check_integer(self.top_pairs, "top_pairs", owner, lower=1)


@dataclass(frozen=True)
class OfflineParams(JobParams):
    """Everything the nightly job needs: the shared parameters, the topology and the store.

    ``graph_stats`` computes the key graph's statistics for the report, where
    ``graph_stats_backend`` says (``auto``: the driver below the measured
    crossover, :mod:`pipelines.graph_backend`); ``replay`` replays the trace
    for exact in-sample figures.
    """

    topology: Topology
    store: str
    _: KW_ONLY
    graph_stats: bool = True
    graph_stats_backend: str = "auto"
    replay: bool = False

    _OWNER = "the offline job"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_option(self.graph_stats_backend, "graph_stats_backend", self._OWNER, BACKENDS)
        self.trace.check_operators(self.topology.operators)

    def fingerprint_parameters(self) -> dict:
        """What, besides the input files, decides the tables (the store's idempotency key)."""
        trace = {k: v for k, v in self.trace.describe().items() if k != "path"}
        return {
            "trace": trace,
            "topology": self.topology.to_dict(),
            "alpha": self.alpha,
            "hash": self.hash,
            "top_pairs": self.top_pairs,
            "capacity": None if self.exact else self.capacity,
            "exact": self.exact,
            "max_entries": self.max_entries,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class OnlineParams(JobParams):
    """Everything one run of the online job needs: the shared parameters, the store, and how to change the tables.

    ``topology`` and ``hash`` are used when the store is empty; afterwards the
    current version's fallback hash is kept, and so is its topology unless
    ``topology`` names another one: the run then publishes a version for
    that topology, servers added or removed, with a plan that moves little
    state (:func:`locality.reconfiguration.reconfigure`), whatever the gain.
    ``incremental`` starts a reconfiguration from the version in force
    instead of a new METIS partition (``reconfigure``'s ``incremental``).
    ``window`` (``--window``) says the trace's time range is its last ``window``,
    resolved against the trace once Spark runs (:func:`pipelines.trace.last_window`):
    it gives the run an end, as ``--end`` does. ``sketches`` reads the window
    of the engines' sketches it selects from the store's ``sketches/`` instead
    of a trace (``trace`` None, ``capacity`` the sketches'; no Spark:
    :func:`pipelines.online.run_sketches`). The other parameters are
    :func:`locality.online.run_window`'s.
    """

    store: str
    topology: Topology | None = None
    _: KW_ONLY
    decay: float = DEFAULT_DECAY
    min_gain: float = DEFAULT_MIN_GAIN
    max_imbalance: float = DEFAULT_MAX_IMBALANCE
    rebalance: str | None = None
    theta_max: float = DEFAULT_THETA_MAX
    state_weight: float = DEFAULT_STATE_WEIGHT
    horizon: str | None = None
    balance_since: str | None = None
    balance_until: str | None = None
    split_hot_keys: bool = False
    split_share: float | None = None
    split_merge: str = "fold"
    switch_after: str | None = None
    incremental: bool = False
    window: str | None = None
    sketches: SketchSelection | None = None

    _OWNER = "the online job"

    def __post_init__(self) -> None:
        owner = self._OWNER
        self._check_input(owner)
        if self.rebalance is not None:
            check_table_method(self.rebalance, "rebalance", owner)
            if self.incremental:
                raise InvalidParameterError(
                    f"incremental in {owner} starts a reconfiguration from the version in force; a rebalancing run "
                    f"(--rebalance {self.rebalance}) adjusts that version already: give one or the other"
                )
            check_rebalance_bounds(self.theta_max, self.state_weight, owner)
        if self.horizon is not None:
            check_duration(self.horizon, "horizon", owner)
        self._check_balance_window(owner)
        if self.switch_after is not None:
            check_duration(self.switch_after, "switch_after", owner)
            if self.trace is not None and self.trace.time_range()[1] is None and self.window is None:
                raise InvalidParameterError(
                    f"switch_after in {owner} schedules the version from the window's end + {self.switch_after}: "
                    "it needs a window with an end (--window, or --end)"
                )
        check_split_options(self.split_merge, self.split_share, self.split_hot_keys, self.rebalance, "rebalance", owner)
        super().__post_init__()
        check_interval(self.min_gain, "min_gain", owner, lower=0.0)
        check_interval(self.max_imbalance, "max_imbalance", owner, lower=self.alpha)
        check_interval(self.decay, "decay", owner, lower=0.0, upper=1.0)
        if self.topology is not None and self.trace is not None:  # the sketches' operators: checked once read
            self.trace.check_operators(self.topology.operators)

    def _check_input(self, owner: str) -> None:
        """A trace or the engines' sketches, and with sketches nothing that only a trace gives."""
        if (self.trace is None) == (self.sketches is None):
            raise InvalidParameterError(
                f"{owner} reads either a trace or the engines' sketches (the 'sketches' parameter); got "
                + ("both" if self.trace is not None else "neither")
            )
        if self.sketches is None:
            return
        if not isinstance(self.sketches, SketchSelection):
            raise InvalidParameterError(
                f"the 'sketches' parameter of {owner} must be a SketchSelection; got {type(self.sketches).__name__}"
            )
        given = [
            name
            for name, value in (
                ("exact", self.exact),
                ("window", self.window),
                ("balance_since", self.balance_since),
                ("balance_until", self.balance_until),
            )
            if value
        ]
        if given:
            raise InvalidParameterError(
                f"{owner} on the engines' sketches reads no trace: {', '.join(given)} need one (the sketches' "
                "window is the 'sketches' parameter's; a balance window replays the trace since it began)"
            )

    def _check_balance_window(self, owner: str) -> None:
        if self.balance_since is None and self.balance_until is None:
            return
        if self.balance_since is None or self.balance_until is None:
            raise InvalidParameterError(
                f"the 'balance_since' and 'balance_until' parameters of {owner} go together (the balance window)"
            )
        check_locality_aware(self.rebalance, "rebalance", owner, "a balance window")
        if self.horizon is not None:
            raise InvalidParameterError(
                f"give {owner} either a horizon or a balance window: with a balance window the moves serve "
                "until its end (balance_until)"
            )
        since, until = self.balance_window()
        if until <= since:
            raise InvalidParameterError(
                f"the balance window of {owner} must end after it begins; "
                f"got {self.balance_since} .. {self.balance_until}"
            )

    def balance_window(self) -> tuple[datetime, datetime]:
        """``(balance_since, balance_until)`` as UTC-aware datetimes."""
        return parse_time(self.balance_since, "balance_since"), parse_time(self.balance_until, "balance_until")

    def switch_point(self, end: datetime | None = None) -> int | None:
        """The point (event time, ms) from which this run's version is in force: the window's end + switch_after.

        ``end`` is the window's end when the trace does not give it (the engines' sketches).
        """
        if self.switch_after is None:
            return None
        end = self.trace.time_range()[1] if end is None else end
        return point_of(end + check_duration(self.switch_after, "switch_after", self._OWNER))

    def window_key(self) -> str:
        """Identity of the window and the parameters (input files, time range, parameters)."""
        params = self._decision_parameters()
        params["trace"] = self.trace.describe()
        return fingerprint(input_identity(self.trace, ConfigStore(self.store).digest_cache), params)[:32]

    def sketch_window_name(self, sketches: SketchWindow) -> str:
        """The name of a window of the engines' sketches: ``sketches-<from>-<to>-<identity>``.

        ``<from>-<to>`` is the span of the intervals read; the identity is the
        objects read (names and bytes) and the parameters, so a rerun on the
        same sketches returns the recorded decision, and a sketch published
        late into the window makes it a new one.
        """
        params = self._decision_parameters()
        return f"sketches-{sketches.span.name}-{fingerprint([(sketches.digest,)], params)[:16]}"

    def _decision_parameters(self) -> dict:
        """What, besides the input, decides a window's outcome (its identity in the store)."""
        params = asdict(self)
        if not self.incremental:  # the windows of runs made before the option existed keep their identity
            params.pop("incremental")
        params.pop("store")
        params.pop("lock_timeout")
        params.pop("window")  # resolved into the trace's time range, which the identity holds
        params.pop("sketches")  # resolved into the intervals read, which the identity holds
        params.pop("trace")
        params["topology"] = self.topology.to_dict() if self.topology else None
        return params
