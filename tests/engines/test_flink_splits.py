"""Split keys through Flink routing keys (locality.engines.flink): the selector and the per-server routing files.

Placement is checked with the Python reproduction of Flink's key groups here;
tests/flink/test_flink_splits.py checks the same routing keys with Flink's own jars.
"""

from __future__ import annotations

import json
import logging
import pickle

import numpy as np
import pandas as pd
import pytest

from locality.engines.flink import RoutingKeySelector, read_routing_file, write_routing_file
from locality.errors import InvalidParameterError
from locality.hashing import PyFlinkKeyGroups, make_fallback
from locality.hashing.flink import SURROGATE_PREFIX
from locality.router import Router
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore
from locality.topology import Topology
from tests.engines import key_group_range

TAGS = [f"tag{i}" for i in range(600)]
TOPOLOGY = Topology.uniform(["location", "hashtag"], 3, 2)  # 6 subtasks, subtask i on server s{i mod 3}


def split_config(fallback=None, seed=0) -> tuple[RoutingConfiguration, dict, dict]:
    """Entries for every third tag, and 60 split tags (20 of them with an entry) whose part for server s is
    one of the two subtasks of s, at random."""
    fallback = fallback or PyFlinkKeyGroups(6, 128)
    rng = np.random.default_rng(seed)
    table = RoutingTable("hashtag", fallback, dict(zip(TAGS[::3], rng.integers(0, 6, 200).tolist())))
    entries = table.entries.to_dict()  # those equal to the hash dropped
    split = TAGS[:60:3] + TAGS[1:121:3]
    splits = {k: [s + 3 * int(rng.integers(0, 2)) for s in range(3)] for k in split}
    table = RoutingTable("hashtag", fallback, entries, splits)
    located = RoutingTable("location", fallback)
    return RoutingConfiguration(TOPOLOGY, {"location": located, "hashtag": table}), entries, splits


def test_a_split_key_gets_the_routing_key_of_its_part_on_the_selecting_server():
    config, entries, splits = split_config()
    fallback = config.tables["hashtag"].fallback
    raw_parts = entry_parts = 0
    for position, name in enumerate(TOPOLOGY.servers):
        by_position, by_name = (
            RoutingKeySelector(config, "hashtag", server=position),
            RoutingKeySelector(config, "hashtag", server=name),
        )
        assert by_position.server == by_name.server == position
        for key, plan in splits.items():
            route = by_name.routing_key(key)
            assert route == by_position(key) == by_position.routing_key(key, name) == by_name.routing_key(key, position)
            assert fallback.instance_of(route) == plan[position]  # the part on this server's subtask
            if route == key:  # the part is where Flink's hash puts the key itself: no surrogate needed
                assert key not in entries and fallback.instance_of(key) == plan[position]
                raw_parts += 1
                continue
            assert route.startswith(SURROGATE_PREFIX)
            groups = key_group_range(fallback, plan[position])  # the entries' rule: spread by the key's own group
            assert fallback.key_group(route) == groups.start + fallback.key_group(key) % len(groups)
            if entries.get(key) == plan[position]:  # the part on the key's home subtask is its home state
                assert route == by_name.routes[key]
                entry_parts += 1
        others = [k for k in TAGS if k not in splits]
        assert [by_name(k) for k in others] == [RoutingKeySelector(config, "hashtag").routing_key(k) for k in others]
    assert raw_parts >= 5 and entry_parts >= 3


def test_a_server_taken_from_the_record_and_the_home_routes_without_one(caplog):
    config, entries, splits = split_config(seed=1)
    fixed = {name: RoutingKeySelector(config, "hashtag", server=name) for name in TOPOLOGY.servers}
    from_record = RoutingKeySelector(config, "hashtag", field=1, server=lambda record: record[2])
    records = [("US/Ohio", k, name) for k in TAGS[:150] for name in TOPOLOGY.servers]
    assert [from_record(r) for r in records] == [fixed[r[2]].routing_key(r[1]) for r in records]
    with caplog.at_level(logging.WARNING, logger="locality.engines.flink"):
        home = RoutingKeySelector(config, "hashtag")
        routed = [home.routing_key(k) for k in TAGS]
    fallback = config.tables["hashtag"].fallback
    assert fallback.instances_of(routed).tolist() == config.tables["hashtag"].route_many(TAGS).tolist()
    assert [home.routing_key(k) == k for k in splits] == [k not in entries for k in splits]
    assert [r.getMessage() for r in caplog.records] == [
        "the table of 'hashtag' splits 60 hot keys but the key selector was given no 'server': "
        "their records go whole to their home subtask"
    ]


