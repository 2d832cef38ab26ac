"""``locality export``: the file a Storm or Flink job loads, from the store's current version."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from locality.cli import EXIT_ERROR, EXIT_OK, main
from locality.engines import make_fallback
from locality.engines.flink import read_routing_file
from locality.engines.storm import read_grouping_file
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore
from locality.topology import Topology

ENTRIES = {"#jazz": 2, "#art": 0, "tab\tkey": 5, "Zürich": 3}


def publish(root, engine: str, **params) -> RoutingConfiguration:
    topology = Topology.uniform(["location", "hashtag"], 6)
    fallbacks = {op: make_fallback(engine, 6, **params) for op in topology.operators}
    tables = {
        "location": RoutingTable("location", fallbacks["location"]),
        "hashtag": RoutingTable("hashtag", fallbacks["hashtag"], pd.Series(ENTRIES)),
    }
    config = RoutingConfiguration(topology, tables)
    ConfigStore(root).publish(config, fingerprint=engine)
    return config


def test_storm_tables_export_as_the_grouping_file(tmp_path, capsys):
    config = publish(tmp_path / "store", "storm")
    out = tmp_path / "hashtag.routes"
    assert (
        main(["export", "--store", str(tmp_path / "store"), "--operator", "hashtag", "--out", str(out), "--json"])
        == EXIT_OK
    )
    document = json.loads(capsys.readouterr().out)
    assert document["engine"] == "storm" and document["entries"] == len(config.tables["hashtag"]) > 0
    assert read_grouping_file(out) == config.tables["hashtag"]


@pytest.mark.parametrize("engine", ["flink", "pyflink"])
def test_flink_tables_export_as_the_routing_file(tmp_path, engine):
    config = publish(tmp_path / "store", engine, max_parallelism=128)
    out = tmp_path / "hashtag.jsonl"
    assert main(["export", "--store", str(tmp_path / "store"), "--operator", "hashtag", "--out", str(out)]) == EXIT_OK
    selector = read_routing_file(out)
    table = config.tables["hashtag"]
    assert selector.fallback == table.fallback and set(selector.routes) == set(table.entries.index)


def test_tables_a_router_serves_are_not_exported(tmp_path, capsys):
    publish(tmp_path / "store", "kafka")
    args = ["export", "--store", str(tmp_path / "store"), "--out", str(tmp_path / "x")]
    assert main([*args, "--operator", "hashtag"]) == EXIT_ERROR
    assert "fall back to 'kafka'" in capsys.readouterr().err
    assert main([*args, "--operator", "tags"]) == EXIT_ERROR
    assert "--operator" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
