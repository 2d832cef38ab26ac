"""Counting key pairs and key loads of a trace with Spark: sketched per partition, or exact.

Sketch mode makes one pass over the trace: each partition feeds its Arrow
batches to Space-Saving sketches (one per consecutive operator pair, one per
operator) and ships them serialized; the driver merges them as a binary tree
(a binary counter over partitions, so it holds O(log P) sketches at a time and
the result does not depend on scheduling). The driver never sees a raw row.
A trace of local Parquet files is read by the tasks themselves with pyarrow
(:mod:`pipelines.parquet_scan`: the same batches, without the JVM's copy of
every row into Arrow); other traces come through Spark's readers (``mapInArrow``).

Exact mode counts with Spark aggregations (distributed ``groupBy``) and keeps
the top ``top_pairs`` pairs and ``top_keys`` keys: exact counts for what is
kept, at the cost of a shuffle.

Both return :class:`TraceCounts`, which is what :func:`locality.graph.build_key_graph` takes.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from locality.counts import KeyCounts, sketch_error_bounds
from locality.defaults import DEFAULT_CAPACITY
from locality.engine_sketches import SketchWindow
from locality.errors import TraceError
from locality.sketch import SpaceSaving
from pipelines.parquet_scan import ParquetScan
from pipelines.trace import REPLACEMENT, TraceSpec, spark_read_errors

__all__ = [
    "TraceCounts",
    "EngineSketchCounts",
    "count_trace",
    "sketch_trace",
    "count_trace_exact",
    "DROP_REASONS",
    "KEY_REASONS",
]

logger = logging.getLogger(__name__)

#: Why a row is dropped before counting.
DROP_REASONS = ("null key", "empty key", "invalid weight")
#: The reasons that concern one key column, counted per column too.
KEY_REASONS = ("null key", "empty key")

_SKETCH_SCHEMA = "slot int, payload binary"
_STATS_SLOT = -1
_COLLECT_LIMIT = 64  # partitions; above this, stream them (toLocalIterator) instead of collect()
#: Task outputs the driver merges itself; above, the executors merge them in groups of _MERGE_FANOUT first
#: (at 55 ms per merge on the driver, 256 tasks would cost 14 s there: docs/scale.md).
_DRIVER_MERGE_LIMIT = 32
_MERGE_FANOUT = 16
_MIN_CHUNK_ROWS = 1_000_000
_ARROW_BATCH_ROWS = 100_000  # Spark's default (10,000) costs a Python round trip per 10k rows


@contextmanager
def _arrow_batches_of_at_least(spark, rows: int) -> Iterator[None]:
    """Raise ``spark.sql.execution.arrow.maxRecordsPerBatch`` to ``rows`` for the block, then restore it."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key, None)
    if before is not None and int(before) >= rows:
        yield
        return
    spark.conf.set(key, str(rows))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


@dataclass
class TraceCounts(KeyCounts):
    """:class:`~locality.counts.KeyCounts` of a trace, with what was dropped and how exact they are.

    ``error_bound`` is, per sketch, the most any count may be over-estimated
    (0 when exact or when the sketch never filled up). ``dropped`` counts
    dropped rows by reason (a row once, for its first reason);
    ``dropped_by_column`` counts, for each key reason, the rows whose key in
    each column is null or empty (a row with two null keys counts in both).
    """

    rows: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    dropped_by_column: dict[str, dict[str, int]] = field(default_factory=dict)
    mode: str = "exact"
    error_bound: dict[str, float] = field(default_factory=dict)
    capacity: int | None = None

    @property
    def usable_rows(self) -> int:
        return self.rows - sum(self.dropped.values())

    def coverage(self) -> dict[str, float]:
        """Share of each hop's weight held by the kept pairs (the rest is routed by hash)."""
        total = self.total_weight
        return {
            f"{a}->{b}": float(t["weight"].sum() / total) if total > 0 else 1.0
            for a, b, t in zip(self.operators, self.operators[1:], self.pair_counts)
        }

    def summary(self) -> dict:
        return {
            "mode": self.mode,
            "rows": self.rows,
            "weight": self.total_weight,
            "dropped": self.dropped,
            "dropped_by_column": self.dropped_by_column,
            "sketch_capacity": self.capacity,
            "sketch_error_bound": self.error_bound,
            "pairs_kept": {
                f"{a}->{b}": len(t) for a, b, t in zip(self.operators, self.operators[1:], self.pair_counts)
            },
            "pair_coverage": self.coverage(),
        }


