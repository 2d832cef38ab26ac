"""The store's fault matrix: real processes publishing through the real ConfigStore, killed, racing, stalled, starved.

Every case checks the same promise, on a local directory and on a bucket of a
real S3 server: the version that was current stays current (or a complete
newer one took its place) and reads whole, and the next publish succeeds
exactly once. Children come from a forkserver that imported
``tests._store_children`` once (fast starts, no Spark threads inherited).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from locality._store_lease import this_process
from locality.cli import ExitCode, main
from locality.errors import SerializationError, StoreBusyError, StoreError
from locality.store import ConfigStore
from tests._store_children import (
    hold_lock,
    make_config,
    publish_after_a_stall,
    publish_forever,
    publish_once,
    publish_range,
    publish_read_only,
    publish_under_file_size_limit,
)
from tests.conftest import trace_keys, trace_path

KILLS = 25
SEED = 20261123


@pytest.fixture(scope="module")
def ctx():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests._store_children"])
    return context


def leftovers(store: ConfigStore) -> list[str]:
    """What interrupted writers left: numbers claimed without a manifest, and (a directory) files being written."""
    unfinished = [f"version {n}" for n, complete in store._numbered().items() if not complete]
    if not store.is_local:
        return unfinished
    root = store.root
    return unfinished + [str(p) for d in [root, *(c for c in root.iterdir() if c.is_dir())] for p in d.glob(".tmp-*")]


def assert_whole(store: ConfigStore, entries: int) -> int:
    """CURRENT names a complete version whose tables are the ones published with its fingerprint; returns it."""
    stored = store.get()
    index = int(stored.manifest["fingerprint"][1:].split(":")[0])
    assert stored.config.tables == make_config(index, entries).tables
    for version in store.versions():  # every listed version is complete: manifest, checksums, tables
        store.get(version).verify()
    return stored.version


def test_kill_9_at_random_moments_of_a_publish(ctx, store_location):
    entries = 5_000
    env = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    store = ConfigStore(store_location, lock_timeout=30)
    started = time.monotonic()
    store.publish(make_config(0, entries), fingerprint="f0")
    window = 4 * (time.monotonic() - started)  # a kill within it lands in one of the child's first few publishes
    rng = np.random.default_rng(SEED)
    killed_mid_write = 0
    next_index = 1
    for _ in range(KILLS):
        before = store.current_version()
        ready = ctx.Event()
        child = ctx.Process(target=publish_forever, args=(store_location, env, next_index, entries, ready))
        child.start()
        assert ready.wait(30)
        time.sleep(rng.uniform(0.0, window))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        assert child.exitcode == -signal.SIGKILL
        killed_mid_write += bool(leftovers(store))
        # The previous version is current and whole, or a complete newer one replaced it.
        assert assert_whole(store, entries) >= before
        next_index += 1
    # The next publish succeeds at once (the dead writer's lease is freed), cleans what the kills left,
    # and the history ends at CURRENT.
    started = time.monotonic()
    result = store.publish(make_config(next_index, entries), fingerprint=f"f{next_index}")
    assert time.monotonic() - started < 20
    assert result.created and store.current_version() == result.version
    assert leftovers(store) == []
    assert assert_whole(store, entries) == result.version
    history = store.history()
    assert history[-1]["version"] == result.version
    assert {e["version"] for e in history} <= set(store.versions())
    # The kills really hit publishes in the middle: some left a half-written version behind.
    assert killed_mid_write >= 1


def test_a_removal_cut_short_is_finished_by_the_next_writer(store_location):
    """A writer killed while it removed a dead writer's unfinished version leaves the claim, so the next one
    knows the folder's writer is gone and removes the rest (a folder without its claim would stay forever)."""
    store = ConfigStore(store_location)
    store.publish(make_config(0, 100), fingerprint="f0")
    dead = {**this_process(), "pid": 2**22 + 1, "pid_start": None}  # above any pid the kernel hands out
    unfinished = "versions/000002"
    store.objects.create(f"{unfinished}/claim.json", json.dumps({"writer": "w", "job": "killed", **dead}).encode())
    store.objects.put(f"{unfinished}/configuration/header.json", b"{}")
    store.objects.put(f"{unfinished}/report.json", b"{}")

    class Killed(BaseException):
        pass

    def kill(*args, **kwargs):
        raise Killed

    # the kill lands after the removal's first step: one object (S3) or one subfolder (a directory) gone
    owner, name = (shutil, "rmtree") if store.is_local else (store.objects, "delete")
    step = getattr(owner, name)
    with pytest.MonkeyPatch.context() as patch, pytest.raises(Killed):

        def first_step(*args, **kwargs):
            step(*args, **kwargs)
            patch.setattr(owner, name, kill)

        patch.setattr(owner, name, first_step)
        store.publish(make_config(1, 100), fingerprint="f1")
    assert leftovers(store) == ["version 2"] and store.current_version() == 1
    result = ConfigStore(store_location, lock_timeout=30).publish(make_config(1, 100), fingerprint="f1")
    assert leftovers(store) == [] and result.version == store.current_version() == 2  # the number is free again
    assert_whole(store, 100)


