"""From key counts to a routing configuration: graph, METIS, placement, tables.

:func:`optimize` is the driver-side step shared by the Spark jobs, the CLI and
the notebooks: it takes a key graph (built from sketches or exact counts) and
returns the configuration with everything measured on the way; the tables
of a placement are written here too (:func:`build_routing`: an entry for each
key placed off its fallback instance), beside their only caller.
:class:`LocalityOptimizer` wraps the whole chain for an in-memory trace
(pandas / Arrow), following the estimator contract: ``fit`` returns ``self``
and leaves ``config_``, ``graph_``, ``partition_``, ``placement_`` and
``report_`` behind.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field

import numpy as np
import pandas as pd

from locality._stopwatch import Stopwatch
from locality._validation import (
    boundary,
    check_at_most,
    check_integer,
    check_interval,
    check_option,
    outermost,
)
from locality.counts import count_keys
from locality.defaults import DEFAULT_ALPHA, DEFAULT_CAPACITY, DEFAULT_HASH, DEFAULT_SEED
from locality.elastic import carried_over
from locality.errors import InvalidParameterError
from locality.evaluation import EvaluationReport, evaluate
from locality.graph import KeyGraph
from locality.hashing import ENGINES, FallbackHash, make_fallback
from locality.migration import relabel_parts
from locality.partition import MAX_SEED, SEED_LIMIT, Partition, partition_key_graph
from locality.placement import Placement, connection_to, place_keys
from locality.routing import RoutingConfiguration, RoutingTable
from locality.topology import Topology

__all__ = [
    "OptimizerSettings",
    "Optimization",
    "optimize",
    "make_fallbacks",
    "LocalityOptimizer",
    "check_optimizer_parameters",
    "build_routing",
    "check_fallbacks",
    "entry_values",
]

logger = logging.getLogger(__name__)


@dataclass
class Optimization:
    """A configuration and how it was made (``stopwatch``: seconds per stage, see :func:`optimize`)."""

    config: RoutingConfiguration
    graph: KeyGraph
    partition: Partition
    placement: Placement
    preferred: np.ndarray
    seconds: float
    stopwatch: Stopwatch = field(default_factory=Stopwatch)

    def summary(self) -> dict:
        """JSON-ready figures on the graph (expected, before replaying any trace)."""
        return {
            "vertices": self.graph.n_vertices,
            "edges": self.graph.n_edges,
            "metis_seconds": self.partition.metis_seconds,
            "metis_cuts": self.partition.n_cuts,
            "optimize_seconds": self.seconds,
            "graph_locality_metis": self.partition.locality,
            "graph_locality": self.placement.locality,
            "expected_imbalance": self.placement.imbalance,
            "repair_moves": self.placement.moves,
            "feasible": self.partition.feasible,
            "hot_keys": [h.to_dict() for h in self.partition.hot_keys],
            "table_entries": self.config.table_sizes(),
            "stage_seconds": self.stopwatch.to_dict(),
        }


def make_fallbacks(topology: Topology, hash: str = DEFAULT_HASH, **params) -> dict[str, FallbackHash]:
    """One fallback hash per operator, sized to its number of instances: the hash of engine ``hash``."""
    check_option(hash, "hash", "make_fallbacks", ENGINES)
    return {op: make_fallback(hash, topology.n_instances(op), **params) for op in topology.operators}


#: The largest balance bound: an instance may carry that many times the mean load (more instances than
#: MAX_INSTANCES never run, so a larger bound bounds nothing; 1e308 overflowed the capacities to infinity).
MAX_ALPHA = 1e6


def check_optimizer_parameters(
    owner: str, *, alpha: float, seed: int, max_entries: int | None = None
) -> tuple[float, int]:
    """The optimizer's parameters checked for ``owner``: ``alpha`` >= 1, METIS's ``seed``, ``max_entries`` >= 0.

    Returns ``(alpha, seed)`` as a float and an int. Every boundary that runs
    the optimizer (:func:`optimize`, :func:`~locality.reconfiguration.reconfigure`,
    :class:`LocalityOptimizer`, the jobs' parameters) checks them this one way.
    """
    alpha = check_interval(alpha, "alpha", owner, lower=1.0, upper=MAX_ALPHA)
    seed = check_at_most(check_integer(seed, "seed", owner, lower=0), MAX_SEED, "seed", owner, SEED_LIMIT)
    if max_entries is not None:
        check_integer(max_entries, "max_entries", owner, lower=0)
    return alpha, seed


@dataclass(frozen=True)
class OptimizerSettings:
    """What every run that builds tables from a trace's counts takes, checked when built.

    ``alpha`` bounds every operator's instance loads; ``hash`` names the
    engine whose hash places the keys without an entry; ``capacity`` is the
    counters per Space-Saving sketch (and the most pairs and keys a blended
    history keeps); ``top_pairs`` keeps the heaviest pairs of each hop in the
    graph; ``max_entries`` caps each table; ``seed`` is METIS's. The jobs'
    parameters (:mod:`pipelines.params`) and an online run's settings
    (:class:`locality.online.OnlineSettings`) extend it, each naming itself in
    the messages (``_OWNER``).
    """

    _: KW_ONLY
    alpha: float = DEFAULT_ALPHA
    hash: str = DEFAULT_HASH
    capacity: int = DEFAULT_CAPACITY
    top_pairs: int | None = None
    max_entries: int | None = None
    seed: int = DEFAULT_SEED

    #: How the checks name the owner of these settings.
    _OWNER = "OptimizerSettings"

    def __post_init__(self) -> None:
        owner = self._OWNER
        check_optimizer_parameters(owner, alpha=self.alpha, seed=self.seed, max_entries=self.max_entries)
        check_option(self.hash, "hash", owner, ENGINES)
        check_integer(self.capacity, "capacity", owner, lower=1)
        if self.top_pairs is not None:
            check_integer(self.top_pairs, "top_pairs", owner, lower=1)


@boundary
def optimize(
    graph: KeyGraph,
    topology: Topology,
    fallbacks: Mapping[str, FallbackHash],
    *,
    alpha: float = DEFAULT_ALPHA,
    seed: int = DEFAULT_SEED,
    max_entries: int | None = None,
    recursive: bool = False,
    preferred: np.ndarray | None = None,
    current: RoutingConfiguration | None = None,
    state: np.ndarray | None = None,
    relabel: bool = True,
    partition: Partition | None = None,
    parameters: Mapping | None = None,
    n_cuts: int | None = None,
    csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> Optimization:
    """Partition ``graph`` with METIS, place keys on instances within ``alpha``, build the tables.

    Parameters
    ----------
    graph : KeyGraph
    topology : Topology
        Its operators must be the graph's, in the same order.
    fallbacks : mapping of operator -> FallbackHash
    alpha : float, default 1.03
        Per-operator, per-instance balance bound (>= 1).
    seed : int, default 0
        METIS seed.
    max_entries : int, optional
        Cap on each operator's table: at most this many of the graph's keys
        leave their fallback instance (the entries :func:`build_routing`
        writes), whatever ``current`` holds. The entries kept are those
        worth the most (:func:`_outside_cap`); every other key of the
        operator goes to its fallback instance.
    recursive : bool, default False
        Recursive bisection instead of k-way METIS.
    preferred : ndarray of int, optional
        Instance each vertex would rather keep (default: its instance under
        ``current``, so no state moves; without ``current``, its fallback
        instance, which needs no table entry).
    current : RoutingConfiguration, optional
        The configuration in force. METIS's parts are then relabeled onto
        servers so that the least state moves (:func:`~locality.migration.relabel_parts`).
        It may be on another topology (servers added or removed): keys are
        then where :func:`~locality.elastic.carried_over` says.
    state : ndarray of float, optional
        State size of every vertex for the relabeling (default: its load).
    relabel : bool, default True
        False publishes METIS's part numbers as they come (to measure what
        relabeling saves).
    partition : Partition, optional
        A partition of ``graph`` already computed (with METIS's own labels),
        to place and route it another way without running METIS again.
    parameters : mapping, optional
        Extra parameters recorded in the configuration.
    n_cuts : int, optional
        METIS partitions to compute and keep the best of; default
        :func:`~locality.partition.adaptive_cuts` of the graph's edges.
    csr : tuple of ndarray, optional
        ``graph.to_csr()`` when the caller has it (built here otherwise).
    """
    if outermost():
        alpha, seed = check_optimizer_parameters("optimize", alpha=alpha, seed=seed, max_entries=max_entries)
        if n_cuts is not None:
            check_integer(n_cuts, "n_cuts", "optimize", lower=1)
    if tuple(topology.operators) != tuple(graph.operators):
        raise ValueError(f"topology operators {topology.operators} differ from the graph's {graph.operators}")
    started = time.perf_counter()
    stopwatch = Stopwatch()
    with stopwatch.stage("csr"):
        if csr is None:  # once for METIS and the placement: 0.35 GB and seconds to build at 1e7 edges
            csr = graph.to_csr()
    if partition is None:
        with stopwatch.stage("metis"):
            partition = partition_key_graph(
                graph, topology, alpha=alpha, seed=seed, recursive=recursive, n_cuts=n_cuts, csr=csr
            )
    with stopwatch.stage("fallback"):
        fallback = np.concatenate(
            [fallbacks[op].instances_of(graph.keys[op].to_numpy(dtype=object)) for op in graph.operators]
        ).astype(np.int64)
        if current is None:
            instances = fallback
        elif preferred is None or relabel:  # a route lookup of every key: seconds at 1e7 edges, only when needed
            instances, held = carried_over(current, graph, topology, fallbacks)
    if preferred is None:
        preferred = instances
    state_sizes = graph.vertex_weight if state is None else state
    if current is not None and relabel:
        with stopwatch.stage("relabel"):
            mapping = relabel_parts(partition.server_of_vertex, held, state_sizes, len(topology.servers))
            partition = dataclasses.replace(partition, server_of_vertex=mapping[partition.server_of_vertex])
    place = functools.partial(place_keys, graph, topology, alpha=alpha, hot_keys=partition.hot_keys, csr=csr)
    placement = place(partition.server_of_vertex, preferred=preferred)
    stopwatch.merge(placement.stopwatch)
    if max_entries is not None:
        kept_state = None if current is None else np.where(preferred != fallback, state_sizes, 0.0)
        with stopwatch.stage("cap"):
            pinned = _outside_cap(graph, topology, placement, fallback, max_entries, kept_state, preferred, csr)
        if pinned is not None:
            # Again, with the keys the cap leaves out of the table pinned on their fallback instance.
            pinned_on = np.where(pinned, fallback, preferred)
            placement = place(placement.server_of_vertex, preferred=pinned_on, pinned=pinned)
            stopwatch.merge(placement.stopwatch)
    del csr  # not needed by the tables: let them use its memory
    params = {"alpha": alpha, "seed": seed, "max_entries": max_entries, "metis": "recursive" if recursive else "kway"}
    params.update(parameters or {})
    with stopwatch.stage("tables"):
        config = build_routing(graph, topology, placement, fallbacks, parameters=params, fallback_instances=fallback)
    seconds = time.perf_counter() - started
    return Optimization(config, graph, partition, placement, preferred, seconds, stopwatch)


def _outside_cap(
    graph: KeyGraph,
    topology: Topology,
    placement: Placement,
    fallback: np.ndarray,
    max_entries: int,
    kept_state: np.ndarray | None = None,
    current: np.ndarray | None = None,
    csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray | None:
    """Keys to pin on their fallback instance so that each table keeps at most ``max_entries`` entries.

    Entries are counted as the tables hold them: keys placed off their
    fallback instance (:func:`build_routing`). Where a
    table would exceed the cap, the entries kept are those worth the most:
    the locality they keep (:func:`entry_values`) plus,
    with ``kept_state``, the state of a key they keep where it is now
    (``current``), which would otherwise move (ties: heavier keys). Every
    other key is pinned, those of operators within the cap included (they
    keep their instances), so the second placement rebalances with the kept
    entries alone: the cap holds, and so does the balance bound when the
    kept keys carry enough load to balance with. None: every table is
    within the cap already.
    """
    pinned = np.ones(graph.n_vertices, dtype=bool)
    over = False
    for op in graph.operators:
        sl = graph.operator_slice(op)
        differs = np.flatnonzero(placement.instance_of_vertex[sl] != fallback[sl])
        keep = differs
        if differs.size > max_entries:
            over = True
            value = entry_values(graph, topology, placement, op, fallback[sl], csr)[differs]
            if kept_state is not None:
                stays = placement.instance_of_vertex[sl][differs] == current[sl][differs]
                value = value + np.where(stays, kept_state[sl][differs], 0.0)
            keep = differs[np.lexsort((-graph.vertex_weight[sl][differs], -value))[:max_entries]]
            logger.info("table of %r capped at %d of %d entries", op, max_entries, differs.size)
        pinned[keep + sl.start] = False
    return pinned if over else None


def build_routing(
    graph: KeyGraph,
    topology: Topology,
    placement: Placement,
    fallbacks: Mapping[str, FallbackHash],
    *,
    parameters: Mapping | None = None,
    fallback_instances: np.ndarray | None = None,
) -> RoutingConfiguration:
    """Routing tables from a placement: an entry for each key whose instance differs from the fallback.

    Parameters
    ----------
    graph, topology, placement
        The key graph and where :func:`~locality.placement.place_keys` put its keys.
    fallbacks : mapping of operator -> FallbackHash
        One per operator, with ``n_instances`` equal to the operator's.
    parameters : mapping, optional
        Recorded in the configuration (alpha, seed, sketch capacity, ...).
    fallback_instances : ndarray of int, shape (graph.n_vertices,), optional
        Each key's instance under ``fallbacks`` when the caller has them (a
        hash of every key: seconds at 1e7 edges).
    """
    check_fallbacks(topology, fallbacks)
    tables = {}
    for op in topology.operators:
        sl = graph.operator_slice(op)
        keys = graph.keys[op].to_numpy(dtype=object)
        chosen = placement.instance_of_vertex[sl]
        hashed = fallbacks[op].instances_of(keys) if fallback_instances is None else fallback_instances[sl]
        differs = np.flatnonzero(chosen != hashed)
        entries = pd.Series(chosen[differs], index=pd.Index(keys[differs], dtype=object))
        tables[op] = RoutingTable(op, fallbacks[op], entries, differ_from_fallback=True)
    return RoutingConfiguration(topology, tables, dict(parameters or {}))


def check_fallbacks(topology: Topology, fallbacks: Mapping[str, FallbackHash]) -> None:
    """Raise when a fallback does not route to exactly the operator's instances."""
    for op in topology.operators:
        if fallbacks[op].n_instances != topology.n_instances(op):
            raise InvalidParameterError(
                f"the fallback of {op!r} routes to {fallbacks[op].n_instances} instances "
                f"but the topology has {topology.n_instances(op)}"
            )


