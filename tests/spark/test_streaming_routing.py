"""Routing tables inside Spark Structured Streaming: surrogates, the route column, per-key state, a real query.

The oracle is Spark itself: ``pmod(hash(col), n)`` for the surrogates and the
route column, and ``TaskContext.partitionId()`` inside the stateful function
of a streaming query (file source, checkpoint, several micro-batches) for the
placement of every key, compared with the table and with the evaluator.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark import cloudpickle
from pyspark.sql import functions as F
from pyspark.sql import types as T

from locality.counts import count_keys
from locality.engines.spark import (
    KeyState,
    checkpoint_partitions,
    per_key_function,
    per_key_processor,
    route_values,
    with_handover,
    with_route,
    write_handover,
)
from locality.errors import InvalidParameterError, TraceError
from locality.evaluation import evaluate
from locality.hashing import SparkHashPartitioning, make_fallback
from locality.hashing.keys import INT_RANGE, LONG_RANGE
from locality.hashing.spark import SURROGATE_CANDIDATES, SURROGATE_PREFIX
from locality.migration import plan_migration
from locality.optimizer import LocalityOptimizer, make_fallbacks, optimize
from locality.routing import RoutingTable
from locality.topology import Topology
from tests.conftest import trace_keys

OPERATORS = trace_keys("geotweets")
ROUTED = "location"  # the operator the streaming query runs
N = 6  # instances = shuffle partitions of the streaming query
SESSION_PARTITIONS = 4  # the session fixture's spark.sql.shuffle.partitions (batch checks)
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
SCHEMA = "seq long, location string, hashtag string"
OUTPUT = "location string, partition int, n long, total long, last_seq long"

# Ship this module's functions to the Python workers by value: they need not import the tests package.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def count_and_last(key, pdfs, state):
    """The user's function of one location: running count and last seq, where it ran."""
    from pyspark import TaskContext

    rows = pd.concat(list(pdfs))
    total, last = state.get if state.exists else (0, -1)
    total, last = total + len(rows), max(last, int(rows["seq"].max()))
    state.update((total, last))
    yield pd.DataFrame(
        {
            "location": [key[0]],
            "partition": [TaskContext.get().partitionId()],
            "n": [len(rows)],
            "total": [total],
            "last_seq": [last],
        }
    )


# ------------------------------------------------------------------------------------------
# Surrogates and the route column, checked with Spark's own hash
# ------------------------------------------------------------------------------------------

PARTITION_COUNTS = (1, 2, 6, 7, 64, 200, 1000)


def test_surrogates_land_on_their_partition_by_sparks_hash(spark):
    rows = []
    for n in PARTITION_COUNTS:
        strings = SparkHashPartitioning(n).surrogates("string")
        longs = SparkHashPartitioning(n).surrogates("integer")
        ints = SparkHashPartitioning(n, int_type="int").surrogates("integer")
        rows += [(n, i, s, lo, it) for i, (s, lo, it) in enumerate(zip(strings, longs, ints))]
        assert all(
            s.startswith(SURROGATE_PREFIX) and int(s[len(SURROGATE_PREFIX) :]) < SURROGATE_CANDIDATES for s in strings
        )
        assert all(LONG_RANGE[0] <= v < LONG_RANGE[0] + SURROGATE_CANDIDATES for v in longs)
        assert all(INT_RANGE[0] <= v < INT_RANGE[0] + SURROGATE_CANDIDATES for v in ints)
    frame = spark.createDataFrame(rows, "n int, partition int, s string, l long, i int")
    placed = frame.select(
        "n",
        "partition",
        *[F.pmod(F.hash(c), F.col("n")).alias(f"{c}_partition") for c in "sli"],
    ).toPandas()
    assert len(placed) == sum(PARTITION_COUNTS)
    for c in "sli":
        assert (placed[f"{c}_partition"] == placed["partition"]).all(), c


def test_surrogates_are_deterministic_and_the_first_of_their_family():
    spark4 = SparkHashPartitioning(4)
    assert spark4.surrogates() == ("\x00route:2", "\x00route:3", "\x00route:0", "\x00route:9")
    # no smaller candidate lands on a partition that got a later one
    first = spark4.instances_of([f"{SURROGATE_PREFIX}{j}" for j in range(10)]).tolist()
    assert [first.index(p) for p in range(4)] == [2, 3, 0, 9]
    with pytest.raises(InvalidParameterError, match="'kind' parameter"):
        spark4.surrogates("float")


def _table(keys, instances, n=SESSION_PARTITIONS, **fallback):
    return RoutingTable(
        "k", make_fallback("spark", n, **fallback), pd.Series(instances, index=pd.Index(keys, dtype=object))
    )