def test_a_rerun_after_a_kill_between_the_version_and_current_publishes_exactly_once(store_location):
    store = ConfigStore(store_location)
    store.publish(make_config(0, 100), fingerprint="f0")

    def killed_before_current_moves(fingerprint: str) -> None:
        with pytest.MonkeyPatch.context() as patch, pytest.raises(ZeroDivisionError):
            patch.setattr(store, "_point_current", lambda version: 1 / 0)
            store.publish(make_config(int(fingerprint[1:]), 100), fingerprint=fingerprint)

    killed_before_current_moves("f1")  # the version is whole; CURRENT did not move
    assert store.current_version() == 1 and store.versions() == [1, 2]
    rerun = ConfigStore(store_location).publish(make_config(1, 100), fingerprint="f1")
    assert (rerun.version, rerun.created, rerun.current_version) == (2, True, 2)  # adopted, no rollback needed
    assert store.versions() == [1, 2] and [e["version"] for e in store.history()] == [1, 2]
    # a version orphaned by another run is retired by the next publish, never made current
    killed_before_current_moves("f2")
    assert store.publish(make_config(3, 100), fingerprint="f3").version == 4
    assert store.retired() == [3] and store.current_version() == 4
    assert store.publish(make_config(2, 100), fingerprint="f2").version == 5  # its rerun: a version of its own


def test_eighty_concurrent_publishers(ctx, store_location):
    """80 processes publish at once: every publish is in the history once, or failed with exit 75; none broken."""
    env = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    ConfigStore(store_location).publish(
        make_config(1000, 100), fingerprint="f1000", artifacts={"report.json": {"i": 1000}}
    )
    start = ctx.Event()
    children = [ctx.Process(target=publish_once, args=(store_location, env, i, 100, start)) for i in range(80)]
    for child in children:
        child.start()
    start.set()
    for child in children:
        child.join(400)
    codes = [child.exitcode for child in children]
    assert set(codes) <= {0, 75}, codes
    store = ConfigStore(store_location)
    published = {i for i, code in enumerate(codes) if code == 0}
    assert len(published) >= 72  # a 300 s wait for the lease covers the queue on two cores, but for stragglers
    history = store.history()
    assert [e["version"] for e in history] == list(range(1, len(published) + 2))
    fingerprints = [store.get(e["version"]).manifest["fingerprint"] for e in history[1:]]
    assert sorted(fingerprints) == sorted(f"f{i}" for i in published)  # each once, none lost
    for version in store.versions():
        stored = store.get(version)
        stored.verify()
        assert stored.read_json("report.json") == {"i": int(stored.manifest["fingerprint"][1:])}
    assert store.current_version() == len(published) + 1 and leftovers(store) == []


