"""Reading a trace, with Spark or without: Parquet, CSV or JSON lines; a file, a directory or a glob.

The key columns name the stateful operators in pipeline order. Keys must be
strings or integers; an optional weight column (tuple count or size) must be
numeric; an optional timestamp column restricts the trace to a time range.
Every problem is a :class:`locality.errors.TraceError` naming the path or column.
Rows with a null or empty key are not errors: the sketching pass drops and
counts them, and the report says how many and why, per column.

There are two readers of one contract: :func:`read_trace` (a Spark DataFrame,
for the jobs) and :func:`read_trace_frame` (a pandas DataFrame read with
pyarrow, for ``locality replay``, which holds the trace in memory anyway and
needs no Spark). Both take the same files (a directory or glob holding files
of more than one format is refused, naming them; the format is the one the
listed files' names say), run the same checks, parse
CSV as CSV (quoted fields may hold newlines and doubled quotes, as
spreadsheets and Python's ``csv`` write them), read a timestamp column held as
ISO 8601 text as timestamps, and keep the same time range: instants, UTC
where a zone is missing (:mod:`locality.time_range`). CSV and JSON files may
be compressed (``.gz``, ``.bz2``).

:func:`check_trace` looks at the files before Spark does any work (a job
checks them before it even starts its session), local or in S3; those only
Spark's Hadoop file system lists (``hdfs://``...), once a session runs
(:mod:`pipelines.trace_files`): every file exists, can be read and is not
empty; Parquet footers hold the columns with usable types (and the same
types in every file); CSV headers hold the columns once each;
the first :data:`PREFIX_BYTES` of each CSV or JSON file decode with the
trace's ``encoding`` into keys without U+FFFD, and JSON lines are objects
whose keys keep one type. What the prefix does not show, the counting pass
checks on every key (:mod:`pipelines.counting`).

Why one module: reading a trace (with Spark or without)
and checking it before Spark starts are one contract (the same files,
columns, types, encodings, time range and error messages); splitting them
would write that contract twice.
"""

from __future__ import annotations

import bz2
import codecs
import csv
import dataclasses
import functools
import gzip
import io
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import BinaryIO

from locality._digests import DigestCache, file_digests
from locality._validation import check_integer
from locality.errors import InvalidParameterError, JobError, TraceError
from locality.time_range import parse_time, within
from pipelines.spark_failures import crash_reason, input_failure
from pipelines.trace_files import TraceFile, can_list, is_glob, is_local, list_files, open_file

__all__ = [
    "TraceSpec",
    "check_trace",
    "read_trace",
    "read_trace_frame",
    "last_window",
    "window_length",
    "input_files",
    "input_identity",
    "spark_read_errors",
    "FORMATS",
    "ENCODINGS",
    "PREFIX_BYTES",
    "REPLACEMENT",
]

logger = logging.getLogger(__name__)

#: File extensions per format (CSV files must have a header row).
FORMATS = {"parquet": (".parquet", ".pq"), "csv": (".csv",), "json": (".json", ".jsonl", ".ndjson")}
#: Compressions of CSV and JSON files, by extension after the format's (``trace.csv.gz``): Spark and pyarrow read them.
COMPRESSIONS = {".gz": gzip.open, ".bz2": bz2.open}

#: The text encodings Spark 4 reads CSV and JSON in, by Python codec name (``codecs.lookup(...).name``).
ENCODINGS = {
    "utf-8": "utf-8",
    "iso8859-1": "iso-8859-1",
    "ascii": "us-ascii",
    "utf-16": "utf-16",
    "utf-16-be": "utf-16be",
    "utf-16-le": "utf-16le",
    "utf-32": "utf-32",
}

#: Bytes of each CSV or JSON file whose text :func:`check_trace` decodes and parses before Spark starts.
PREFIX_BYTES = 64 * 1024

#: What a decoder puts where bytes are not valid in the encoding (U+FFFD REPLACEMENT CHARACTER).
REPLACEMENT = "\ufffd"

