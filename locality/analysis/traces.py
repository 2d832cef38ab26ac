"""Trace statistics: read a trace, split it, and measure how skewed and concentrated its keys are.

The first questions of every notebook, asked before any routing table is
built: how many tuples and keys, how heavy the head of each key and of each
pair of consecutive keys (rank/frequency), how few pairs cover most tuples,
how a key's load moves from window to window, and how much of each window's
traffic travels on pairs the windows before it already showed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from locality._validation import check_columns, check_interval, check_random_state
from locality.defaults import DEFAULT_PERIOD, DEFAULT_SEED, DEFAULT_TS
from locality.errors import TraceError
from locality.replay import windows_of
from locality.time_range import within

__all__ = [
    "load_trace",
    "split_trace",
    "rank_frequency",
    "pair_concentration",
    "pairs_to_cover",
    "interval_costs",
    "pair_drift",
]

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------- traces
def load_trace(
    path: str | Path | pd.DataFrame,
    keys: Sequence[str],
    *,
    ts: str | None = None,
    order: str | None = None,
    start: str | pd.Timestamp | None = None,
    end: str | pd.Timestamp | None = None,
    extra: Sequence[str | None] = (),
) -> pd.DataFrame:
    """Read a Parquet (file or directory) or CSV trace: its key columns, in order, within ``[start, end)``.

    Rows with a null or empty key are dropped (and logged). The frame is sorted
    by ``order`` when given, else by ``ts`` when given, else kept in file order.
    ``path`` may also be a DataFrame already in memory (a generated trace);
    ``extra`` names more columns to keep (``None`` entries are ignored).
    ``start`` and ``end`` without a zone are UTC, and so are times of a
    column without one (:mod:`locality.time_range`: the jobs' rule).

    Raises
    ------
    TraceError
        The path does not exist, a column is missing, ``ts`` is not a timestamp,
        ``start``/``end`` without ``ts``, or no row is left.
    """
    keys = list(keys)
    columns = list(dict.fromkeys([*keys, *(c for c in (ts, order, *extra) if c is not None)]))
    if (start is not None or end is not None) and ts is None:
        raise TraceError("a time range (start/end) needs the timestamp column 'ts'")
    if isinstance(path, pd.DataFrame):
        check_columns(list(path.columns), columns, "the trace")
        frame, path = path[columns], "the generated trace"
    else:
        frame = _read_columns(Path(path).expanduser(), columns, ts)
    if ts is not None and not pd.api.types.is_datetime64_any_dtype(frame[ts]):
        raise TraceError(f"the timestamp column {ts!r} of {path} has type {frame[ts].dtype}; it must be a timestamp")
    if start is not None or end is not None:
        frame = frame[within(frame[ts], start, end)]  # instants; UTC where a zone is missing, as every reader
    valid = frame[keys].notna().all(axis=1)
    for key in keys:
        if not pd.api.types.is_numeric_dtype(frame[key].dtype):
            valid &= frame[key].astype(str) != ""
    if (~valid).any():
        logger.info("load_trace: dropped %d rows with a null or empty key", int((~valid).sum()))
    frame = frame[valid]
    sort_by = order if order is not None else ts
    if sort_by is not None:
        frame = frame.sort_values(sort_by, kind="stable")
    if frame.empty:
        raise TraceError(f"the trace {path} has no row with every key of {keys} in the time range")
    return frame.reset_index(drop=True)


def _read_columns(path: Path, columns: list[str], ts: str | None) -> pd.DataFrame:
    """``columns`` of a CSV file or a Parquet file or directory, checked to exist."""
    if not path.exists():
        raise TraceError(f"no trace at {path} (relative paths start from {Path.cwd()})")
    if path.suffix == ".csv":
        present = list(pd.read_csv(path, nrows=0).columns)
        check_columns(present, columns, f"the trace {path}")
        return pd.read_csv(path, usecols=columns, parse_dates=[ts] if ts else False)
    import pyarrow.dataset as ds

    dataset = ds.dataset(path, format="parquet")
    check_columns(dataset.schema.names, columns, f"the trace {path}")
    return dataset.to_table(columns=columns).to_pandas()


def split_trace(
    trace: pd.DataFrame, fraction: float = 0.5, *, shuffle: bool = False, seed: int = DEFAULT_SEED
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The first ``fraction`` of the rows and the rest (rows drawn at random with ``shuffle``, seeded)."""
    fraction = check_interval(fraction, "fraction", "split_trace", lower=0.0, upper=1.0, closed="neither")
    rows = np.arange(len(trace))
    if shuffle:
        rows = check_random_state(seed, "seed", "split_trace").permutation(rows)
    cut = int(round(fraction * len(trace)))
    return trace.iloc[np.sort(rows[:cut])], trace.iloc[np.sort(rows[cut:])]


# ---------------------------------------------------------------------- skew
def rank_frequency(trace: pd.DataFrame, columns: str | Sequence[str]) -> pd.DataFrame:
    """Tuples per distinct key (or key combination), heaviest first: ``rank`` (from 1), ``count``, ``share``."""
    columns = [columns] if isinstance(columns, str) else list(columns)
    check_columns(list(trace.columns), columns, "the trace")
    counts = trace.groupby(columns, sort=False, observed=True).size().sort_values(ascending=False, kind="stable")
    values = counts.to_numpy(dtype=np.int64)
    return pd.DataFrame(
        {"rank": np.arange(1, len(values) + 1), "count": values, "share": values / max(values.sum(), 1)}
    )


def pair_concentration(trace: pd.DataFrame, keys: Sequence[str], points: int = 40) -> pd.DataFrame:
    """Share of tuples covered by the ``top_n`` heaviest key pairs, at ``points`` log-spaced ``top_n``.

    Returns columns ``top_n`` and ``share`` (0 to 1), ending at every distinct pair (share 1).
    """
    ranked = rank_frequency(trace, keys)
    cumulative = np.cumsum(ranked["count"].to_numpy()) / ranked["count"].sum()
    top = np.unique(np.geomspace(1, len(ranked), num=max(points, 2)).round().astype(np.int64))
    return pd.DataFrame({"top_n": top, "share": cumulative[top - 1]})


def pairs_to_cover(trace: pd.DataFrame, keys: Sequence[str], shares: Sequence[float] = (0.5, 0.8, 0.9)) -> dict:
    """Fewest key pairs that cover each share of the tuples (``{share: n_pairs}``)."""
    ranked = rank_frequency(trace, keys)
    cumulative = np.cumsum(ranked["count"].to_numpy()) / ranked["count"].sum()
    return {s: int(np.searchsorted(cumulative, s - 1e-12) + 1) for s in shares}


# ---------------------------------------------------------------------- windows
def interval_costs(
    trace: pd.DataFrame, key: str, *, ts: str = DEFAULT_TS, period: str = DEFAULT_PERIOD
) -> tuple[np.ndarray, np.ndarray, list[pd.Timestamp]]:
    """Tuples of every key of ``key`` in each window: ``(keys, costs, starts)``, ``costs`` of shape ``(windows, K)``.

    Windows are those of :func:`~locality.replay.replay_trace`; keys are sorted.
    """
    check_columns(list(trace.columns), [key, ts], "the trace")
    frame = trace[[key, ts]].dropna()
    bounds = windows_of(frame[ts], period)
    starts = [a for a, _ in bounds]
    index = pd.DatetimeIndex(starts).searchsorted(frame[ts], side="right") - 1  # lengths and calendar periods
    table = frame.assign(window=index).groupby(["window", key], observed=True).size().unstack(fill_value=0)
    table = table.reindex(range(len(starts)), fill_value=0).sort_index(axis=1)
    return table.columns.to_numpy(dtype=object), table.to_numpy(dtype=float), starts


def pair_drift(
    trace: pd.DataFrame, columns: str | Sequence[str], *, ts: str = DEFAULT_TS, period: str = DEFAULT_PERIOD
) -> pd.DataFrame:
    """How much of each window's traffic travels on keys (or key pairs) seen before: what tables can learn.

    A routing table learned on past windows can only place what those windows
    showed; a pair first seen in this window goes to the fallback hash.
    ``columns`` is one key column or a combination (``["cell", "tag"]``: the
    pairs of one hop). Windows are those of :func:`~locality.replay.replay_trace`
    (a length such as ``"7D"`` or a calendar period such as ``"YS"``); empty
    windows are left out and do not count as the previous one.

    Returns
    -------
    DataFrame
        One row per non-empty window: ``start``, ``tuples``, ``distinct``,
        ``seen_previous`` (share of the window's tuples whose key was in the
        previous window), ``seen_before`` (in any earlier window) and
        ``overlap_previous`` (sum over keys of the smaller of the two windows'
        shares: 1 when the traffic is spread over the keys as before, 0 when no
        key is shared). The first window has NaN for the last three.
    """
    columns = [columns] if isinstance(columns, str) else list(columns)
    check_columns(list(trace.columns), [*columns, ts], "the trace")
    frame = trace[[*columns, ts]].dropna()
    starts = pd.DatetimeIndex([a for a, _ in windows_of(frame[ts], period)])
    window = starts.searchsorted(frame[ts], side="right") - 1
    rows, previous, before = [], None, None
    for w, rows_of_window in frame.groupby(window, sort=True):
        counts = rows_of_window.groupby(columns, sort=False, observed=True).size()
        shares = counts / counts.sum()
        row = {"start": str(starts[w]), "tuples": int(counts.sum()), "distinct": len(counts)}
        if previous is None:
            row.update(seen_previous=np.nan, seen_before=np.nan, overlap_previous=np.nan)
        else:
            row["seen_previous"] = float(shares[shares.index.isin(previous.index)].sum())
            row["seen_before"] = float(shares[shares.index.isin(before)].sum())
            row["overlap_previous"] = float(np.minimum(shares, previous.reindex(shares.index, fill_value=0)).sum())
        rows.append(row)
        previous = shares
        before = shares.index if before is None else before.union(shares.index)
    return pd.DataFrame(rows)
