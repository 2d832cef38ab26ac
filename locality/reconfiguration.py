"""One online reconfiguration: new tables for a window, relabeled to move little state, and whether to publish.

Correlations drift (a hashtag follows different regions week to week), so
tables computed once decay [1]_. Each period the online job partitions the
latest window's key graph, maps METIS's parts onto the servers that already
hold most of their state, places keys on the instance they are on when it is
on the chosen server, and plans the migration from the configuration in force.
:func:`decide` then publishes only when the locality gained over the window
pays for the state that moves, or when the configuration in force breaks the
balance bound.

On another topology than the one in force (servers added or removed),
:func:`reconfigure` makes two candidates: the least change
(:func:`locality.elastic.rescale_partition`: every key stays where it is but
the surplus of the servers above their new fair share and the keys of
removed servers) and the full re-optimization relabeled onto the servers. It
keeps the re-optimization only when the locality it adds pays for the extra
state it moves, by the same measure as :func:`decide` (``min_gain``).

An incremental step (``incremental=True``) starts from the configuration in
force instead of partitioning from scratch
(:func:`~locality.incremental.repartition_changed`): a key stays on its
server under the version in force (its fallback instance's for a key the
tables do not hold, new ones included) unless another server holds more of
its edge weight, or no server holds half of it and it is next to such a
key; METIS cuts only those keys, beside one contracted vertex per server, and
:func:`~locality.placement.place_keys` repairs and refines as after a full
partition. Its cost follows the keys the window moved, not the graph; the
measure of the trade (locality against time on the IRA and flights traces,
and at 1e6 and 1e7 edges) is in ``benchmarks/RESULTS.md``, "The online step
at the cost of its change", and the choice is argued in ``docs/scale.md``.

References
----------
.. [1] Caneill, El Rheddane, Leroy, De Palma. "Locality-aware routing in
   stateful streaming applications." Middleware 2016 (sections 3.4 and 4.3).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from locality._validation import boundary, check_interval, outermost
from locality.defaults import DEFAULT_ALPHA, DEFAULT_MIN_GAIN, DEFAULT_SEED
from locality.elastic import carried_over, fill_shares, rescale_partition, same_deployment
from locality.evaluation import Evaluation
from locality.graph import KeyGraph
from locality.hashing import FallbackHash
from locality.incremental import repartition_changed
from locality.migration import MigrationPlan, plan_migration
from locality.optimizer import Optimization, check_optimizer_parameters, optimize
from locality.partition import partition_key_graph
from locality.routing import RoutingConfiguration
from locality.topology import Topology

__all__ = ["Reconfiguration", "reconfigure", "Decision", "decide", "graph_state_sizes"]

logger = logging.getLogger(__name__)


@dataclass
class Reconfiguration:
    """The new configuration, the plan that leads to it, and what raw METIS labels would have moved.

    ``topology_change`` says, when the topology differs from the one in
    force, which candidate was kept and why (None otherwise).
    """

    optimization: Optimization
    plan: MigrationPlan
    unrelabeled_cost: float | None = None
    topology_change: str | None = None

    @property
    def config(self) -> RoutingConfiguration:
        return self.optimization.config


def _graph_locality(config: RoutingConfiguration, graph: KeyGraph) -> float:
    """Share of ``graph``'s edge weight whose two keys ``config`` routes to one server."""
    servers = np.concatenate(
        [
            config.topology.instance_servers(op)[config.route_many(op, graph.keys[op].to_numpy(dtype=object))]
            for op in graph.operators
        ]
    )
    total = float(graph.edge_weight.sum())
    same = servers[graph.src] == servers[graph.dst]
    return float(graph.edge_weight[same].sum()) / total if total > 0 else 1.0


def graph_state_sizes(graph: KeyGraph, state: Mapping[str, pd.Series] | None = None) -> dict[str, pd.Series]:
    """State size per key and operator: ``state`` where given, else the key's load in the graph."""
    out = {}
    for op in graph.operators:
        loads = pd.Series(graph.vertex_weight[graph.operator_slice(op)], index=graph.keys[op])
        if state is not None and op in state:
            loads = state[op].reindex(graph.keys[op]).fillna(loads)
        out[op] = loads
    return out


