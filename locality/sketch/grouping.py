"""Exact grouping of key rows for the sketch: one group per distinct key tuple, in a deterministic order.

The sketch merges blocks of rows (its own keys, then batch rows or another
sketch's keys) by grouping them by key, summing value columns per group and
finding the group of each of its own counters. :func:`group` does that exactly,
with no per-key Python code: Arrow's hash aggregation
(``Table.group_by(..., use_threads=False)``) compares keys exactly, so nothing
depends on a hash; a single int64 component goes through ``pandas.factorize``
instead while the rows are few enough for it to be faster.

Short strings are grouped as fixed-width bytes: when a string component's values
all fit in :data:`_PACKED_MAX_BYTES` bytes and hold no NUL byte, each is padded
with NULs to the longest one's length and grouped as ``fixed_size_binary``. Two
such strings pad alike only if they are equal, so the groups are the same; Arrow
groups fixed-width keys about 1.7x as fast as strings once its hash table
outgrows the CPU caches (a sketch with ~100,000 counters). The padding is
stripped only from the rows a caller takes (:class:`PackedStrings`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from locality.sketch.columns import INT

__all__ = ["Groups", "PackedStrings", "group"]

# pandas.factorize groups int64 faster than Arrow until its hash table leaves the CPU caches.
_PANDAS_MAX_ROWS = 1 << 20
# Longer strings (URLs, say) are grouped as strings: at 98,304 counters padding still won with 26-byte keys
# (1.74x against 1.98x Arrow's per-batch count) and lost with 33-byte ones (1.95x against 1.80x).
_PACKED_MAX_BYTES = 32
_MAX_STRING_BYTES = 2**31 - 1


class PackedStrings:
    """Grouped strings held as their bytes NUL-padded to one width (an Arrow ``fixed_size_binary`` column)."""

    def __init__(self, padded: pa.ChunkedArray) -> None:
        self.padded = padded

    def take(self, rows: np.ndarray) -> pa.StringArray:
        """The strings of ``rows``, their padding stripped (packed strings hold no NUL of their own)."""
        chosen = self.padded.take(rows).combine_chunks().cast(pa.string())
        return pc.utf8_rtrim(chosen, characters="\0")


class Groups(NamedTuple):
    """The groups of some rows, in a deterministic order.

    ``keys`` holds, per component, one value per group: an int64 ndarray, or
    strings (an Arrow Array or ChunkedArray, or :class:`PackedStrings`; all of
    them ``take`` rows into Arrow strings). ``rows`` is the number of rows of
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
    # Per component, its column in each block: the int64 values, or the strings, padded if they can be.
    columns, packed = [], []
    for i, kind in enumerate(kinds):
        column = [block[i] for block in blocks]
        padded = None if kind == INT else _padded(column)
        packed.append(padded is not None)
        columns.append([pa.array(c) for c in column] if kind == INT else column if padded is None else padded)
    keys = [f"k{i}" for i in range(len(kinds))]
    names = [*keys, *(f"at{b}" for b in range(located)), *(f"v{j}" for j in range(len(values)))]
    batches = []
    for b, rows in enumerate(sizes):
        # Column "at<b>" numbers the rows of block b (null elsewhere): its sum per group finds them.
        positions = [
            pa.array(np.arange(rows, dtype=np.float64)) if b == c else pa.nulls(rows, pa.float64())
            for c in range(located)
        ]
        summed = [pa.array(column[b]) for column in values]
        batches.append(pa.RecordBatch.from_arrays([*(c[b] for c in columns), *positions, *summed], names=names))
    aggregations = [*((f"at{b}", "sum") for b in range(located)), *((f"v{j}", "sum") for j in range(len(values)))]
    # Without threads the group order is stable (Arrow's documented promise for use_threads=False).
    out = pa.Table.from_batches(batches).group_by(keys, use_threads=False).aggregate([*aggregations, ([], "count_all")])
    grouped = [
        out.column(k).to_numpy() if kind == INT else PackedStrings(out.column(k)) if packs else out.column(k)
        for k, kind, packs in zip(keys, kinds, packed, strict=True)
    ]
    sums = [out.column(f"v{j}_sum").to_numpy() for j in range(len(values))]
    at = []
    for b in range(located):
        position = out.column(f"at{b}_sum").to_numpy()
        holders = np.flatnonzero(~np.isnan(position))
        where = np.empty(sizes[b], dtype=np.int64)
        where[position[holders].astype(np.int64)] = holders
        at.append(where)
    return Groups(grouped, out.column("count_all").to_numpy(), sums, at)


def _padded(strings: list[pa.StringArray]) -> list[pa.FixedSizeBinaryArray] | None:
    """Each block's strings NUL-padded to one width, as ``fixed_size_binary``; None if some cannot be."""
    offsets = [_offsets(s) for s in strings]
    longest = max((int(np.diff(o).max()) for o in offsets if len(o) > 1), default=0)
    if longest > _PACKED_MAX_BYTES:
        return None
    width = max(1, longest)
    if width * max(len(s) for s in strings) > _MAX_STRING_BYTES:
        return None  # a padded block would overflow Arrow's 32-bit string offsets
    padded = []
    for s, offset in zip(strings, offsets, strict=True):
        if offset[-1] > offset[0] and not np.frombuffer(s.buffers()[2], dtype=np.uint8)[offset[0] : offset[-1]].all():
            return None  # a NUL byte: "a" and "a\0" would pad to the same bytes
        # ascii_rpad counts bytes, so non-ASCII UTF-8 pads to the width as well; the check below makes sure.
        out = pc.ascii_rpad(s, width=width, padding="\0")
        ends = _offsets(out)
        if ends[0] != 0 or ends[-1] != width * len(s):
            return None  # padded by characters, not bytes: the rows would not line up
        data = out.buffers()[2] if len(s) else pa.py_buffer(b"")
        padded.append(pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(s), [None, data]))
    return padded


def _offsets(strings: pa.StringArray) -> np.ndarray:
    """Where each string of the array starts in its data buffer, and where the last ends (int32, no copy)."""
    return np.frombuffer(strings.buffers()[1], dtype=np.int32, count=len(strings) + 1, offset=4 * strings.offset)