def entry_values(
    graph: KeyGraph,
    topology: Topology,
    placement: Placement,
    op: str,
    fallback_instances: np.ndarray,
    csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Locality each key of ``op`` is worth as a table entry.

    The edge weight it keeps on its placed server minus what it would keep on
    its fallback instance's server (0 for keys the fallback already places).
    Memory follows the operator's edges, not its keys times the servers.
    ``csr`` is ``graph.to_csr()`` when the caller has it.
    """
    sl = graph.operator_slice(op)
    inst_server = topology.instance_servers(op)
    keys = np.arange(sl.start, sl.stop)
    csr = graph.to_csr() if csr is None else csr
    placed = connection_to(graph, keys, placement.server_of_vertex, inst_server[placement.instance_of_vertex[sl]], csr)
    return placed - connection_to(graph, keys, placement.server_of_vertex, inst_server[fallback_instances], csr)


class LocalityOptimizer:
    """Learn routing tables from an in-memory trace (estimator contract).

    Parameters
    ----------
    topology : Topology
        Its operators name the trace's key columns, in pipeline order.
    alpha : float, default 1.03
        Per-operator balance bound.
    hash : {"kafka", "storm", "flink", "pyflink", "spark", "ring"}, default "kafka"
        The engine whose hash routes keys not in the tables (``--hash``).
    top_pairs : int, optional
        Keep only the heaviest pairs of each hop in the graph.
    capacity : int, optional
        Count with Space-Saving sketches of this capacity instead of exactly
        (``--capacity``).
    max_entries : int, optional
        Cap on each table.
    seed : int, default 0
    recursive : bool, default False
        METIS recursive bisection instead of k-way.

    Attributes
    ----------
    config_ : RoutingConfiguration
    graph_ : KeyGraph
    partition_ : Partition
    placement_ : Placement
    report_ : EvaluationReport
        In-sample figures (on the trace ``fit`` saw) beside hash routing.

    Examples
    --------
    >>> import pandas as pd
    >>> from locality.topology import Topology
    >>> trace = pd.DataFrame({"region": ["eu", "eu", "us", "us"] * 50,
    ...                       "tag": ["a", "b", "c", "d"] * 50})
    >>> opt = LocalityOptimizer(Topology.uniform(["region", "tag"], 2), alpha=1.1).fit(trace)
    >>> opt.report_.optimized.locality
    1.0
    """

    def __init__(
        self,
        topology: Topology,
        *,
        alpha: float = DEFAULT_ALPHA,
        hash: str = DEFAULT_HASH,
        top_pairs: int | None = None,
        capacity: int | None = None,
        max_entries: int | None = None,
        seed: int = DEFAULT_SEED,
        recursive: bool = False,
    ) -> None:
        self.topology = topology
        self.alpha = alpha
        self.hash = hash
        self.top_pairs = top_pairs
        self.capacity = capacity
        self.max_entries = max_entries
        self.seed = seed
        self.recursive = recursive

    @boundary
    def fit(self, trace: pd.DataFrame, weight: str | None = None) -> LocalityOptimizer:
        """Count, build the graph, partition, place and route; then evaluate in-sample."""
        owner = "LocalityOptimizer"
        check_optimizer_parameters(owner, alpha=self.alpha, seed=self.seed, max_entries=self.max_entries)
        if self.top_pairs is not None:
            check_integer(self.top_pairs, "top_pairs", owner, lower=1)
        if self.capacity is not None:
            check_integer(self.capacity, "capacity", owner, lower=1)
        operators = list(self.topology.operators)
        counts = count_keys(trace, operators, weight=weight, capacity=self.capacity)
        self.graph_ = counts.graph(self.top_pairs)
        result = optimize(
            self.graph_,
            self.topology,
            make_fallbacks(self.topology, self.hash),
            alpha=self.alpha,
            seed=self.seed,
            max_entries=self.max_entries,
            recursive=self.recursive,
            parameters={"hash": self.hash, "top_pairs": self.top_pairs, "capacity": self.capacity},
        )
        self.config_, self.partition_, self.placement_ = result.config, result.partition, result.placement
        self.optimization_ = result
        self.report_ = evaluate(trace, self.config_, weight=weight)
        return self

    def evaluate(self, trace: pd.DataFrame, weight: str | None = None) -> EvaluationReport:
        """Figures of the fitted configuration on another trace (e.g. the next window)."""
        if not hasattr(self, "config_"):
            raise AttributeError("this LocalityOptimizer is not fitted yet; call fit(trace) first")
        return evaluate(trace, self.config_, weight=weight)