@dataclass
class EngineSketchCounts(TraceCounts):
    """:class:`TraceCounts` of the engines' sketches of a window (no trace read): what was read, how exact.

    ``rows`` is the first operator's total weight (the records, when the
    engines weigh each record 1); nothing is dropped; ``sketches`` is
    :meth:`locality.engine_sketches.SketchWindow.summary`.
    """

    sketches: dict = field(default_factory=dict)

    @classmethod
    def of(cls, window: SketchWindow) -> EngineSketchCounts:
        counts = window.counts
        return cls(
            list(counts.operators),
            counts.pair_counts,
            counts.key_loads,
            counts.totals,
            rows=int(round(counts.total_weight)),
            mode="sketches",
            error_bound=window.error_bound,
            capacity=window.capacity,
            sketches=window.summary(),
        )

    def summary(self) -> dict:
        return {**super().summary(), "sketches": self.sketches}


def _no_drops(keys: Sequence[str]) -> tuple[dict, dict]:
    """Zero counts: rows dropped by reason, and by key reason and column."""
    return dict.fromkeys(DROP_REASONS, 0), {reason: dict.fromkeys(keys, 0) for reason in KEY_REASONS}


def _add_drops(into: tuple[dict, dict], counts: tuple[dict, dict]) -> None:
    for reason, n in counts[0].items():
        into[0][reason] += n
    for reason, per_column in counts[1].items():
        for column, n in per_column.items():
            into[1][reason][column] += n


def _valid_rows(batch: pa.Table, keys: Sequence[str], weight: str | None) -> tuple[pa.Table, tuple[dict, dict]]:
    """Drop rows with a null or empty key or an invalid weight; count each reason once per row, and per column."""
    dropped, by_column = _no_drops(keys)
    keep = pa.chunked_array([np.ones(batch.num_rows, dtype=bool)])
    for key in keys:
        column = batch.column(key)
        null = pc.is_null(column)
        by_column["null key"][key] = column.null_count
        dropped["null key"] += pc.sum(pc.and_(keep, null)).as_py() or 0
        keep = pc.and_(keep, pc.invert(null))
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            empty = pc.fill_null(pc.equal(column, ""), False)
            by_column["empty key"][key] = pc.sum(empty).as_py() or 0
            dropped["empty key"] += pc.sum(pc.and_(keep, empty)).as_py() or 0
            keep = pc.and_(keep, pc.invert(empty))
    if weight:
        column = pc.cast(batch.column(weight), pa.float64())
        bad = pc.fill_null(pc.or_(pc.less_equal(column, 0), pc.is_nan(column)), True)
        dropped["invalid weight"] += pc.sum(pc.and_(keep, bad)).as_py() or 0
        keep = pc.and_(keep, pc.invert(bad))
    return batch.filter(keep), (dropped, by_column)


def _undecoded_keys(column: pa.ChunkedArray, name: str) -> tuple[int, str | None]:
    """How many of ``column``'s (distinct) string keys hold U+FFFD, and one of them.

    Raises ValueError when the keys are not valid UTF-8 (Parquet text written as raw bytes).
    """
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return 0, None
    try:
        column.validate(full=True)
    except pa.ArrowInvalid:
        raise ValueError(f"key column {name!r} holds text that is not valid UTF-8 (Parquet text must be)") from None
    hits = column.filter(pc.match_substring(column, REPLACEMENT))
    return len(hits), (hits[0].as_py() if len(hits) else None)


def _chunks(batches: Iterator[pa.RecordBatch], min_rows: int) -> Iterator[pa.Table]:
    """Regroup Arrow batches into tables of at least ``min_rows`` rows (the last may be smaller)."""
    pending, size = [], 0
    for batch in batches:
        pending.append(batch)
        size += batch.num_rows
        if size >= min_rows:
            yield pa.Table.from_batches(pending)
            pending, size = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def _sum_by(table: pa.Table, columns: list[str], weight: str) -> pa.Table:
    """``columns`` + ``weight`` (the sum of the ``weight`` column per distinct value of ``columns``)."""
    summed = table.group_by(columns, use_threads=False).aggregate([(weight, "sum")])
    return pa.table({**{c: summed.column(c) for c in columns}, "weight": summed.column(f"{weight}_sum")})


