"""Keys as the engines take them: ``str`` or ``int``, one at a time or in batches.

A batch (list, numpy array, pandas Series, pyarrow Array) is split into an
Arrow ``large_string`` column and an int64 column, with the rows each kind goes
back to, so that every engine hashes strings and integers with numpy. Every
rejected key is named with its position and type in an
:class:`~locality.errors.InvalidParameterError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from locality._validation import check_integer
from locality.errors import InvalidParameterError

__all__ = [
    "LONG_RANGE",
    "INT_RANGE",
    "KeyColumns",
    "key_columns",
    "is_int_key",
    "check_int_key",
    "lone_surrogate_error",
    "first_candidates",
]

#: Values of a Java ``long`` and ``int``.
LONG_RANGE = (-(2**63), 2**63 - 1)
INT_RANGE = (-(2**31), 2**31 - 1)


def is_int_key(key: object) -> bool:
    return isinstance(key, (int, np.integer)) and not isinstance(key, bool)


def check_int_key(key: object, bounds: tuple[int, int], owner: str) -> int:
    """Return ``key`` as a Python int, or raise naming its type (str and int keys only)."""
    if not is_int_key(key):
        raise InvalidParameterError(
            f"the 'key' parameter of {owner} must be a str or an int; got {type(key).__name__} ({key!r})",
            parameter="key",
        )
    return check_integer(key, "key", owner, lower=bounds[0], upper=bounds[1])


def lone_surrogate_error(text: object, name: str, owner: str) -> InvalidParameterError:
    return InvalidParameterError(
        f"the {name!r} parameter of {owner} must hold valid Unicode text; got a string with a lone surrogate: {text!r}"
    )


@dataclass
class KeyColumns:
    """A batch of keys split by kind; ``*_rows`` is where each kind goes in the output (None: all rows)."""

    n: int
    strings: pa.LargeStringArray | None = None
    string_rows: np.ndarray | None = None
    ints: np.ndarray | None = None
    int_rows: np.ndarray | None = None


def key_columns(keys: object, owner: str) -> KeyColumns:
    def reject(what: str) -> InvalidParameterError:
        return InvalidParameterError(
            f"the 'keys' parameter of {owner} must hold only str or int keys; got {what}", parameter="keys"
        )

    if isinstance(keys, pd.Series):
        keys = keys.to_numpy(dtype=object) if keys.dtype == object else pa.Array.from_pandas(keys)
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if isinstance(keys, pa.Array):
        if pa.types.is_dictionary(keys.type):
            keys = keys.dictionary_decode()
        if keys.null_count:
            position = int(np.flatnonzero(keys.is_null().to_numpy(zero_copy_only=False))[0])
            raise reject(f"a null key at position {position}")
        kind = keys.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
            return KeyColumns(len(keys), strings=keys.cast(pa.large_string()))
        if not pa.types.is_integer(kind):
            raise reject(f"a pyarrow array of type {kind}")
        keys = keys.to_numpy()
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
        raise InvalidParameterError(
            f"the 'keys' parameter of {owner} must be a list, numpy array, pandas Series or pyarrow Array "
            f"of keys; got {type(keys).__name__}",
            parameter="keys",
        )
    if isinstance(keys, np.ndarray):
        if keys.ndim != 1:
            raise InvalidParameterError(
                f"the 'keys' parameter of {owner} must be one-dimensional; got {keys.ndim}-d", parameter="keys"
            )
        if keys.dtype.kind == "U":
            return KeyColumns(keys.size, strings=_arrow_strings(keys, owner))
        if keys.dtype.kind in "iu":
            if keys.dtype == np.uint64 and keys.size and keys.max() > LONG_RANGE[1]:
                position = int(np.argmax(keys > LONG_RANGE[1]))
                raise reject(f"{keys[position]} at position {position}, outside the int64 range")
            return KeyColumns(keys.size, ints=keys.astype(np.int64, copy=False))
        if keys.dtype.kind != "O":
            raise reject(f"a numpy array of dtype {keys.dtype}")
    else:
        keys = list(keys)
    types = set(map(type, keys))
    if all(issubclass(t, str) for t in types):
        return KeyColumns(len(keys), strings=_arrow_strings(keys, owner))
    if types <= {int}:
        return KeyColumns(len(keys), ints=_int64s(keys, None, reject))
    is_str = np.fromiter((isinstance(k, str) for k in keys), dtype=bool, count=len(keys))
    is_int = np.fromiter(map(is_int_key, keys), dtype=bool, count=len(keys))
    if not (is_str | is_int).all():
        position = int(np.argmin(is_str | is_int))
        raise reject(f"{type(keys[position]).__name__} ({keys[position]!r}) at position {position}")
    int_rows = np.flatnonzero(is_int)
    ints = _int64s([keys[i] for i in int_rows], int_rows, reject)
    if not is_str.any():
        return KeyColumns(len(keys), ints=ints)
    string_rows = np.flatnonzero(is_str)
    strings = _arrow_strings([keys[i] for i in string_rows], owner)
    return KeyColumns(len(keys), strings, string_rows, ints, int_rows)


def _int64s(values: list[Any], rows: np.ndarray | None, reject: Any) -> np.ndarray:
    """``values`` (Python or numpy ints) as int64; ``rows`` maps them to key positions for errors."""
    try:
        return np.fromiter(map(int, values), dtype=np.int64, count=len(values))
    except OverflowError:
        i = next(i for i, v in enumerate(values) if not LONG_RANGE[0] <= int(v) <= LONG_RANGE[1])
        position = i if rows is None else int(rows[i])
        raise reject(f"{values[i]} at position {position}, outside the int64 range") from None


def _arrow_strings(values: Any, owner: str) -> pa.LargeStringArray:
    try:
        return pa.array(values, type=pa.large_string())
    except UnicodeEncodeError as error:
        bad = next(v for v in values if not v.isascii() and not _encodable(v))
        raise lone_surrogate_error(bad, "keys", owner) from error


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def first_candidates(
    buckets_of: Callable[[int, int], np.ndarray], n_buckets: int, limit: int, chunk: int
) -> np.ndarray:
    """The smallest candidate number each of ``n_buckets`` buckets gets, -1 where none below ``limit`` does.

    How a surrogate key is found for every instance (or key group) of an
    engine's hash: candidates ``0, 1, 2, ...`` are hashed ``chunk`` at a
    time, ``buckets_of(start, stop)`` giving the bucket of candidates
    ``start..stop - 1``, until every bucket has one.
    """
    first = np.full(n_buckets, -1, dtype=np.int64)
    for start in range(0, limit, chunk):
        stop = min(start + chunk, limit)
        buckets, at = np.unique(buckets_of(start, stop), return_index=True)
        new = first[buckets] < 0
        first[buckets[new]] = start + at[new]  # np.unique's index is the first, hence smallest, candidate
        if (first >= 0).all():
            break
    return first
