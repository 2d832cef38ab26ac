"""Split the key graph into one part per server with METIS, under a balance bound.

Locality-aware routing reduces to graph partitioning [1]_: a cut edge is a
pair of keys whose tuples cross the network, so the partitioner minimises the
cut weight while keeping every part within ``alpha`` of its share of the load.
METIS [2]_ (through pymetis) does the partitioning; this module prepares its
input (integer weights, ``ufactor`` from ``alpha``, target part weights from
server capacities) and checks, before partitioning, whether ``alpha`` can be
met at all: a key heavier than ``alpha`` times the largest instance share of
its operator cannot fit anywhere, and METIS would silently return a far worse
balance than the lower bound (feasibility.md section 3).

The balance METIS guarantees is on the *sum* of the operators' loads per
server. The paper's bound is per operator and per instance; that is enforced
afterwards by :func:`locality.placement.place_keys`, which assigns keys to
instances and repairs what METIS leaves unbalanced (pymetis cannot pass
multi-constraint weights: it reads them wrong, anchors.md section 2.1).

References
----------
.. [1] Caneill, El Rheddane, Leroy, De Palma. "Locality-aware routing in
   stateful streaming applications." Middleware 2016.
.. [2] Karypis, Kumar. "A fast and high quality multilevel scheme for
   partitioning irregular graphs." SIAM J. Sci. Comput. 20(1), 1998.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from locality._stdout import native_stdout_captured
from locality._validation import boundary, check_at_most, check_integer, check_interval, outermost
from locality.defaults import DEFAULT_ALPHA, DEFAULT_SEED
from locality.graph import KeyGraph, csr_from_edges
from locality.imbalance import heavier_than
from locality.topology import Topology

__all__ = [
    "HotKey",
    "MetisInput",
    "Partition",
    "metis_input",
    "partition_key_graph",
    "partition_of",
    "adaptive_cuts",
    "find_hot_keys",
    "metis_weights",
    "cut_vertices",
    "METIS_WEIGHT_SCALE",
    "MAX_SEED",
    "SEED_LIMIT",
]

logger = logging.getLogger(__name__)

#: The largest ufactor METIS takes (a C int).
_MAX_UFACTOR = 2**31 - 1
#: The largest seed: METIS's seed is an ``idx_t``, 32 bits in common builds.
MAX_SEED = 2**31 - 1
SEED_LIMIT = "METIS takes a 32-bit seed"

#: Operator loads are rescaled to this total before rounding to METIS's integer weights.
METIS_WEIGHT_SCALE = 1 << 30

#: Vertices per chunk when writing METIS's graph file (a few hundred MB of temporaries at the densest).
_WRITE_CHUNK = 1 << 20

#: Keys heavier than an instance that the warnings name; past these, their number (``Partition.hot_keys`` has all).
_NAMED_HOT_KEYS = 10
#: Edges x cuts METIS may spend: 8 cuts up to 250,000 edges, then fewer, 1 from 2,000,000.
CUTS_EDGE_BUDGET = 2_000_000
MAX_CUTS = 8


def adaptive_cuts(n_edges: int) -> int:
    """How many METIS partitions to compute and keep the best of: ``CUTS_EDGE_BUDGET // n_edges`` in [1, 8].

    METIS's time grows with the edges times the cuts, while what extra cuts buy
    shrinks with the graph (``bench_partition.py --cuts``, benchmarks/RESULTS.md,
    "The optimizer at 1e7 edges"): on the IRA card's first half (182,398 edges,
    6 parts) 8 cuts instead of 1 took the graph locality from 0.812 to 0.819 and
    next-half locality from 28.2% to 32.3% for 0.47 s instead of 0.09 s; on
    generated power-law graphs of 1e6 edges they bought nothing at 6 or 48 parts
    and one cut already takes 2-6 s (75 s at 1e7 edges into 48 parts, where 8 cuts
    would be 10 minutes). So the cuts share a budget of 2e6 edges' worth of METIS
    work: 8 up to 250,000 edges (every card and the offline job's graphs keep 8),
    4 at 500,000, 2 at 1e6, 1 from 2e6.
    """
    return int(min(MAX_CUTS, max(1, CUTS_EDGE_BUDGET // max(n_edges, 1))))


@dataclass(frozen=True)
class HotKey:
    """A key too heavy for the balance bound: alone it exceeds ``alpha`` times the largest instance share."""

    operator: str
    key: object
    load: float
    bound: float

    def to_dict(self) -> dict:
        key = self.key.item() if hasattr(self.key, "item") else self.key
        return {"operator": self.operator, "key": key, "load": self.load, "bound": self.bound}

    def __str__(self) -> str:
        return (
            f"key {self.to_dict()['key']!r} of operator {self.operator!r} carries {self.load:g} load, "
            f"more than the {self.bound:g} any one instance may take under alpha"
        )


@dataclass
class Partition:
    """METIS's answer: a server (position in ``topology.servers``) per vertex, and what it cost."""

    server_of_vertex: np.ndarray
    edge_cut: float
    locality: float
    metis_seconds: float
    hot_keys: list[HotKey] = field(default_factory=list)
    n_cuts: int = 1

    @property
    def feasible(self) -> bool:
        """False when some key alone is heavier than the balance bound allows."""
        return not self.hot_keys


def find_hot_keys(graph: KeyGraph, topology: Topology, alpha: float) -> list[HotKey]:
    """Keys that alone exceed ``alpha`` x the largest fair instance load of their operator.

    Such a key makes the per-operator bound infeasible whatever the
    partitioner does; it is reported instead of silently unbalancing.
    """
    hot = []
    for op in graph.operators:
        bound = alpha * float(topology.instance_shares(op).max()) * graph.totals[op]
        weights = graph.vertex_weight[graph.operator_slice(op)]
        for i in heavier_than(weights, bound):
            hot.append(HotKey(op, graph.keys[op][i], float(weights[i]), bound))
    hot.sort(key=lambda h: -h.load)
    return hot


def _integer_weights(values: np.ndarray, factor: float) -> np.ndarray:
    """Round ``values * factor`` to int64 (METIS needs integers), keeping positive weights positive."""
    scaled = values * factor if factor != 1 else values.copy()
    scaled = np.rint(scaled, out=scaled).astype(np.int64)  # one float and one int copy (160 MB each at 1e7 edges)
    # A positive weight rounded to 0 would make METIS treat the key as free.
    scaled[(scaled == 0) & (values > 0)] = 1
    return scaled


def _edge_factor(weights: np.ndarray) -> float:
    """1 for integer counts; otherwise a factor that keeps fractional weights apart once rounded."""
    if weights.size == 0 or np.all(weights == np.floor(weights)):
        return 1.0
    smallest = weights[weights > 0].min()
    return min(max(1.0, 100.0 / smallest), float(1 << 40) / weights.sum())


def metis_weights(graph: KeyGraph, topology: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Vertex weights (each operator scaled to the same total) and each server's target share, as METIS takes them."""
    n_ops = len(graph.operators)
    vweights = np.zeros(graph.n_vertices, dtype=np.int64)
    shares = np.zeros(len(topology.servers))
    for op in graph.operators:
        sl = graph.operator_slice(op)
        op_total = graph.vertex_weight[sl].sum()
        if op_total > 0:
            vweights[sl] = _integer_weights(graph.vertex_weight[sl], METIS_WEIGHT_SCALE / n_ops / op_total)
        shares += topology.server_shares(op) / n_ops
    return vweights, shares


@dataclass
class MetisInput:
    """Exactly what METIS is given: the graph in CSR form with integer weights, the part targets and the options.

    One object for both ways of running METIS, so that they partition the same
    graph: :meth:`run` calls the library in this process through pymetis, and
    :meth:`write` writes METIS's own file format for its ``gpmetis`` program
    (``bench_metis_floor.py`` times the two side by side). The arrays are
    ``idx_t``, int64 in pymetis's build, so pymetis passes them to METIS
    without copying them.
    """

    xadj: np.ndarray
    adjncy: np.ndarray
    vweights: np.ndarray
    eweights: np.ndarray | None
    n_parts: int
    tpwgts: list[float] | None
    ufactor: int
    seed: int
    n_cuts: int
    recursive: bool

    @classmethod
    def of(
        cls,
        csr: tuple[np.ndarray, np.ndarray, np.ndarray],
        vweights: np.ndarray,
        shares: np.ndarray,
        *,
        alpha: float,
        seed: int = DEFAULT_SEED,
        n_cuts: int = 1,
        recursive: bool = False,
    ) -> MetisInput:
        """METIS's input for a CSR graph with float edge weights, integer vertex weights and each part's share."""
        xadj, adjncy, eweights = csr
        shares = np.asarray(shares, dtype=float) / float(np.sum(shares))
        # METIS takes ufactor as a C int; an alpha past what it holds bounds nothing anyway (alpha >= the number of
        # instances lets one instance take everything), so it is clamped rather than overflowing.
        ufactor = min(max(1, int(round(1000 * (alpha - 1)))), _MAX_UFACTOR)
        return cls(
            xadj,
            adjncy,
            vweights,
            _integer_weights(eweights, _edge_factor(eweights)) if eweights.size else None,
            shares.shape[0],
            None if np.allclose(shares, 1.0 / shares.shape[0]) else shares.tolist(),
            ufactor,
            seed,
            n_cuts,
            recursive,
        )

    def run(self) -> np.ndarray:
        """METIS's part of every vertex, as int64."""
        import pymetis

        with native_stdout_captured() as printed:
            result = pymetis.part_graph(
                self.n_parts,
                adjacency=pymetis.CSRAdjacency(self.xadj, self.adjncy),
                vweights=self.vweights,
                eweights=self.eweights,
                tpwgts=self.tpwgts,
                recursive=self.recursive,
                options=pymetis.Options(ufactor=self.ufactor, seed=self.seed, ncuts=self.n_cuts),
            )
        if printed:
            said = sorted({line.strip(" \t*") for line in printed if line.strip()})
            logger.warning(
                "METIS printed %d lines partitioning %d vertices into %d parts: %s",
                len(printed), self.xadj.shape[0] - 1, self.n_parts, "; ".join(said[:3]),
            )  # fmt: skip
        return np.asarray(result.vertex_part, dtype=np.int64)  # an int64 array.array: its buffer, not a copy

    def write(self, stem: str | Path) -> list[str]:
        """Write ``<stem>.graph`` (and ``<stem>.tpwgts`` for unequal parts) in METIS's formats.

        Returns the ``gpmetis`` arguments that partition it as :meth:`run`
        does: ``["gpmetis", *returned]`` is the command. The graph file is one
        line per vertex, ``weight neighbour edge-weight ...`` with neighbours
        numbered from 1 (METIS manual, section 4.1.1); it is written in chunks
        of vertices, each formatted by Arrow's integer-to-string cast.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        stem = Path(stem)
        graph_path = stem.with_name(stem.name + ".graph")
        n = self.xadj.shape[0] - 1
        has_edge_weights = self.eweights is not None
        with open(graph_path, "wb") as out:
            out.write(f"{n} {self.adjncy.shape[0] // 2} {'011' if has_edge_weights else '010'}\n".encode())
            for lo in range(0, n, _WRITE_CHUNK):
                hi = min(n, lo + _WRITE_CHUNK)
                first, last = int(self.xadj[lo]), int(self.xadj[hi])
                per_entry = 2 if has_edge_weights else 1
                starts = np.arange(hi - lo) + per_entry * (self.xadj[lo:hi] - first)  # each line's first token
                tokens = np.empty(hi - lo + per_entry * (last - first), dtype=np.int64)
                tokens[starts] = self.vweights[lo:hi]
                neighbours = np.ones(tokens.shape[0], dtype=bool)
                neighbours[starts] = False
                entries = np.empty((last - first, per_entry), dtype=np.int64)
                entries[:, 0] = self.adjncy[first:last] + 1
                if has_edge_weights:
                    entries[:, 1] = self.eweights[first:last]
                tokens[neighbours] = entries.ravel()
                separators = np.full(tokens.shape[0], " ", dtype=object)
                separators[starts + per_entry * np.diff(self.xadj[lo : hi + 1])] = "\n"  # each line's last token
                text = pc.binary_join_element_wise(pc.cast(pa.array(tokens), pa.string()), pa.array(separators), "")
                offsets = np.frombuffer(text.buffers()[1], dtype=np.int32, count=len(text) + 1, offset=text.offset * 4)
                out.write(memoryview(text.buffers()[2])[offsets[0] : offsets[-1]])
        args = [f"-ptype={'rb' if self.recursive else 'kway'}", f"-ufactor={self.ufactor}", f"-seed={self.seed}"]
        args.append(f"-ncuts={self.n_cuts}")
        if self.tpwgts is not None:
            tpwgts_path = stem.with_name(stem.name + ".tpwgts")
            tpwgts_path.write_text("".join(f"{i} = {w!r}\n" for i, w in enumerate(self.tpwgts)))
            args.append(f"-tpwgts={tpwgts_path}")
        return [*args, str(graph_path), str(self.n_parts)]


def metis_input(
    graph: KeyGraph,
    topology: Topology,
    *,
    alpha: float,
    seed: int = DEFAULT_SEED,
    recursive: bool = False,
    n_cuts: int = 1,
    csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> MetisInput:
    """What :func:`partition_key_graph` gives METIS for ``graph`` (see its parameters); inputs assumed checked."""
    vweights, shares = metis_weights(graph, topology)
    csr = graph.to_csr() if csr is None else csr
    return MetisInput.of(csr, vweights, shares, alpha=alpha, seed=seed, n_cuts=n_cuts, recursive=recursive)


@boundary
def partition_key_graph(
    graph: KeyGraph,
    topology: Topology,
    *,
    alpha: float = DEFAULT_ALPHA,
    seed: int = DEFAULT_SEED,
    recursive: bool = False,
    n_cuts: int | None = None,
    csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> Partition:
    """Split the key graph into server parts that keep co-occurring keys together.

    Parameters
    ----------
    graph : KeyGraph
        The key graph (:func:`locality.graph.build_key_graph`).
    topology : Topology
        Servers and their capacities; part ``s`` is ``topology.servers[s]``.
    alpha : float, default 1.03
        Balance bound (>= 1): a part may hold at most ``alpha`` times its share
        of the load. Passed to METIS as ``ufactor = 1000 * (alpha - 1)``.
    seed : int, default 0
        METIS's random seed; the same seed and graph give the same partition.
    recursive : bool, default False
        Recursive bisection instead of k-way. pymetis defaults to recursive
        bisection up to 8 parts; k-way cuts less on key graphs (measured in
        ``benchmarks/RESULTS.md``), so it is the default here.
    n_cuts : int, optional
        METIS computes this many partitions (``ncuts``) and keeps the one
        with the smallest cut; default (None) :func:`adaptive_cuts` of the
        graph's edges: 8 up to 250,000 edges, falling to 1 from 2,000,000.
    csr : tuple of ndarray, optional
        ``graph.to_csr()`` when the caller already has it (the optimizer
        reuses it for the placement).

    Returns
    -------
    Partition
        Server per vertex, edge cut (weight), locality on the graph (kept edge
        weight / total edge weight), METIS time and the hot keys that make
        ``alpha`` infeasible (empty when feasible).

    Raises
    ------
    InvalidParameterError
        ``alpha < 1`` or a negative seed.

    Notes
    -----
    Operators are scaled to the same total weight so that each counts equally
    in METIS's single balance constraint, and the target part weights are the
    servers' capacity shares averaged over operators.

    Examples
    --------
    >>> import pandas as pd
    >>> from locality.graph import build_key_graph
    >>> from locality.topology import Topology
    >>> pairs = pd.DataFrame({"key0": ["a", "a", "b", "b"], "key1": ["x", "y", "z", "w"],
    ...                       "weight": [10, 9, 10, 9]})
    >>> g = build_key_graph(["k1", "k2"], [pairs])
    >>> p = partition_key_graph(g, Topology.uniform(["k1", "k2"], 2), alpha=1.5)
    >>> p.locality
    1.0
    """
    owner = "partition_key_graph"
    if outermost():
        alpha = check_interval(alpha, "alpha", owner, lower=1.0)
        seed = check_at_most(check_integer(seed, "seed", owner, lower=0), MAX_SEED, "seed", owner, SEED_LIMIT)
    if n_cuts is None:
        n_cuts = adaptive_cuts(graph.n_edges)
    elif outermost():
        n_cuts = check_integer(n_cuts, "n_cuts", owner, lower=1)
    n_parts = len(topology.servers)
    hot = find_hot_keys(graph, topology, alpha)
    for h in hot[:_NAMED_HOT_KEYS]:
        logger.warning("alpha %.3f is infeasible: %s", alpha, h)
    if len(hot) > _NAMED_HOT_KEYS:
        logger.warning(
            "alpha %.3f is infeasible for %d keys in all (the first %d named above)", alpha, len(hot), _NAMED_HOT_KEYS
        )

    started = time.perf_counter()
    if n_parts == 1 or graph.n_vertices == 0:
        parts = np.zeros(graph.n_vertices, dtype=np.int64)
    else:
        parts = metis_input(graph, topology, alpha=alpha, seed=seed, recursive=recursive, n_cuts=n_cuts, csr=csr).run()
    seconds = time.perf_counter() - started

    partition = partition_of(graph, parts, seconds, hot, n_cuts)
    logger.info("METIS: %d parts, cut %.4g of the edge weight, %.3f s", n_parts, partition.edge_cut, seconds)
    return partition


def partition_of(
    graph: KeyGraph, server_of_vertex: np.ndarray, seconds: float, hot_keys: list[HotKey], n_cuts: int = 1
) -> Partition:
    """A :class:`Partition` of ``graph`` holding ``server_of_vertex`` as it is, with its cut and locality."""
    cut = float(graph.edge_weight[server_of_vertex[graph.src] != server_of_vertex[graph.dst]].sum())
    total = float(graph.edge_weight.sum())
    return Partition(server_of_vertex, cut, 1.0 - cut / total if total > 0 else 1.0, seconds, hot_keys, n_cuts)


def cut_vertices(
    graph: KeyGraph,
    vertices: np.ndarray,
    targets: np.ndarray,
    vweights: np.ndarray,
    *,
    alpha: float,
    seed: int = DEFAULT_SEED,
) -> np.ndarray:
    """Cut the keys ``vertices`` into ``len(targets)`` parts of weights proportional to ``targets``, fewest hops lost.

    METIS on the subgraph the vertices induce (the edges to other keys are
    left out: they are cut whatever the parts), with ``vweights`` (from
    :func:`metis_weights`) as vertex weights and ``alpha`` as the balance
    bound. With no more vertices than parts, the heaviest vertex goes to
    the part with the largest weight left to fill, and so on.

    Returns
    -------
    ndarray of int, shape (len(vertices),)
        The part of each vertex.
    """
    vertices = np.asarray(vertices, dtype=np.int64)
    targets = np.asarray(targets, dtype=float)
    k = targets.shape[0]
    if k <= 1 or vertices.shape[0] == 0:
        return np.zeros(vertices.shape[0], dtype=np.int64)
    weights = vweights[vertices]
    if vertices.shape[0] <= k:  # METIS refuses to cut a graph into more parts than it has vertices
        left = targets / targets.sum() * float(weights.sum())
        parts = np.empty(vertices.shape[0], dtype=np.int64)
        for v in np.argsort(-weights, kind="stable").tolist():
            parts[v] = int(np.argmax(left))
            left[parts[v]] -= weights[v]
        return parts
    local = np.full(graph.n_vertices, -1, dtype=np.int64)
    local[vertices] = np.arange(vertices.shape[0])
    inside = (local[graph.src] >= 0) & (local[graph.dst] >= 0)
    csr = csr_from_edges(
        local[graph.src[inside]], local[graph.dst[inside]], graph.edge_weight[inside], vertices.shape[0]
    )
    # k <= 8: pymetis's default, which the elastic figures were measured with: bisections up to 8 parts
    return MetisInput.of(csr, weights, targets, alpha=alpha, seed=seed, n_cuts=MAX_CUTS, recursive=k <= 8).run()
