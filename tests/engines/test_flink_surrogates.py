"""Flink surrogates and routing keys (locality.engines.flink): PyFlink's Row hash, the surrogate search,
the key selector, the routing file. Flink's own code checks the same things in tests/flink/."""

from __future__ import annotations

import doctest
import json
import pickle

import numpy as np
import pandas as pd
import pytest

import locality.engines.flink as flink_module
import locality.hashing.flink as flink_hash
from locality.engines.flink import RoutingKeySelector, read_routing_file, write_routing_file
from locality.errors import InvalidParameterError, SerializationError
from locality.hashing import FlinkKeyGroups, PyFlinkKeyGroups, fallback_from_dict, java_hash_code, make_fallback
from locality.hashing.flink import RESERVED_INTS, RESERVED_LONGS, SURROGATE_PREFIX, flink_surrogates
from locality.migration import plan_migration
from locality.router import Router
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore
from locality.topology import Topology
from tests.engines import key_group_range

# Subtask at max parallelism 128, parallelism 6, printed by a javac-compiled probe against the 2.3.0 jars:
# KeyGroupRangeAssignment.assignKeyToParallelOperator on the key itself (plain) and on
# new KeyByKeySelector().getKey(Row.of(key, value)) (row), whose hashCode was key.hashCode() + 62 each time.
JAR_VECTORS = [
    # key, int_type, plain subtask, PyFlink (Row) subtask
    ("abc", "long", 5, 3),
    ("", "long", 4, 1),
    ("hello", "long", 1, 1),
    ("\x00route:1", "long", 2, 5),
    (5, "long", 5, 0),
    (-7, "long", 0, 5),
    (-(2**63), "long", 5, 5),
    (42, "int", 1, 1),
    (-(2**31), "int", 5, 5),
]


@pytest.mark.parametrize(("key", "int_type", "plain", "row"), JAR_VECTORS)
def test_pyflink_row_hash_matches_the_jars(key, int_type, plain, row):
    assert FlinkKeyGroups(6, 128, int_type=int_type).instance_of(key) == plain
    assert PyFlinkKeyGroups(6, 128, int_type=int_type).instance_of(key) == row
    # the Row's hashCode is the key's + 62: PyFlink's key group is Flink's of an Integer 62 larger
    row_hash = (java_hash_code(key, int_type=int_type) + 62 + 2**31) % 2**32 - 2**31
    assert PyFlinkKeyGroups(6, 128, int_type=int_type).key_group(key) == FlinkKeyGroups(
        6, 128, int_type="int"
    ).key_group(row_hash)


def test_pyflink_engine_is_registered_and_round_trips():
    fallback = make_fallback("pyflink", 6, max_parallelism=100)
    assert isinstance(fallback, PyFlinkKeyGroups)
    assert fallback.to_dict() == {
        "engine": "pyflink",
        "n_instances": 6,
        "parameters": {"max_parallelism": 100, "int_type": "long"},
    }
    assert fallback_from_dict(fallback.to_dict()) == fallback != make_fallback("flink", 6, max_parallelism=100)
    keys = ["a", "bb", "US/Texas", "jobs"] + [str(i) for i in range(200)]
    assert fallback.instances_of(keys).tolist() == [fallback.instance_of(k) for k in keys]
    assert fallback.key_groups(keys).tolist() == [fallback.key_group(k) for k in keys]


