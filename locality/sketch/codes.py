"""Grouping the rows of a batch with the sketch's keys: one int64 code per key tuple, checked for collisions.

The batch path of the sketch must count a batch exactly and find which of its
keys the sketch already monitors, without any per-key Python code. Every key
tuple becomes one int64 *code*: the key itself for a single int component,
else a 64-bit hash of its components computed with numpy over the Arrow string
buffers (:func:`key_codes`). :func:`group` labels the sketch's keys and the
batch rows with one id per distinct code (``pandas.factorize``), then compares
every batch row with the first row of its label; a hash collision sends the
batch to the exact grouping of :func:`exact_labels` (Arrow
``dictionary_encode`` per component), so results never depend on the hash.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from locality.sketch.columns import INT, Column

__all__ = ["key_codes", "group", "exact_labels", "mix", "hash_utf8"]

logger = logging.getLogger(__name__)

# The golden-ratio increment and the splitmix64 finalizer multipliers.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
# _LOW_BYTES[k] keeps the k low bytes of a little-endian word (k = 0..8).
_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], dtype=np.uint64)


def key_codes(cols: list[Column], code_is_key: bool) -> np.ndarray:
    """One int64 code per row: the key itself (``code_is_key``: a single int component), or a 64-bit hash."""
    if code_is_key:
        return cols[0].values
    combined = None
    for col in cols:
        if col.kind == INT:
            part = mix(col.values.view(np.uint64))
        else:
            part = hash_utf8(col.values)
            if col.codes is not None:
                part = part[col.codes]
        combined = part if combined is None else mix(combined * _GOLDEN + part)
    return combined.view(np.int64)


def group(
    stored: list[Any], stored_codes: np.ndarray, cols: list[Column], codes: np.ndarray, code_is_key: bool
) -> tuple[np.ndarray, int, list[Any]]:
    """Label the sketch's keys followed by the batch rows with one id per distinct key tuple.

    Parameters
    ----------
    stored : list
        The sketch's key components (int64 array or Arrow strings each), ``n`` rows.
    stored_codes : ndarray of int64
        Their codes (kept by the sketch, so its keys are never re-hashed).
    cols, codes
        The batch's components and their codes.
    code_is_key : bool
        The codes are the keys themselves: no collision is possible.

    Returns
    -------
    labels : ndarray of int64
        ``n + len(batch)`` labels, numbered in order of first appearance.
    count : int
        Number of labels.
    sources : list
        Per component, the sketch's values followed by the batch's, to ``take`` kept keys from.
    """
    n = len(stored_codes)
    sources = []
    for mine, col in zip(stored, cols, strict=True):
        if col.kind == INT:
            sources.append(np.concatenate([mine, col.values]))
        else:
            sources.append(pa.concat_arrays([mine, col.values]))
    labels, uniques = pd.factorize(np.concatenate([stored_codes, codes]))
    if code_is_key:
        return labels, len(uniques), sources
    distinct = n == 0 or labels[n - 1] == n - 1  # two sketch keys sharing a code would break this
    if distinct:
        first = _first_positions(labels)[labels[n:]]
        distinct = all(_same_keys(src, col, n, first) for src, col in zip(sources, cols, strict=True))
    if distinct:
        return labels, len(uniques), sources
    logger.info("SpaceSaving: 64-bit key hash collision; grouping this batch exactly")
    labels, count = exact_labels(cols, sources, n)
    return labels, count, sources


def exact_labels(cols: list[Column], sources: list[Any], n: int) -> tuple[np.ndarray, int]:
    """Labels of the ``n`` sketch rows and the batch rows of ``sources``, grouped by value, without hashing."""
    labels = card = None
    for col, cat in zip(cols, sources, strict=True):
        if col.kind == INT:
            codes, uniques = pd.factorize(cat)
            size = len(uniques)
        else:
            encoded = cat.dictionary_encode()
            codes = encoded.indices.to_numpy().astype(np.int64)
            size = len(encoded.dictionary)
            if col.codes is not None:  # rows point into a dictionary: map them through it
                codes = np.concatenate([codes[:n], codes[n:][col.codes]])
        if labels is None:
            labels, card = codes, size
            continue
        # Both factors are below the row count, so the mixed-radix code fits in int64;
        # re-factorizing after each component keeps it so for any arity.
        labels, uniques = pd.factorize(labels * size + codes)
        card = len(uniques)
    return labels, int(card)


def mix(h: np.ndarray) -> np.ndarray:
    """Return the splitmix64 finalizer of a uint64 array (a bijection that spreads every bit)."""
    h = h ^ (h >> np.uint64(30))
    h *= _MIX1
    h ^= h >> np.uint64(27)
    h *= _MIX2
    h ^= h >> np.uint64(31)
    return h


def hash_utf8(arr: pa.StringArray) -> np.ndarray:
    """Return a 64-bit hash per string, vectorized over 8-byte words of the Arrow buffers.

    Word ``j`` of every string is read at once through an overlapping uint64 view
    of the data (one view element per byte offset), masked to the string's length,
    and folded in; only strings longer than ``8 * j`` take part in round ``j``, so
    the cost is about one numpy pass per 8 bytes of the typical key. Deterministic
    across processes (unlike Python's ``hash``), though the codes never leave one.
    """
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype="<i4", count=arr.offset + n + 1)[arr.offset :].astype(np.int64)
    starts, lengths = offsets[:-1], np.diff(offsets)
    h = lengths.astype(np.uint64) * _GOLDEN
    longest = int(lengths.max())
    if longest == 0:
        return mix(h)
    begin, end = int(offsets[0]), int(offsets[-1])
    size = end - begin
    padded = np.empty(size + 8, dtype=np.uint8)
    padded[:size] = np.frombuffer(data_buf, dtype=np.uint8, count=end)[begin:]
    padded[size:] = 0
    words = np.ndarray((size + 1,), dtype="<u8", buffer=padded, strides=(1,))  # words[i] = bytes i..i+7
    starts = starts - begin
    rows = None
    for j in range(0, longest, 8):
        if j:
            rows = np.flatnonzero(lengths > j) if rows is None else rows[lengths[rows] > j]
        sel_starts = starts if rows is None else starts[rows]
        sel_lengths = lengths if rows is None else lengths[rows]
        word = words[sel_starts + j] & _LOW_BYTES[np.minimum(sel_lengths - j, 8)]
        part = (h if rows is None else h[rows]) ^ word
        part *= _GOLDEN
        part ^= part >> np.uint64(29)
        if rows is None:
            h = part
        else:
            h[rows] = part
    return mix(h)


def _first_positions(labels: np.ndarray) -> np.ndarray:
    """Return, per label, the position of its first row (labels numbered in order of appearance)."""
    running = np.maximum.accumulate(labels)
    return np.flatnonzero(np.concatenate([[True], running[1:] > running[:-1]]))


def _same_keys(source: Any, col: Column, n: int, first: np.ndarray) -> bool:
    """Return True if every batch row holds the same component value as the first row of its label."""
    if col.kind == INT:
        return bool(np.array_equal(source[n:], source[first]))
    rows = source.slice(n) if col.codes is None else source.take(n + col.codes)
    if col.codes is not None:
        first = np.where(first >= n, n + col.codes[np.maximum(first - n, 0)], first)
    return bool(pc.all(pc.equal(rows, source.take(first))).as_py())
