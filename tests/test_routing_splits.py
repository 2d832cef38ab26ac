"""Split keys in published tables: routing by neighbour server, storage, evaluation, migration, rebalancing."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from locality.errors import InvalidParameterError, SerializationError
from locality.evaluation import evaluate
from locality.graph import build_key_graph
from locality.hashing.kafka import KafkaPartitioner
from locality.migration import plan_migration
from locality.rebalance.tables import rebalance_configuration
from locality.router import Router
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore
from locality.topology import Topology

OPS = ["user", "tag"]


def config_with(splits: dict[str, dict] | None = None, entries: dict[str, dict] | None = None) -> RoutingConfiguration:
    """Three servers, two instances of each operator per server (instance i on server i % 3)."""
    topology = Topology.uniform(OPS, 3, 2)
    tables = {op: RoutingTable(op, KafkaPartitioner(6), (entries or {}).get(op), (splits or {}).get(op)) for op in OPS}
    return RoutingConfiguration(topology, tables)


def test_a_split_key_follows_the_server_it_is_sent_from_and_stays_home_without_one():
    config = config_with({"tag": {"hot": [0, 4, 5]}}, {"user": {"a": 0, "b": 1, "c": 2}, "tag": {"hot": 3}})
    assert config.route("tag", "hot") == 3  # home: its entry
    assert [config.route("tag", "hot", s) for s in range(3)] == [0, 4, 5]
    assert config.route("tag", "hot", "s1") == 4  # a server name works too
    assert config.route("tag", "cold", 2) == KafkaPartitioner(6).instance_of("cold")  # others ignore the server
    keys = np.array(["hot", "cold", "hot", "hot"], dtype=object)
    servers = np.array([2, 0, 0, 1])
    assert config.route_many("tag", keys, servers).tolist() == [
        config.route("tag", k, s) for k, s in zip(keys, servers)
    ]
    # whole tuples: the tag's server is the one of the user's instance (instance i on server i % 3)
    routes = config.route_rows({"user": ["a", "b", "c"], "tag": ["hot", "hot", "hot"]})
    assert routes["user"].tolist() == [0, 1, 2] and routes["tag"].tolist() == [0, 4, 5]


def test_a_split_key_of_the_first_operator_follows_the_next_keys_home():
    config = config_with({"user": {"u": [3, 1, 2]}}, {"tag": {"x": 1, "y": 5}})
    routes = config.route_rows({"user": ["u", "u"], "tag": ["x", "y"]})
    assert routes["user"].tolist() == [1, 2]  # x on instance 1 (server 1), y on 5 (server 2)


def test_bad_split_plans_and_servers_are_named():
    with pytest.raises(InvalidParameterError, match="'hot' of 'tag'"):
        config_with({"tag": {"hot": [0, 9, 1]}})
    with pytest.raises(InvalidParameterError, match="for 2 servers; the topology has 3"):
        config_with({"tag": {"hot": [0, 1]}})
    with pytest.raises(InvalidParameterError, match="all strings or all integers"):
        config_with({"tag": {"hot": [0, 1, 2], 7: [0, 1, 2]}})
    config = config_with({"tag": {"hot": [0, 4, 5]}})
    with pytest.raises(InvalidParameterError, match=r"'server' of a split key of 'tag'.*\[0, 2\]"):
        config.route("tag", "hot", 3)
    with pytest.raises(InvalidParameterError, match="unknown server 's9'"):
        config.route("tag", "hot", "s9")
    with pytest.raises(InvalidParameterError, match="one server per key"):
        config.route_many("tag", ["hot", "x"], np.array([0]))


def test_split_plans_survive_json_and_parquet_and_raise_the_format_version(tmp_path):
    config = config_with({"tag": {"hot": [0, 4, 5], "warm": [1, 1, 2]}}, {"user": {"a": 3}})
    assert json.loads(config.to_json())["format_version"] == 2
    assert json.loads(config_with(entries={"user": {"a": 3}}).to_json())["format_version"] == 1
    assert RoutingConfiguration.from_json(config.to_json()) == config
    config.write(tmp_path)
    assert RoutingConfiguration.read(tmp_path) == config
    long = pd.read_parquet(tmp_path / "tables" / "01.splits.parquet")  # what a JVM job loads
    assert long.shape == (6, 4) and set(long.columns) == {"key", "server_index", "server", "instance"}
    hot = long[long.key == "hot"].sort_values("server_index")
    assert hot.instance.tolist() == [0, 4, 5] and hot.server.tolist() == ["s0", "s1", "s2"]
    # a reader of an older format refuses a newer document instead of routing split keys whole
    doc = json.loads(config.to_json())
    doc["format_version"] = 3
    with pytest.raises(SerializationError, match="format version 3"):
        RoutingConfiguration.from_json(json.dumps(doc))


def test_a_router_serves_split_keys_of_the_version_in_force(tmp_path):
    store = ConfigStore(tmp_path)
    store.publish(config_with({"tag": {"hot": [0, 4, 5]}}), fingerprint="v1")
    with Router(tmp_path) as router:
        assert [router.route("tag", "hot", s) for s in ("s0", "s1", "s2")] == [0, 4, 5]
        assert router.route_many("tag", ["hot", "hot"], np.array([1, 2])).tolist() == [4, 5]


def test_evaluation_routes_split_keys_by_their_neighbour():
    """A hot tag sent from every server: split over one instance per server, all its hops stay local."""
    users = [f"u{i}" for i in range(6)]
    config = config_with({"tag": {"hot": [3, 1, 2]}}, {"user": {u: i for i, u in enumerate(users)}})
    trace = pd.DataFrame({"user": users * 10, "tag": ["hot"] * 60})
    report = evaluate(trace, config)
    assert report.optimized.locality == 1.0
    assert report.optimized.instance_loads["tag"] == [0, 20, 20, 20, 0, 0]  # three parts, one per server
    whole = evaluate(trace, config_with(None, {"user": {u: i for i, u in enumerate(users)}}))
    assert whole.optimized.locality == pytest.approx(1 / 3)


def test_ending_a_split_folds_its_partials_home_unless_they_are_merged_downstream():
    before = config_with({"tag": {"hot": [0, 4, 5]}}, {"tag": {"hot": 3}})
    after = config_with(None, {"tag": {"hot": 3}})
    state = {"tag": pd.Series({"hot": 40.0})}
    plan = plan_migration(before, after, state)
    moves = plan.moves_of("tag").sort_values("source")
    # the partials on 0, 4 and 5 fold into 3, which held a partial too: a quarter of the state each
    assert moves[["key", "source", "target"]].values.tolist() == [["hot", 0, 3], ["hot", 4, 3], ["hot", 5, 3]]
    assert moves["state"].tolist() == [10.0, 10.0, 10.0]
    assert plan_migration(before, after, state, split_merge="downstream").moved_keys == 0
    # a re-planned split folds only the part it gives up
    replanned = config_with({"tag": {"hot": [0, 4, 4]}}, {"tag": {"hot": 3}})
    assert plan_migration(before, replanned, state).moves_of("tag")[["source", "target"]].values.tolist() == [[5, 3]]
    assert plan_migration(before, before, state).moved_keys == 0


def test_rebalancing_splits_the_hot_key_locally_and_keeps_it_split_while_seen():
    """A burst tag used by users on every server: split by the users' servers, its hops stay local."""
    rng = np.random.default_rng(0)
    users = [f"u{i}" for i in range(60)]
    config = config_with(entries={"user": {u: i % 6 for i, u in enumerate(users)}})
    tags = [f"t{i}" for i in range(60)]
    rows = pd.DataFrame({"user": rng.choice(users, 3000), "tag": rng.choice(tags, 3000)})
    burst = pd.DataFrame({"user": np.repeat(users, 20), "tag": "burst"})  # 1200 rows: 3x an instance's share
    window = pd.concat([rows, burst], ignore_index=True)
    pairs = window.groupby(["user", "tag"]).size().rename("weight").reset_index()
    graph = build_key_graph(OPS, [pairs.rename(columns={"user": "key0", "tag": "key1"})])
    loads = {op: window[op].value_counts().astype(float) for op in OPS}
    options = {"graph": graph, "method": "local", "theta_max": 0.1}
    new, _, _ = rebalance_configuration(config, loads, **options, split_hot_keys=True, split_share=0.5)
    assert "burst" in new.tables["tag"].splits
    report = evaluate(window, new)
    whole = evaluate(window, rebalance_configuration(config, loads, **options)[0])
    assert report.optimized.hop_locality["user->tag"] > whole.optimized.hop_locality["user->tag"]
    assert report.optimized.imbalance["tag"] < whole.optimized.imbalance["tag"]
    # every hop of the split key reaches one of its parts
    routes = new.route_rows({op: window[op].to_numpy(dtype=object) for op in OPS})
    hits = routes["tag"][window["tag"].to_numpy() == "burst"]
    assert set(hits.tolist()) <= set(new.tables["tag"].splits["burst"])
    # the next window sees the tag again: it stays split; a window without it ends the split (home)
    again, _, _ = rebalance_configuration(new, loads, **options, split_hot_keys=True)
    assert "burst" in again.tables["tag"].splits
    quiet = {op: rows[op].value_counts().astype(float) for op in OPS}
    done, _, _ = rebalance_configuration(new, quiet, **options, split_hot_keys=True)
    assert "burst" not in done.tables["tag"].splits
    with pytest.raises(
        InvalidParameterError, match="locality-aware rebalancer: the .method. parameter of rebalance_configuration"
    ):
        rebalance_configuration(config, loads, method="mixed", split_hot_keys=True)