def test_two_concurrent_publishers_make_80_complete_versions(ctx, store_location):
    env = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    children = [ctx.Process(target=publish_range, args=(store_location, env, first, 40, 200)) for first in (0, 1000)]
    for child in children:
        child.start()
    for child in children:
        child.join(300)
    assert [child.exitcode for child in children] == [0, 0]
    store = ConfigStore(store_location)
    assert store.versions() == list(range(1, 81))
    fingerprints = {store.get(v).manifest["fingerprint"] for v in store.versions()}
    assert fingerprints == {f"f{i}" for i in [*range(40), *range(1000, 1040)]}
    for version in store.versions():
        stored = store.get(version)
        stored.verify()
        assert stored.config.tables == make_config(int(stored.manifest["fingerprint"][1:]), 200).tables
        assert stored.read_json("report.json") == {"i": int(stored.manifest["fingerprint"][1:])}
    history = store.history()
    assert [e["version"] for e in history] == list(range(1, 81))
    assert [e["previous"] for e in history] == [None, *range(1, 80)]
    assert store.current_version() == 80 and leftovers(store) == []


def test_a_writer_in_another_process_makes_the_next_wait_then_fail(ctx, store_location, capsys):
    env = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    store = ConfigStore(store_location, lock_timeout=0.5)
    store.publish(make_config(0, 100), fingerprint="f0")
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=hold_lock, args=(store_location, env, ready, release))
    child.start()
    assert ready.wait(30)
    started = time.monotonic()
    busy = f"store busy: held by pid {child.pid} \\(locality optimize, host .*\\) since 20"
    with pytest.raises(StoreBusyError, match=busy):
        store.publish(make_config(1, 100), fingerprint="f1")
    assert time.monotonic() - started >= 0.5  # it waited for the timeout
    assert main(["rollback", "--store", store_location, "--to", "1", "--lock-timeout", "0"]) == ExitCode.BUSY
    err = capsys.readouterr().err
    assert f"store busy: held by pid {child.pid}" in err and err.rstrip().endswith("(option --lock-timeout)")
    assert store.get().config.tables == make_config(0, 100).tables  # readers never wait
    release.set()
    child.join()
    assert store.publish(make_config(1, 100), fingerprint="f1").version == 2


def test_a_writer_stalled_past_its_lease_is_fenced_out(ctx, store_location):
    """Stopped (SIGSTOP) past its lease while another writer publishes, a writer that resumes cannot move CURRENT.

    Its own lease check is off (a stall between the check and the write): the store's conditional write refuses it.
    """
    env = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    store = ConfigStore(store_location, lease_seconds=1.0)
    store.publish(make_config(0, 100), fingerprint="f0")
    ready, resume, results = ctx.Event(), ctx.Event(), ctx.Queue()
    child = ctx.Process(target=publish_after_a_stall, args=(store_location, env, 7, 1.0, ready, resume, results))
    child.start()
    assert ready.wait(30)
    os.kill(child.pid, signal.SIGSTOP)
    try:
        time.sleep(1.5)  # past the stalled writer's lease
        taken_over = ConfigStore(store_location, lock_timeout=10).publish(make_config(1, 100), fingerprint="f1")
        assert taken_over.version == 2 and store.current_version() == 2
    finally:
        os.kill(child.pid, signal.SIGCONT)  # first: a stopped waiter cannot acknowledge the event (set would hang)
        resume.set()
    kind, message = results.get(timeout=60)
    child.join(30)
    assert kind == "LeaseLostError" and "lost the lease" in message, message
    # CURRENT and the new writer's version are untouched; the stalled writer's version is never current
    assert store.current_version() == 2 and store.get().config.tables == make_config(1, 100).tables
    store.get(2).verify()
    assert [e["version"] for e in store.history()] == [1, 2]
    assert store.publish(make_config(8, 100), fingerprint="f8").current_version == 4
    assert store.retired() == [3]


def test_a_write_that_fails_midway_publishes_nothing(ctx, tmp_path):
    store = ConfigStore(tmp_path)
    store.publish(make_config(0, 100), fingerprint="f0")
    results = ctx.Queue()
    # 200 kB per file: the manifest and small files fit, the 20,000-entry tables (~300 kB) do not.
    child = ctx.Process(target=publish_under_file_size_limit, args=(str(tmp_path), 1, 20_000, 200_000, results))
    child.start()
    kind, message = results.get(timeout=60)
    child.join()
    assert kind == "StoreError"
    assert "File too large" in message and "nothing was published" in message and str(tmp_path) in message
    assert store.versions() == [1] and store.current_version() == 1
    assert store.get().config.tables == make_config(0, 100).tables
    assert leftovers(store) == []  # the failing writer removed its own half-written version
    assert store.publish(make_config(1, 20_000), fingerprint="f1").version == 2  # the next run succeeds


