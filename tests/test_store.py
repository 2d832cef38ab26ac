import json
import os
import socket
import threading
import time

import pytest

from locality.errors import StoreBusyError, StoreError
from locality.hashing import make_fallback
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


def test_same_fingerprint_is_idempotent_and_never_rolls_back(tmp_path):
    store = ConfigStore(tmp_path)
    store.publish(config(1), fingerprint="f1")
    again = store.publish(config(1), fingerprint="f1")
    assert (again.version, again.created, again.current_version) == (1, False, 1) and store.versions() == [1]
    store.publish(config(2), fingerprint="f2")
    back = store.publish(config(1), fingerprint="f1")
    # no duplicate version, and no silent rollback: CURRENT stays at the newer version
    assert (back.version, back.previous_version, back.created, back.current_version) == (1, 2, False, 2)
    assert store.versions() == [1, 2] and store.current_version() == 2
    assert [e["version"] for e in store.history()] == [1, 2]


def test_rollback_is_explicit_and_recorded(tmp_path):
    store = ConfigStore(tmp_path, job="test")
    for i in (1, 2, 3):
        store.publish(config(i), fingerprint=f"f{i}")
    result = store.rollback(1, reason="version 3 sends ORD to one instance")
    assert (result.version, result.previous_version, result.current_version) == (1, 3, 1)
    assert store.current_version() == 1 and store.get().config.tables == config(1).tables
    history = store.history()
    assert [(e["version"], e["previous"], e["action"]) for e in history] == [
        (1, None, "publish"),
        (2, 1, "publish"),
        (3, 2, "publish"),
        (1, 3, "rollback"),
    ]
    assert history[-1]["reason"] == "version 3 sends ORD to one instance"
    with pytest.raises(StoreError, match=r"has no version 9; versions: \[1, 2, 3\]"):
        store.rollback(9)
    assert store.current_version() == 1


def test_a_second_writer_waits_then_fails_naming_the_holder(tmp_path):
    holder = ConfigStore(tmp_path, job="locality optimize")
    waiter = ConfigStore(tmp_path, lock_timeout=0.3)
    outcome = {}
    with holder.lock():
        thread = threading.Thread(target=lambda: outcome.update(error=_publish_error(waiter)))
        thread.start()
        thread.join()
    assert isinstance(outcome["error"], StoreBusyError)
    assert f"store busy: held by pid {os.getpid()} (locality optimize" in str(outcome["error"])  # the same process
    assert "since 20" in str(outcome["error"]) and "wait longer: lock_timeout" in str(outcome["error"])
    assert outcome["error"].parameter == "lock_timeout"  # the command line names its option (--lock-timeout)
    assert waiter.versions() == []
    # once released, the lease says so and the waiter publishes
    assert json.loads((tmp_path / "LEASE").read_text())["released"] is True
    assert waiter.publish(config(1), fingerprint="f1").version == 1


def test_a_waiting_writer_proceeds_when_the_holder_finishes(tmp_path):
    holder, waiter = ConfigStore(tmp_path), ConfigStore(tmp_path, lock_timeout=30)
    results = []
    with holder.lock():
        thread = threading.Thread(target=lambda: results.append(waiter.publish(config(2), fingerprint="f2")))
        thread.start()
        holder.publish(config(1), fingerprint="f1")  # re-entrant for the holder
        time.sleep(0.2)
        assert results == []  # still waiting
    thread.join()
    assert results[0].version == 2 and store_history_versions(tmp_path) == [1, 2]


def store_history_versions(root):
    return [e["version"] for e in ConfigStore(root).history()]


def _publish_error(store):
    try:
        store.publish(config(1), fingerprint="f1")
    except StoreError as exc:
        return exc
    return None


def test_job_state_is_written_only_under_the_lease(tmp_path):
    store = ConfigStore(tmp_path)
    with pytest.raises(RuntimeError, match="needs the store's lease"):
        store.write_state("decisions/w.json", b"{}")
    with store.lock():
        store.write_state("decisions/w.json", b"{}")
    assert (tmp_path / "decisions" / "w.json").read_text() == "{}"
    assert not list((tmp_path / "decisions").glob(".tmp-*"))


def test_an_unrecorded_move_of_current_is_recorded_by_the_next_writer(tmp_path):
    store = ConfigStore(tmp_path)
    store.publish(config(1), fingerprint="f1")
    store.publish(config(2), fingerprint="f2")
    (tmp_path / "CURRENT").write_text("1\n")  # as a writer killed between CURRENT and the history would leave it
    with store.lock():
        pass
    assert store.history()[-1]["version"] == 1 and store.history()[-1]["action"] == "recorded"
    # a history line a crash cut short is skipped, and the next line starts on its own
    with open(tmp_path / "history.jsonl", "a") as fh:
        fh.write('{"version": 3, "prev')
    store.publish(config(3), fingerprint="f3")
    assert [e["version"] for e in store.history()] == [1, 2, 1, 3]


def test_the_store_path_must_be_a_directory(tmp_path):
    path = tmp_path / "store.txt"
    path.write_text("not a store")
    with pytest.raises(StoreError, match=f"the store {path} is a file, not a directory"):
        ConfigStore(path).check_writable()
    with pytest.raises(StoreError, match="is a file, not a directory"):
        ConfigStore(path).publish(config(1), fingerprint="f1")
    with pytest.raises(StoreError, match=f"cannot be created: {path} is a file"):
        ConfigStore(path / "sub").check_writable()


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

    put = store.objects.put

    def put_until_the_disk_fills(name, data):
        if name.endswith("00.parquet"):
            raise OSError("disk full")
        return put(name, data)

    monkeypatch.setattr(store.objects, "put", put_until_the_disk_fills)
    with pytest.raises(OSError, match="disk full"):
        store.publish(config(2), fingerprint="f2")
    monkeypatch.undo()
    assert store.versions() == [1] and store.current_version() == 1
    # what the failed write wrote (its claim included) is gone: the number is free again
    assert sorted(p.name for p in (tmp_path / "versions").iterdir()) == ["000001"]
    # a rerun after the failure publishes normally
    assert store.publish(config(2), fingerprint="f2").version == 2


def test_killed_run_leftovers_are_cleaned_and_ignored(tmp_path):
    store = ConfigStore(tmp_path)
    store.publish(config(1), fingerprint="f1")
    dead = 2**22 + 1  # above any pid the kernel hands out (pid_max is at most 2**22)
    leftover = tmp_path / "versions" / f".tmp-{socket.gethostname()}-{dead}-{'d' * 32}"
    leftover.write_bytes(b"half a file")
    elsewhere = tmp_path / "versions" / f".tmp-another-host-1-{'e' * 32}"  # its writer may live: kept
    older = tmp_path / "versions" / ".tmp-0123"  # a locality from before the lease left it: removed
    older.mkdir()
    elsewhere.write_bytes(b"half a file")
    assert store.versions() == [1]
    store.publish(config(2), fingerprint="f2")
    assert not leftover.exists() and elsewhere.exists() and not older.exists()


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
