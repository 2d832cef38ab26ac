"""Split keys in Spark: the route column of a split key follows its row's server, checked with Spark itself.

The oracle is Spark's own ``pmod(hash(route), n)`` for the route column, and
``TaskContext.partitionId()`` inside the stateful function of a streaming
query, compared with :meth:`RoutingConfiguration.route_rows`, which routes
whole tuples (a split key by its upstream key's server).
"""

from __future__ import annotations

import logging
import sys

import numpy as np
import pandas as pd
import pytest
from pyspark import cloudpickle
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from locality.engines.spark import per_key_function, route_values, with_route
from locality.errors import InvalidParameterError, TraceError
from locality.hashing import make_fallback
from locality.optimizer import LocalityOptimizer
from locality.routing import RoutingConfiguration, RoutingTable
from locality.topology import Topology
from tests.conftest import trace_keys

from .test_streaming_routing import SESSION_PARTITIONS, session_conf

OPERATORS = trace_keys("geotweets")  # location -> hashtag
TOPOLOGY = Topology.uniform(OPERATORS, 3, 2)  # 6 partitions, partition i on server s{i mod 3}
OUTPUT = "hashtag string, partition int, n long, total long"

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def count(key, pdfs, state):
    """Running count of one hashtag in its group (a partial count for a split key's part), and where it ran."""
    from pyspark import TaskContext

    n = sum(len(p) for p in pdfs)
    total = (state.get[0] if state.exists else 0) + n
    state.update((total,))
    yield pd.DataFrame(
        {"hashtag": [key[0]], "partition": [TaskContext.get().partitionId()], "n": [n], "total": [total]}
    )


def split_plans(keys, n_servers: int, n: int, seed: int) -> dict:
    """A random partition per key and server."""
    rng = np.random.default_rng(seed)
    return {k: rng.integers(0, n, n_servers).tolist() for k in keys}


@pytest.mark.parametrize(
    ("column_type", "keys", "fallback"),
    [
        ("string", ["paris", "lyon", "", "é中🔥", "grenoble", "nice", "metz", "pau"], {}),
        ("bigint", [0, -1, 2**62, -(2**63) + 5, 12345678901, 42, 7, 8], {}),
        ("int", [0, -1, 2**31 - 1, -(2**31) + 3, 77, 1000, 7, 8], {"int_type": "int"}),
    ],
)
def test_a_split_keys_route_lands_on_the_part_of_its_rows_server(spark, column_type, keys, fallback):
    n, n_servers = SESSION_PARTITIONS, 3
    hashing = make_fallback("spark", n, **fallback)
    entries = dict(zip(keys[:4], ((hashing.instances_of(keys[:4]) + 1) % n).tolist()))
    plans = split_plans(keys[2:6], n_servers, n, seed=len(column_type))  # two of them with an entry
    table = RoutingTable("k", hashing, entries, plans)
    servers = ["east", "west", "north"]
    rows = [(k, s, servers[s]) for k in keys for s in range(n_servers)] + [(k, None, None) for k in keys]
    frame = spark.createDataFrame(rows, f"k {column_type}, position int, name string")
    for column, names in (("position", None), ("name", servers)):
        routed = with_route(frame, table, "k", server_column=column, servers=names)
        got = routed.select("k", "position", "route", F.pmod(F.hash("route"), F.lit(n)).alias("p")).toPandas()
        placed, home = got[got["position"].notna()], got[got["position"].isna()]
        at = placed["position"].astype(int).to_numpy()
        k = placed["k"].to_numpy(dtype=object)
        assert placed["route"].tolist() == route_values(table, k, at).tolist()
        assert placed["p"].tolist() == table.route_many(k, at).tolist()  # Spark's hash agrees with the table
        assert home["p"].tolist() == table.route_many(home["k"].to_numpy(dtype=object)).tolist()
        assert home["route"].tolist() == route_values(table, home["k"].to_numpy(dtype=object)).tolist()
    split = placed["k"].isin(list(plans)).to_numpy()
    assert (placed["p"].to_numpy()[split] == [plans[key][s] for key, s in zip(k[split], at[split])]).all()
    # a part on the partition Spark's hash gives a key without an entry is the key's own group
    own = [(key, s) for key, plan in plans.items() for s in range(n_servers) if key not in entries]
    own = [(key, s) for key, s in own if plans[key][s] == hashing.instance_of(key)]
    assert [route_values(table, [key], [s])[0] for key, s in own] == [key for key, _ in own]


def test_route_values_and_with_route_refuse_servers_they_cannot_read(spark, caplog):
    n = SESSION_PARTITIONS
    table = RoutingTable("k", make_fallback("spark", n), {"a": 1, "b": 2}, {"a": [0, 3], "hot": [1, 2]})
    frame = spark.createDataFrame([("hot", 1, "s1", 1.0)], "k string, position int, name string, weight double")
    with pytest.raises(TraceError, match="no column 'server'"):
        with_route(frame, table, "k", server_column="server")
    with pytest.raises(
        InvalidParameterError, match=r"'server_column' parameter of with_route .* and 'servers' is missing"
    ):
        with_route(frame, table, "k", server_column="name")
    with pytest.raises(InvalidParameterError, match="'server_column' parameter of with_route must name an integer"):
        with_route(frame, table, "k", server_column="weight")
    with pytest.raises(InvalidParameterError, match=r"'servers' parameter of with_route must list the 2 server names"):
        with_route(frame, table, "k", server_column="name", servers=["s0", "s1", "s2"])
    with pytest.raises(PySparkException, match=r"with_route: the server_column 'name' holds s7, not a server position"):
        with_route(
            frame.withColumn("name", F.lit("s7")), table, "k", server_column="name", servers=["s0", "s1"]
        ).collect()
    with pytest.raises(
        PySparkException, match=r"the server_column 'position' holds 2, not a server position in \[0, 1\]"
    ):
        with_route(frame.withColumn("position", F.lit(2)), table, "k", server_column="position").collect()
    # only split keys read the server: other keys route whatever it holds
    other = frame.withColumn("k", F.lit("b")).withColumn("position", F.lit(9))
    assert (
        with_route(other, table, "k", server_column="position").select("route").first()[0]
        == route_values(table, ["b"])[0]
    )
    with pytest.raises(
        InvalidParameterError, match=r"'servers' parameter of route_values must hold one server position"
    ):
        route_values(table, ["a", "hot"], [0])
    with pytest.raises(InvalidParameterError, match=r"must hold server positions in \[0, 1\]; got 2 for key 'hot'"):
        route_values(table, ["b", "hot"], [2, 2])
    with caplog.at_level(logging.WARNING, logger="locality.engines.spark"):
        whole = with_route(frame, table, "k").select("route").first()[0]
    assert whole == "hot" and "splits 2 hot keys but no 'server_column'" in caplog.text


