"""``locality export``: the file a Flink job loads, from the store's current version."""

from __future__ import annotations

import json
import os
import stat

import pandas as pd
import pytest

from locality.cli import ExitCode, main
from locality.engines.flink import read_routing_file
from locality.hashing import make_fallback
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


@pytest.mark.parametrize("engine", ["flink", "pyflink"])
def test_flink_tables_export_as_the_routing_file(tmp_path, engine, capsys):
    config = publish(tmp_path / "store", engine, max_parallelism=128)
    out = tmp_path / "hashtag.jsonl"
    args = ["export", "--store", str(tmp_path / "store"), "--operator", "hashtag", "--out", str(out), "--json"]
    assert main(args) == ExitCode.OK
    document = json.loads(capsys.readouterr().out)
    assert document["engine"] == engine and document["entries"] == len(config.tables["hashtag"]) > 0
    selector = read_routing_file(out)
    table = config.tables["hashtag"]
    assert selector.fallback == table.fallback and set(selector.routes) == set(table.entries.index)


@pytest.mark.parametrize("engine", ["kafka", "storm"])
def test_tables_a_job_reads_from_the_store_are_not_exported(tmp_path, capsys, engine):
    publish(tmp_path / "store", engine)
    args = ["export", "--store", str(tmp_path / "store"), "--out", str(tmp_path / "x")]
    assert main([*args, "--operator", "hashtag"]) == ExitCode.BAD_INPUT
    error = capsys.readouterr().err
    assert f"fall back to {engine!r}" in error and "LocalityGrouping of jvm/locality-storm" in error
    assert main([*args, "--operator", "tags"]) == ExitCode.BAD_INPUT
    assert "--operator" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_export_writes_only_a_regular_file_outside_the_store(tmp_path, capsys):
    """Never over the store's own files, a device, a FIFO, or through a symbolic link; refused with exit 2."""
    store = tmp_path / "store"
    publish(store, "flink", max_parallelism=128)
    current = (store / "CURRENT").read_bytes()
    os.mkfifo(tmp_path / "fifo")
    os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a device of the test's own: /dev/null's twin
    (tmp_path / "kept.jsonl").write_text("kept\n")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "kept.jsonl")
    refused = {
        store / "CURRENT": "inside the configuration store",
        store / "versions" / "hashtag.jsonl": "inside the configuration store",
        tmp_path / "null": "is a device, not a regular file",
        tmp_path / "fifo": "is a FIFO, not a regular file",
        tmp_path / "link.jsonl": "is a symbolic link",
    }
    for out, says in refused.items():
        args = ["export", "--store", str(store), "--operator", "hashtag", "--out", str(out)]
        assert main(args) == ExitCode.BAD_INPUT, out
        error = capsys.readouterr().err
        assert says in error and str(out) in error and "--out" in error, error
    assert (store / "CURRENT").read_bytes() == current and (tmp_path / "kept.jsonl").read_text() == "kept\n"
    assert (tmp_path / "null").is_char_device() and (tmp_path / "fifo").is_fifo()
    assert not (store / "versions" / "hashtag.jsonl").exists()