#: Allowed kinds of each column role (the kinds of :func:`_arrow_kind` and :func:`_spark_kind`).
_ROLE_KINDS = {
    "key": ({"string", "integer"}, "keys must be strings or integers"),
    "weight": ({"integer", "float"}, "it must be numeric"),
    "state": ({"integer", "float"}, "it must be numeric"),
    "timestamp": ({"timestamp"}, "it must be a timestamp or date"),
}


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
    encoding: str | None = None
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
            raise TraceError(f"unknown trace format {self.format!r}; use one of {sorted(FORMATS)}", parameter="format")
        if self.encoding is not None:
            object.__setattr__(self, "encoding", _spark_encoding(self.encoding))
            if self.format == "parquet":
                raise InvalidParameterError(_PARQUET_ENCODING, parameter="encoding")
        if self.newest is not None:
            check_integer(self.newest, "newest", "a trace", lower=1)
        for name in ("start", "end"):
            if getattr(self, name) is not None:
                parse_time(getattr(self, name), name)
        object.__setattr__(self, "keys", keys)
        extra = tuple(dict.fromkeys(c for c in (self.weight, self.ts, self.state) if c))
        object.__setattr__(self, "columns", keys + extra)
        for column in self.columns:
            if not isinstance(column, str) or not column or "." in column or "`" in column:
                raise TraceError(
                    f"column {column!r}: a trace's column names are non-empty and hold no '.' or '`' (Spark reads "
                    "'a.b' as field b of a struct a); rename the column in the trace"
                )

    def describe(self) -> dict:
        """The spec as a JSON-ready dict for fingerprints (an unset encoding is left out: old fingerprints hold)."""
        doc = {k: v for k, v in dataclasses.asdict(self).items() if k != "columns"}
        if doc["encoding"] is None:
            del doc["encoding"]
        return doc

    @property
    def local(self) -> bool:
        """True for a local path or ``file://``; False for ``s3a://``, ``hdfs://``..."""
        return is_local(self.path)

    def file_format(self, files: Sequence[str]) -> str:
        """``format``, or the one the names of the trace's listed ``files`` say."""
        return self.format or _detect_format(self.path, files)

    def time_range(self) -> tuple[datetime | None, datetime | None]:
        """``(start, end)`` as UTC-aware datetimes (None when unset)."""
        return (
            parse_time(self.start, "start") if self.start else None,
            parse_time(self.end, "end") if self.end else None,
        )

    def check_operators(self, operators: Sequence[str]) -> None:
        """Raise unless ``operators`` (a topology's) are this trace's key columns, in order."""
        if tuple(operators) != tuple(self.keys):
            raise InvalidParameterError(
                f"the topology's operators {list(operators)} must be the key columns {list(self.keys)}"
            )


_PARQUET_ENCODING = "the 'encoding' parameter applies to CSV and JSON traces; Parquet text is always UTF-8"


def _spark_encoding(name: object) -> str:
    """Spark's name of the encoding ``name`` (any Python spelling), or InvalidParameterError."""
    allowed = "utf-8, latin-1 (iso-8859-1), ascii, utf-16, utf-16-be, utf-16-le, utf-32"
    try:
        canonical = codecs.lookup(name).name if isinstance(name, str) else None
    except LookupError:
        canonical = None
    if canonical not in ENCODINGS:
        raise InvalidParameterError(
            f"the 'encoding' parameter must be one of the encodings Spark reads: {allowed}; got {name!r}",
            parameter="encoding",
        )
    return ENCODINGS[canonical]


def _format_of(name: str) -> str | None:
    """The format a file name says (``.csv``, ``.csv.gz``, ``.parquet``...), or None."""
    lower = name.lower()
    stem = next((lower[: -len(ext)] for ext in COMPRESSIONS if lower.endswith(ext)), lower)
    for fmt, extensions in FORMATS.items():
        if stem.endswith(extensions) and (stem == lower or fmt != "parquet"):
            return fmt
    return None


def _compression(name: str):
    """The opener of a compressed file (``gzip.open``...), or None."""
    return next((opener for ext, opener in COMPRESSIONS.items() if name.lower().endswith(ext)), None)


def _detect_format(path: str, files: Sequence[str]) -> str:
    """The format the names of the files listed say (not the path: a directory's name says nothing)."""
    for name in files:
        fmt = _format_of(name)
        if fmt is not None:
            return fmt
    raise TraceError(f"cannot tell the format of {path!r} from its file names; pass format (parquet, csv or json)")