@boundary
def reconfigure(
    graph: KeyGraph,
    topology: Topology,
    current: RoutingConfiguration,
    fallbacks: Mapping[str, FallbackHash],
    *,
    alpha: float = DEFAULT_ALPHA,
    seed: int = DEFAULT_SEED,
    state: Mapping[str, pd.Series] | None = None,
    max_entries: int | None = None,
    compare_unrelabeled: bool = True,
    parameters: Mapping | None = None,
    min_gain: float = DEFAULT_MIN_GAIN,
    incremental: bool = False,
) -> Reconfiguration:
    """Tables for the window's ``graph``, relabeled against ``current``, and the migration plan.

    Parameters
    ----------
    graph : KeyGraph
        The window's key graph.
    topology, fallbacks
        The deployment to route on: ``current``'s, or another one (servers
        added or removed, see the module docstring).
    current : RoutingConfiguration
        The configuration in force.
    alpha, seed, max_entries
        As for :func:`~locality.optimizer.optimize`.
    state : mapping of operator -> Series (key -> state size), optional
        State of each key: pass the latest window's key loads (the default
        state size) when ``graph`` blends several windows; keys missing here
        weigh their load in ``graph``.
    compare_unrelabeled : bool, default True
        Also compute what publishing METIS's labels as they come would move
        (``unrelabeled_cost``, a share of the state), for the report.
    min_gain : float, default 0.1
        On another topology: local hops over the window (its tuples times
        the hops each makes) per unit of extra state moved that the full
        re-optimization must gain over the least change to be kept
        (``math.inf``: always the least change).
    incremental : bool, default False
        Start from ``current`` instead of a new METIS partition of the whole
        graph (see the module docstring): METIS re-partitions only the keys
        that another server now draws more (and their undecided neighbours),
        the rest stays; then the per-operator repair and refinement. On
        another topology than ``current``'s the step is the topology
        change's, as without it. ``unrelabeled_cost`` is then None (there
        are no METIS labels to compare).
    """
    if outermost():
        alpha, seed = check_optimizer_parameters("reconfigure", alpha=alpha, seed=seed, max_entries=max_entries)
        min_gain = check_interval(min_gain, "min_gain", "reconfigure", lower=0.0, upper=math.inf)
    sizes = graph_state_sizes(graph, state)
    state_vector = np.concatenate([sizes[op].to_numpy(dtype=float) for op in graph.operators])
    csr = graph.to_csr()  # one for the partition and the placement: seconds and GBs at 1e7 edges
    common = dict(alpha=alpha, max_entries=max_entries, current=current, state=state_vector, seed=seed, csr=csr)
    # Where every key is now: a route lookup of every key (seconds at 1e7 edges), made once here and handed to each
    # optimization that keeps METIS's labels as they come (one that relabels them looks it up itself).
    instances, held = carried_over(current, graph, topology, fallbacks)
    as_labeled = dict(relabel=False, preferred=instances)
    same = same_deployment(current, topology, fallbacks)
    if incremental and same:
        start = repartition_changed(graph, topology, held, alpha=alpha, seed=seed, csr=csr)
        refined = {**dict(parameters or {}), "start": "in force"}
        result = optimize(graph, topology, fallbacks, parameters=refined, partition=start, **as_labeled, **common)
        plan = plan_migration(current, result.config, sizes)
        logger.info(
            "incremental reconfiguration moves %d keys (%.1f%% of the state)", plan.moved_keys, 100 * plan.cost_share
        )
        return Reconfiguration(result, plan)
    partition = partition_key_graph(graph, topology, alpha=alpha, seed=seed, csr=csr)
    result = optimize(graph, topology, fallbacks, parameters=parameters, partition=partition, **common)
    plan = plan_migration(current, result.config, sizes)
    change = None
    if not same:
        least = rescale_partition(graph, topology, held, alpha=alpha, seed=seed)
        rescaled = optimize(graph, topology, fallbacks, parameters=parameters, partition=least, **as_labeled, **common)
        loads = graph_state_sizes(graph)
        filled = fill_shares(rescaled.config, graph, loads, sizes, alpha=alpha, max_entries=max_entries)
        rescaled = dataclasses.replace(rescaled, config=filled)
        small = plan_migration(current, filled, sizes)
        hops = float(sizes[graph.operators[0]].sum()) * (len(graph.operators) - 1)
        gain = (_graph_locality(result.config, graph) - _graph_locality(filled, graph)) * hops
        extra = plan.cost - small.cost
        verdict = (
            f"re-optimizing gains {gain:,.0f} local hops over the window for {extra:,.0f} more state moved "
            f"({plan.cost_share:.1%} instead of {small.cost_share:.1%})"
        )
        if gain > 0 and (extra <= 0 or gain / extra >= min_gain):
            change = f"re-optimized for the new topology: {verdict}, at least {min_gain:g} per unit"
        else:
            result, plan = rescaled, small
            change = f"least change for the new topology: {verdict}, less than {min_gain:g} per unit"
        logger.info("%s", change)
    unrelabeled = None
    if compare_unrelabeled:
        raw = optimize(graph, topology, fallbacks, partition=partition, **as_labeled, **common)
        unrelabeled = plan_migration(current, raw.config, sizes).cost_share
    logger.info(
        "reconfiguration moves %d keys (%.1f%% of the state; %.1f%% without relabeling)",
        plan.moved_keys,
        100 * plan.cost_share,
        100 * (unrelabeled or 0.0),
    )
    return Reconfiguration(result, plan, unrelabeled, change)


