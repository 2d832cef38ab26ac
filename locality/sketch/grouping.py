"""Exact grouping of key rows for the sketch: one group per distinct key tuple, in a deterministic order.

The sketch merges blocks of rows (its own keys, then batch rows or another
sketch's keys) by grouping them by key, summing value columns per group and
finding the group of each of its own counters. :func:`group` does that exactly,
with no per-key Python code: Arrow's hash aggregation
(``Table.group_by(..., use_threads=False)``) compares keys exactly, so nothing
depends on a hash; a single int64 component goes through ``pandas.factorize``
instead, its hash table sized from the sketch's keys, which makes it faster.

Short strings are grouped as fixed-width bytes: when a string component's values
all fit in :data:`_PACKED_MAX_BYTES` bytes and hold no NUL byte, each is padded
with NULs to the longest one's length (rounded up to whole 64-bit words when
the keys seen once are looked for, below) and grouped as ``fixed_size_binary``.
Two such strings pad alike only if they are equal, so the groups are the same;
Arrow groups fixed-width keys faster than strings once its hash table outgrows
the CPU caches (``docs/design-choices.md``). The padding is stripped only from
the rows a caller takes (:class:`PackedStrings`).

Keys seen once are set aside before the hash aggregation. In a sketch's merge
most groups are keys of the stream's tail that occur in one buffered row, and
inserting them is most of
what Arrow's hash table costs once it outgrows the caches. When every key
component is an int or padded bytes, each row gets a 64-bit fingerprint of its
key words and the rows are counted per bucket of fingerprints (``np.bincount``):
a row alone in its bucket holds a key that occurs in no other row, whatever the
fingerprint function (equal keys share a bucket), so it is a group of one
without being grouped. Collisions only leave some such rows to the aggregation.
Exactness never depends on the fingerprint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from locality.sketch.columns import INT, STR

__all__ = ["Groups", "PackedStrings", "group"]

# pandas.factorize groups int64 keys faster than Arrow when its hash table starts near the number of groups
# (by default it starts at one slot per row and leaves the caches): 0.4x-0.8x Arrow's time from 200k to 3.2M rows.
_PANDAS_MAX_ROWS = 1 << 26
# Rows of the blocks not located from which the keys seen once are set aside before Arrow groups the rest.
_SINGLES_MIN_ROWS = 1 << 16
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
        # Groups: the located blocks' keys, which are distinct, and a guess at the other rows' distinct keys.
        hint = sum(sizes[:located]) + sum(sizes[located:]) // 8 + 1
        labels, uniques = pd.factorize(np.concatenate([block[0] for block in blocks]), size_hint=hint)
        size = len(uniques)
        sums = [np.bincount(labels, weights=np.concatenate(parts), minlength=size) for parts in values]
        starts = np.cumsum([0, *sizes])
        at = [labels[starts[b] : starts[b + 1]] for b in range(located)]
        return Groups([uniques.astype(np.int64, copy=False)], np.bincount(labels, minlength=size), sums, at)
    # Keys seen once are worth setting aside (strings padded to whole words for it) when there are many rows of
    # string keys; Arrow groups int64 keys fast enough that it does not pay for them (benchmarks/results_sketch.md).
    unlocated = sum(sizes[located:])
    find_singles = STR in kinds and unlocated >= _SINGLES_MIN_ROWS
    # Per component, its column in each block: the int64 values, or the strings, padded if they can be.
    columns, packed = [], []
    for i, kind in enumerate(kinds):
        column = [block[i] for block in blocks]
        padded = None if kind == INT else _padded(column, 8 if find_singles else 1)
        packed.append(padded is not None)
        columns.append(column if padded is None else padded)
    singles = None
    if find_singles and all(kind == INT or packs for kind, packs in zip(kinds, packed)):
        columns, values, sizes, singles = _set_aside_singles(columns, values, sizes, located)
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
        batches.append(pa.RecordBatch.from_arrays([*(_arrow(c[b]) for c in columns), *positions, *summed], names=names))
    aggregations = [*((f"at{b}", "sum") for b in range(located)), *((f"v{j}", "sum") for j in range(len(values)))]
    # Without threads the group order is stable (Arrow's documented promise for use_threads=False).
    out = pa.Table.from_batches(batches).group_by(keys, use_threads=False).aggregate([*aggregations, ([], "count_all")])
    grouped = [out.column(k) for k in keys]
    counts = out.column("count_all").to_numpy()
    sums = [out.column(f"v{j}_sum").to_numpy() for j in range(len(values))]
    if singles is not None:  # the keys seen once follow the aggregation's groups, in row order
        single_keys, single_values = singles
        grouped = [pa.chunked_array([*g.chunks, _arrow(k)], type=g.type) for g, k in zip(grouped, single_keys)]
        counts = np.concatenate([counts, np.ones(len(single_keys[0]), dtype=counts.dtype)])
        sums = [np.concatenate([total, alone]) for total, alone in zip(sums, single_values, strict=True)]
    grouped = [
        g.to_numpy() if kind == INT else PackedStrings(g) if packs else g
        for g, kind, packs in zip(grouped, kinds, packed, strict=True)
    ]
    at = []
    for b in range(located):
        position = out.column(f"at{b}_sum").to_numpy()
        holders = np.flatnonzero(~np.isnan(position))
        where = np.empty(sizes[b], dtype=np.int64)
        where[position[holders].astype(np.int64)] = holders
        at.append(where)
    return Groups(grouped, counts, sums, at)


def _set_aside_singles(
    columns: list[list[Any]], values: Sequence[Sequence[np.ndarray]], sizes: list[int], located: int
) -> tuple[list[list[Any]], list[list[np.ndarray]], list[int], tuple[list[Any], list[np.ndarray]]]:
    """The rows of the blocks after the first ``located`` whose key no other row holds, taken out of the blocks.

    Returns the blocks' columns, values and sizes without those rows, and the
    rows taken out: their key components and their values (one group each).
    """
    alone = _seen_once(columns, located)
    rest = {b: ~mask for b, mask in alone.items()}
    single_keys = [_concat([_rows(column[b], mask) for b, mask in alone.items()]) for column in columns]
    single_values = [np.concatenate([np.compress(mask, parts[b]) for b, mask in alone.items()]) for parts in values]
    columns = [[_rows(block, rest[b]) if b in rest else block for b, block in enumerate(c)] for c in columns]
    values = [[np.compress(rest[b], part) if b in rest else part for b, part in enumerate(p)] for p in values]
    sizes = [int(np.count_nonzero(rest[b])) if b in rest else size for b, size in enumerate(sizes)]
    return columns, values, sizes, (single_keys, single_values)


def _seen_once(columns: list[list[Any]], located: int) -> dict[int, np.ndarray]:
    """Per block after the first ``located``, which of its rows hold a key that no other row of any block holds.

    Every component is int64 values or padded bytes (a multiple of 8 wide), so a
    key is a few 64-bit words; their fingerprint picks a bucket and the rows are
    counted per bucket. A row alone in its bucket is alone with its key: equal
    keys have equal fingerprints. Collisions only hide some such rows, never
    invent one, so the fingerprint needs no strength, only spread.
    """
    rows = sum(len(block) for block in columns[0])
    bits = max(1, int(rows - 1).bit_length())  # one to two buckets per row
    buckets = []
    for b in range(len(columns[0])):
        mixed, position = None, 0
        for column in columns:
            words = _words(column[b])
            for j in range(words.shape[1]):
                term = words[:, j] * _odd(position)
                mixed = term if mixed is None else mixed + term
                position += 1
        mixed ^= mixed >> np.uint64(29)
        mixed *= _odd(0)
        buckets.append((mixed >> np.uint64(64 - bits)).astype(np.intp))
    lone = np.bincount(np.concatenate(buckets), minlength=1 << bits) == 1  # a byte per bucket: read in the caches
    return {b: lone[buckets[b]] for b in range(located, len(buckets))}


def _odd(position: int) -> np.uint64:
    """The odd 64-bit multiplier of a key's word at ``position``: an odd multiple of the golden ratio's."""
    return np.uint64((0x9E3779B97F4A7C15 * (2 * position + 1)) % 2**64)


def _words(column: Any) -> np.ndarray:
    """A component's rows as 64-bit words (rows x words, no copy): int64 values, or padded bytes 8 at a time."""
    if isinstance(column, np.ndarray):
        return column.view(np.uint64).reshape(-1, 1)
    per_row = column.type.byte_width // 8
    data = np.frombuffer(column.buffers()[1], dtype=np.uint64, count=(column.offset + len(column)) * per_row)
    return data[column.offset * per_row :].reshape(-1, per_row)