def _data_files(spec: TraceSpec, listed: list[TraceFile]) -> list[TraceFile]:
    """The trace's data files among ``listed``: those of its one format (a README beside them is not data).

    Files without a format's extension are all data when no file has one
    (then ``format`` says what they are). With ``newest``, only the newest
    that many (by modification time, then name), from the listing: a remote
    trace's too.

    Raises
    ------
    TraceError
        The files are of more than one format (the message names some of
        each), or of another format than ``format``.
    """
    by_format: dict[str, list[TraceFile]] = {}
    for file in listed:
        fmt = _format_of(file.path)
        if fmt is not None:
            by_format.setdefault(fmt, []).append(file)
    if len(by_format) > 1:
        listing = "; ".join(f"{fmt}: {_some(_paths(files))}" for fmt, files in sorted(by_format.items()))
        first = sorted(by_format)[0]
        where = "a glob" if is_glob(spec.path) else spec.path.rstrip("/") + "/*" + FORMATS[first][0]
        raise TraceError(
            f"the trace at {spec.path!r} holds files of {len(by_format)} formats ({listing}): a trace is one format; "
            f"move the others away, or name the files of one format (e.g. {where!r})"
        )
    if spec.format is not None and by_format and spec.format not in by_format:
        (fmt, files), *_ = by_format.items()
        raise TraceError(
            f"the format is {spec.format} but the files of the trace at {spec.path!r} are {fmt}: "
            f"{_some(_paths(files))}",
            parameter="format",
        )
    matching = next(iter(by_format.values())) if by_format else listed
    if len(matching) < len(listed):
        logger.info(
            "trace %s: not data (no %s extension): %s",
            spec.path,
            "/".join(by_format),
            _some(sorted(set(_paths(listed)) - set(_paths(matching)))),
        )
    if spec.newest is not None:
        matching = sorted(matching, key=lambda f: (f.modified_ns, f.path))[-spec.newest :]
    return sorted(matching, key=lambda f: f.path)


def _paths(files: Sequence[TraceFile]) -> list[str]:
    return [file.path for file in files]


