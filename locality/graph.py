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
    heads = np.concatenate([src, dst])
    xadj = np.zeros(n_vertices + 1, dtype=np.int64)
    np.cumsum(np.bincount(heads, minlength=n_vertices), out=xadj[1:])
    order = np.argsort(heads, kind="stable")
    del heads  # at 1e7 edges each of these temporaries is 160 MB: free them as soon as they are used
    adjncy = np.concatenate([dst, src]).astype(np.int64, copy=False)[order]
    return xadj, adjncy, np.concatenate([weights, weights])[order]


def _keyed_weights(table: pd.DataFrame, key_columns: Sequence[str], what: str) -> pd.DataFrame:
    check_columns(list(table.columns), [*key_columns, "weight"], what)
    if table[list(key_columns)].isna().any().any():
        raise TraceError(f"{what} has null keys; drop them before building the key graph")
    weights = pd.to_numeric(table["weight"], errors="coerce")
    if weights.isna().any() or (weights < 0).any():
        raise TraceError(f"{what} column 'weight' must hold numbers >= 0")
    return table.assign(weight=weights.astype(float))


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
            f"the 'operators' parameter of build_key_graph must list at least two operators; got {list(operators)}"
        )
    if len(pair_counts) != len(operators) - 1:
        raise InvalidParameterError(
            f"the 'pair_counts' parameter of build_key_graph must hold {len(operators) - 1} tables "
            f"(one per consecutive pair of {list(operators)}); got {len(pair_counts)}"
        )
    key_loads = dict(key_loads or {})
    pairs = []
    for i, table in enumerate(pair_counts):
        what = f"the pair counts of ({operators[i]!r}, {operators[i + 1]!r})"
        table = _keyed_weights(table, ["key0", "key1"], what)
        table = table.groupby(["key0", "key1"], sort=False, as_index=False)["weight"].sum()
        if top_pairs is not None:
            table = table.nlargest(top_pairs, "weight", keep="first")
        pairs.append(table[table["weight"] > 0])
    loads = {}
    for op, table in key_loads.items():
        if op not in operators:
            raise InvalidParameterError(f"key loads given for {op!r}, which is not one of {list(operators)}")
        loads[op] = (
            _keyed_weights(table, ["key"], f"the key loads of {op!r}").groupby("key", sort=False)["weight"].sum()
        )

    keys: dict[str, pd.Index] = {}
    for i, op in enumerate(operators):
        parts = []
        if i > 0:
            parts.append(pd.Index(pairs[i - 1]["key1"]))
        if i < len(operators) - 1:
            parts.append(pd.Index(pairs[i]["key0"]))
        if op in loads:
            parts.append(loads[op].index)
        index = parts[0]
        for part in parts[1:]:
            index = index.append(part)
        # Sorted so that the graph, and METIS's answer, do not depend on the order the counts came in
        # (pandas group-by order, sketch order, Spark partitioning).
        keys[op] = pd.Index(index.unique(), name=op).sort_values()

    offsets, start = {}, 0
    for op in operators:
        offsets[op] = start
        start += len(keys[op])
    n_vertices = start

    src_parts, dst_parts, w_parts = [], [], []
    for i, table in enumerate(pairs):
        a, b = operators[i], operators[i + 1]
        src_parts.append(keys[a].get_indexer(table["key0"]) + offsets[a])
        dst_parts.append(keys[b].get_indexer(table["key1"]) + offsets[b])
        w_parts.append(table["weight"].to_numpy(dtype=float))
    src = np.concatenate(src_parts).astype(np.int64)
    dst = np.concatenate(dst_parts).astype(np.int64)
    edge_weight = np.concatenate(w_parts)
    order = np.lexsort((dst, src))
    src, dst, edge_weight = src[order], dst[order], edge_weight[order]

    # A vertex without a measured load weighs at least what its edges carry on
    # either side (each tuple is one hop in and one hop out).
    towards_next = np.bincount(src, weights=edge_weight, minlength=n_vertices)
    towards_prev = np.bincount(dst, weights=edge_weight, minlength=n_vertices)
    vertex_weight = np.maximum(towards_next, towards_prev)
    for op, series in loads.items():
        ids = keys[op].get_indexer(series.index) + offsets[op]
        vertex_weight[ids] = series.to_numpy(dtype=float)

    sums = {op: float(vertex_weight[offsets[op] : offsets[op] + len(keys[op])].sum()) for op in operators}
    given = dict(totals or {})
    out_totals = {op: max(float(given.get(op, sums[op])), sums[op]) for op in operators}
    logger.info("key graph: %d vertices, %d edges", n_vertices, src.shape[0])
    return KeyGraph(operators, keys, offsets, vertex_weight, src, dst, edge_weight, out_totals)