@pytest.mark.parametrize(
    ("column_type", "keys", "fallback"),
    [
        ("string", ["paris", "lyon", "", "é中🔥", "\x00route:7", "grenoble-isère"], {}),
        ("bigint", [0, -1, 2**62, -(2**63) + 5, 12345678901, 42], {}),
        ("int", [0, -1, 2**31 - 1, -(2**31), 77, 1000], {"int_type": "int"}),
    ],
)
def test_route_column_puts_table_keys_on_their_partition_and_others_on_sparks(spark, column_type, keys, fallback):
    n = SESSION_PARTITIONS
    fallback_hash = SparkHashPartitioning(n, **fallback)
    targets = (fallback_hash.instances_of(keys) + 1) % n  # every entry differs from the hash
    table = _table(keys[:4], targets[:4], **fallback)
    others = keys[4:]
    frame = spark.createDataFrame([(k,) for k in keys], f"k {column_type}")
    routed = with_route(frame, table, "k").select("k", "route", F.pmod(F.hash("route"), F.lit(n)).alias("p"))
    got = routed.toPandas().set_index("k").loc[keys]
    assert routed.schema["route"].dataType == frame.schema["k"].dataType
    assert got["route"].tolist() == route_values(table, keys).tolist()
    assert got["p"].tolist() == targets[:4].tolist() + fallback_hash.instances_of(others).tolist()
    assert got["route"].loc[others].tolist() == others  # keys without an entry route as themselves


def test_empty_table_routes_every_key_as_itself(spark):
    frame = spark.createDataFrame([("a",), ("b",)], "k string")
    empty = RoutingTable("k", make_fallback("spark", SESSION_PARTITIONS))
    assert with_route(frame, empty, "k").select("route").toPandas()["route"].tolist() == ["a", "b"]


def test_route_column_rejects_what_spark_would_hash_differently(spark):
    frame = spark.createDataFrame([("a", 1, 2)], "k string, l long, i int")
    n = SESSION_PARTITIONS
    table = _table(["a"], [(SparkHashPartitioning(n).instance_of("a") + 1) % n])
    with pytest.raises(InvalidParameterError, match="engine 'kafka'"):
        with_route(frame, RoutingTable("k", make_fallback("kafka", n), {"a": 1}), "k")
    with pytest.raises(InvalidParameterError, match="'table' parameter of with_route must be a routing table"):
        with_route(frame, {"a": 1}, "k")
    with pytest.raises(TraceError, match="no column 'missing'"):
        with_route(frame, table, "missing")
    with pytest.raises(InvalidParameterError, match="'l' is already a column"):
        with_route(frame, table, "k", route="l")
    with pytest.raises(InvalidParameterError, match="key column 'l' of with_route must be string"):
        with_route(frame, table, "l")
    longs = _table([1], [(SparkHashPartitioning(n).instance_of(1) + 1) % n])
    with pytest.raises(InvalidParameterError, match="hashes ints as long"):
        with_route(frame, longs, "i")
    collated = frame.select(F.collate("k", "UTF8_LCASE").alias("k"))
    with pytest.raises(InvalidParameterError, match="collation UTF8_LCASE"):
        with_route(collated, table, "k")
    with pytest.raises(InvalidParameterError, match="spark.sql.shuffle.partitions=4; set it to 7"):
        with_route(frame, _table([], [], n=7), "k")


def test_key_state_has_group_state_semantics():
    states: dict = {}
    f = per_key_function(count_and_last, "location", "total long, last_seq long")
    state = KeyState(_store(states), ("paris",))
    assert not state.exists and state.getOption is None and not state.hasTimedOut
    with pytest.raises(ValueError, match="'paris' does not exist"):
        _ = state.get
    state.update((np.int64(3), np.int64(9)))
    assert state.exists and state.get == (3, 9) and type(state.get[0]) is int
    with pytest.raises(ValueError, match="cannot be set to None"):
        state.update(None)
    KeyState(_store(states), ("lyon",)).update((1, 2))
    assert f.decode(f.encode(states)) == {("paris",): (3, 9), ("lyon",): (1, 2)}
    state.remove()
    assert not state.exists and list(states) == [("lyon",)]


def test_per_key_state_round_trips_types():
    f = per_key_function(count_and_last, "k", "count long, mean double, label string, seen boolean")
    states = {(2**62,): (1, 0.5, "é中", True), (-3,): (None, None, None, None)}
    assert f.decode(f.encode(states)) == states
    assert f.decode(f.encode({})) == {}
    assert [fld.name for fld in f.group_state_schema.fields] == ["key_states"]


def test_per_key_helpers_reject_bad_arguments():
    with pytest.raises(InvalidParameterError, match="'func' parameter of per_key_function must be callable"):
        per_key_function("count", "k", "n long")
    with pytest.raises(InvalidParameterError, match="'state_schema' parameter of per_key_processor"):
        per_key_processor(count_and_last, "k", "string", T.LongType())