def _some(names: Sequence[str], shown: int = 3) -> str:
    """A few of ``names`` and how many more, for a message."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(repr(n) for n in names[:shown]) + more


@contextmanager
def spark_read_errors(path: str) -> Iterator[None]:
    """Turn Spark's failures while reading a trace (at planning or in a task) into errors that say what failed.

    A failure outside the trace (a worker or executor that died, the JVM, memory, the network:
    :func:`pipelines.spark_failures.crash_reason`) is a :class:`~locality.errors.JobError`: nothing
    wrong with the trace, a rerun may succeed. A failure about the trace is a
    :class:`~locality.errors.TraceError` naming the path.
    """
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    try:
        yield
    except (Py4JJavaError, PySparkException) as exc:
        crash = crash_reason(exc)
        if crash is not None:
            raise JobError(f"the Spark job reading {path!r} failed: {crash}") from exc
        raise TraceError(f"cannot read the trace at {path!r}: {input_failure(exc)[:500]}") from None


def input_files(spec: TraceSpec) -> list[TraceFile]:
    """The trace's data files (those of its one format; with ``newest``, the newest), sorted by path.

    Listed where they are (:mod:`pipelines.trace_files`): a local directory or
    glob, an S3 prefix, or, with a Spark session at hand, any Hadoop file system.

    Raises
    ------
    TraceError
        The listing failed, or the files are of more than one format.
    """
    listed = list_files(spec.path)
    return _data_files(spec, listed) if listed else []


def input_identity(spec: TraceSpec, cache: DigestCache | None = None) -> list[tuple]:
    """What identifies the trace's content, for the store's fingerprint, one tuple per file.

    A local file is its ``(size, SHA-256)``: a file touched, copied with its
    dates or moved is the same input; a file rewritten is not
    (:mod:`locality._digests`, whose ``cache`` spares reading unchanged files
    again). A remote file is ``(path, size, ETag)`` from the listing (its
    modification time where the file system has no ETag, as HDFS): reading
    every byte of a remote trace to identify it would cost what the job costs,
    and a file rewritten at the same path gets a new ETag (and a new time).
    """
    files = input_files(spec)
    if not spec.local:
        return [(file.path, file.size, file.etag or file.modified_ns) for file in files]
    try:
        return file_digests(_paths(files), cache)
    except OSError as exc:
        raise TraceError(f"cannot read the trace file {exc.filename!r}: {exc.strerror}") from None


def check_trace(spec: TraceSpec, *, spark: bool = True) -> None:
    """Check the trace's files before Spark starts (see the module docstring), local or remote.

    A trace on a Hadoop file system (``hdfs://``...) can be listed only through
    a Spark session: with none running yet, it passes, and the job checks it
    once its session started (:func:`read_trace` does). ``spark=False`` for the
    reader without Spark: what only Spark cannot read (nanosecond timestamps)
    passes.

    Raises
    ------
    TraceError
        No file matches; a file cannot be read, is empty, is not Parquet, lacks
        a column, holds a column twice or with an unusable type (or a type
        other files do not share); a CSV or JSON prefix decodes into keys with
        U+FFFD, a JSON line is not an object or a key changes type.
    InvalidParameterError
        ``encoding`` given for Parquet files.
    """
    if not can_list(spec.path):
        logger.info("trace %s: checked once Spark started (only Spark's Hadoop file system lists it)", spec.path)
        return
    files = input_files(spec)
    if not files:
        raise TraceError(f"no trace file at {spec.path!r}")
    if spark:
        colons = [f.path for f in files if ":" in f.path.rsplit("://", 1)[-1]]
        if colons:  # Hadoop parses what precedes the ':' as a URI scheme (HADOOP-3257): Spark cannot open the file
            raise TraceError(
                f"Spark cannot read a trace file whose path holds ':' ({_some(colons)}): rename it "
                "(Hadoop, which Spark reads files with, takes what comes before a ':' for a URI scheme)"
            )
    _check_files(spec, tuple(files), spark)


@functools.lru_cache(maxsize=32)
def _check_files(spec: TraceSpec, files: tuple[TraceFile, ...], spark: bool) -> None:
    # Cached by the files' (path, size, time, ETag): the CLI checks before starting Spark and read_trace checks again.
    fmt = spec.file_format(_paths(files))
    if fmt == "parquet" and spec.encoding is not None:
        raise InvalidParameterError(_PARQUET_ENCODING, parameter="encoding")
    kinds_seen: dict[str, tuple[str, str, str]] = {}  # column -> (kind, type name, first file with it)
    for file in files:
        if file.size == 0:
            raise TraceError(f"the trace file {file.path!r} is empty (0 bytes): remove it or point at the other files")
        if fmt == "parquet":
            _check_parquet(spec, file, kinds_seen, spark)
            continue
        prefix, whole = _read_prefix(file)
        if fmt == "csv":
            _check_csv(spec, file.path, _decode_prefix(prefix, spec.encoding, whole), whole)
        else:
            _check_json(spec, file.path, _decode_prefix(prefix, spec.encoding, whole).split("\n"))


@contextmanager
def _data(file: TraceFile) -> Iterator[BinaryIO]:
    """``file`` opened for its data: decompressed when its name says so (``.gz``, ``.bz2``), seekable otherwise."""
    with open_file(file) as raw:
        opener = _compression(file.path)
        if opener is None:
            yield raw
        else:
            with opener(raw, "rb") as decompressed:
                yield decompressed


def _read_prefix(file: TraceFile) -> tuple[bytes, bool]:
    """The first :data:`PREFIX_BYTES` of a file's data (decompressed), and whether that is all of it."""
    try:
        with _data(file) as fh:
            data = fh.read(PREFIX_BYTES + 1)
    except (OSError, EOFError) as exc:  # EOFError: a compressed file cut short
        raise TraceError(f"cannot read the trace file {file.path!r}: {getattr(exc, 'strerror', None) or exc}") from None
    return data[:PREFIX_BYTES], len(data) <= PREFIX_BYTES


def _arrow_kind(arrow_type) -> str:
    import pyarrow as pa

    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    if pa.types.is_integer(arrow_type):
        return "integer"
    if pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type):
        return "float"
    if pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type):
        return "timestamp"
    return "other"


def _arrow_name(arrow_type) -> str:
    """The type as a user reads it: Arrow's large and dictionary-encoded strings are strings."""
    import pyarrow as pa

    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    return "string" if pa.types.is_large_string(arrow_type) else str(arrow_type)