def _sketch_partition(keys: list[str], weight: str | None, capacity: int) -> Callable:
    """The per-partition function for ``mapInArrow``: Arrow batches in, serialized sketches out."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pairs = [SpaceSaving(capacity, arity=2) for _ in keys[1:]]
        loads = [SpaceSaving(capacity) for _ in keys]
        rows, drops = 0, _no_drops(keys)
        undecoded = {key: [0, None] for key in keys}  # keys with U+FFFD: distinct per chunk, and an example
        # Chunks of 4x the capacity (1M rows at least): the larger the chunk, the more repeats its Arrow
        # count collapses, and the more of the stream each sketch merge spans (a sketch buffers 16 rows
        # per counter). Raw rows instead: 20% faster, but the kept pairs held 1.4 points less weight.
        for chunk in _chunks(batches, max(4 * capacity, _MIN_CHUNK_ROWS)):
            rows += chunk.num_rows
            chunk, why = _valid_rows(chunk, keys, weight)
            _add_drops(drops, why)
            if chunk.num_rows == 0:
                continue
            # Count the chunk exactly once per hop with Arrow's hash aggregation: the sketches then merge
            # distinct pairs, not rows, and each key's load comes from a hop that holds its operator.
            ones = pa.chunked_array([np.ones(chunk.num_rows)])
            chunk = chunk.append_column("__w", chunk.column(weight).cast(pa.float64()) if weight else ones)
            hops = [_sum_by(chunk, [a, b], "__w") for a, b in zip(keys, keys[1:])]
            for (a, b), hop, sketch in zip(zip(keys, keys[1:]), hops, pairs):
                sketch.update_batch([hop.column(a), hop.column(b)], hop.column("weight").to_numpy())
            for j, (key, sketch) in enumerate(zip(keys, loads)):
                per_key = _sum_by(hops[max(j - 1, 0)], [key], "weight")
                sketch.update_batch(per_key.column(key), per_key.column("weight").to_numpy())
                n, example = _undecoded_keys(per_key.column(key), key)
                undecoded[key][0] += n
                undecoded[key][1] = undecoded[key][1] or example
        stats = {"rows": rows, "dropped": drops[0], "by_column": drops[1], "undecoded": undecoded}
        stats = json.dumps(stats).encode()
        payloads = [s.to_bytes() for s in pairs + loads] + [stats]
        slots = list(range(len(pairs) + len(loads))) + [_STATS_SLOT]
        yield pa.RecordBatch.from_arrays(
            [pa.array(slots, pa.int32()), pa.array(payloads, pa.binary())], names=["slot", "payload"]
        )

    return run


class _TreeMerger:
    """Merge a stream of per-partition sketch sets like a binary counter (pairwise, balanced)."""

    def __init__(self) -> None:
        self.levels: list[list[SpaceSaving] | None] = []

    def add(self, sketches: list[SpaceSaving]) -> None:
        level = 0
        while level < len(self.levels) and self.levels[level] is not None:
            sketches = [a.merge(b) for a, b in zip(self.levels[level], sketches)]
            self.levels[level] = None
            level += 1
        if level == len(self.levels):
            self.levels.append(None)
        self.levels[level] = sketches

    def result(self) -> list[SpaceSaving] | None:
        out = None
        for sketches in self.levels:
            if sketches is not None:
                out = sketches if out is None else [a.merge(b) for a, b in zip(out, sketches)]
        return out


def _no_stats(keys: Sequence[str]) -> dict:
    """A task's statistics before any row: rows read, dropped (by reason and column), keys with U+FFFD."""
    dropped, by_column = _no_drops(keys)
    return {"rows": 0, "dropped": dropped, "by_column": by_column, "undecoded": {key: [0, None] for key in keys}}


def _add_stats(into: dict, stats: dict) -> None:
    into["rows"] += stats["rows"]
    _add_drops((into["dropped"], into["by_column"]), (stats["dropped"], stats["by_column"]))
    for key, (n, example) in stats["undecoded"].items():
        into["undecoded"][key] = [into["undecoded"][key][0] + n, into["undecoded"][key][1] or example]


