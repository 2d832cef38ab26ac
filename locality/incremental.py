"""Re-partition only the part of the key graph that a window changed; every other key stays on its server.

The online job runs every period on a blended graph that a short window
changes little, yet a full reconfiguration partitions the whole graph with
METIS again. Repartitioning adaptive graphs is ParMETIS's problem [1]_:
start from the partition in force and move only what the change asks.
METIS's serial library has no such entry point (it refines only the
partitions it builds, and takes no fixed vertices), so
:func:`repartition_changed` gives it a graph in which the unchanged part
cannot move apart:

1. Every key has a server under the version in force (keys the tables do
   not hold, new keys among them, their fallback instance's). A key is
   *outdrawn* when another server holds more of its edge weight than its
   own, *undecided* when no server holds half of it. The changed part is
   the outdrawn keys and their undecided neighbours; every other key is
   *settled*. The neighbours go with them because keys that shift together
   each leave their server one edge at a time: the first to be outdrawn
   frees the undecided keys around it, and METIS can move the group. Not
   every undecided key (the rule of this step's first version): on
   power-law graphs a balanced partition leaves many light keys with their
   few edges spread over several servers, and re-cutting all of them every
   run, touched by the window or not, gave METIS a large share of the edges;
   nor only the outdrawn keys, which on the IRA trace kept less next-window
   locality (``benchmarks/RESULTS.md``, "The online step re-cuts what moved").
2. The settled keys of each server are contracted into one vertex weighing
   their sum. METIS cuts the graph of these contracted vertices and the
   changed keys into one part per server, under the same balance bound as a
   full partition (edges between two contracted vertices are left out: they
   are local or cut whatever the changed keys do).
3. The parts go to the servers that already hold most of their weight (the
   full step's relabeling, :func:`~locality.migration.relabel_parts`, here on
   the contracted graph: a contracted vertex weighs its whole server), the
   changed keys with their part. The settled keys stay on their server
   whatever METIS did with their contracted vertex: where it merged two
   light ones into one part (it may, when the changed keys weigh much or a
   hot key breaks the bound), the placement's repair restores balance.

The cost follows the changed part (its keys and their edges), not the
graph: a pass over the edges to find the changed keys, then METIS on a graph
of tens of thousands of vertices where the full partition has millions.
:func:`~locality.placement.place_keys` then repairs the per-operator bound
and refines, as after a full partition.

References
----------
.. [1] K. Schloegel, G. Karypis, V. Kumar. "Wavefront diffusion and LMSR:
   algorithms for dynamic repartitioning of adaptive meshes." IEEE
   Transactions on Parallel and Distributed Systems 12(5), 2001.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pandas as pd

from locality.defaults import DEFAULT_ALPHA, DEFAULT_SEED
from locality.graph import KeyGraph, csr_from_edges
from locality.migration import relabel_parts
from locality.partition import MetisInput, Partition, adaptive_cuts, find_hot_keys, metis_weights, partition_of
from locality.placement import server_connections_by_chunk
from locality.topology import Topology

__all__ = ["repartition_changed", "changed_keys"]

logger = logging.getLogger(__name__)


def changed_keys(
    graph: KeyGraph, held: np.ndarray, n_servers: int, csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """The keys to re-partition: the outdrawn ones and their undecided neighbours (see the module docstring).

    Parameters
    ----------
    graph : KeyGraph
    held : ndarray of int, shape (graph.n_vertices,)
        Each key's server position under the version in force, below ``n_servers``.
    n_servers : int
    csr : tuple of ndarray, optional
        ``graph.to_csr()`` when the caller has it.

    Returns
    -------
    ndarray of int
        Their vertex ids, ascending.
    """
    csr = graph.to_csr() if csr is None else csr
    outdrawn = np.zeros(graph.n_vertices, dtype=bool)
    undecided = np.zeros(graph.n_vertices, dtype=bool)
    # keys x servers sums a chunk of keys at a time: memory flat in the graph's size
    for rows, weights in server_connections_by_chunk(graph, np.arange(graph.n_vertices), held, n_servers, csr):
        own = weights[np.arange(weights.shape[0]), held[rows]]
        outdrawn[rows] = weights.max(axis=1) > own
        undecided[rows] = own < 0.5 * weights.sum(axis=1)
    beside = np.zeros(graph.n_vertices, dtype=bool)
    beside[graph.dst[outdrawn[graph.src]]] = True
    beside[graph.src[outdrawn[graph.dst]]] = True
    return np.flatnonzero(outdrawn | (beside & undecided))


def repartition_changed(
    graph: KeyGraph,
    topology: Topology,
    held: np.ndarray,
    *,
    alpha: float = DEFAULT_ALPHA,
    seed: int = DEFAULT_SEED,
    csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> Partition:
    """A server per key of ``graph`` that keeps the settled keys where they are and re-partitions the others.

    Parameters
    ----------
    graph : KeyGraph
    topology : Topology
        The deployment of the version in force (the same servers).
    held : ndarray of int, shape (graph.n_vertices,)
        Server position (in ``topology.servers``) of every key under the
        version in force (:func:`~locality.elastic.carried_over`).
    alpha : float
        The balance bound METIS cuts under (as :func:`~locality.partition.partition_key_graph`).
    seed : int
        METIS seed.
    csr : tuple of ndarray, optional
        ``graph.to_csr()`` when the caller has it.

    Returns
    -------
    Partition
        Its ``n_cuts`` is 0 when no key changed (no METIS run).
    """
    started = time.perf_counter()
    k = len(topology.servers)
    held = np.asarray(held, dtype=np.int64)
    csr = graph.to_csr() if csr is None else csr
    changed = changed_keys(graph, held, k, csr)
    hot = find_hot_keys(graph, topology, alpha)
    if changed.size == 0 or k == 1:
        return partition_of(graph, held, time.perf_counter() - started, hot, n_cuts=0)
    vweights, shares = metis_weights(graph, topology)
    node = held.copy()  # contracted graph: server s is vertex s, the i-th changed key vertex k + i
    node[changed] = k + np.arange(changed.size)
    settled = node < k
    src, dst = node[graph.src], node[graph.dst]
    touching = (src >= k) | (dst >= k)
    edges = (
        pd.DataFrame(
            {
                "a": np.minimum(src, dst)[touching],
                "b": np.maximum(src, dst)[touching],
                "weight": graph.edge_weight[touching],
            }
        )
        .groupby(["a", "b"], sort=False)["weight"]
        .sum()
    )
    weights = np.concatenate([np.bincount(held[settled], weights=vweights[settled], minlength=k), vweights[changed]])
    contracted = csr_from_edges(
        edges.index.get_level_values("a").to_numpy(),
        edges.index.get_level_values("b").to_numpy(),
        edges.to_numpy(),
        k + changed.size,
    )
    # Half the full partition's budget of cuts: the contracted vertices anchor the parts, so METIS's restarts buy
    # less (measured with the first rule, 1e6 edges, 48 parts, 2% changed: 0.7611 graph locality with 1 cut, 0.7612
    # with 2, 2.9 s against 3.7 s).
    n_cuts = adaptive_cuts(2 * graph.n_edges)
    given = MetisInput.of(contracted, np.rint(weights).astype(np.int64), shares, alpha=alpha, seed=seed, n_cuts=n_cuts)
    parts = given.run()
    placed = np.concatenate([np.arange(k), held[changed]])
    server_of_part = relabel_parts(parts, placed, weights, k)
    server = held.copy()
    server[changed] = server_of_part[parts[k:]]
    seconds = time.perf_counter() - started
    logger.info("re-partitioned %d changed keys of %d in %.3f s", changed.size, graph.n_vertices, seconds)
    return partition_of(graph, server, seconds, hot, n_cuts)
