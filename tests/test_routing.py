import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from locality.errors import InvalidParameterError, SerializationError
from locality.hashing import make_fallback
from locality.routing import RoutingConfiguration, RoutingTable
from locality.topology import Topology

OPS = ["location", "hashtag"]


def config(engine="kafka"):
    topo = Topology.uniform(OPS, 3, 2)
    fallbacks = {op: make_fallback(engine, 6) for op in OPS}
    keys = ["paris", "lyon", "nice", "é#🙂"]
    tables = {
        "location": RoutingTable("location", fallbacks["location"], {k: (i + 1) % 6 for i, k in enumerate(keys)}),
        "hashtag": RoutingTable("hashtag", fallbacks["hashtag"], {7: 3, 123456789012: 5, -4: 0}),
    }
    return RoutingConfiguration(topo, tables, {"alpha": 1.03, "seed": 0})


def test_table_routes_entries_and_falls_back_to_hash():
    fallback = make_fallback("kafka", 6)
    wanted = {"a": 1, "b": 2, "c": fallback.instance_of("c")}
    table = RoutingTable("op", fallback, wanted)
    # the entry equal to the fallback is not stored
    assert "c" not in table.entries.index and len(table) == sum(fallback.instance_of(k) != v for k, v in wanted.items())
    for key, instance in wanted.items():
        assert table.route(key) == instance
    other = ["zz", "yy", "xx"]
    assert [table.route(k) for k in other] == fallback.instances_of(other).tolist()
    keys = np.array(["a", "zz", "b", "c"], dtype=object)
    np.testing.assert_array_equal(table.route_many(keys), [table.route(k) for k in keys])


def test_json_and_parquet_round_trip(tmp_path):
    cfg = config()
    again = RoutingConfiguration.from_json(cfg.to_json())
    assert again.tables == cfg.tables and again.topology == cfg.topology and again.parameters == cfg.parameters
    cfg.write(tmp_path / "cfg")
    read = RoutingConfiguration.read(tmp_path / "cfg")
    assert read.tables == cfg.tables and read.topology == cfg.topology
    # a non-Python engine reads typed Parquet: string keys, int64 keys, int32 instances, server names
    loc = pq.read_table(tmp_path / "cfg" / "tables" / "00.parquet")
    assert str(loc.schema.field("key").type) == "string" and str(loc.schema.field("instance").type) == "int32"
    assert str(pq.read_table(tmp_path / "cfg" / "tables" / "01.parquet").schema.field("key").type) == "int64"
    header = json.loads((tmp_path / "cfg" / "header.json").read_text())
    assert header["fallbacks"]["location"]["engine"] == "kafka"
    probe = ["paris", "lyon", "unknown", "nice"]
    for op in OPS:
        keys = probe + ["é#🙂"] if op == "location" else [7, 123456789012, -4, 8]
        np.testing.assert_array_equal(read.route_many(op, np.array(keys, dtype=object)), cfg.route_many(op, keys))
    assert read.server_of("location", "paris") == cfg.topology.server_of("location", cfg.route("location", "paris"))


def test_hash_only_has_empty_tables():
    base = config().hash_only()
    assert base.table_sizes() == {"location": 0, "hashtag": 0}


def test_damaged_documents(tmp_path):
    with pytest.raises(SerializationError, match="not a routing configuration JSON"):
        RoutingConfiguration.from_json("{nope")
    doc = config().to_json_dict()
    doc["format_version"] = 99
    with pytest.raises(SerializationError, match="format version 99"):
        RoutingConfiguration.from_json_dict(doc)
    with pytest.raises(SerializationError, match="cannot read routing configuration header"):
        RoutingConfiguration.read(tmp_path)
    with pytest.raises(InvalidParameterError, match="outside"):
        RoutingTable("op", make_fallback("kafka", 2), {"a": 5})
    with pytest.raises(InvalidParameterError, match="all strings or all integers"):
        RoutingTable("op", make_fallback("kafka", 2), {"a": 1, 2: 1})
    with pytest.raises(InvalidParameterError, match="lists a key twice"):
        RoutingTable("op", make_fallback("kafka", 2), pd.Series([0, 1], index=["a", "a"]))


def test_lookups_take_only_str_and_int_keys_and_survive_pickling():
    import pickle

    import pyarrow as pa

    fallback = make_fallback("kafka", 6)
    table = RoutingTable("op", fallback, {0: fallback.instance_of(0) ^ 1, 1: fallback.instance_of(1) ^ 1, 2**40: 5})
    assert table.key_kind == "integer" and len(table) >= 2
    # True == 1 and 1.0 == 1 in Python: neither may find the entry of 1
    for bad in (True, 1.0, None, b"1"):
        with pytest.raises(InvalidParameterError, match="must be a str or an int"):
            table.route(bad)
    with pytest.raises(InvalidParameterError, match="position 1"):
        table.route_many([1, True])
    keys = [0, 1, 2**40, 7, np.int64(1), "1"]
    expected = [table.route(k) for k in keys]
    assert expected[:2] == [fallback.instance_of(0) ^ 1, fallback.instance_of(1) ^ 1] and expected[4] == expected[1]
    assert expected[5] == fallback.instance_of("1")  # a string is never an integer key
    assert table.route_many(keys).tolist() == expected
    assert table.route_many(pa.array([0, 1, 7])).tolist() == [expected[0], expected[1], expected[3]]
    again = pickle.loads(pickle.dumps(table))
    assert again == table and again.route_many(keys).tolist() == expected and again.route(2**40) == 5
    assert RoutingTable("op", fallback).key_kind is None


def test_string_batches_name_a_bad_key_by_its_position():
    import pyarrow as pa

    fallback = make_fallback("kafka", 6)
    table = RoutingTable("op", fallback, {"a": fallback.instance_of("a") ^ 1, "é🙂": fallback.instance_of("é🙂") ^ 1})
    keys = ["a", "zz", "é🙂", 7, np.str_("a")]
    expected = [table.route(k) for k in keys]
    assert expected[0] == expected[4] == fallback.instance_of("a") ^ 1 and expected[3] == fallback.instance_of(7)
    for container in (keys, np.array(keys, dtype=object), pd.Series(keys), pa.array(keys[:3])):
        assert table.route_many(container).tolist() == expected[: len(container)]
    for bad, position in ((["a", "b", True], 2), (["a", None], 1), (["a", ["nested"]], 1), (["x", 1.5, "a"], 1)):
        with pytest.raises(InvalidParameterError, match=f"position {position}"):
            table.route_many(bad)
    with pytest.raises(InvalidParameterError, match="one-dimensional"):
        table.route_many(np.array([["a", "b"]], dtype=object))
