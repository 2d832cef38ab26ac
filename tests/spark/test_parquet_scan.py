"""Local Parquet read by the tasks with pyarrow counts exactly what Spark's own reader counts."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from locality.errors import TraceError
from pipelines import counting
from pipelines.counting import count_trace, sketch_trace
from pipelines.parquet_scan import ParquetScan
from pipelines.trace import TraceSpec, read_trace, spark_read_errors
from tests.conftest import trace_card, trace_path


def both_ways(spark, spec: TraceSpec, capacity: int = 20_000):
    """The sketch counts of ``spec`` read by Spark (mapInArrow) and by the pyarrow scan."""
    df = read_trace(spark, spec)
    scan = ParquetScan.of(spark, spec, df.schema)
    assert scan is not None
    by_spark = sketch_trace(df, spec.keys, weight=spec.weight, capacity=capacity)
    by_scan = sketch_trace(df, spec.keys, weight=spec.weight, capacity=capacity, scan=scan)
    return by_spark, by_scan


def assert_same_counts(a, b) -> None:
    assert (a.rows, a.dropped, a.dropped_by_column, a.total_weight) == (
        b.rows,
        b.dropped,
        b.dropped_by_column,
        b.total_weight,
    )
    for x, y in zip(a.pair_counts, b.pair_counts):
        order = ["key0", "key1"]
        pd.testing.assert_frame_equal(
            x.sort_values(order).reset_index(drop=True), y.sort_values(order).reset_index(drop=True)
        )
    for op in a.key_loads:
        pd.testing.assert_frame_equal(
            a.key_loads[op].sort_values("key").reset_index(drop=True),
            b.key_loads[op].sort_values("key").reset_index(drop=True),
        )


@pytest.mark.parametrize("name, start, end", [("flights", "2013-06-03", "2013-06-10"), ("ira", None, None)])
def test_scan_counts_what_spark_reads(spark, name, start, end):
    card = trace_card(name)
    spec = TraceSpec(str(trace_path(name)), card.keys, weight=card.weight, ts=card.ts, start=start, end=end)
    by_spark, by_scan = both_ways(spark, spec)
    assert by_scan.rows > 0
    assert_same_counts(by_spark, by_scan)


def test_time_range_on_dates_zoned_and_naive_times(spark, tmp_path):
    # Spark compares in UTC and a date as its midnight; the scan must keep the same rows.
    moments = [datetime(2020, 1, d, h, tzinfo=timezone.utc) for d in (1, 2, 3) for h in (0, 23)]
    frame = pa.table(
        {
            "a": [f"a{i % 3}" for i in range(len(moments))],
            "b": list(range(len(moments))),
            "day": pa.array([m.date() for m in moments], pa.date32()),
            "zoned": pa.array(moments, pa.timestamp("us", tz="America/New_York")),
            "naive": pa.array([m.replace(tzinfo=None) for m in moments], pa.timestamp("us")),
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(frame, path, row_group_size=2)  # several row groups, so several slices and fragments
    for ts in ("day", "zoned", "naive"):
        spec = TraceSpec(str(path), ["a", "b"], ts=ts, start="2020-01-01T23:00:00", end="2020-01-03")
        by_spark, by_scan = both_ways(spark, spec)
        assert_same_counts(by_spark, by_scan)
        assert by_scan.rows == {"day": 2, "zoned": 3, "naive": 3}[ts]


def test_integer_widths_follow_sparks_schema(spark, tmp_path):
    (tmp_path / "t").mkdir()
    pq.write_table(pa.table({"a": pa.array([1, 2, 2], pa.int32()), "b": ["x", "y", "y"]}), tmp_path / "t" / "1.parquet")
    pq.write_table(pa.table({"a": pa.array([2, 3], pa.int32()), "b": ["y", None]}), tmp_path / "t" / "2.parquet")
    by_spark, by_scan = both_ways(spark, TraceSpec(str(tmp_path / "t"), ["a", "b"]))
    assert_same_counts(by_spark, by_scan)
    assert by_scan.dropped["null key"] == 1
    assert dict(zip(by_scan.key_loads["b"]["key"], by_scan.key_loads["b"]["weight"])) == {"x": 1.0, "y": 3.0}


def test_only_local_parquet_is_scanned(spark, tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("a,b\nx,1\n")
    spec = TraceSpec(str(csv), ["a", "b"])
    assert ParquetScan.of(spark, spec, read_trace(spark, spec).schema) is None
    remote = TraceSpec("hdfs://namenode/trace.parquet", ["a", "b"])
    assert ParquetScan.of(spark, remote, read_trace(spark, spec).schema) is None


def test_unreadable_row_group_names_the_file(spark, tmp_path):
    (tmp_path / "t").mkdir()
    for name in ("good", "bad"):
        table = pa.table({"a": [f"key{i}" for i in range(1000)], "b": list(range(1000))})
        pq.write_table(table, tmp_path / "t" / f"{name}.parquet", compression="none")
    spec = TraceSpec(str(tmp_path / "t"), ["a", "b"])
    df = read_trace(spark, spec)
    bad = tmp_path / "t" / "bad.parquet"
    data = bytearray(bad.read_bytes())
    data[100:2000] = b"\xff" * 1900  # the footer still parses; the column data does not
    bad.write_bytes(bytes(data))
    with pytest.raises(TraceError, match="bad.parquet"):
        count_trace(df, spec)


NOT_UTF8 = r"key column 'a' holds text that is not valid UTF-8 \(Parquet text must be\)"


def test_keys_that_are_not_utf8_are_named(spark, tmp_path):
    raw = pa.array([b"ok", b"bad\xff\xfe", b"ok"], pa.binary()).view(pa.string())  # Parquet lets a writer do this
    pq.write_table(pa.table({"a": raw, "b": [1, 2, 3]}), tmp_path / "t.parquet")
    spec = TraceSpec(str(tmp_path / "t.parquet"), ["a", "b"])
    df = read_trace(spark, spec)
    with pytest.raises(TraceError, match=NOT_UTF8):
        count_trace(df, spec)  # the scan
    with pytest.raises(TraceError, match=NOT_UTF8):
        with spark_read_errors(spec.path):
            sketch_trace(df, spec.keys)  # Spark's reader


@pytest.mark.parametrize("scan", [False, True])
def test_executors_merge_many_tasks_like_the_driver(spark, monkeypatch, scan):
    # Capacity above the distinct keys keeps the sketches exact, so any merge order gives the same counts.
    spec = TraceSpec(str(trace_path("flights")), trace_card("flights").keys)
    df = read_trace(spark, spec).repartition(12)
    parquet = ParquetScan.of(spark, spec, df.schema) if scan else None
    if parquet is not None:  # twelve tasks of the scan too
        parquet = dataclasses.replace(parquet, slices=parquet.slices * 12)
    by_driver = sketch_trace(df, spec.keys, capacity=200_000, scan=parquet)
    monkeypatch.setattr(counting, "_DRIVER_MERGE_LIMIT", 2)
    monkeypatch.setattr(counting, "_MERGE_FANOUT", 3)  # 12 -> 4 -> 2 outputs: two levels on the executors
    progress = []
    by_executors = sketch_trace(
        df, spec.keys, capacity=200_000, scan=parquet, on_partition=lambda d, t: progress.append((d, t))
    )
    assert_same_counts(by_driver, by_executors)
    assert by_executors.error_bound == dict.fromkeys(by_executors.error_bound, 0.0)
    assert progress[-1] == (12, 12) and len(progress) == 2