@pytest.mark.parametrize("engine", ["flink", "pyflink"])
@pytest.mark.parametrize(
    ("key_type", "p", "m"), [("string", 6, 128), ("long", 7, 7), ("int", 5, 100), ("string", 300, 512)]
)
def test_surrogates_land_on_their_key_group_and_subtask(engine, key_type, p, m):
    fallback = make_fallback(engine, p, max_parallelism=m, int_type="int" if key_type == "int" else "long")
    table = flink_surrogates(fallback, key_type)
    surrogates = table["surrogate"].tolist()
    assert table.index.tolist() == list(range(m)) and len(set(surrogates)) == m
    assert fallback.key_groups(surrogates).tolist() == list(range(m))
    assert fallback.instances_of(surrogates).tolist() == table["subtask"].tolist() == [g * p // m for g in range(m)]
    if key_type == "string":
        assert all(isinstance(s, str) and s.startswith(SURROGATE_PREFIX) for s in surrogates)
        numbers = [int(s[len(SURROGATE_PREFIX) :]) for s in surrogates]
    else:
        low, high = RESERVED_INTS if key_type == "int" else RESERVED_LONGS
        assert all(isinstance(s, int) and low <= s < high for s in surrogates)
        numbers = [s - low for s in surrogates]
    # each is the first candidate of its key group: no smaller candidate lands there
    candidates = flink_hash._candidates(key_type, 0, max(numbers) + 1)
    first = pd.Series(fallback.key_groups(candidates)).drop_duplicates()
    assert dict(zip(first.to_numpy(), first.index)) == dict(zip(range(m), numbers))


def test_surrogates_reach_every_key_group_of_the_largest_max_parallelism():
    for key_type, int_type in (("int", "int"), ("long", "long")):
        table = flink_surrogates(PyFlinkKeyGroups(1000, 32768, int_type=int_type), key_type)
        assert table["surrogate"].nunique() == 32768 and table["subtask"].nunique() == 1000


def test_surrogates_refuse_other_fallbacks_and_mismatched_int_types():
    with pytest.raises(
        InvalidParameterError, match="'fallback' parameter of flink_surrogates must be a FlinkKeyGroups"
    ):
        flink_surrogates(make_fallback("kafka", 6))
    with pytest.raises(InvalidParameterError, match="'key_type' parameter of flink_surrogates must be one of"):
        flink_surrogates(FlinkKeyGroups(6), "short")
    with pytest.raises(InvalidParameterError, match="is 'int' but the fallback hashes int keys as 'long'"):
        flink_surrogates(FlinkKeyGroups(6), "int")


TAGS = [f"tag{i}" for i in range(600)]


def tag_table(fallback=None, seed=0):
    fallback = fallback or PyFlinkKeyGroups(6, 128)
    targets = np.random.default_rng(seed).integers(0, 6, len(TAGS))
    return RoutingTable("hashtag", fallback, pd.Series(targets, index=pd.Index(TAGS, dtype=object)))


def test_selector_routes_table_keys_to_their_subtask_and_others_to_themselves():
    table = tag_table()
    select = RoutingKeySelector(table, field=1)
    assert select.key_type == "string" and (select.max_parallelism, select.parallelism) == (128, 6)
    assert len(select.routes) == len(table) > 400
    keys = list(table.entries.index)
    routing = [select(("US/Ohio", k, 17)) for k in keys]
    assert all(isinstance(r, str) and r.startswith(SURROGATE_PREFIX) for r in routing)
    assert table.fallback.instances_of(routing).tolist() == table.entries.tolist()
    others = ["jobs", "tbt", "tag600", ""]
    assert [select(("x", k)) for k in others] == others
    # a table key goes to key group start + (its own key group mod size) of its subtask's range
    fallback = table.fallback
    for k in keys:
        groups = key_group_range(fallback, int(table.entries[k]))
        expected = groups.start + fallback.key_group(k) % len(groups)
        assert fallback.key_group(select.routing_key(k)) == expected
    # so a subtask's ~80 table keys spread over its 21 or 22 key groups
    for i in range(6):
        used = {select.routes[k] for k in keys if table.entries[k] == i}
        assert len(used) >= 0.75 * len(key_group_range(fallback, i))


@pytest.mark.parametrize(("field", "record"), [(None, "tag3"), (0, ("tag3", 1)), ("tag", {"tag": "tag3"})])
def test_selector_fields(field, record):
    table = tag_table()
    assert RoutingKeySelector(table, field=field)(record) == RoutingKeySelector(table).routing_key("tag3")
    assert RoutingKeySelector(table, field=lambda r: r[0][::-1])(("3gat",)) == RoutingKeySelector(table)("tag3")


def test_selector_int_tables_keep_the_java_type():
    for int_type, (low, high) in (("long", RESERVED_LONGS), ("int", RESERVED_INTS)):
        fallback = PyFlinkKeyGroups(6, 128, int_type=int_type)
        keys = np.arange(1000, 1300, dtype=np.int64)
        table = RoutingTable("user", fallback, pd.Series(np.arange(300) % 6, index=keys))
        select = RoutingKeySelector(table)
        assert select.key_type == int_type
        routing = [select(int(k)) for k in table.entries.index]
        assert all(type(r) is int and low <= r < high for r in routing)
        assert fallback.instances_of(routing).tolist() == table.entries.tolist()
        assert select(5) == 5


def test_selector_refuses_reserved_and_mistyped_keys():
    select = RoutingKeySelector(tag_table())
    with pytest.raises(
        InvalidParameterError, match=r"operator 'hashtag' got key '\\x00locality:7', whose form is reserved"
    ):
        select(SURROGATE_PREFIX + "7")
    with pytest.raises(InvalidParameterError, match="keys of operator 'hashtag' are Java string values; got int"):
        select(7)
    reserved = RoutingTable("user", FlinkKeyGroups(6), pd.Series({RESERVED_LONGS[0] + 3: 1}))
    with pytest.raises(
        InvalidParameterError, match=r"holds key -9223372036854775805, whose form is reserved .*long values"
    ):
        RoutingKeySelector(reserved)
    long_select = RoutingKeySelector(RoutingTable("user", FlinkKeyGroups(6), pd.Series({5: 1})))
    with pytest.raises(InvalidParameterError, match="reserved for Flink surrogates"):
        long_select(RESERVED_LONGS[1] - 1)
    assert long_select(RESERVED_LONGS[1]) == RESERVED_LONGS[1]


def test_selector_finds_the_table_in_a_configuration_or_a_router(tmp_path):
    table = tag_table()
    topology = Topology.uniform(["location", "hashtag"], 6)
    config = RoutingConfiguration(topology, {"location": RoutingTable("location", table.fallback), "hashtag": table})
    ConfigStore(tmp_path).publish(config, fingerprint="flink-selector")
    router = Router(tmp_path)

    for routing in (config, router, router.snapshot()):
        assert RoutingKeySelector(routing, "hashtag").routes == RoutingKeySelector(table).routes
    with pytest.raises(
        InvalidParameterError,
        match=r"'operator' parameter of RoutingKeySelector must be one of \['hashtag', 'location'\]; got 'tag'",
    ):
        RoutingKeySelector(config, "tag")
    with pytest.raises(InvalidParameterError, match="empty, so its keys' type is unknown; pass key_type"):
        RoutingKeySelector(config, "location")
    assert RoutingKeySelector(config, "location", key_type="string").routes == {}
    with pytest.raises(InvalidParameterError, match="'routing' parameter of RoutingKeySelector must be a RoutingTable"):
        RoutingKeySelector({"hashtag": table}, "hashtag")
    with pytest.raises(InvalidParameterError, match="falls back to KafkaPartitioner; Flink routing keys need"):
        RoutingKeySelector(RoutingTable("t", make_fallback("kafka", 6), pd.Series({"a": 1})))
    with pytest.raises(InvalidParameterError, match="is 'long' but the table holds string keys"):
        RoutingKeySelector(table, key_type="long")


def test_key_by_refuses_a_table_learned_for_java():
    select = RoutingKeySelector(tag_table(FlinkKeyGroups(6, 128)))
    with pytest.raises(InvalidParameterError, match="learned with the 'flink' fallback.*make_fallback\\('pyflink'"):
        select.key_by(object())


def test_only_keys_the_migration_plan_moves_change_routing_key():
    topology = Topology.uniform(["location", "hashtag"], 6)
    old, new = tag_table(seed=1), tag_table(seed=2)
    located = RoutingTable("location", old.fallback)
    configs = [RoutingConfiguration(topology, {"location": located, "hashtag": t}) for t in (old, new)]
    plan = plan_migration(*configs, {"hashtag": pd.Series(1.0, index=TAGS)})
    moved = set(plan.moves["key"])
    assert 0 < len(moved) < len(TAGS)
    before, after = (RoutingKeySelector(c, "hashtag") for c in configs)
    changed = {k for k in TAGS if before.routing_key(k) != after.routing_key(k)}
    assert changed == moved


def test_routing_file_round_trip(tmp_path):
    table = tag_table()
    path = write_routing_file(table, tmp_path / "hashtag.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    assert header == {
        "format": "locality-flink-routing",
        "version": 1,
        "operator": "hashtag",
        "engine": "pyflink",
        "key_type": "string",
        "max_parallelism": 128,
        "parallelism": 6,
        "entries": len(table),
    }
    entries = [json.loads(line) for line in lines[1:]]
    assert [e["key"] for e in entries] == sorted(table.entries.index)
    assert all(e["subtask"] == table.entries[e["key"]] and e["subtask"] == e["key_group"] * 6 // 128 for e in entries)
    assert "\\u0000locality:" in lines[1]  # the NUL is escaped in the file
    loaded = read_routing_file(path, field=0)
    assert loaded.routes == RoutingKeySelector(table).routes and loaded.operator == "hashtag"
    assert loaded(("tag5",)) == RoutingKeySelector(table)("tag5")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hashtag.jsonl"]  # nothing left aside


def test_routing_file_errors(tmp_path):
    path = write_routing_file(tag_table(), tmp_path / "t.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    cases = {
        "not-json": "nope\n",
        "other-format": json.dumps({"format": "csv"}) + "\n",
        "newer": lines[0].replace('"version": 1', '"version": 2') + "\n",
        "other-m": lines[0].replace('"max_parallelism": 128', '"max_parallelism": 256') + "\n" + "\n".join(lines[1:]),
        "short": "\n".join(lines[:-1]),
    }
    messages = {
        "not-json": "cannot read Flink routing file",
        "other-format": "is not a Flink routing file",
        "newer": "version 2; this locality reads <= 1",
        "other-m": "does not match its header",
        "short": "does not match its header",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        with pytest.raises(SerializationError, match=messages[name]):
            read_routing_file(tmp_path / name)


def test_selector_pickles_as_pyflink_ships_it():
    select = RoutingKeySelector(tag_table(), field=1)
    again = pickle.loads(pickle.dumps(select))
    assert again.routes == select.routes and again(("x", "tag9")) == select(("x", "tag9"))
    assert repr(again) == (
        f"RoutingKeySelector(operator='hashtag', engine='pyflink', key_type='string', max_parallelism=128, "
        f"parallelism=6, routes={len(select.routes)})"
    )


def test_docstring_examples():
    assert doctest.testmod(flink_module).failed == doctest.testmod(flink_hash).failed == 0