def _store(states):
    from locality.engines.spark import _DictStore

    return _DictStore(states)


# ------------------------------------------------------------------------------------------
# A real streaming query: tables learned on one half of the tweets, the other half streamed
# ------------------------------------------------------------------------------------------


@dataclass
class StreamRun:
    v1: object  # RoutingConfiguration used for the first files
    v2: object  # the next version, in force after the restart
    files: list[pd.DataFrame]  # the records of each file (= micro-batch)
    output: pd.DataFrame  # what the stateful function emitted, with the batch id
    moved: set  # keys of the migration plan v1 -> v2
    handed_over: list[int]  # keys whose state write_handover wrote, at the first call and at a rerun
    handover_files: list[str]  # what the handover directory held after both calls
    checkpoint: Path
    batches_v1: int


@contextmanager
def session_conf(spark, conf):
    """Set SQL confs for one query and restore them afterwards."""
    before = {k: spark.conf.get(k) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            spark.conf.set(k, v)


def run_stream(spark, source, checkpoint, table, stateful, sink, handover=None):
    """Route the Parquet files of ``source`` (one per micro-batch; with the ``handover`` directory's rows)
    with ``table``, run ``stateful`` on the route groups until every file is processed, and append each
    micro-batch's output to ``sink``."""
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    if handover is not None:
        stream = with_handover(stream, handover, ROUTED)
    query = (
        stateful(with_route(stream, table, ROUTED).groupBy("route"))
        .writeStream.outputMode("update")
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(lambda batch, batch_id: sink.append(batch.toPandas().assign(batch=batch_id)))
        .start()
    )
    query.processAllAvailable()
    query.stop()


def with_state(grouped):
    f = per_key_function(count_and_last, ROUTED, "total long, last_seq long")
    return grouped.applyInPandasWithState(f, OUTPUT, f.group_state_schema, "Update", "NoTimeout")


@pytest.fixture(scope="module")
def stream_run(spark, geotweets, tmp_path_factory) -> StreamRun:
    """Learn v1 on the first half (Spark fallback), stream the second half as 3 files through a
    checkpointed query; after 2 micro-batches, restart the query with v2 (re-learned with the
    streamed records, v1 in force) and stream the last file."""
    trace = geotweets[["seq", *OPERATORS]]
    half = len(trace) // 2
    topology = Topology.uniform(OPERATORS, N)
    v1 = LocalityOptimizer(topology, hash="spark").fit(trace.iloc[:half]).config_
    files = [trace.iloc[rows].reset_index(drop=True) for rows in np.array_split(np.arange(half, len(trace)), 3)]
    seen = pd.concat([trace.iloc[:half], *files[:2]])
    graph = count_keys(seen, OPERATORS).graph()
    v2 = optimize(graph, topology, make_fallbacks(topology, "spark"), current=v1).config
    moved = set(plan_migration(v1, v2, {}).moves_of(ROUTED)["key"])

    work = tmp_path_factory.mktemp("stream")
    source, checkpoint, handover = work / "source", work / "checkpoint", work / "handover"
    source.mkdir()
    sink: list[pd.DataFrame] = []
    with session_conf(spark, {"spark.sql.shuffle.partitions": str(N)}):
        for i in range(2):
            files[i].to_parquet(source / f"part-{i}.parquet", index=False)
        run_stream(spark, source, checkpoint, v1.tables[ROUTED], with_state, sink, handover)
        batches_v1 = len(sink)
        handed_over = [write_handover(spark, checkpoint, v1.tables[ROUTED], v2.tables[ROUTED], ROUTED, handover)]
        handed_over.append(write_handover(spark, checkpoint, v1.tables[ROUTED], v2.tables[ROUTED], ROUTED, handover))
        handover_files = sorted(p.name for p in handover.iterdir())
        files[2].to_parquet(source / "part-2.parquet", index=False)
        run_stream(spark, source, checkpoint, v2.tables[ROUTED], with_state, sink, handover)
    output = pd.concat(sink, ignore_index=True)
    return StreamRun(v1, v2, files, output, moved, handed_over, handover_files, checkpoint, batches_v1)


def test_stream_runs_one_micro_batch_per_file_and_restores_the_session(spark, stream_run):
    assert stream_run.batches_v1 == 2
    assert sorted(stream_run.output["batch"].unique()) == [0, 1, 2]
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    assert checkpoint_partitions(stream_run.checkpoint) == N


def test_every_key_runs_in_its_tables_partition(stream_run):
    """Table keys in the partition their table names; every other key where Spark's hash puts it."""
    out = stream_run.output
    for config, batches in ((stream_run.v1, [0, 1]), (stream_run.v2, [2])):
        table = config.tables[ROUTED]
        rows = out[out["batch"].isin(batches)]
        in_table = rows["location"].isin(table.entries.index).to_numpy()
        expected = table.route_many(rows["location"].to_numpy(dtype=object))
        hashed = table.fallback.instances_of(rows["location"].to_numpy(dtype=object))
        assert in_table.sum() >= 400  # hundreds of table keys checked per version
        assert (rows["partition"].to_numpy()[in_table] == expected[in_table]).all()
        assert (expected[in_table] != hashed[in_table]).all()  # all of them away from their hash partition
        assert (rows["partition"].to_numpy()[~in_table] == hashed[~in_table]).all()


def test_partition_loads_equal_the_evaluators(stream_run):
    out = stream_run.output
    for config, batches in ((stream_run.v1, [0, 1]), (stream_run.v2, [2])):
        records = pd.concat([stream_run.files[b] for b in batches])
        measured = out[out["batch"].isin(batches)].groupby("partition")["n"].sum().reindex(range(N), fill_value=0)
        expected = evaluate(records[OPERATORS], config).optimized.instance_loads[ROUTED]
        assert measured.tolist() == expected
        assert measured.sum() == len(records)


def test_state_per_real_key_equals_grouping_by_the_real_key(stream_run):
    """Until the restart: each location's running state is the one of a query grouped by location."""
    out, files = stream_run.output, stream_run.files
    last = out[out["batch"] <= 1].sort_values("batch").groupby("location").last()
    records = pd.concat(files[:2])
    expected = records.groupby("location").agg(total=("seq", "size"), last_seq=("seq", "max"))
    assert len(last) == len(expected) > 500
    assert last[["total", "last_seq"]].sort_index().equals(expected.sort_index())


def test_new_version_hands_the_state_of_moved_keys_over(stream_run):
    """Restarted with v2, every key carries on with its state: keys outside the migration plan keep their
    group; the plan's keys got their state from write_handover in their new group."""
    out, files = stream_run.output, stream_run.files
    seen_before = set(pd.concat(files[:2])["location"])
    assert stream_run.handed_over[0] == len(stream_run.moved & seen_before) >= 50
    # a rerun for the same stop finds the file and writes nothing new
    assert stream_run.handed_over[1] == stream_run.handed_over[0]
    assert stream_run.handover_files == ["handover-000001.parquet"]
    after = out[out["batch"] == 2].set_index("location")
    moved = after.index.isin(list(stream_run.moved))
    assert moved.sum() >= 20 and (~moved).sum() >= 200
    all_counts = pd.concat(files).groupby("location").size()
    assert (after["total"] == all_counts.loc[after.index]).all()


def test_route_column_refuses_a_table_for_another_partition_count_than_the_checkpoints(spark, stream_run):
    frame = spark.createDataFrame([("a",)], "location string")
    with pytest.raises(InvalidParameterError, match=f"froze spark.sql.shuffle.partitions at {N}"):
        with_route(frame, _table([], [], n=SESSION_PARTITIONS), "location", checkpoint=str(stream_run.checkpoint))
    assert checkpoint_partitions(stream_run.checkpoint.parent / "source") is None


def test_transform_with_state_keeps_a_map_state_per_real_key(spark, stream_run, tmp_path):
    """transformWithStateInPandas: the same function, its state in a MapState keyed by the real key."""
    records = [f.iloc[:1500] for f in stream_run.files[:2]]
    (tmp_path / "source").mkdir()
    for i, part in enumerate(records):
        part.to_parquet(tmp_path / "source" / f"part-{i}.parquet", index=False)
    table = stream_run.v1.tables[ROUTED]
    processor = per_key_processor(count_and_last, ROUTED, "string", "total long, last_seq long")
    sink: list[pd.DataFrame] = []
    rocksdb = {"spark.sql.shuffle.partitions": str(N), "spark.sql.streaming.stateStore.providerClass": ROCKSDB}
    with session_conf(spark, rocksdb):
        run_stream(
            spark,
            tmp_path / "source",
            tmp_path / "checkpoint",
            table,
            lambda grouped: grouped.transformWithStateInPandas(processor, OUTPUT, "Update", "None"),
            sink,
        )
    out = pd.concat(sink, ignore_index=True)
    assert sorted(out["batch"].unique()) == [0, 1]
    assert (out["partition"].to_numpy() == table.route_many(out["location"].to_numpy(dtype=object))).all()
    assert out["location"].isin(table.entries.index).sum() >= 100
    last = out.sort_values("batch").groupby("location").last()
    expected = pd.concat(records).groupby("location").agg(total=("seq", "size"), last_seq=("seq", "max"))
    assert last[["total", "last_seq"]].sort_index().equals(expected.sort_index())