@pytest.fixture(scope="module")
def split_stream(spark, geotweets, tmp_path_factory):
    """Tables learned on the first half of the tweets, the 8 most frequent hashtags of the streamed records
    split over the 3 servers (a random one of each server's partitions); 20,000 records streamed as 2 files.
    The query routes location, takes each row's server from its location's partition (Spark's hash of the
    location route), and routes hashtag by it."""
    trace = geotweets[["seq", *OPERATORS]]
    half = len(trace) // 2
    learned = LocalityOptimizer(TOPOLOGY, hash="spark").fit(trace.iloc[:half]).config_
    records = trace.iloc[half : half + 20_000].reset_index(drop=True)
    hot = records["hashtag"].value_counts().index[:8].tolist()
    rng = np.random.default_rng(5)
    plans = {k: [s + 3 * int(rng.integers(0, 2)) for s in range(3)] for k in hot}
    hashtags = learned.tables["hashtag"]
    split = RoutingTable("hashtag", hashtags.fallback, hashtags.entries, plans)
    config = RoutingConfiguration(TOPOLOGY, {"location": learned.tables["location"], "hashtag": split})
    at = TOPOLOGY.instance_servers("location")[config.route_many("location", records["location"].to_numpy(object))]
    records["server"] = np.array(TOPOLOGY.servers, dtype=object)[at]
    work = tmp_path_factory.mktemp("split-stream")
    (work / "source").mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(records)), 2)):
        records.iloc[part][["seq", *OPERATORS]].to_parquet(work / "source" / f"part-{i}.parquet", index=False)
    sink: list[pd.DataFrame] = []
    f = per_key_function(count, "hashtag", "total long")
    n = TOPOLOGY.n_instances("hashtag")
    with session_conf(spark, {"spark.sql.shuffle.partitions": str(n)}):
        stream = spark.readStream.schema("seq long, location string, hashtag string")
        stream = stream.option("maxFilesPerTrigger", 1).parquet(str(work / "source"))
        located = with_route(stream, config.tables["location"], "location", route="location_route")
        hosts = F.array(*(F.lit(s) for s in TOPOLOGY.placement["location"]))  # server of each location partition
        located = located.withColumn("server", F.element_at(hosts, F.pmod(F.hash("location_route"), F.lit(n)) + 1))
        routed = with_route(located, split, "hashtag", server_column="server", servers=TOPOLOGY.servers)
        query = (
            routed.groupBy("route")
            .applyInPandasWithState(f, OUTPUT, f.group_state_schema, "Update", "NoTimeout")
            .writeStream.outputMode("update")
            .option("checkpointLocation", str(work / "checkpoint"))
            .foreachBatch(lambda batch, batch_id: sink.append(batch.toPandas().assign(batch=batch_id)))
            .start()
        )
        query.processAllAvailable()
        query.stop()
    columns = {op: records[op].to_numpy(dtype=object) for op in OPERATORS}
    records["partition"] = config.route_rows(columns)["hashtag"]
    return records, pd.concat(sink, ignore_index=True), plans


def test_every_record_runs_where_route_rows_says(split_stream):
    records, out, plans = split_stream
    assert sorted(out["batch"].unique()) == [0, 1]
    measured = out.groupby(["hashtag", "partition"])["n"].sum().sort_index()
    expected = records.groupby(["hashtag", "partition"]).size().sort_index()
    assert measured.equals(expected) and measured.sum() == len(records) == 20_000
    hot = records[records["hashtag"].isin(list(plans))]
    # each hot hashtag's records ran on the part of their location's server
    position = hot["server"].map(TOPOLOGY.servers.index).to_numpy()
    assert (hot["partition"].to_numpy() == [plans[k][s] for k, s in zip(hot["hashtag"], position)]).all()
    assert hot.groupby("hashtag")["partition"].nunique().min() >= 2 and len(hot) > 1000


def test_partial_states_merge_into_each_keys_count(split_stream):
    """Each part keeps a partial count under the real key; summed downstream by the key, they are its count."""
    records, out, plans = split_stream
    last = out.sort_values("batch").groupby(["hashtag", "partition"])["total"].last()
    assert last.equals(records.groupby(["hashtag", "partition"]).size().sort_index().rename("total"))
    merged = last.groupby(level="hashtag").sum()
    assert merged.equals(records.groupby("hashtag").size().sort_index().rename("total"))
    assert (last.loc[list(plans)].groupby(level="hashtag").size() >= 2).all()  # several partial states each
