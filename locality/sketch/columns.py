"""Key columns as the sketch takes them: int64 rows or Arrow strings, checked once per batch.

:func:`parse_column` turns one key component of a batch (numpy, pandas, Arrow,
or a list) into a :class:`Column`, rejecting nulls and other types with a
message that names the key position; :func:`parse_weights` does the same for
the weights. The sketch itself never sees anything but these columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from locality.errors import InvalidParameterError

__all__ = [
    "INT",
    "STR",
    "KIND_NAMES",
    "KIND_ARTICLES",
    "INT64_MIN",
    "INT64_MAX",
    "Column",
    "build_column",
    "parse_column",
    "parse_weights",
]

# Component kinds. The numbers are also the on-disk codes of the serialized format.
INT = 1
STR = 2
KIND_NAMES = {INT: "int", STR: "str", None: "unset"}
KIND_ARTICLES = {INT: "an int", STR: "a str"}
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class Column(NamedTuple):
    """One key component of a batch, normalized.

    ``kind`` is ``INT`` (``values`` is an int64 ndarray of rows) or ``STR``
    (``values`` is a ``pa.StringArray``). For strings, ``codes`` is either
    ``None`` (``values`` holds one entry per row) or an int64 array of row codes
    into ``values`` (a dictionary of distinct strings): the object-array path
    factorizes in pandas first because building Arrow strings from Python objects
    costs ~180 ns each, so it pays that only once per distinct value.
    """

    kind: int
    values: Any
    codes: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.values) if self.codes is None else len(self.codes)


def build_column(kind: int | None, values: list[Any]) -> Any:
    if kind == INT:
        return np.array(values, dtype=np.int64)
    if kind == STR:
        return pa.array(values, type=pa.string())
    return None


def _describe_types(values: Any) -> str:
    names = sorted({type(v).__name__ for v in values})
    return ", ".join(names)


def parse_column(col: Any, pos: int, arity: int, owner: str) -> Column:
    """Normalize one key column to int64 rows or Arrow strings, rejecting nulls and other types."""
    where = "" if arity == 1 else f" (key position {pos})"
    param = f"the 'keys' parameter of {owner}"
    if isinstance(col, (str, bytes)) or not isinstance(
        col, (Sequence, np.ndarray, pd.Series, pd.Index, pa.Array, pa.ChunkedArray)
    ):
        raise InvalidParameterError(
            f"{param} must hold columns (array, Series, Arrow array or list){where}; got {type(col).__name__}"
        )
    if len(col) == 0:  # an empty batch (e.g. an empty partition) adds nothing, whatever its type
        return Column(STR, pa.array([], type=pa.string()))
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if isinstance(col, (pd.Series, pd.Index)):
        if isinstance(col.dtype, np.dtype):
            return parse_column(col.to_numpy(), pos, arity, owner)
        col = pa.array(col, from_pandas=True)  # string, category and nullable dtypes convert without copies
    elif isinstance(col, np.ndarray):
        if col.ndim != 1:
            raise InvalidParameterError(f"{param} must hold 1-D columns{where}; got shape {col.shape}")
        if col.dtype.kind in "iu":
            return _int_column(col, param, where)
        if col.dtype.kind == "O":
            return _object_column(col, param, where)
        if col.dtype.kind != "U":
            raise InvalidParameterError(f"{param} must hold str or int values{where}; got dtype {col.dtype}")
        col = pa.array(col)
    elif not isinstance(col, pa.Array):
        # fromiter keeps each element whole (np.array would turn a list of tuples into 2-D)
        return _object_column(np.fromiter(col, dtype=object, count=len(col)), param, where)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if col.null_count:
        raise InvalidParameterError(
            f"{param} must not contain nulls{where} (drop rows with null keys first); got {col.null_count} nulls"
        )
    if pa.types.is_integer(col.type):
        if pa.types.is_uint64(col.type) and len(col) and col.to_numpy().max() > INT64_MAX:
            raise InvalidParameterError(f"{param} must hold ints that fit in int64{where}; got uint64 values above")
        return Column(INT, col.to_numpy().astype(np.int64, copy=False))
    if pa.types.is_string(col.type):
        return Column(STR, col)
    if pa.types.is_large_string(col.type) or pa.types.is_string_view(col.type):
        return Column(STR, col.cast(pa.string()))
    raise InvalidParameterError(f"{param} must hold str or int values{where}; got Arrow type {col.type}")


def _int_column(values: np.ndarray, param: str, where: str) -> Column:
    if values.dtype == np.uint64 and len(values) and values.max() > INT64_MAX:
        raise InvalidParameterError(f"{param} must hold ints that fit in int64{where}; got {values.max()}")
    return Column(INT, values.astype(np.int64, copy=False))


def _object_column(values: np.ndarray, param: str, where: str) -> Column:
    """Factorize a Python-object column in pandas, then check types on its distinct values only."""
    codes, uniques = pd.factorize(values)
    if len(codes) and codes.min() < 0:
        nulls = int(np.count_nonzero(codes < 0))
        raise InvalidParameterError(
            f"{param} must not contain nulls{where} (drop rows with null keys first); got {nulls} nulls"
        )
    inferred = pd.api.types.infer_dtype(uniques, skipna=False)
    if inferred == "string":
        return Column(STR, pa.array(uniques, type=pa.string()), codes.astype(np.int64, copy=False))
    if inferred == "integer":
        big = [v for v in uniques if not INT64_MIN <= v <= INT64_MAX]
        if big:
            raise InvalidParameterError(f"{param} must hold ints that fit in int64{where}; got {big[0]!r}")
        return Column(INT, np.asarray(uniques.tolist(), dtype=np.int64)[codes])
    if len(values) == 0:
        return Column(STR, pa.array([], type=pa.string()))
    raise InvalidParameterError(f"{param} must hold only str or only int values{where}; got {_describe_types(uniques)}")


def parse_weights(weights: Any, nrows: int, owner: str) -> np.ndarray | None:
    if weights is None:
        return None
    if isinstance(weights, (pa.Array, pa.ChunkedArray)):
        if weights.null_count:
            raise InvalidParameterError(
                f"the 'weights' parameter of {owner} must not contain nulls", parameter="weights"
            )
        weights = weights.to_numpy()
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"the 'weights' parameter of {owner} must hold finite floats > 0; got {type(weights).__name__}",
            parameter="weights",
        ) from exc
    if w.ndim != 1 or len(w) != nrows:
        raise InvalidParameterError(
            f"the 'weights' parameter of {owner} must hold one weight per key row ({nrows}); got shape {w.shape}",
            parameter="weights",
        )
    bad = ~(np.isfinite(w) & (w > 0))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise InvalidParameterError(
            f"the 'weights' parameter of {owner} must hold finite floats > 0; got {float(w[first])!r} at row {first}",
            parameter="weights",
        )
    return w
