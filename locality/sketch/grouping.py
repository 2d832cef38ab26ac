"""Exact grouping of key rows for the sketch: one group per distinct key tuple, in order of first appearance.

The sketch merges blocks of rows (its own keys, then batch rows or another
sketch's keys) by grouping them by key, summing value columns per group and
finding the group of each of its own counters. :func:`group` does that exactly,
with no per-key Python code: Arrow's hash aggregation
(``Table.group_by(..., use_threads=False)``) compares keys exactly, so nothing
depends on a hash; a single int64 component goes through ``pandas.factorize``
instead while the rows are few enough for it to be faster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from locality.sketch.columns import INT

__all__ = ["Groups", "group"]

# pandas.factorize groups int64 faster than Arrow until its hash table leaves the CPU caches.
_PANDAS_MAX_ROWS = 1 << 20


class Groups(NamedTuple):
    """The groups of some rows, in a deterministic order.

    ``keys`` holds, per component, one value per group: an int64 ndarray or
    Arrow strings (an Array or a ChunkedArray). ``rows`` is the number of rows of
    each group; ``sums`` holds, per value column, its float64 sum per group;
    ``at`` holds, per located block, the group of each of its rows.
    """

    keys: list[Any]
    rows: np.ndarray
    sums: list[np.ndarray]
    at: list[np.ndarray]


def group(
    kinds: list[int | None], blocks: list[list[Any]], values: Sequence[Sequence[np.ndarray]] = (), located: int = 0
) -> Groups:
    """Group the rows of ``blocks`` by key, sum ``values`` per group, and locate the rows of the first blocks.

    Parameters
    ----------
    kinds : list of int
        Per key component, ``INT`` or ``STR``.
    blocks : list of list
        Row blocks; ``blocks[b][i]`` is component ``i`` of block ``b``: an int64
        ndarray for ``INT``, a ``pa.StringArray`` otherwise. Empty blocks are fine.
    values : list of list of ndarray
        ``values[j][b]`` is value column ``j`` (float64) of block ``b``.
    located : int
        The first ``located`` blocks each hold distinct keys (a sketch's), and
        the group of each of their rows is returned.

    Returns
    -------
    Groups
        One group per distinct key tuple. The order is deterministic (the same
        rows give the same order) but is not promised to be that of first
        appearance: Arrow lists the new keys of each mini-batch of rows in its
        own order.
    """
    sizes = [len(block[0]) for block in blocks]
    if len(kinds) == 1 and kinds[0] == INT and sum(sizes) <= _PANDAS_MAX_ROWS:
        labels, uniques = pd.factorize(np.concatenate([block[0] for block in blocks]))
        size = len(uniques)
        sums = [np.bincount(labels, weights=np.concatenate(parts), minlength=size) for parts in values]
        starts = np.cumsum([0, *sizes])
        at = [labels[starts[b] : starts[b + 1]] for b in range(located)]
        return Groups([uniques.astype(np.int64, copy=False)], np.bincount(labels, minlength=size), sums, at)
    keys = [f"k{i}" for i in range(len(kinds))]
    names = [*keys, *(f"at{b}" for b in range(located)), *(f"v{j}" for j in range(len(values)))]
    batches = []
    for b, (block, rows) in enumerate(zip(blocks, sizes, strict=True)):
        columns = [pa.array(c) if kind == INT else c for kind, c in zip(kinds, block, strict=True)]
        # Column "at<b>" numbers the rows of block b (null elsewhere): its sum per group finds them.
        positions = [
            pa.array(np.arange(rows, dtype=np.float64)) if b == c else pa.nulls(rows, pa.float64())
            for c in range(located)
        ]
        summed = [pa.array(parts[b]) for parts in values]
        batches.append(pa.RecordBatch.from_arrays([*columns, *positions, *summed], names=names))
    aggregations = [*((f"at{b}", "sum") for b in range(located)), *((f"v{j}", "sum") for j in range(len(values)))]
    # Without threads the group order is stable (Arrow's documented promise for use_threads=False).
    out = pa.Table.from_batches(batches).group_by(keys, use_threads=False).aggregate([*aggregations, ([], "count_all")])
    grouped = [out.column(k).to_numpy() if kind == INT else out.column(k) for k, kind in zip(keys, kinds, strict=True)]
    sums = [out.column(f"v{j}_sum").to_numpy() for j in range(len(values))]
    at = []
    for b in range(located):
        position = out.column(f"at{b}_sum").to_numpy()
        holders = np.flatnonzero(~np.isnan(position))
        where = np.empty(sizes[b], dtype=np.int64)
        where[position[holders].astype(np.int64)] = holders
        at.append(where)
    return Groups(grouped, out.column("count_all").to_numpy(), sums, at)