@dataclass(frozen=True)
class Decision:
    """Whether to publish, and the sentence that says why."""

    publish: bool
    reason: str
    gain: float
    payback: float | None


@boundary
def decide(
    before: Evaluation | None,
    after: Evaluation,
    plan: MigrationPlan | None,
    *,
    alpha: float,
    min_gain: float = DEFAULT_MIN_GAIN,
    max_imbalance: float | None = None,
) -> Decision:
    """Publish when the locality gained on the window pays for the migration, or when balance is broken.

    Parameters
    ----------
    before : Evaluation or None
        The configuration in force, on the window (None: nothing is in force).
    after : Evaluation
        The new configuration, on the same window.
    plan : MigrationPlan
        The moves from the configuration in force to the new one.
    alpha : float
        The balance bound the new tables were built for.
    max_imbalance : float, optional
        An operator above this in ``before`` breaks the balance and forces a
        publish (default ``alpha``). Drift puts tables built last period a few
        percent above ``alpha`` almost every period, so a tolerance such as
        1.10 leaves the decision to the gain unless balance really suffers.
    min_gain : float, default 0.1
        Hops made local over one window per unit of state moved needed to
        publish (state defaults to key load, so 1.0 would mean: the window's
        gain in local hops at least equals the tuples' worth of state that
        move; the gain keeps paying in later windows, hence a lower default).

    Returns
    -------
    Decision
    """
    if outermost():
        min_gain = check_interval(min_gain, "min_gain", "decide", lower=0.0)
    if before is None:
        return Decision(True, "no configuration is in force yet", after.locality, None)
    gain = after.locality - before.locality
    hops = after.weight * len(after.hop_locality)
    limit = alpha if max_imbalance is None else max_imbalance
    broken = {op: v for op, v in before.imbalance.items() if v > limit * (1 + 1e-9)}
    if broken and max(after.imbalance.values()) < max(broken.values()):
        worst = max(broken, key=broken.get)
        return Decision(True, f"balance is broken: operator {worst!r} at {broken[worst]:.3f} > {limit:g}", gain, None)
    cost = plan.cost if plan is not None else 0.0
    if plan is not None and plan.moved_keys == 0:
        return Decision(False, "the new tables route every key as the current ones do", gain, None)
    payback = gain * hops / cost if cost > 0 else (np.inf if gain > 0 else 0.0)
    verdict = (
        f"locality {before.locality:.1%} -> {after.locality:.1%} on the window "
        f"({gain * hops:,.0f} hops made local) for {cost:,.0f} state moved: {payback:.2f} per unit"
    )
    if payback >= min_gain and gain > 0:
        return Decision(True, f"the gain pays: {verdict} >= {min_gain:g}", gain, float(payback))
    return Decision(False, f"the gain does not pay: {verdict} < {min_gain:g}", gain, float(payback))