def _rows(column: Any, mask: np.ndarray) -> Any:
    """The rows of a component (int64 values or padded bytes) where ``mask`` is true."""
    if isinstance(column, np.ndarray):
        return np.compress(mask, column)
    chosen = np.compress(mask, _words(column), axis=0)  # 10x as fast as boolean indexing of a 2-d array
    return pa.FixedSizeBinaryArray.from_buffers(column.type, len(chosen), [None, pa.py_buffer(chosen)])


def _arrow(column: Any) -> pa.Array:
    """A component's rows as an Arrow array (int64 values are numpy until then)."""
    return pa.array(column) if isinstance(column, np.ndarray) else column


def _concat(parts: list[Any]) -> Any:
    """One column of the parts of a component (int64 values or padded bytes)."""
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)
    return pa.concat_arrays(parts)


def _padded(strings: list[pa.StringArray], multiple: int) -> list[pa.FixedSizeBinaryArray] | None:
    """Each block's strings NUL-padded to one width (a ``multiple`` of bytes), as ``fixed_size_binary``.

    None if some cannot be.
    """
    offsets = [_offsets(s) for s in strings]
    longest = max((int(np.diff(o).max()) for o in offsets if len(o) > 1), default=0)
    if longest > _PACKED_MAX_BYTES:
        return None
    width = multiple * -(-max(1, longest) // multiple)
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