def test_a_router_or_a_table_alone_and_a_pickled_selector(tmp_path):
    config, _, splits = split_config(seed=2)
    ConfigStore(tmp_path).publish(config, fingerprint="flink-splits")
    table = config.tables["hashtag"]
    want = RoutingKeySelector(config, "hashtag", server="s2")
    for selector in (
        RoutingKeySelector(Router(tmp_path), "hashtag", server="s2"),
        RoutingKeySelector(table, server=2),
        pickle.loads(pickle.dumps(want)),
    ):
        assert [selector.routing_key(k) for k in TAGS] == [want.routing_key(k) for k in TAGS]
    assert RoutingKeySelector(table).n_servers == 3 and RoutingKeySelector(table).servers is None
    assert repr(want) == (
        "RoutingKeySelector(operator='hashtag', engine='pyflink', key_type='string', max_parallelism=128, "
        f"parallelism=6, routes={len(want.routes)}, splits=60, server=2)"
    )


@pytest.mark.parametrize("int_type", ["long", "int"])
def test_integer_split_keys_keep_the_java_type(int_type):
    fallback = PyFlinkKeyGroups(6, 128, int_type=int_type)
    keys = list(range(1000, 1040))
    table = RoutingTable("user", fallback, None, {k: [k % 6, (k + 1) % 6, (k + 2) % 6] for k in keys})
    for server in range(3):
        select = RoutingKeySelector(table, server=server)
        assert select.key_type == int_type
        routes = [select(k) for k in keys]
        assert all(type(r) is int for r in routes)
        assert fallback.instances_of(routes).tolist() == [(k + server) % 6 for k in keys]


def test_one_routing_file_per_server(tmp_path, caplog):
    config, entries, splits = split_config(seed=3)
    fallback = config.tables["hashtag"].fallback
    for name in TOPOLOGY.servers:
        path = write_routing_file(config, tmp_path / f"hashtag.{name}.jsonl", "hashtag", server=name)
        lines = path.read_text(encoding="utf-8").splitlines()
        header, rows = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
        position = TOPOLOGY.servers.index(name)
        assert header["version"] == 1 and header["server"] == name and header["entries"] == len(rows)
        planned = {**entries, **{k: plan[position] for k, plan in splits.items()}}
        # a split key is not listed on a server whose part is where Flink's hash puts the key itself
        listed = {r["key"]: r["subtask"] for r in rows}
        assert listed == {k: s for k, s in planned.items() if k in entries or fallback.instance_of(k) != s}
        assert len(listed) < len(planned)
        selector = RoutingKeySelector(config, "hashtag", server=name)
        loaded = read_routing_file(path)
        assert [loaded.routing_key(k) for k in TAGS] == [selector.routing_key(k) for k in TAGS]
    with caplog.at_level(logging.WARNING, logger="locality.engines.flink"):
        home = write_routing_file(config, tmp_path / "hashtag.jsonl", "hashtag")
    assert "given no 'server'" in caplog.text and "server" not in json.loads(home.read_text().splitlines()[0])
    assert read_routing_file(home).routes == RoutingKeySelector(config, "hashtag").routes
    table_alone = write_routing_file(config.tables["hashtag"], tmp_path / "by-position.jsonl", server=1)
    assert json.loads(table_alone.read_text().splitlines()[0])["server"] == 1
    assert table_alone.read_text().splitlines()[1:] == (tmp_path / "hashtag.s1.jsonl").read_text().splitlines()[1:]


def test_refuses_a_server_it_cannot_place():
    config, _, _ = split_config()
    table = config.tables["hashtag"]
    with pytest.raises(
        InvalidParameterError, match=r"'server' parameter of RoutingKeySelector must be one of \['s0', 's1', 's2'\]"
    ):
        RoutingKeySelector(config, "hashtag", server="s3")
    with pytest.raises(InvalidParameterError, match=r"must be a server position with a routing table alone.*'s1'"):
        RoutingKeySelector(table, server="s1")
    for bad in (3, -1, True, 1.0):
        with pytest.raises(InvalidParameterError, match=r"'server' parameter of RoutingKeySelector must be an int"):
            RoutingKeySelector(config, "hashtag", server=bad)
    from_record = RoutingKeySelector(config, "hashtag", field=0, server=lambda record: record[1])
    split_key = next(iter(table.splits))
    with pytest.raises(InvalidParameterError, match=r"must be one of \['s0', 's1', 's2'\]; got 'nowhere'"):
        from_record((split_key, "nowhere"))
    assert from_record(("tag599", "nowhere")) == "tag599"  # only split keys read the server
    with pytest.raises(InvalidParameterError, match="'server' parameter of write_routing_file must be a server name"):
        write_routing_file(config, "unused.jsonl", "hashtag", server=lambda record: 0)
    reserved = RoutingTable("user", make_fallback("flink", 6), None, {SURROGATE_PREFIX + "3": [0, 1]})
    with pytest.raises(InvalidParameterError, match="whose form is reserved for Flink surrogates"):
        RoutingKeySelector(reserved)
    mixed = RoutingTable("user", make_fallback("flink", 6), pd.Series({"a": 1}), {5: [0, 1]})
    with pytest.raises(InvalidParameterError, match="is 'string' but the table holds int keys"):
        RoutingKeySelector(mixed, key_type="string")
