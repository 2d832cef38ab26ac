"""Time ranges, read one way by every reader: ISO 8601 bounds, and UTC wherever a zone is missing.

A trace's timestamps may carry a zone (Parquet ``timestamp[us, tz=...]``,
ISO 8601 text with an offset) or not, and so may ``--start`` and ``--end``.
Every reader (the Spark jobs of :mod:`pipelines.trace`, the replay's reader
without Spark, the notebooks' :func:`locality.analysis.traces.load_trace`)
takes a timestamp without a zone as UTC and compares instants:
``--start 2013-03-01`` is ``2013-03-01T00:00:00Z`` whatever the column, and
``--start 2013-03-01T00:00:00+01:00`` against a column without a zone is the
instant an hour earlier, never a type error. (Spark does the same when its
session time zone is UTC, which :func:`pipelines.session.build_session` sets.)
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pandas as pd

from locality.errors import TraceError

__all__ = ["parse_time", "to_utc", "in_column_zone", "within", "arrow_filter"]


def parse_time(value: str | datetime, name: str) -> datetime:
    """``value`` (ISO 8601 text or a datetime) as a UTC-aware datetime, UTC when it names no zone.

    Raises
    ------
    TraceError
        ``value`` is not an ISO 8601 date or timestamp; the message names ``name``.
    """
    if isinstance(value, datetime):  # pandas.Timestamp too
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(value)
        except (TypeError, ValueError):
            raise TraceError(f"the {name} time {value!r} is not an ISO 8601 date or timestamp") from None
    if pd.isna(moment):
        raise TraceError(f"the {name} time {value!r} is not a date or timestamp")
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def to_utc(moment: str | datetime, name: str = "time") -> pd.Timestamp:
    """``moment`` as a UTC-aware ``pandas.Timestamp`` (see :func:`parse_time`)."""
    return pd.Timestamp(parse_time(moment, name))


def in_column_zone(moment: pd.Timestamp, ts: pd.Series) -> pd.Timestamp:
    """The UTC-aware ``moment`` spelled as the column ``ts`` spells time: naive UTC, or in the column's zone."""
    zone = ts.dt.tz
    return moment.tz_convert(None) if zone is None else moment.tz_convert(zone)


def within(ts: pd.Series, start: str | datetime | None, end: str | datetime | None) -> np.ndarray:
    """Mask of the rows with ``start <= ts < end`` (either bound may be None), compared as instants."""
    keep = np.ones(len(ts), dtype=bool)
    if start is not None:
        keep &= (ts >= in_column_zone(to_utc(start, "start"), ts)).to_numpy(dtype=bool)
    if end is not None:
        keep &= (ts < in_column_zone(to_utc(end, "end"), ts)).to_numpy(dtype=bool)
    return keep


def arrow_filter(column: str, start: datetime | None, end: datetime | None):
    """The pyarrow dataset expression for ``start <= column < end`` (None when both are None), compared in UTC.

    The column is cast to UTC microseconds first: a naive time is taken as
    UTC, a date as its midnight, as Spark compares them.
    """
    import pyarrow as pa
    import pyarrow.dataset as ds

    if start is None and end is None:
        return None
    utc = pa.timestamp("us", tz="UTC")
    ts = ds.field(column).cast(utc)
    bounds = []
    if start is not None:
        bounds.append(ts >= pa.scalar(parse_time(start, "start"), utc))
    if end is not None:
        bounds.append(ts < pa.scalar(parse_time(end, "end"), utc))
    return bounds[0] if len(bounds) == 1 else bounds[0] & bounds[1]
