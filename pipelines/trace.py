"""Reading a trace with Spark: Parquet, CSV or JSON lines; a file, a directory or a glob.

The key columns name the stateful operators in pipeline order. Keys must be
strings or integers; an optional weight column (tuple count or size) must be
numeric; an optional timestamp column restricts the trace to a time range.
Every problem is a :class:`locality.errors.TraceError` naming the path or column.
Rows with a null or empty key are not errors: the sketching pass drops and
counts them, and the report says how many and why.
"""

from __future__ import annotations

import dataclasses
import glob
import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone

from locality.errors import InvalidParameterError, TraceError

__all__ = ["TraceSpec", "read_trace", "last_window", "input_files", "spark_read_errors", "FORMATS"]

logger = logging.getLogger(__name__)

#: File extensions per format (CSV files must have a header row).
FORMATS = {"parquet": (".parquet", ".pq"), "csv": (".csv",), "json": (".json", ".jsonl", ".ndjson")}


@dataclass(frozen=True)
class TraceSpec:
    """Where a trace is and which columns matter.

    ``start`` / ``end`` (ISO 8601, UTC when no zone is given) keep rows with
    ``start <= ts < end``; they need ``ts``. ``state`` is a numeric column
    whose sum per key is the key's state size. ``newest`` keeps only the newest
    ``newest`` files (by modification time, then name) of a directory or glob.
    """

    path: str
    keys: Sequence[str]
    weight: str | None = None
    ts: str | None = None
    state: str | None = None
    start: str | None = None
    end: str | None = None
    format: str | None = None
    newest: int | None = None
    columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        keys = tuple(self.keys)
        if len(keys) < 2:
            raise TraceError(f"a trace needs at least two key columns (one per stateful operator); got {list(keys)}")
        if len(set(keys)) != len(keys):
            raise TraceError(f"key columns must be distinct; got {list(keys)}")
        if (self.start or self.end) and not self.ts:
            raise TraceError("a time range (start/end) needs the timestamp column (ts)")
        if self.format is not None and self.format not in FORMATS:
            raise TraceError(f"unknown trace format {self.format!r}; use one of {sorted(FORMATS)}")
        object.__setattr__(self, "keys", keys)
        extra = tuple(dict.fromkeys(c for c in (self.weight, self.ts, self.state) if c))
        object.__setattr__(self, "columns", keys + extra)

    def check_operators(self, operators: Sequence[str]) -> None:
        """Raise unless ``operators`` (a topology's) are this trace's key columns, in order."""
        if tuple(operators) != tuple(self.keys):
            raise InvalidParameterError(
                f"the topology's operators {list(operators)} must be the key columns {list(self.keys)}"
            )


