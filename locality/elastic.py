"""Servers added and removed: a partition for another topology that moves little state.

Adding a server used to mean a full re-optimization: METIS cuts the whole key
graph again into one part per server, and even relabeled onto the servers
that hold most of each part (:func:`~locality.migration.relabel_parts`), the
new partition moves far more of the state on the weekly traces than hash
routing on a consistent-hash ring would, about 1/N (``benchmarks/RESULTS.md``,
"Servers added and removed").

:func:`rescale_partition` changes as little as a ring does, on the key graph:

- Gedik's consistent-hash construction [1]_ grows from N to N + 1 channels by
  moving about 1/(N + 1) of the items, every one *to* the new channel and
  none between the channels that stay. Here every server above its fair
  share in the new topology hands its surplus to the servers below theirs
  (new servers first among them), and what it hands is the piece of its own
  keys that METIS cuts off with the fewest hops lost (a two-way cut of the
  keys it holds, the surplus as one side's target weight,
  :func:`~locality.partition.cut_vertices`). The keys of removed servers
  join the pool.
- Ding et al.'s migration planning [2]_ splits the work into a partitioning
  and an assignment: the pool is cut into one part per receiving server
  (targets: their deficits), and the parts are matched to the receivers so
  that the most edge weight becomes local (their matching step, with
  locality as the gain, since a pooled key's state moves wherever it goes).

Keys stay on the server they are on otherwise;
:func:`~locality.placement.place_keys` then puts each key on an instance of
its server (the one it is on when that instance survives) and repairs the
per-operator bound, and :func:`fill_shares` brings every instance up to
``1 / alpha`` of its fair share of each operator (the cuts balance the sum of
the operators, so a new server can fall short on one of them). Whether this
partition or a full re-optimization is
published is :func:`~locality.reconfiguration.reconfigure`'s choice: the
re-optimization when the locality it adds pays for the extra state it moves.

An instance is the same across two topologies when it has the same index on
the same server (a Kafka partition, a Flink subtask on its machine); a key
whose instance does not survive moves.

References
----------
.. [1] B. Gedik. "Partitioning functions for stateful data parallelism in
   stream processing." The VLDB Journal 23(4), 2014 (section 4.1, the
   consistent hash of the hybrid partitioning function).
.. [2] J. Ding, T. Z. J. Fu, R. T. B. Ma, M. Winslett, Y. Yang, Z. Zhang,
   H. Chao. "Optimal operator state migration for elastic data stream
   processing." arXiv:1501.03619, 2015 (section 4: partitioning, then
   assignment by matching).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

import numpy as np
import pandas as pd

from locality.defaults import DEFAULT_ALPHA, DEFAULT_SEED
from locality.graph import KeyGraph
from locality.hashing import FallbackHash
from locality.partition import Partition, cut_vertices, find_hot_keys, metis_weights, partition_of
from locality.placement import server_connections
from locality.rebalance.tables import rebalance_configuration
from locality.routing import RoutingConfiguration
from locality.topology import Topology

__all__ = ["carried_over", "rescale_partition", "fill_shares", "same_deployment"]

logger = logging.getLogger(__name__)

#: A server whose load exceeds its fair share by less than this fraction keeps all its keys.
_SURPLUS_TOLERANCE = 1e-6
#: Balance bound of the cuts. METIS's slack is relative to each side's target, so at alpha 1.03 a server
#: handing a seventh of its keys could hand a fifth less; 1.001 forces poorer cuts (flights 6 -> 7: 70.2%
#: locality instead of 70.7% for 18.2% of the state instead of 17.4%; 1.01 and 1.02 land between).
_CUT_ALPHA = 1.005


def same_deployment(config: RoutingConfiguration, topology: Topology, fallbacks: Mapping[str, FallbackHash]) -> bool:
    """True when ``config`` routes on ``topology`` with ``fallbacks``: every key not in a table stays where it is."""
    return config.topology == topology and all(config.tables[op].fallback == fallbacks[op] for op in topology.operators)


def carried_over(
    current: RoutingConfiguration, graph: KeyGraph, topology: Topology, fallbacks: Mapping[str, FallbackHash]
) -> tuple[np.ndarray, np.ndarray]:
    """Where the keys of ``graph`` are under ``current``, seen from ``topology``.

    Returns
    -------
    (ndarray of int, ndarray of int), each of shape (graph.n_vertices,)
        Per vertex, its instance in ``topology`` (the one it is on when that
        instance, its index on its server, survives; else its fallback
        instance under ``fallbacks``, where a key goes when nothing holds it)
        and the position of its server in ``topology.servers`` (-1 when the
        server is gone).
    """
    instances = np.empty(graph.n_vertices, dtype=np.int64)
    servers = np.empty(graph.n_vertices, dtype=np.int64)
    positions = pd.Index(topology.servers)
    for op in graph.operators:
        sl = graph.operator_slice(op)
        keys = graph.keys[op].to_numpy(dtype=object)
        old = current.route_many(op, keys)
        hosts = np.asarray(current.topology.placement[op], dtype=object)[old]
        new_hosts = np.asarray(topology.placement[op], dtype=object)
        survives = (old < new_hosts.shape[0]) & (new_hosts[np.minimum(old, new_hosts.shape[0] - 1)] == hosts)
        instances[sl] = np.where(survives, old, fallbacks[op].instances_of(keys))
        servers[sl] = positions.get_indexer(hosts)
    return instances, servers


def rescale_partition(
    graph: KeyGraph, topology: Topology, held: np.ndarray, *, alpha: float = DEFAULT_ALPHA, seed: int = DEFAULT_SEED
) -> Partition:
    """A server per key of ``graph`` for ``topology`` that moves the least load from where the keys are.

    Parameters
    ----------
    graph : KeyGraph
    topology : Topology
        The new deployment.
    held : ndarray of int, shape (graph.n_vertices,)
        Server position (in ``topology.servers``) each key is on now; -1 for
        keys of removed servers (:func:`carried_over`).
    alpha : float
        The balance bound: a server short of its share by less than this
        tolerates receives nothing (the keys heavier than it allows are hot).
    seed : int
        METIS seed.

    Returns
    -------
    Partition
        Its ``server_of_vertex`` keeps every key where it is but the
        surplus of the servers above their fair share and the keys of
        removed servers, which go to the servers below theirs (see the
        module docstring).

    Examples
    --------
    Two servers become three: each hands a third of its load to the new one.

    >>> import pandas as pd
    >>> from locality.graph import build_key_graph
    >>> pairs = pd.DataFrame({"key0": [f"a{i}" for i in range(12)], "key1": [f"b{i}" for i in range(12)],
    ...                       "weight": [1] * 12})
    >>> g = build_key_graph(["a", "b"], [pairs])
    >>> held = np.array([i % 2 for i in range(12)] * 2)
    >>> parts = rescale_partition(g, Topology.uniform(["a", "b"], 3), held, alpha=1.01).server_of_vertex
    >>> np.bincount(parts).tolist(), int((parts != held).sum())
    ([8, 8, 8], 8)
    """
    started = time.perf_counter()
    n = len(topology.servers)
    vweights, shares = metis_weights(graph, topology)  # integers, as METIS takes them
    weight = vweights.astype(float)
    fair = shares * float(weight.sum())
    server = np.asarray(held, dtype=np.int64).copy()
    kept = server >= 0
    load = np.bincount(server[kept], weights=weight[kept], minlength=n)
    pool = [np.flatnonzero(~kept)]
    for s in np.flatnonzero(load > fair * (1 + _SURPLUS_TOLERANCE)).tolist():
        mine = np.flatnonzero(server == s)
        surplus = load[s] - fair[s]
        side = cut_vertices(graph, mine, np.array([fair[s], surplus]), vweights, alpha=_CUT_ALPHA, seed=seed)
        pool.append(mine[side == 1])
    pooled = np.concatenate(pool)
    server[pooled] = -1
    kept = server >= 0
    load = np.bincount(server[kept], weights=weight[kept], minlength=n)
    deficit = np.clip(fair - load, 0.0, None)
    # A server short of its share by less than alpha tolerates (what the cuts leave over) receives nothing,
    # nor does one whose part of the pool would be lighter than its average key: METIS cannot cut such parts.
    receivers = np.flatnonzero(deficit > (alpha - 1.0) / 2.0 * fair)
    if pooled.size and receivers.size:
        mean_key = float(weight[pooled].mean())
        receivers = receivers[deficit[receivers] / deficit[receivers].sum() * float(weight[pooled].sum()) >= mean_key]
    if pooled.size:
        if receivers.size == 0:  # every server is at its share: the pool goes where its edges are
            receivers, deficit = np.arange(n), fair
        parts = cut_vertices(graph, pooled, deficit[receivers], vweights, alpha=_CUT_ALPHA, seed=seed)
        server[pooled] = receivers[_match(graph, pooled, parts, server, receivers, n)][parts]
    seconds = time.perf_counter() - started
    moved = float(weight[server != np.asarray(held)].sum() / max(weight.sum(), 1.0))
    logger.info("rescaled onto %d servers: %.1f%% of the load moves, %.3f s", n, 100 * moved, seconds)
    return partition_of(graph, server, seconds, find_hot_keys(graph, topology, alpha))


def _match(
    graph: KeyGraph, pooled: np.ndarray, parts: np.ndarray, server: np.ndarray, receivers: np.ndarray, n_servers: int
) -> np.ndarray:
    """Receiver (position in ``receivers``) of each part of the pool: the matching keeping most edge weight local."""
    from scipy.optimize import linear_sum_assignment

    placed = np.where(server >= 0, server, n_servers)  # pooled keys on a server of their own: no affinity counted
    affinity = server_connections(graph, pooled, placed, n_servers + 1)[:, receivers]
    gain = np.zeros((receivers.shape[0], receivers.shape[0]))
    np.add.at(gain, parts, affinity)
    rows, cols = linear_sum_assignment(gain, maximize=True)
    out = np.empty(receivers.shape[0], dtype=np.int64)
    out[rows] = cols
    return out


def fill_shares(
    config: RoutingConfiguration,
    graph: KeyGraph,
    loads: Mapping[str, pd.Series],
    state: Mapping[str, pd.Series],
    *,
    alpha: float = DEFAULT_ALPHA,
    max_entries: int | None = None,
) -> RoutingConfiguration:
    """``config`` with every instance pulled up to ``(2 - alpha)`` of its fair share, the cheapest keys first.

    The fill phase of the locality-aware rebalancer
    (:func:`~locality.rebalance.local.local`, ``theta_max = alpha - 1``): an
    instance below the low bound takes the keys that cost the least locality
    (on ``graph``) plus state (``state``) per unit of load (``loads``: the
    graph's key loads), from instances that stay above it. It stops short
    rather than reshuffle (no Mixed fallback), and holds ``max_entries``.
    """
    filled, _, _ = rebalance_configuration(
        config,
        loads,
        state=state,
        graph=graph,
        method="local",
        theta_max=alpha - 1.0,
        table_cap=max_entries,
        fill=True,
        follow=False,
        max_cost=float(np.finfo(float).max),  # finite: a budget, which waives the Mixed fallback
    )
    return filled
