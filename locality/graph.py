"""The weighted key graph of a chain of stateful operators.

One vertex per ``(operator, key)``, weighted by the key's load at that
operator; one edge per pair of keys of consecutive operators that travel
together, weighted by how often they do. Two operators give a bipartite graph,
a longer chain a k-partite one. Partitioning this graph so that heavy edges
stay inside a part is what keeps correlated keys on one server [1]_.

Vertex ids are consecutive integers: the keys of the first operator, then
those of the second, and so on. The tables follow GraphFrames' schema
(vertices ``id``; edges ``src``, ``dst``) so the Spark job can wrap them in a
``GraphFrame`` when the jar is on the classpath.

References
----------
.. [1] Caneill, El Rheddane, Leroy, De Palma. "Locality-aware routing in
   stateful streaming applications." Middleware 2016.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from locality._validation import check_columns
from locality.errors import InvalidParameterError, TraceError

__all__ = ["KeyGraph", "build_key_graph", "csr_from_edges"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeyGraph:
    """A k-partite key graph (build it with :func:`build_key_graph`).

    Attributes
    ----------
    operators : tuple of str
        Operators in pipeline order.
    keys : dict of operator -> pandas.Index
        The keys of each operator; vertex ``offsets[op] + i`` is ``keys[op][i]``.
    offsets : dict of operator -> int
        First vertex id of each operator.
    vertex_weight : ndarray of float64, shape (V,)
        Load of each key at its operator.
    src, dst : ndarray of int64, shape (E,)
        Edge endpoints; ``src`` belongs to operator ``i``, ``dst`` to ``i + 1``.
    edge_weight : ndarray of float64, shape (E,)
        Co-occurrence count (or weight) of each pair.
    totals : dict of operator -> float
        Total load of each operator in the trace, including keys that are not
        vertices (the tail the sketch did not keep); at least the vertex sum.
    """

    operators: tuple[str, ...]
    keys: dict[str, pd.Index]
    offsets: dict[str, int]
    vertex_weight: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    edge_weight: np.ndarray
    totals: dict[str, float]

    @property
    def n_vertices(self) -> int:
        return int(self.vertex_weight.shape[0])

    @property
    def n_edges(self) -> int:
        return int(self.src.shape[0])

    def operator_slice(self, operator: str) -> slice:
        """Vertex ids of ``operator`` as a slice."""
        start = self.offsets[operator]
        return slice(start, start + len(self.keys[operator]))

    def residual(self, operator: str) -> float:
        """Load of ``operator`` carried by keys that are not vertices (routed by the fallback)."""
        return max(self.totals[operator] - float(self.vertex_weight[self.operator_slice(operator)].sum()), 0.0)

    # ------------------------------------------------------------------ exports
    def to_csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Symmetric adjacency in CSR form: ``(xadj, adjncy, weights)``, int64 / int64 / float64.

        Neighbours of vertex ``v`` are ``adjncy[xadj[v]:xadj[v+1]]``; each
        undirected edge appears once in each direction.
        """
        return csr_from_edges(self.src, self.dst, self.edge_weight, self.n_vertices)

    def vertex_table(self) -> pd.DataFrame:
        """Vertices in GraphFrames' schema: ``id``, ``operator``, ``key``, ``weight``.

        ``key`` is an object column holding each key with its own type.
        """
        keys = (
            np.concatenate([self.keys[op].to_numpy(dtype=object) for op in self.operators]) if self.n_vertices else []
        )
        return pd.DataFrame(
            {
                "id": np.arange(self.n_vertices, dtype=np.int64),
                "operator": np.repeat(
                    np.array(self.operators, dtype=object), [len(self.keys[op]) for op in self.operators]
                ),
                "key": pd.Series(keys, dtype=object),
                "weight": self.vertex_weight,
            }
        )

    def edge_table(self) -> pd.DataFrame:
        """Edges in GraphFrames' schema: ``src``, ``dst``, ``weight``."""
        return pd.DataFrame({"src": self.src, "dst": self.dst, "weight": self.edge_weight})