def _parse_time(value: str, name: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise TraceError(f"the {name} time {value!r} is not an ISO 8601 date or timestamp") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _matching_files(path: str) -> list[str]:
    if any(ch in path for ch in "*?["):
        files = sorted(glob.glob(path))
    elif os.path.isdir(path):
        files = sorted(
            os.path.join(root, name)
            for root, _, names in os.walk(path)
            for name in names
            if not name.startswith((".", "_"))
        )
    else:
        files = [path] if os.path.exists(path) else []
    return files


def _detect_format(path: str, files: list[str]) -> str:
    for name in files or [path]:
        lower = name.lower()
        for fmt, extensions in FORMATS.items():
            if lower.endswith(extensions):
                return fmt
    raise TraceError(f"cannot tell the format of {path!r} from its file names; pass format (parquet, csv or json)")


def _data_files(files: list[str], fmt: str, newest: int | None = None) -> list[str]:
    """The files of ``fmt`` (a README or _SUCCESS beside the data is not data); all files if none has the extension.

    With ``newest``, only the newest that many (by modification time, then name).
    """
    matching = [f for f in files if f.lower().endswith(FORMATS[fmt])] or files
    if newest is not None:
        matching = sorted(matching, key=lambda f: (os.stat(f).st_mtime_ns, f))[-newest:]
    return sorted(matching)


@contextmanager
def spark_read_errors(path: str) -> Iterator[None]:
    """Turn Spark's failures to read a trace (at planning or in a task) into a TraceError naming the path."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    try:
        yield
    except (Py4JJavaError, PySparkException) as exc:
        text = str(exc.java_exception) if isinstance(exc, Py4JJavaError) else str(exc)
        first = next((line.strip() for line in text.splitlines() if line.strip()), text)
        raise TraceError(f"cannot read the trace at {path!r}: {first[:500]}") from None


def input_files(spec: TraceSpec) -> list[tuple[str, int, int]]:
    """``(path, size, mtime_ns)`` of every local input file, for the store's fingerprint.

    Non-local paths (``hdfs://``, ``s3a://``) give the path alone; their
    fingerprint then depends on the path and parameters only.
    """
    if "://" in spec.path and not spec.path.startswith("file://"):
        return [(spec.path, 0, 0)]
    out = []
    files = _matching_files(spec.path.removeprefix("file://"))
    if files:
        files = _data_files(files, spec.format or _detect_format(spec.path, files), spec.newest)
    for name in files:
        stat = os.stat(name)
        out.append((os.path.abspath(name), stat.st_size, stat.st_mtime_ns))
    return out


def last_window(spark, spec: TraceSpec, length: str) -> TraceSpec:
    """``spec`` restricted to the last ``length`` (a pandas offset such as ``"7D"``) before its latest ``ts``."""
    import pandas as pd
    from pyspark.sql import functions as F

    if not spec.ts:
        raise TraceError("a window length needs the timestamp column (ts)")
    try:
        span = pd.Timedelta(length)
    except ValueError:
        raise TraceError(f"the window {length!r} is not a duration such as 7D, 24h or 30min") from None
    with spark_read_errors(spec.path):
        latest = read_trace(spark, spec).agg(F.max(spec.ts)).collect()[0][0]
    if latest is None:
        raise TraceError(f"the trace at {spec.path!r} has no timestamp in {spec.ts!r}: it is empty")
    end = pd.Timestamp(latest)
    end = (end.tz_localize("UTC") if end.tzinfo is None else end) + pd.Timedelta(microseconds=1)
    return dataclasses.replace(spec, start=(end - span).isoformat(), end=end.isoformat())


def read_trace(spark, spec: TraceSpec):
    """A Spark DataFrame with the key columns (and weight / ts), checked and time-filtered.

    Raises
    ------
    TraceError
        The path matches nothing or cannot be read, a column is missing
        (the message lists the columns present), a key column is neither
        string nor integer, the weight is not numeric, or ts is not a time.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    local = "://" not in spec.path or spec.path.startswith("file://")
    files = _matching_files(spec.path.removeprefix("file://")) if local else []
    if local and not files:
        raise TraceError(f"no trace file at {spec.path!r}")
    fmt = spec.format or _detect_format(spec.path, files)
    files = _data_files(files, fmt, spec.newest)
    reader = spark.read
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    # Spark reads the glob/directory itself; a file list keeps hidden files out.
    source = files if local else spec.path
    with spark_read_errors(spec.path):
        df = reader.format(fmt).load(source)
        names = df.columns

    missing = [c for c in spec.columns if c not in names]
    if missing:
        raise TraceError(
            f"the trace at {spec.path!r} has no column {', '.join(map(repr, missing))}; columns present: {names}"
        )
    types = dict(df.dtypes)
    schema = {f.name: f.dataType for f in df.schema.fields}
    for key in spec.keys:
        if not isinstance(schema[key], (T.StringType, T.IntegralType)):
            raise TraceError(f"key column {key!r} has type {types[key]}; keys must be strings or integers")
    for role, column in (("weight", spec.weight), ("state", spec.state)):
        if column and not isinstance(schema[column], T.NumericType):
            raise TraceError(f"{role} column {column!r} has type {types[column]}; it must be numeric")
    if spec.ts and not isinstance(schema[spec.ts], (T.TimestampType, T.TimestampNTZType, T.DateType)):
        raise TraceError(f"timestamp column {spec.ts!r} has type {types[spec.ts]}; it must be a timestamp or date")

    df = df.select(*spec.columns)
    if spec.start:
        df = df.filter(F.col(spec.ts) >= F.lit(_parse_time(spec.start, "start")))
    if spec.end:
        df = df.filter(F.col(spec.ts) < F.lit(_parse_time(spec.end, "end")))
    logger.info("trace %s (%s, %d files): columns %s", spec.path, fmt, len(files), list(spec.columns))
    return df