def _spark_kind(spark_type) -> str:
    from pyspark.sql import types as T

    if isinstance(spark_type, T.StringType):
        return "string"
    if isinstance(spark_type, T.IntegralType):
        return "integer"
    if isinstance(spark_type, T.NumericType):
        return "float"
    if isinstance(spark_type, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        return "timestamp"
    return "other"


def _roles(spec: TraceSpec) -> list[tuple[str, str]]:
    """``(role, column)`` of every column the spec uses."""
    roles = [("key", key) for key in spec.keys]
    roles += [(role, col) for role, col in (("weight", spec.weight), ("state", spec.state)) if col]
    return roles + ([("timestamp", spec.ts)] if spec.ts else [])


def _check_kinds(spec: TraceSpec, kinds: Mapping[str, tuple[str, str]]) -> None:
    """Raise unless each column's kind suits its role; ``kinds`` maps column -> (kind, type name)."""
    for role, column in _roles(spec):
        allowed, rule = _ROLE_KINDS[role]
        kind, type_name = kinds[column]
        if kind not in allowed:
            raise TraceError(f"{role} column {column!r} has type {type_name}; {rule}")


def _check_columns_present(spec: TraceSpec, where: str, names: Sequence[str]) -> None:
    duplicated = sorted({c for c in names if names.count(c) > 1})
    if duplicated:
        raise TraceError(f"{where} has the column {', '.join(map(repr, duplicated))} more than once")
    missing = [c for c in spec.columns if c not in names]
    if missing:
        raise TraceError(f"{where} has no column {', '.join(map(repr, missing))}; columns present: {list(names)}")


def _check_parquet(spec: TraceSpec, file: TraceFile, kinds_seen: dict[str, tuple[str, str, str]], spark: bool) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = file.path
    try:
        with _data(file) as fh:
            schema = pq.read_schema(fh)
    except (OSError, pa.ArrowException) as exc:
        raise TraceError(f"cannot read the trace at {name!r}: not a Parquet file, or truncated ({exc})") from None
    _check_columns_present(spec, f"the trace file {name!r}", schema.names)
    for field_ in schema if spark else ():  # Spark converts every column's type, used or not
        if pa.types.is_timestamp(field_.type) and field_.type.unit == "ns":
            raise TraceError(
                f"column {field_.name!r} of {name!r} holds nanosecond timestamps, which Spark cannot read; write them "
                "in microseconds (pandas: to_parquet(..., coerce_timestamps='us', allow_truncated_timestamps=True))"
            )
    kinds = {c: (_arrow_kind(schema.field(c).type), _arrow_name(schema.field(c).type)) for c in spec.columns}
    try:
        _check_kinds(spec, kinds)
    except TraceError as exc:
        raise TraceError(f"{exc} (in {name!r})") from None
    for column, (kind, type_name) in kinds.items():
        first_kind, first_type, first_file = kinds_seen.setdefault(column, (kind, type_name, name))
        if kind != first_kind:
            raise TraceError(
                f"column {column!r} is {first_type} in {first_file!r} but {type_name} in {name!r}; "
                "every file of a trace must give a column the same type"
            )


def _decode_prefix(prefix: bytes, encoding: str | None, whole: bool) -> str:
    """A file's first bytes decoded (bad bytes become U+FFFD), up to its last complete line unless ``whole``."""
    decoder = codecs.getincrementaldecoder(encoding or "utf-8")(errors="replace")
    text = decoder.decode(prefix, final=whole)
    if not whole:
        text = text[: text.rfind("\n") + 1]
    return text.removeprefix("\ufeff")  # a byte order mark is not part of the first column's name


def _undecodable(name: str, column: str, line: int, value: str, encoding: str | None) -> TraceError:
    return TraceError(
        f"key column {column!r} of {name!r} holds {value[:40]!r} (line {line}) with U+FFFD: the file is not "
        f"{encoding or 'utf-8'}; give its encoding (e.g. latin-1)",
        parameter="encoding",
    )


def _check_csv(spec: TraceSpec, name: str, text: str, whole: bool) -> None:
    # Parsed as CSV (a quoted field may hold newlines and doubled quotes), as both readers read it.
    if whole:  # a quoted field never closed swallows the rest of the file: refused, not read as one key
        try:
            _csv_rows(text, strict=True)
        except csv.Error as exc:
            if "end of data" in str(exc):
                raise TraceError(f"the trace file {name!r} is not CSV: a quoted field is never closed") from None
    try:
        rows = _csv_rows(text, strict=False)  # other stray quotes are text, as Spark keeps them
    except csv.Error as exc:
        raise TraceError(f"the trace file {name!r} is not CSV: {exc}") from None
    if not whole and rows:
        rows.pop()  # the prefix may end inside a quoted field that goes on
    header = rows[0][1] if rows else None
    if not header:
        raise TraceError(f"the trace file {name!r} has no header row (a CSV trace needs one)")
    _check_columns_present(spec, f"the trace file {name!r}", header)
    positions = {key: header.index(key) for key in spec.keys}
    for number, row in rows[1:]:
        for key, position in positions.items():
            if position < len(row) and REPLACEMENT in row[position]:
                raise _undecodable(name, key, number, row[position], spec.encoding)


def _csv_rows(text: str, strict: bool) -> list[tuple[int, list[str]]]:
    """``(line, fields)`` of every row of CSV ``text`` (``line``: where the row ends)."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=strict)
    return [(reader.line_num, row) for row in reader]


def _check_json(spec: TraceSpec, name: str, lines: list[str]) -> None:
    types: dict[str, tuple[str, int]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            raise TraceError(f"line {number} of {name!r} is not a JSON object: {line[:60]!r}")
        for key in spec.keys:
            value = record.get(key)
            if isinstance(value, str) and REPLACEMENT in value:
                raise _undecodable(name, key, number, value, spec.encoding)
            if value is not None:
                kind = "string" if isinstance(value, str) else type(value).__name__
                first, first_line = types.setdefault(key, (kind, number))
                if kind != first:
                    raise TraceError(
                        f"key column {key!r} of {name!r} holds a {first} on line {first_line} and a {kind} on line "
                        f"{number}; keys of one operator share one type (the engine hashes 42 and '42' apart)"
                    )


def window_length(spec: TraceSpec, length: str):
    """``length`` as a positive ``pandas.Timedelta`` (checked before Spark starts); ``spec`` must have ``ts``."""
    from locality._validation import check_duration

    if not spec.ts:
        raise TraceError("a window length needs the timestamp column (ts)")
    return check_duration(length, "window", "the online job")


def last_window(spark, spec: TraceSpec, length: str) -> TraceSpec:
    """``spec`` restricted to the last ``length`` (a pandas offset such as ``"7D"``) before its latest ``ts``."""
    import pandas as pd
    from pyspark.sql import functions as F

    span = window_length(spec, length)
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

    check_trace(spec)
    files = _paths(input_files(spec))
    fmt = spec.file_format(files)
    reader = spark.read
    if fmt == "csv":
        # multiLine: a quoted field may hold a newline; escape '"': a quote inside a quoted field is doubled (RFC 4180).
        reader = reader.option("header", "true").option("inferSchema", "true")
        reader = reader.option("multiLine", "true").option("escape", '"')
    if spec.encoding and fmt != "parquet":
        reader = reader.option("encoding", spec.encoding)
        if fmt == "json":
            reader = reader.option("lineSep", "\n")  # Spark needs it to split lines of a non-UTF-8 JSON file
    # The files listed, not the directory or glob: Spark reads what was checked and what the fingerprint names
    # (with newest, the newest files alone; never a README beside the data).
    # The files are the ones listed: Hadoop must not read "[", "*", "?" or "{" in their names as a pattern.
    reader = reader.option("__globPaths__", "false")
    with spark_read_errors(spec.path):
        df = reader.format(fmt).load(files)
        names = df.columns
        if fmt == "json" and _CORRUPT in names:
            _raise_on_corrupt_json(df, spec)
        if fmt == "csv":
            df = _csv_keys_as_written(reader, files, df, spec.keys)

    _check_columns_present(spec, f"the trace at {spec.path!r}", names)
    if fmt != "parquet" and spec.ts and _spark_kind(df.schema[spec.ts].dataType) == "string":
        df = _spark_text_timestamps(df, spec)
    types = dict(df.dtypes)
    _check_kinds(spec, {f.name: (_spark_kind(f.dataType), types[f.name]) for f in df.schema.fields})

    df = df.select(*spec.columns)
    start, end = spec.time_range()
    if start:
        df = df.filter(F.col(spec.ts) >= F.lit(start))
    if end:
        df = df.filter(F.col(spec.ts) < F.lit(end))
    logger.info("trace %s (%s, %d files): columns %s", spec.path, fmt, len(files), list(spec.columns))
    return df


#: How a CSV key is written when it is an integer: no sign but '-', no leading zero, at most 18 digits (in int64).
#: A column of CSV keys is integers only when every key is written so; else its keys are text, as written ("007").
INTEGER_TEXT = r"^-?(0|[1-9][0-9]{0,17})$"


def _csv_keys_as_written(reader, files: list[str], df, keys: Sequence[str]):
    """``df`` (a CSV read with inferred types) with its key columns as :data:`INTEGER_TEXT` says: integers or text.

    Spark's inference reads "007" and "7" as the integer 7 (two keys as one) and "1.5" as a double; the
    key columns it read as numbers are read again as text, and such a column becomes integers only when
    every key in it is written as an integer is (a column inferred as text holds a key that is not a
    number: it stays text). One more pass over a CSV trace with a numeric key column, the rule
    :func:`read_trace_frame` follows.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    keys = [f.name for f in df.schema.fields if f.name in keys and isinstance(f.dataType, T.NumericType)]
    if not keys:
        return df
    as_text = T.StructType([T.StructField(f.name, T.StringType()) if f.name in keys else f for f in df.schema.fields])
    text = reader.schema(as_text).format("csv").load(files)
    not_integer = [F.max((F.col(k).isNotNull() & ~F.col(k).rlike(INTEGER_TEXT)).cast("int")).alias(k) for k in keys]
    found = text.agg(*not_integer).collect()[0]
    for key in keys:
        if not found[key]:  # every key written as an integer (or none at all)
            text = text.withColumn(key, F.col(key).cast("long"))
    return text


def read_trace_frame(spec: TraceSpec):
    """The trace's columns as a pandas DataFrame, read with pyarrow (no Spark): :func:`read_trace`'s contract.

    The same files, checks, column types and time range as :func:`read_trace`
    (a timestamp without a zone is UTC). Rows with a null or empty key are
    dropped, as the counting pass drops them, and their number is logged. For
    a trace that fits in memory (``locality replay``): local, or in S3.

    Raises
    ------
    TraceError
        As :func:`read_trace`; also a trace only Spark's Hadoop file system
        lists (``hdfs://``...), and files that disagree on a column's type.
    """
    import pyarrow as pa

    check_trace(spec, spark=False)
    files = input_files(spec)  # a trace no one can list without Spark is refused here, saying so
    fmt = spec.file_format(_paths(files))
    tables = [_arrow_table(file, fmt, spec) for file in files]
    try:
        table = pa.concat_tables(tables, promote_options="permissive")
    except pa.ArrowException as exc:
        raise TraceError(f"the files of the trace at {spec.path!r} disagree on a column's type: {exc}") from None
    _check_columns_present(spec, f"the trace at {spec.path!r}", table.column_names)
    table = table.select(list(spec.columns))
    if fmt == "csv":  # key columns were read as text: integers when every key of every file is written as one
        table = _arrow_integer_keys(table, spec.keys)
    kinds = {f.name: (_arrow_kind(f.type), _arrow_name(f.type)) for f in table.schema}
    if spec.ts and kinds[spec.ts][0] == "string":
        kinds[spec.ts] = ("timestamp", "string")  # ISO 8601 text, parsed below as read_trace parses it
    _check_kinds(spec, kinds)
    frame = table.to_pandas(types_mapper={pa.int64(): _nullable_int()}.get, date_as_object=False)
    if spec.ts:
        frame[spec.ts] = _pandas_timestamps(frame[spec.ts], spec.ts)
        frame = frame[within(frame[spec.ts], spec.start, spec.end)]
    return _without_missing_keys(frame, spec)


def _arrow_table(file: TraceFile, fmt: str, spec: TraceSpec):
    """One file of the trace as an Arrow table (CSV parsed as CSV; text in ``spec.encoding``)."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.json as pa_json
    import pyarrow.parquet as pq

    try:
        with _data(file) as fh:
            if fmt == "parquet":
                return pq.read_table(fh, columns=list(spec.columns))
            data = fh.read()
        if fmt == "csv":
            return pa_csv.read_csv(
                io.BytesIO(data),
                read_options=pa_csv.ReadOptions(encoding=spec.encoding or "utf8"),
                parse_options=pa_csv.ParseOptions(newlines_in_values=True),
                # As Spark reads CSV: only an empty field is null ("NA" is North America), no booleans from words.
                convert_options=pa_csv.ConvertOptions(
                    include_columns=list(spec.columns),
                    null_values=[""],
                    strings_can_be_null=True,
                    column_types={key: pa.string() for key in spec.keys},  # as written: see INTEGER_TEXT
                ),
            )
        if spec.encoding not in (None, "utf-8"):
            data = data.decode(spec.encoding).encode("utf-8")
        return pa_json.read_json(io.BytesIO(data))
    except (OSError, EOFError, UnicodeDecodeError, pa.ArrowException) as exc:
        raise TraceError(f"cannot read the trace file {file.path!r}: {str(exc).splitlines()[0][:300]}") from None


def _arrow_integer_keys(table, keys: Sequence[str]):
    """``table`` with each text key column that holds only :data:`INTEGER_TEXT` keys cast to int64."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for key in keys:
        column = table[key]
        if pc.all(pc.match_substring_regex(column, INTEGER_TEXT)).as_py() is not False:  # nulls aside
            table = table.set_column(table.schema.get_field_index(key), key, column.cast(pa.int64()))
    return table


def _nullable_int():
    import pandas as pd

    return pd.Int64Dtype()  # an integer key column with nulls stays integers (not floats) until they are dropped


def _pandas_timestamps(column, name: str):
    """``column`` as UTC timestamps: a naive time is UTC, a date its midnight, ISO 8601 text parsed.

    In UTC whatever the source, as Spark holds them: every format of a trace
    then gives the same windows, and the same figures.
    """
    import pandas as pd

    if pd.api.types.is_datetime64_any_dtype(column):
        return column.dt.tz_localize("UTC") if column.dt.tz is None else column.dt.tz_convert("UTC")
    parsed = pd.to_datetime(column, format="ISO8601", utc=True, errors="coerce")
    bad = column[column.notna() & parsed.isna()]
    if len(bad):
        raise TraceError(
            f"timestamp column {name!r} holds {str(bad.iloc[0])[:40]!r}, which is not an ISO 8601 timestamp"
        )
    return parsed


def _without_missing_keys(frame, spec: TraceSpec):
    """``frame`` without the rows whose key is null or empty (logged per column); integer keys as int64."""
    import pandas as pd

    keep = pd.Series(True, index=frame.index)
    for key in spec.keys:
        column = frame[key]
        missing = column.isna() | (column.astype(str) == "") if column.dtype == object else column.isna()
        if missing.any():
            logger.warning(
                "trace %s: %d rows with a null or empty key in %r dropped", spec.path, int(missing.sum()), key
            )
        keep &= ~missing
    frame = frame[keep.to_numpy()]
    ints = {key: "int64" for key in spec.keys if isinstance(frame[key].dtype, pd.Int64Dtype)}
    return frame.astype(ints).reset_index(drop=True)


_CORRUPT = "_corrupt_record"  # the column Spark adds when inferring the schema met lines that are not JSON


def _spark_text_timestamps(df, spec: TraceSpec):
    """``df`` with its timestamp column, ISO 8601 text in a CSV or JSON trace, parsed (UTC where no zone is given).

    Spark's JSON reader infers no timestamps, and its CSV reader none when the
    forms vary (offsets on some rows): both readers parse the text the same way.
    """
    from pyspark.sql import functions as F

    parsed = F.try_to_timestamp(F.col(spec.ts))
    bad = df.select(spec.ts).where(F.col(spec.ts).isNotNull() & parsed.isNull()).first()
    if bad is not None:
        raise TraceError(f"timestamp column {spec.ts!r} holds {bad[0][:40]!r}, which is not an ISO 8601 timestamp")
    return df.withColumn(spec.ts, parsed)


def _raise_on_corrupt_json(df, spec: TraceSpec) -> None:
    """Name a file and a line Spark could not parse as JSON (Spark would read it as a row of nulls)."""
    from pyspark.sql import functions as F

    # Spark refuses a query that reads only the corrupt-record column of a raw file: take a key along.
    bad = df.select(spec.keys[0], _CORRUPT, F.input_file_name().alias("file")).where(F.col(_CORRUPT).isNotNull())
    row = bad.first()
    if row is not None:
        raise TraceError(f"{row['file']!r} holds a line that is not a JSON object: {row[_CORRUPT][:60]!r}")
