"""``locality export --server``: one Flink file per server for a table that splits hot keys.

Each file is read back (``read_routing_file``) and must route every split key
to its part on the file's server and every other key as the published table does.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from locality.cli import ExitCode, cli
from locality.engines.flink import read_routing_file
from locality.hashing import make_fallback
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore
from locality.topology import Topology

TAGS = [f"tag{i}" for i in range(600)]
TOPOLOGY = Topology.uniform(["location", "hashtag"], 3, 2)  # 6 instances, instance i on server s{i mod 3}
ENGINES = {"flink": {"max_parallelism": 128}, "pyflink": {"max_parallelism": 128}}


def publish(root, engine: str, seed: int = 0) -> RoutingConfiguration:
    """Entries for 30 cities and every third tag, and 60 split tags (20 of them with an entry) whose part on
    server s is one of the two instances of s, at random; published as the store's current version."""
    rng = np.random.default_rng(seed)
    fallback = make_fallback(engine, 6, **ENGINES[engine])
    entries = RoutingTable("hashtag", fallback, dict(zip(TAGS[::3], rng.integers(0, 6, 200).tolist()))).entries
    split = TAGS[:60:3] + TAGS[1:121:3]
    splits = {k: [s + 3 * int(rng.integers(0, 2)) for s in range(3)] for k in split}
    tables = {
        "location": RoutingTable("location", fallback, {f"city{i}": i % 6 for i in range(30)}),  # no split keys
        "hashtag": RoutingTable("hashtag", fallback, entries, splits),
    }
    config = RoutingConfiguration(TOPOLOGY, tables)
    ConfigStore(root).publish(config, fingerprint=f"{engine}-splits")
    return config


def export(root, out, *args: str, code: int = ExitCode.OK):
    """Run ``locality export`` in-process on the hashtag table; check its exit code."""
    command = ["export", "--store", str(root), "--operator", "hashtag", "--out", str(out), *args]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == code, result.output
    return result


def instances(engine: str, path, keys: list) -> list[int]:
    """Where the file read back sends each key: the Flink subtask of its routing key."""
    selector = read_routing_file(path)
    return selector.fallback.instances_of([selector.routing_key(k) for k in keys]).tolist()


@pytest.mark.parametrize("engine", list(ENGINES))
def test_one_file_per_server_routes_split_keys_to_their_part_there(tmp_path, engine):
    config = publish(tmp_path / "store", engine)
    table = config.tables["hashtag"]
    others = [k for k in TAGS if k not in table.splits]
    for position, name in enumerate(TOPOLOGY.servers):
        out = tmp_path / f"hashtag.{name}"
        document = json.loads(export(tmp_path / "store", out, "--server", name, "--json").stdout)
        assert document["server"] == name and document["split_keys"] == 60 and document["warning"] is None
        routed = dict(zip(TAGS, instances(engine, out, TAGS)))
        assert {k: routed[k] for k in table.splits} == {k: plan[position] for k, plan in table.splits.items()}
        assert [routed[k] for k in others] == table.route_many(others).tolist()
        # the parts differ from the home routes on this server for some split keys: the file is per server
        assert sum(routed[k] != table.route(k) for k in table.splits) >= 10
        by_position = tmp_path / f"hashtag.{position}"
        assert "as seen from server" in export(tmp_path / "store", by_position, "--server", str(position)).output
        assert by_position.read_bytes() == out.read_bytes()


@pytest.mark.parametrize("engine", list(ENGINES))
def test_without_server_split_keys_route_home_and_the_output_says_so(tmp_path, engine):
    config = publish(tmp_path / "store", engine, seed=3)
    table = config.tables["hashtag"]
    result = export(tmp_path / "store", tmp_path / "text.out")
    assert "warning: 'hashtag' splits 60 hot keys and no --server was given" in result.stdout
    assert "one file per server with --server (servers: s0, s1, s2)" in result.stdout
    document = json.loads(export(tmp_path / "store", tmp_path / "hashtag.out", "--json").stdout)
    assert document["split_keys"] == 60 and document["server"] is None and "--server" in document["warning"]
    assert instances(engine, tmp_path / "hashtag.out", TAGS) == table.route_many(TAGS).tolist()
    assert (tmp_path / "hashtag.out").read_bytes() == (tmp_path / "text.out").read_bytes()


def test_a_table_without_split_keys_routes_alike_from_every_server(tmp_path):
    config = publish(tmp_path / "store", "flink", seed=4)
    args = ["export", "--store", str(tmp_path / "store"), "--operator", "location", "--json"]
    whole = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "whole")])
    seen = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "s2"), "--server", "s2"])
    assert whole.exit_code == seen.exit_code == ExitCode.OK
    assert json.loads(seen.stdout)["split_keys"] == 0 and json.loads(seen.stdout)["server"] == "s2"
    assert json.loads(whole.stdout)["warning"] is None and "warning" not in whole.stderr
    cities = [f"city{i}" for i in range(40)]
    routes = config.tables["location"].route_many(cities).tolist()
    assert instances("flink", tmp_path / "whole", cities) == instances("flink", tmp_path / "s2", cities) == routes


@pytest.mark.parametrize("engine", list(ENGINES))
def test_a_server_not_in_the_topology_is_refused(tmp_path, engine):
    publish(tmp_path / "store", engine)
    for bad in ("s9", "3", "-1", "S1"):
        result = export(tmp_path / "store", tmp_path / "x", "--server", bad, code=ExitCode.BAD_INPUT)
        assert "--server" in result.output and "['s0', 's1', 's2']" in result.output
        assert f"{bad!r} is not a server of version 1" in result.output
    assert not (tmp_path / "x").exists()


def test_numeric_server_names_are_taken_as_names_only(tmp_path):
    topology = Topology(["1", "0"], ["location", "hashtag"], {"location": ["1", "0"], "hashtag": ["1", "0"]})
    fallback = make_fallback("flink", 2, **ENGINES["flink"])
    table = RoutingTable("hashtag", fallback, None, {"hot": [0, 1]})
    ConfigStore(tmp_path / "store").publish(
        RoutingConfiguration(topology, {"location": RoutingTable("location", fallback), "hashtag": table}),
        fingerprint="numeric",
    )
    export(tmp_path / "store", tmp_path / "one", "--server", "1")  # the name "1": position 0
    assert instances("flink", tmp_path / "one", ["hot"]) == [0]
    result = export(tmp_path / "store", tmp_path / "x", "--server", "2", code=ExitCode.BAD_INPUT)
    assert "(a name, no position: a server name is a number)" in result.output