def csr_from_edges(
    src: np.ndarray, dst: np.ndarray, weights: np.ndarray, n_vertices: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The symmetric CSR ``(xadj, adjncy, weights)`` of undirected edges ``src``-``dst`` on ``n_vertices`` vertices.

    ``adjncy`` is int64 because pymetis's ``idx_t`` is: narrower arrays would
    be copied on the way into METIS.
    """
    heads = np.concatenate([src, dst]).astype(np.int64, copy=False)
    xadj = np.zeros(n_vertices + 1, dtype=np.int64)
    np.cumsum(np.bincount(heads, minlength=n_vertices), out=xadj[1:])
    # The stable order of the heads, as one sort of (head, position) packed into an int64 (V * 2E fits for any
    # graph in memory), in place: numpy's vectorised sort takes a quarter of a stable argsort's time, and at
    # 1e7 edges each temporary is 160 MB of fresh pages.
    n_heads = len(heads)
    heads *= n_heads
    heads += np.arange(n_heads)
    heads.sort()
    order = np.remainder(heads, n_heads, out=heads)
    adjncy = np.concatenate([dst, src]).astype(np.int64, copy=False)[order]
    return xadj, adjncy, np.concatenate([weights, weights])[order]


def _checked_weights(table: pd.DataFrame, key_columns: Sequence[str], what: str) -> pd.Series:
    """The ``weight`` column of ``table`` as floats, once its columns, keys and weights are checked."""
    check_columns(list(table.columns), [*key_columns, "weight"], what)
    if any(table[column].hasnans for column in key_columns):
        raise TraceError(f"{what} has null keys; drop them before building the key graph")
    weights = pd.to_numeric(table["weight"], errors="coerce")
    if weights.isna().any() or (weights < 0).any():
        raise TraceError(f"{what} column 'weight' must hold numbers >= 0")
    return weights.astype(float, copy=False)


def _key_codes(
    operators: Sequence[str], pair_counts: Sequence[pd.DataFrame], loads: Mapping[str, pd.Series]
) -> tuple[dict[str, pd.Index], list[tuple[np.ndarray, np.ndarray]], dict[str, np.ndarray]]:
    """Each operator's distinct keys (first seen first), and the codes into them of every key column.

    Returns the distinct keys per operator, the codes of ``key0`` and ``key1``
    per pair table, and the codes of each load table's keys. One hash pass per
    operator over every column naming its keys: every later step works on
    these integer codes, not on the keys (strings, in most traces).
    """
    distinct, codes0, codes1, load_codes = {}, {}, {}, {}
    for i, op in enumerate(operators):
        columns = []
        if i > 0:
            columns.append(pd.Index(pair_counts[i - 1]["key1"]))
        if i < len(pair_counts):
            columns.append(pd.Index(pair_counts[i]["key0"]))
        if op in loads:
            columns.append(loads[op].index)
        codes, distinct[op] = columns[0].append(columns[1:]).factorize()
        parts = iter(np.split(codes, np.cumsum([len(column) for column in columns])[:-1]))
        if i > 0:
            codes1[i - 1] = next(parts)
        if i < len(pair_counts):
            codes0[i] = next(parts)
        if op in loads:
            load_codes[op] = next(parts)
    return distinct, [(codes0[i], codes1[i]) for i in range(len(pair_counts))], load_codes


def _summed_pairs(
    codes0: np.ndarray, codes1: np.ndarray, n_keys1: int, weight: np.ndarray, top_pairs: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One row per distinct pair ``(codes0, codes1)``: its summed weight, the ``top_pairs`` heaviest, weights > 0.

    What ``groupby(["key0", "key1"], sort=False).sum()`` then ``nlargest`` gave,
    on the keys' codes. Counts come one row per pair (a sketch's top-k,
    Spark's group-by), so the group-by runs only when a pair repeats; one
    sort of the pairs packed into an int64 finds out (``n_keys0 * n_keys1``
    fits for any table that fits in memory).
    """
    packed = codes0 * n_keys1 + codes1
    in_order = np.sort(packed)
    if (in_order[1:] == in_order[:-1]).any():
        # pandas's sum (compensated, in row order), groups in the order they first appear: as on the keys.
        summed = pd.Series(weight).groupby(packed, sort=False).sum()
        codes0, codes1 = np.divmod(summed.index.to_numpy(), n_keys1)
        weight = summed.to_numpy()
    if top_pairs is not None:
        rows = pd.Series(weight).nlargest(top_pairs, keep="first").index.to_numpy()
        codes0, codes1, weight = codes0[rows], codes1[rows], weight[rows]
    heavy = weight > 0
    if heavy.all():  # the usual case: no copy
        return codes0, codes1, weight
    return codes0[heavy], codes1[heavy], weight[heavy]


def _sorted_keys(distinct: pd.Index, used: np.ndarray, operator: str) -> tuple[pd.Index, np.ndarray]:
    """The used keys of ``distinct``, sorted, and each distinct key's rank among them (-1 if unused).

    Sorted so that the graph, and METIS's answer, do not depend on the order
    the counts came in (pandas group-by order, sketch order, Spark partitioning).
    """
    chosen = np.flatnonzero(used)
    keys, order = pd.Index(distinct[chosen], name=operator).sort_values(return_indexer=True)
    rank = np.full(len(distinct), -1, dtype=np.int64)
    rank[chosen[order]] = np.arange(len(chosen))
    return keys, rank


def _sorted_edges(
    ranks: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], widths: Sequence[int], offsets: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges ``(src, dst, weight)`` sorted by ``(src, dst)``, from each pair table's key ranks and weights.

    ``ranks[i]`` holds the ranks of operator ``i``'s keys, of operator
    ``i + 1``'s and the pairs' weights; ``widths`` and ``offsets`` are each
    operator's number of keys and first vertex id. Every operator's vertices
    come before the next's, so sorting table after table sorts the whole;
    the arrays are written in place (at 1e7 edges every temporary array is
    80 MB of fresh pages).
    """
    n_edges = sum(len(weight) for _, _, weight in ranks)
    src, dst = np.empty(n_edges, dtype=np.int64), np.empty(n_edges, dtype=np.int64)
    edge_weight = np.empty(n_edges, dtype=float)
    start = 0
    for i, (rank0, rank1, weight) in enumerate(ranks):
        # The packed ranks are distinct, so any sort, the fastest, gives the order by (src, dst).
        order = np.argsort(rank0 * widths[i + 1] + rank1)
        edges = slice(start, start + len(order))
        np.take(rank0, order, out=src[edges])
        np.take(rank1, order, out=dst[edges])
        np.take(weight, order, out=edge_weight[edges])
        src[edges] += offsets[i]
        dst[edges] += offsets[i + 1]
        start = edges.stop
    return src, dst, edge_weight


def build_key_graph(
    operators: Sequence[str],
    pair_counts: Sequence[pd.DataFrame],
    key_loads: Mapping[str, pd.DataFrame] | None = None,
    *,
    totals: Mapping[str, float] | None = None,
    top_pairs: int | None = None,
) -> KeyGraph:
    """Build the key graph from pair counts of consecutive operators and key loads.

    Parameters
    ----------
    operators : sequence of str
        Operators in pipeline order (two or more).
    pair_counts : sequence of DataFrame, one per consecutive pair
        ``pair_counts[i]`` has columns ``key0`` (a key of ``operators[i]``),
        ``key1`` (a key of ``operators[i + 1]``) and ``weight``, one row per
        distinct pair (the output of ``SpaceSaving.top_k`` for a pair sketch,
        or exact counts).
    key_loads : mapping of operator -> DataFrame, optional
        Columns ``key`` and ``weight``: the load of keys at that operator. Keys
        listed here become vertices even without an edge, so heavy keys weigh
        in the balance. A vertex with no load given weighs the larger of its
        summed edge weights towards its two neighbouring operators.
    totals : mapping of operator -> float, optional
        Total load of each operator in the trace (the sketch's total weight);
        defaults to the sum of its vertex weights.
    top_pairs : int, optional
        Keep only the ``top_pairs`` heaviest pairs of each consecutive pair of
        operators (the paper's "number of edges", Figure 12).

    Returns
    -------
    KeyGraph

    Raises
    ------
    InvalidParameterError
        Fewer than two operators, or not one pair table per consecutive pair.
    TraceError
        A table misses a column or holds null keys or negative weights.

    Examples
    --------
    >>> import pandas as pd
    >>> pairs = pd.DataFrame({"key0": ["Asia", "Asia", "Africa"],
    ...                       "key1": ["#java", "#ruby", "#python"], "weight": [5, 3, 2]})
    >>> g = build_key_graph(["region", "hashtag"], [pairs])
    >>> g.n_vertices, g.n_edges, g.vertex_weight.tolist()  # keys sorted: Africa, Asia; #java, #python, #ruby
    (5, 3, [2.0, 8.0, 5.0, 2.0, 3.0])
    """
    operators = tuple(operators)
    if len(operators) < 2:
        raise InvalidParameterError(
            f"the 'operators' parameter of build_key_graph must list at least two operators; got {list(operators)}",
            parameter="operators",
        )
    if len(pair_counts) != len(operators) - 1:
        raise InvalidParameterError(
            f"the 'pair_counts' parameter of build_key_graph must hold {len(operators) - 1} tables "
            f"(one per consecutive pair of {list(operators)}); got {len(pair_counts)}",
            parameter="pair_counts",
        )
    key_loads = dict(key_loads or {})
    # Read in place, not copied: at 1e7 pairs a copy of the table is 0.5 s.
    weights = [
        _checked_weights(table, ["key0", "key1"], f"the pair counts of ({operators[i]!r}, {operators[i + 1]!r})")
        for i, table in enumerate(pair_counts)
    ]
    loads = {}
    for op, table in key_loads.items():
        if op not in operators:
            raise InvalidParameterError(f"key loads given for {op!r}, which is not one of {list(operators)}")
        weight = _checked_weights(table, ["key"], f"the key loads of {op!r}")
        loads[op] = table.assign(weight=weight).groupby("key", sort=False)["weight"].sum()

    distinct, pair_codes, load_codes = _key_codes(operators, pair_counts, loads)
    pairs = [
        _summed_pairs(codes0, codes1, len(distinct[operators[i + 1]]), weights[i].to_numpy(), top_pairs)
        for i, (codes0, codes1) in enumerate(pair_codes)
    ]
    keys, rank = {}, {}
    for i, op in enumerate(operators):
        used = np.zeros(len(distinct[op]), dtype=bool)
        if i > 0:
            used[pairs[i - 1][1]] = True
        if i < len(pairs):
            used[pairs[i][0]] = True
        if op in loads:
            used[load_codes[op]] = True
        keys[op], rank[op] = _sorted_keys(distinct[op], used, op)

    offsets, start = {}, 0
    for op in operators:
        offsets[op] = start
        start += len(keys[op])
    n_vertices = start
    src, dst, edge_weight = _sorted_edges(
        [
            (rank[a][codes0], rank[b][codes1], weight)
            for (a, b), (codes0, codes1, weight) in zip(zip(operators, operators[1:]), pairs)
        ],
        [len(keys[op]) for op in operators],
        [offsets[op] for op in operators],
    )

    # A vertex without a measured load weighs at least what its edges carry on
    # either side (each tuple is one hop in and one hop out).
    towards_next = np.bincount(src, weights=edge_weight, minlength=n_vertices)
    towards_prev = np.bincount(dst, weights=edge_weight, minlength=n_vertices)
    vertex_weight = np.maximum(towards_next, towards_prev)
    for op, series in loads.items():
        vertex_weight[rank[op][load_codes[op]] + offsets[op]] = series.to_numpy(dtype=float)

    sums = {op: float(vertex_weight[offsets[op] : offsets[op] + len(keys[op])].sum()) for op in operators}
    given = dict(totals or {})
    out_totals = {op: max(float(given.get(op, sums[op])), sums[op]) for op in operators}
    logger.info("key graph: %d vertices, %d edges", n_vertices, src.shape[0])
    return KeyGraph(operators, keys, offsets, vertex_weight, src, dst, edge_weight, out_totals)