def _task_outputs(rows: Iterable) -> Iterator[list[bytes]]:
    """Group ``(slot, payload)`` rows into each task's payloads: its sketches, then its statistics."""
    payloads: list[bytes] = []
    for slot, payload in rows:
        payloads.append(bytes(payload))
        if slot == _STATS_SLOT:
            yield payloads
            payloads = []


def _absorb(merger: _TreeMerger, stats: dict, output: list[bytes]) -> None:
    """Add one task's (or group's) output, its sketches then its statistics, to ``merger`` and ``stats``."""
    *sketches, output_stats = output
    merger.add([SpaceSaving.from_bytes(b) for b in sketches])
    _add_stats(stats, json.loads(output_stats))


def _merge_outputs(keys: Sequence[str], group: Iterable[tuple[int, list[bytes]]]) -> list[bytes]:
    """One output from several tasks' (or groups') outputs, merged in index order (the same on any executor)."""
    merger, stats = _TreeMerger(), _no_stats(keys)
    for _, output in sorted(group, key=lambda item: item[0]):
        _absorb(merger, stats, output)
    return [sketch.to_bytes() for sketch in merger.result()] + [json.dumps(stats).encode()]


def _merged_on_executors(rdd, n_tasks: int, keys: Sequence[str]) -> list[list[bytes]]:
    """Merge the tasks' outputs in groups of ``_MERGE_FANOUT`` on the executors until the driver's share is small.

    ``rdd`` holds each task's ``(slot, payload)`` rows; returns the remaining
    outputs in order. Each level is one shuffle of serialized sketches (a
    task's are a few MB).
    """
    level = rdd.mapPartitionsWithIndex(lambda index, rows: [(index, out) for out in _task_outputs(rows)])
    merge = functools.partial(_merge_outputs, list(keys))
    n = n_tasks
    while n > _DRIVER_MERGE_LIMIT:
        n = -(-n // _MERGE_FANOUT)
        level = level.map(lambda item: (item[0] // _MERGE_FANOUT, item)).groupByKey(n).mapValues(merge)
    return [out for _, out in sorted(level.collect(), key=lambda item: item[0])]


def sketch_trace(
    df,
    keys: Sequence[str],
    *,
    weight: str | None = None,
    capacity: int = DEFAULT_CAPACITY,
    top_pairs: int | None = None,
    on_partition: Callable[[int, int], None] | None = None,
    scan: ParquetScan | None = None,
) -> TraceCounts:
    """Count pairs and loads with per-partition Space-Saving sketches merged on the driver.

    Parameters
    ----------
    df : pyspark DataFrame
        The trace (:func:`pipelines.trace.read_trace`).
    keys : sequence of str
        Key columns in operator order.
    weight : str, optional
        Weight column; rows weigh 1 without it.
    capacity : int
        Counters per sketch (memory and accuracy: error <= total weight / capacity).
    top_pairs : int, optional
        Keep only the heaviest pairs of each hop.
    on_partition : callable(done, total), optional
        Progress callback, called after each partition's sketches are merged.
    scan : ParquetScan, optional
        Read ``df``'s Parquet files with pyarrow in the tasks (:mod:`pipelines.parquet_scan`)
        instead of passing ``df``'s rows from the JVM; the counts are the same.
    """
    keys = list(keys)
    sketch = _sketch_partition(keys, weight, capacity)
    if scan is None:
        sketched = df.mapInArrow(sketch, _SKETCH_SCHEMA)
        n_partitions = df.rdd.getNumPartitions()
    else:
        sketched, n_partitions = scan.map_batches(df.sparkSession, sketch), scan.n_tasks
    with _arrow_batches_of_at_least(df.sparkSession, _ARROW_BATCH_ROWS):
        if n_partitions > _DRIVER_MERGE_LIMIT:
            outputs = _merged_on_executors(sketched if scan else sketched.rdd, n_partitions, keys)
            n_outputs = len(outputs)
        else:
            records = sketched.collect() if n_partitions <= _COLLECT_LIMIT else sketched.toLocalIterator(True)
            outputs, n_outputs = _task_outputs(records), n_partitions
        merger, stats = _TreeMerger(), _no_stats(keys)
        for done, output in enumerate(outputs, 1):
            _absorb(merger, stats, output)
            if on_partition:
                on_partition(round(done * n_partitions / n_outputs), n_partitions)
    rows, drops = stats["rows"], (stats["dropped"], stats["by_column"])
    undecoded = stats["undecoded"]
    n_sketches = 2 * len(keys) - 1
    merged = merger.result() or [SpaceSaving(capacity, arity=2) for _ in keys[1:]] + [
        SpaceSaving(capacity) for _ in keys
    ]
    if len(merged) != n_sketches:
        raise RuntimeError(f"expected {n_sketches} sketches per partition, got {len(merged)}")
    pair_sketches, load_sketches = merged[: len(keys) - 1], merged[len(keys) - 1 :]
    total = float(load_sketches[0].total_weight)
    _check_not_empty(total, rows, drops)
    _check_decoded(df, {key: (n, example) for key, (n, example) in undecoded.items() if n})
    sketched = KeyCounts.from_sketches(
        keys, pair_sketches, load_sketches, top_pairs=top_pairs, totals=dict.fromkeys(keys, total)
    )
    bounds = sketch_error_bounds(keys, pair_sketches, load_sketches)
    counts = TraceCounts(
        keys, sketched.pair_counts, sketched.key_loads, sketched.totals, rows, *drops, "sketch", bounds, capacity
    )
    _log_drops(counts)
    return counts


def count_trace_exact(
    df,
    keys: Sequence[str],
    *,
    weight: str | None = None,
    top_pairs: int = 100_000,
    top_keys: int = 100_000,
) -> TraceCounts:
    """Count pairs and loads exactly with Spark aggregations; keep the heaviest ``top_pairs`` / ``top_keys``."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    keys = list(keys)
    schema = {f.name: f.dataType for f in df.schema.fields}
    null_any = F.lit(False)
    reasons = {}
    for key in keys:
        null_any = null_any | F.col(key).isNull()
    reasons["null key"] = null_any
    empty_any = F.lit(False)
    for key in keys:
        if isinstance(schema[key], T.StringType):
            empty_any = empty_any | (F.col(key) == "")
    reasons["empty key"] = ~null_any & empty_any
    valid = ~null_any & ~empty_any
    if weight:
        bad = F.col(weight).isNull() | (F.col(weight) <= 0) | F.isnan(F.col(weight))
        reasons["invalid weight"] = valid & bad
        valid = valid & ~bad
    else:
        reasons["invalid weight"] = F.lit(False)
    w = F.col(weight).cast("double") if weight else F.lit(1.0)
    strings = [key for key in keys if isinstance(schema[key], T.StringType)]
    per_column = {("null key", key): F.col(key).isNull() for key in keys}
    per_column.update({("empty key", key): F.col(key) == "" for key in strings})
    per_column.update({("undecoded", key): F.col(key).contains(REPLACEMENT) for key in strings})

    def count_of(condition):
        return F.sum(F.when(condition, 1).otherwise(0))

    stats = df.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.when(valid, w).otherwise(0.0)).alias("weight"),
        *[count_of(cond).alias(reason) for reason, cond in reasons.items()],
        *[count_of(cond).alias(f"{why}:{key}") for (why, key), cond in per_column.items()],
    ).collect()[0]
    rows, total = int(stats["rows"]), float(stats["weight"] or 0.0)
    drops = _no_drops(keys)
    drops[0].update({reason: int(stats[reason] or 0) for reason in DROP_REASONS})
    for why, key in per_column:
        if why in KEY_REASONS:
            drops[1][why][key] = int(stats[f"{why}:{key}"] or 0)
    _check_not_empty(total, rows, drops)
    undecoded = {key: int(stats[f"undecoded:{key}"] or 0) for key in strings}
    _check_decoded(df, {key: (n, None) for key, n in undecoded.items() if n})
    clean = df.filter(valid).withColumn("__w", w)

    def top(columns: list[str], limit: int) -> pd.DataFrame:
        grouped = clean.groupBy(*columns).agg(F.sum("__w").alias("weight"))
        # ties broken by key so that reruns keep the same pairs
        ordered = grouped.orderBy(F.desc("weight"), *[F.asc(c) for c in columns]).limit(limit)
        return ordered.toPandas()

    pair_counts = [top([a, b], top_pairs).rename(columns={a: "key0", b: "key1"}) for a, b in zip(keys, keys[1:])]
    key_loads = {k: top([k], top_keys).rename(columns={k: "key"}) for k in keys}
    counts = TraceCounts(keys, pair_counts, key_loads, dict.fromkeys(keys, total), rows, drops[0], drops[1], "exact")
    _log_drops(counts)
    return counts


def count_trace(
    df,
    spec: TraceSpec,
    *,
    exact: bool = False,
    capacity: int = DEFAULT_CAPACITY,
    top_pairs: int | None = None,
    on_partition: Callable[[int, int], None] | None = None,
) -> TraceCounts:
    """The jobs' counting step: sketched (default) or exact counts of the trace ``spec`` describes.

    Exact mode keeps the ``top_pairs`` heaviest pairs (default: ``capacity``) and the ``capacity``
    heaviest keys. A file that turns out unreadable while counting raises a TraceError naming it.
    """
    with spark_read_errors(spec.path):
        if exact:
            return count_trace_exact(
                df, spec.keys, weight=spec.weight, top_pairs=top_pairs or capacity, top_keys=capacity
            )
        return sketch_trace(
            df,
            spec.keys,
            weight=spec.weight,
            capacity=capacity,
            top_pairs=top_pairs,
            on_partition=on_partition,
            scan=ParquetScan.of(df.sparkSession, spec, df.schema),
        )


def read_and_count(spark, params, stages, *, what: str = "trace") -> tuple:
    """Both jobs' first two stages: read the trace of ``params`` and count it; returns ``(df, counts)``.

    ``params`` is a job's parameters (``trace``, ``exact``, ``capacity``, ``top_pairs``);
    ``stages`` a :class:`pipelines.progress.Stages` whose bar advances per counted partition.
    """
    from pipelines.trace import read_trace

    with stages.stage(f"read {what}"):
        df = read_trace(spark, params.trace)
    with stages.stage("count keys" + (" (exact)" if params.exact else " (sketch)")):
        counts = count_trace(
            df,
            params.trace,
            exact=params.exact,
            capacity=params.capacity,
            top_pairs=params.top_pairs,
            on_partition=stages.advance,
        )
    return df, counts


def _per_column(by_column: dict[str, dict[str, int]]) -> str:
    """``null key in 'hashtag' 5,000; empty key in 'location' 3`` (the columns that have any)."""
    parts = [
        f"{reason} in {column!r} {n:,}" for reason, columns in by_column.items() for column, n in columns.items() if n
    ]
    return "; ".join(parts)


def _check_not_empty(total: float, rows: int, drops: tuple[dict, dict]) -> None:
    if total <= 0:
        why = ", ".join(f"{n:,} with {reason}" for reason, n in drops[0].items() if n) or "none at all"
        columns = _per_column(drops[1])
        raise TraceError(
            f"the trace is empty: {rows:,} rows read, none usable ({why}" + (f"; {columns})" if columns else ")")
        )


def _check_decoded(df, undecoded: dict[str, tuple[int, str | None]]) -> None:
    """Refuse keys holding U+FFFD: text decoded with the wrong encoding (the engine would see other keys).

    ``undecoded`` maps each key column with such keys to (how many, an
    example). One more small Spark query finds a file that holds one.
    """
    if not undecoded:
        return
    from pyspark.sql import functions as F

    column, (n, example) = next(iter(undecoded.items()))
    row = df.where(F.col(column).contains(REPLACEMENT)).select(column, F.input_file_name().alias("file")).first()
    where = f" of {row['file']!r}" if row is not None and row["file"] else ""
    example = example or (row[column] if row is not None else "")
    raise TraceError(
        f"key column {column!r}{where} holds {n:,} keys with U+FFFD, such as {example[:40]!r}: the text was "
        "decoded with the wrong encoding; for CSV or JSON give the files' encoding (e.g. latin-1); Parquet text "
        "must be valid UTF-8",
        parameter="encoding",
    )


def _log_drops(counts: TraceCounts) -> None:
    for reason, n in counts.dropped.items():
        if n:
            detail = _per_column({r: c for r, c in counts.dropped_by_column.items() if r == reason})
            logger.warning("dropped %d of %d rows: %s%s", n, counts.rows, reason, f" ({detail})" if detail else "")