@pytest.fixture
def open_dir():
    """A directory another user can traverse (pytest's tmp_path is private to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="locality-store-"))
    path.chmod(0o755)
    yield path
    for p in [path, *path.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)
    shutil.rmtree(path)


def test_a_read_only_store_fails_clearly_and_stays_readable(ctx, open_dir):
    root = open_dir / "store"
    store = ConfigStore(root)
    store.publish(make_config(0, 100), fingerprint="f0")
    read_only = stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
    for path in (root, root / "versions"):
        path.chmod(read_only)
    results = ctx.Queue()
    child = ctx.Process(target=publish_read_only, args=(str(root), 1, str(trace_path("geotweets")), results))
    child.start()
    (check_kind, check_message), (publish_kind, publish_message), (code, stderr) = results.get(timeout=120)
    child.join()
    assert check_kind == "StoreError" and f"the store {root} is not writable" in check_message
    assert publish_kind == "StoreError" and str(root) in publish_message
    assert code == ExitCode.BAD_INPUT and f"the store {root} is not writable" in stderr and "Traceback" not in stderr, (
        stderr
    )
    assert store.versions() == [1] and store.get().config.tables == make_config(0, 100).tables
    for path in (root, root / "versions"):
        path.chmod(0o755)
    assert store.publish(make_config(1, 100), fingerprint="f1").version == 2


@pytest.mark.parametrize("content", ["garbage\n", "7\n", ""])
def test_current_holding_garbage_or_a_missing_version(tmp_path, capsys, content):
    store = ConfigStore(tmp_path)
    store.publish(make_config(0, 100), fingerprint="f0")
    (tmp_path / "CURRENT").write_text(content)
    expected = "is not a version number" if content != "7\n" else "names version 7, which the store does not have"
    with pytest.raises(StoreError, match=expected):
        store.get()
    assert main(["show", "--store", str(tmp_path)]) == ExitCode.BAD_INPUT
    out, err = capsys.readouterr()
    assert expected in err and str(tmp_path / "CURRENT") in err and "current DAMAGED" in out
    assert "Traceback" not in err
    assert store.get(1).config.tables == make_config(0, 100).tables  # the version itself is untouched
    # the next publish repairs CURRENT and records where it came from
    assert store.publish(make_config(1, 100), fingerprint="f1").version == 2
    assert store.current_version() == 2 and store.history()[-1]["version"] == 2


def test_a_truncated_table_in_the_current_version_is_named(tmp_path, capsys):
    store = ConfigStore(tmp_path)
    store.publish(make_config(0, 500), fingerprint="f0")
    store.publish(make_config(1, 500), fingerprint="f1")
    table = store.get().path / "configuration" / "tables" / "01.parquet"
    table.write_bytes(table.read_bytes()[:300])
    with pytest.raises(SerializationError, match=f"{table}.*truncated"):
        _ = store.get().config  # what the Router reads
    assert main(["show", "--store", str(tmp_path)]) == ExitCode.BAD_INPUT
    _, err = capsys.readouterr()
    assert str(table) in err and "Traceback" not in err
    keys = ",".join(trace_keys("flights"))
    args = ["evaluate", str(trace_path("flights")), "--keys", keys, "--store", str(tmp_path), "-q"]
    assert main(args) == ExitCode.BAD_INPUT  # fails before Spark starts
    _, err = capsys.readouterr()
    assert str(table) in err
    # a damaged version cannot be made current, the previous one can, explicitly
    with pytest.raises(SerializationError, match=str(table)):
        store.rollback(2)
    assert main(["rollback", "--store", str(tmp_path), "--to", "1", "--reason", "table 01 truncated"]) == 0
    assert store.current_version() == 1 and store.get().config.tables == make_config(0, 500).tables
    assert store.history()[-1] == {**store.history()[-1], "version": 1, "action": "rollback"}
    assert store.publish(make_config(2, 500), fingerprint="f2").version == 3
