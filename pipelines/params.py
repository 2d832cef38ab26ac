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

from locality._validation import check_duration, check_option, check_wait
from locality.defaults import DEFAULT_GRAPH_STATS_BACKEND, DEFAULT_LOCK_TIMEOUT
from locality.engine_sketches import SketchSelection, SketchWindow
from locality.errors import InvalidParameterError
from locality.online import OnlineSettings
from locality.optimizer import OptimizerSettings
from locality.rebalance.options import RebalanceOptions
from locality.schedule import point_of
from locality.store import ConfigStore, fingerprint
from locality.topology import Topology
from pipelines.graph_backend import BACKENDS
from pipelines.trace import TraceSpec, input_identity

__all__ = ["JobParams", "OfflineParams", "OnlineParams"]


@dataclass(frozen=True)
class JobParams(OptimizerSettings):
    """What both jobs take: the trace, how to count it, how to partition and route it, the store's lock.

    The :class:`~locality.optimizer.OptimizerSettings` (``alpha``, ``hash``,
    ``capacity``, ``top_pairs``, ``max_entries``, ``seed``), and: ``exact``
    counts with Spark aggregations instead of sketches; ``lock_timeout`` is how
    long to wait for another writer of the store. ``trace`` is None only for
    an online run on the engines' sketches (:class:`OnlineParams`' ``sketches``).
    """

    trace: TraceSpec | None
    _: KW_ONLY
    exact: bool = False
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT

    #: How the checks name the job.
    _OWNER = "the job"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_wait(self.lock_timeout, "lock_timeout", self._OWNER)


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
    graph_stats_backend: str = DEFAULT_GRAPH_STATS_BACKEND
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
class OnlineParams(JobParams, OnlineSettings):
    """Everything one run of the online job needs: the shared parameters, the store, and how to change the tables.

    How the run changes the tables is :class:`locality.online.OnlineSettings`
    (``topology``, ``decay``, ``min_gain``, ``max_imbalance``, ``rebalance``,
    ``horizon``, the balance window, ``incremental``), which
    :func:`locality.online.run_window` reads. The job's own: ``store``;
    ``switch_after``, the lead from the window's end at which its version is
    in force for routers by point; ``window`` (``--window``) says the trace's
    time range is its last ``window``, resolved against the trace once Spark
    runs (:func:`pipelines.trace.last_window`): it gives the run an end, as
    ``--end`` does. ``sketches`` reads the window of the engines' sketches it
    selects from the store's ``sketches/`` instead of a trace (``trace`` None,
    ``capacity`` the sketches'; no Spark: :func:`pipelines.online.run_sketches`).
    """

    store: str
    _: KW_ONLY
    switch_after: str | None = None
    window: str | None = None
    sketches: SketchSelection | None = None

    _OWNER = "the online job"

    def __post_init__(self) -> None:
        owner = self._OWNER
        self._check_input(owner)
        super().__post_init__()
        if self.switch_after is not None:
            check_duration(self.switch_after, "switch_after", owner)
            if self.trace is not None and self.trace.time_range()[1] is None and self.window is None:
                raise InvalidParameterError(
                    f"switch_after in {owner} schedules the version from the window's end + {self.switch_after}: "
                    "it needs a window with an end (the 'window' parameter, or the trace's end)",
                    parameter="switch_after",
                )
        if self.topology is not None and self.trace is not None:  # the sketches' operators: checked once read
            self.trace.check_operators(self.topology.operators)

    def _check_input(self, owner: str) -> None:
        """A trace or the engines' sketches, and with sketches nothing that only a trace gives."""
        if (self.trace is None) == (self.sketches is None):
            raise InvalidParameterError(
                f"{owner} reads either a trace or the engines' sketches (the 'sketches' parameter); got "
                + ("both" if self.trace is not None else "neither"),
                parameter="sketches",
            )
        if self.sketches is None:
            return
        if not isinstance(self.sketches, SketchSelection):
            raise InvalidParameterError(
                f"the 'sketches' parameter of {owner} must be a SketchSelection; got {type(self.sketches).__name__}",
                parameter="sketches",
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
                "window is the 'sketches' parameter's; a balance window replays the trace since it began)",
                parameter=given[0],
            )

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
        """What, besides the input, decides a window's outcome (its identity in the store).

        The rebalance options are flat, as they were before they became one object (their defaults without
        a rebalancer), so that a window keeps its identity.
        """
        params = asdict(self)
        params.update(asdict(self.rebalance or RebalanceOptions()))
        method = params.pop("method")
        params["rebalance"] = method if self.rebalance is not None else None
        if not self.incremental:  # the windows of runs made before the option existed keep their identity
            params.pop("incremental")
        params.pop("store")
        params.pop("lock_timeout")
        params.pop("window")  # resolved into the trace's time range, which the identity holds
        params.pop("sketches")  # resolved into the intervals read, which the identity holds
        params.pop("trace")
        params["topology"] = self.topology.to_dict() if self.topology else None
        return params
