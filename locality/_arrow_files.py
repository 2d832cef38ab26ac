"""Parquet files as bytes: what the store writes and reads (a bucket holds objects, not open files)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["table_bytes", "table_from_bytes"]


def table_bytes(table: pa.Table) -> bytes:
    """``table`` as the bytes of one Parquet file."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def table_from_bytes(data: bytes, columns: Sequence[str] | None = None) -> pa.Table:
    """The table of the Parquet file ``data`` (only ``columns``, when given)."""
    return pq.read_table(pa.BufferReader(data), columns=None if columns is None else list(columns))
