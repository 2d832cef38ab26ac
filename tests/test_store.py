import json

import pytest

from locality.engines import make_fallback
from locality.errors import StoreError
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore, fingerprint
from locality.topology import Topology

OPS = ["a", "b"]


def config(entry: int) -> RoutingConfiguration:
    topo = Topology.uniform(OPS, 2)
    fb = make_fallback("kafka", 2)
    tables = {
        op: RoutingTable(op, fb, {f"k{i}": (fb.instance_of(f"k{i}") + 1) % 2 for i in range(entry)}) for op in OPS
    }
    return RoutingConfiguration(topo, tables, {"entry": entry})


def test_publish_versions_and_current(tmp_path):
    store = ConfigStore(tmp_path / "store")
    assert store.versions() == [] and store.current_version() is None
    first = store.publish(
        config(1), fingerprint="f1", artifacts={"report.json": {"locality": 0.5}, "load.png": b"\x89PNG"}
    )
    second = store.publish(config(2), fingerprint="f2")
    assert (first.version, first.previous_version, first.created) == (1, None, True)
    assert (second.version, second.previous_version) == (2, 1)
    assert store.versions() == [1, 2] and store.current_version() == 2
    assert store.get().config.tables == config(2).tables
    assert store.get(1).read_json("report.json") == {"locality": 0.5}
    assert (store.get(1).path / "load.png").read_bytes() == b"\x89PNG"
    assert store.get(1).manifest["fingerprint"] == "f1"


def test_same_fingerprint_is_idempotent(tmp_path):
    store = ConfigStore(tmp_path)
    store.publish(config(1), fingerprint="f1")
    again = store.publish(config(1), fingerprint="f1")
    assert (again.version, again.created) == (1, False) and store.versions() == [1]
    store.publish(config(2), fingerprint="f2")
    back = store.publish(config(1), fingerprint="f1")
    # no duplicate version: the existing one becomes current again
    assert (back.version, back.previous_version, back.created) == (1, 2, False)
    assert store.versions() == [1, 2] and store.current_version() == 1


def test_failure_before_the_pointer_moves_keeps_previous_current(tmp_path, monkeypatch):
    store = ConfigStore(tmp_path)
    store.publish(config(1), fingerprint="f1")

    def crash(version):
        raise OSError("killed before CURRENT moved")

    monkeypatch.setattr(store, "_point_current", crash)
    with pytest.raises(OSError, match="killed"):
        store.publish(config(2), fingerprint="f2")
    monkeypatch.undo()
    assert store.current_version() == 1
    assert store.get().config.tables == config(1).tables  # still readable, whole


def test_failure_while_writing_leaves_nothing_visible(tmp_path, monkeypatch):
    store = ConfigStore(tmp_path)
    store.publish(config(1), fingerprint="f1")

    def crash(self, directory):
        (directory / "tables").mkdir(parents=True)
        (directory / "tables" / "00.parquet").write_bytes(b"half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(RoutingConfiguration, "write", crash)
    with pytest.raises(RuntimeError, match="disk full"):
        store.publish(config(2), fingerprint="f2")
    monkeypatch.undo()
    assert store.versions() == [1] and store.current_version() == 1
    assert not list((tmp_path / "versions").glob(".tmp-*"))
    # a rerun after the failure publishes normally
    assert store.publish(config(2), fingerprint="f2").version == 2


def test_killed_run_leftovers_are_cleaned_and_ignored(tmp_path):
    store = ConfigStore(tmp_path)
    store.publish(config(1), fingerprint="f1")
    (tmp_path / "versions" / ".tmp-deadbeef").mkdir()
    assert store.versions() == [1]
    store.publish(config(2), fingerprint="f2")
    assert not (tmp_path / "versions" / ".tmp-deadbeef").exists()


def test_errors_name_the_problem(tmp_path):
    store = ConfigStore(tmp_path)
    with pytest.raises(StoreError, match="has no published version yet"):
        store.get()
    store.publish(config(1), fingerprint="f1")
    with pytest.raises(StoreError, match=r"has no version 7; versions: \[1\]"):
        store.get(7)
    (tmp_path / "CURRENT").write_text("garbage")
    with pytest.raises(StoreError, match="damaged"):
        store.current_version()


def test_fingerprint_depends_on_inputs_and_parameters():
    files = [("/data/a.parquet", 10, 1)]
    assert fingerprint(files, {"alpha": 1.03}) == fingerprint(list(files), {"alpha": 1.03})
    assert fingerprint(files, {"alpha": 1.03}) != fingerprint(files, {"alpha": 1.05})
    assert fingerprint(files, {"alpha": 1.03}) != fingerprint([("/data/a.parquet", 11, 1)], {"alpha": 1.03})
    json.dumps(fingerprint(files, {}))
