"""Readers on other servers ride out an outage of the object store, and follow it within a poll once it is back.

Five servers that share only the network (``Testbed(private_files=True)``, 1 Gb/s links): servers 0 and 1
each run an object store (the S3 server of ``testbed.s3server``, its objects in that server's own files), 2
is a gateway that publishes (with the library, as ``locality reconfigure`` does) and runs ``locality
optimize`` during each outage, 3 runs a Python reader of each store (``locality.router.Router`` on the
store's ``s3://`` URI, in a child process: ``_outage_reader.py``) and 4 a Java reader of each
(``io.locality.store.ScheduleFollower`` on the same URI: ``FollowSchedule.java``, run by Java's source
launcher against locality-core, with locality-kafka-streams for the tables' Kafka fallback hash). Every
reader routes keys at points the schedule has sealed (records whose version is settled) every 200 ms, and
waits for the next point past the seal as a record does.

Two outages of at least 30 s each, one per store, side by side (the second begins :data:`STAGGER_SECONDS`
after the first, so that the two stores' returns do not meet), while the readers run: the first store's S3
server's process killed, then started again on the same address with its data; the second store's server's
link dropped with ``tc`` (:meth:`testbed.network.Testbed.drop_link`), then restored. Checked, for each:

- the readers keep serving: lines logged throughout the outage, every key at every sealed point routed
  as the version in force there routes it (before, during and after), no exception, no reader exits;
- neither ever replaces what it knows by an empty, older or unreadable schedule or version (the seal,
  the schedule's entries and the Python router's version never move back);
- ``locality optimize`` in the gateway exits 75 naming the store, and the store is whole after (the same
  versions, history and schedule, the current version verified against its manifest);
- once the store answers again, a new version published and scheduled from the seal (then sealed further)
  is picked up by both readers within one poll interval (plus the version's load): the delays are printed.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from locality.store import ConfigStore
from testbed import Server, Testbed
from testbed.jvm import classpath, java
from testbed.s3server import S3Server, object_store
from tests._store_children import make_config
from tests.conftest import REPO

HERE = Path(__file__).resolve().parent
BUCKET = "locality"
STORE = f"s3://{BUCKET}/outage"
#: Seconds between two reads of the store by a reader: the Router's ``poll_interval``, the follower's ``pollInterval``.
POLL_SECONDS = 2.0
#: What a pick-up may take beyond one poll: reading and checking the new version (manifest, tables) on a
#: machine whose two cores are shared with other work.
LOAD_SECONDS = 2.0
#: How long each outage lasts at least (the writer may take longer to give up behind a dropped link).
OUTAGE_SECONDS = 30.0
#: How long after the first outage the second begins.
STAGGER_SECONDS = 5.0
#: Bounds (seconds): the readers' start (a JVM compiling its source on a loaded machine), a writer, a pick-up.
START_TIMEOUT, WRITER_TIMEOUT, PICKUP_TIMEOUT = 180, 120, 30
READER_SECONDS = 600
OPERATOR = "a"
ENTRIES = 100
#: Keys in the tables of versions 1 and 2 (each off its fallback instance), and one in none.
KEYS = [f"k{index}-{i}" for index in (1, 2) for i in range(5)] + ["unlisted"]
#: The schedule: version 1 in force from 0, sealed to SEALS[0]; after the outage, version 2 from SEALS[0],
#: sealed to SEALS[1].
SEALS = [1000, 2000]
POINTS = [0, 999, 1000, 1999]
#: A record past the seal: it waits for the version published after the outage.
WAITS = SEALS[:1]


def version_at(point: int) -> int:
    return 1 + (point >= SEALS[0])


def expected_routes() -> dict[str, list[int]]:
    configs = {v: make_config(v, ENTRIES) for v in (1, 2)}
    return {str(p): [configs[version_at(p)].route(OPERATOR, key) for key in KEYS] for p in POINTS}


# -- the testbed helper -----------------------------------------------------------------------------
def _connect(address: str) -> str:
    """What a connection to a closed port of ``address`` meets: ``refused`` (the link carries), or ``unreachable``.

    Unreachable: no answer at all, so a timeout, or the kernel's "no route to host" once the address's ARP
    requests went unanswered (as behind a cut cable).
    """
    try:
        with socket.create_connection((address, 9), timeout=1.5):
            return "connected"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "unreachable"
    except OSError as error:
        if error.errno == errno.EHOSTUNREACH:
            return "unreachable"
        raise


def _tc(args: list[str]) -> str:
    return subprocess.run(["tc", *args], capture_output=True, text=True, timeout=30, check=True).stdout


def _reached(bed: Testbed, source: Server, target: Server, timeout: float = 10.0) -> str:
    """What ``source`` meets at ``target`` once it is refused, or within ``timeout`` seconds (an ARP resolution
    left failed by the drop may take its retries first)."""
    deadline = time.monotonic() + timeout
    while (met := bed.call_in(source, lambda: _connect(target.address))) != "refused" and time.monotonic() < deadline:
        time.sleep(0.2)
    return met


@pytest.mark.parametrize("rate_mbit", [None, 100])
def test_drop_link_drops_every_frame_both_ways_and_restore_link_reshapes_it(rate_mbit):
    with Testbed(3, rate_mbit=rate_mbit) as bed:
        cut, other, third = bed.servers
        bed.drop_link(cut)
        during = [bed.call_in(other, lambda: _connect(cut.address)), bed.call_in(cut, lambda: _connect(other.address))]
        beside = bed.call_in(other, lambda: _connect(third.address))
        dropped = bed.shaper_stats(cut)["dropped"]
        bed.restore_link(cut)
        after = [_reached(bed, other, cut), _reached(bed, cut, other)]
        shapers = [
            _tc(["-n", cut.namespace, "qdisc", "show", "dev", "eth0"]),
            _tc(["qdisc", "show", "dev", cut.host_link]),
        ]
    assert during == ["unreachable", "unreachable"] and beside == "refused"  # dropped, not refused; other links carry
    assert dropped > 0
    assert after == ["refused", "refused"]
    for shaper in shapers:
        assert ("rate 100Mbit" in shaper) if rate_mbit else ("tbf" not in shaper)


def _java_classpath() -> str:
    """locality-core, and locality-kafka-streams for the tables' Kafka fallback hash (built by ``make test``)."""
    try:
        return classpath("locality-core", "locality-kafka-streams")
    except FileNotFoundError as error:  # a module not built fails the test, never a skip
        pytest.fail(str(error), pytrace=False)


# -- the outage -------------------------------------------------------------------------------------
class Readers:
    """The two readers of one store: their processes and their logs (host files, named after ``tag``)."""

    def __init__(self, bed: Testbed, python: Server, jvm: Server, s3: S3Server, work: Path, tag: str) -> None:
        env = {**os.environ, **s3.env}
        self.errs = {name: work / f"{tag}-{name}-reader.err" for name in ("python", "java")}
        self.logs = {name: work / f"{tag}-{name}-reader.jsonl" for name in ("python", "java")}
        args = {
            "store": STORE, "poll": POLL_SECONDS, "operator": OPERATOR, "keys": KEYS, "points": POINTS,
            "waits": WAITS, "seconds": READER_SECONDS,
        }  # fmt: skip
        self.processes = {
            "python": bed.spawn(
                python, [sys.executable, "-m", "tests.testbed._outage_reader", json.dumps(args)],
                log=self.errs["python"], stdout=self.logs["python"], env=env, cwd=REPO,
            ),
            "java": bed.spawn(
                jvm,
                [java(), "-XX:TieredStopAtLevel=1", "-cp", _java_classpath(), HERE / "FollowSchedule.java",
                 STORE, int(POLL_SECONDS * 1000), OPERATOR, ",".join(KEYS), ",".join(map(str, POINTS)),
                 ",".join(map(str, WAITS)), READER_SECONDS],
                log=self.errs["java"], stdout=self.logs["java"], env=env, cwd=REPO,
            ),
        }  # fmt: skip

    def lines(self, name: str) -> list[dict]:
        text = self.logs[name].read_text() if self.logs[name].exists() else ""
        return [json.loads(line) for line in text.split("\n")[:-1]]  # whole lines only: one may be on its way

    def check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                err = self.errs[name].read_text()[-3000:]
                pytest.fail(f"the {name} reader exited with {process.returncode}: {self.lines(name)[-3:]} {err}")

    def wait_for(self, name: str, found, what: str, timeout: float) -> dict:
        """The first line of ``name`` that ``found(line)``, waited for with a bound."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hits = [line for line in self.lines(name) if found(line)]
            if hits:
                return hits[0]
            self.check_alive()
            time.sleep(0.1)
        pytest.fail(f"the {name} reader did not log {what} within {timeout} s: {self.lines(name)[-3:]}")

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
                process.wait(20)


@dataclass(frozen=True)
class OutageStore:
    """One store under test: the outage it gets (``stopped`` or ``dropped``), its server, S3 server and readers."""

    kind: str
    server: Server
    s3: S3Server
    readers: Readers


#: The library reads where S3 is from the environment: one call in the gateway at a time, with its store's.
_GATEWAY = threading.Lock()


def _in_gateway(bed: Testbed, gateway: Server, s3: S3Server, function, timeout: float):
    """``function()`` in the gateway with ``s3``'s settings in the environment."""
    with _GATEWAY, pytest.MonkeyPatch.context() as env:
        for name, value in s3.env.items():
            env.setenv(name, value)
        return bed.call_in(gateway, function, timeout=timeout)


def _store_state() -> dict:
    """What the store holds (read from inside the gateway): its versions, history, schedule, current version checked."""
    store = ConfigStore(STORE)
    current = store.get()
    current.verify()
    schedule = store.schedule()
    return {
        "current": current.version,
        "versions": store.versions(),
        "history": [move["version"] for move in store.history()],
        "schedule": (schedule.starts, schedule.versions, schedule.sealed_until),
    }


def _publish(version: int, start: int, seal: int) -> tuple[float, float]:
    """Version ``version`` in force from ``start``, then the seal moved to ``seal``; when each was done."""
    store = ConfigStore(STORE, lock_timeout=60)
    store.publish(make_config(version, ENTRIES), fingerprint=f"outage-{version}", in_force_from=start)
    published = time.time()
    store.seal(seal)
    return published, time.time()


def _writer_during_outage(bed: Testbed, gateway: Server, s3: S3Server) -> subprocess.CompletedProcess:
    """``locality optimize`` of a small trace in the gateway's own files, into the store that cannot be reached."""
    trace = "a,b\n" + "".join(f"k1-{i % 7},k2-{i % 5}\n" for i in range(200))
    folder = f"/tmp/job-{uuid.uuid4().hex[:8]}"
    bed.write_file(gateway, f"{folder}/trace.csv", trace.encode())
    command = [
        REPO / ".venv" / "bin" / "locality", "optimize", f"{folder}/trace.csv", "--keys", "a,b", "--servers", "2",
        "--store", STORE, "--lock-timeout", "5",
    ]  # fmt: skip
    env = {**os.environ, **s3.env}
    return bed.run(gateway, command, env=env, check=False, timeout=WRITER_TIMEOUT, cwd=folder)


def _outage(bed: Testbed, gateway: Server, store: OutageStore) -> dict:
    """``store``'s outage, then version 2 published and sealed further. Returns its figures."""
    s3, readers = store.s3, store.readers
    before = _in_gateway(bed, gateway, s3, _store_state, timeout=60)
    assert before["current"] == 1
    began = time.time()
    if store.kind == "stopped":
        s3.kill()
    else:
        bed.drop_link(store.server)
    try:
        writer = _writer_during_outage(bed, gateway, s3)
        gave_up = time.time() - began
        time.sleep(max(0.0, began + OUTAGE_SECONDS - time.time()))
        readers.check_alive()
    finally:
        if store.kind == "stopped":
            s3.restart()
        else:
            bed.restore_link(store.server)
    ended = time.time()
    assert writer.returncode == 75, writer.stderr[-2000:]
    assert STORE in writer.stderr and "Traceback" not in writer.stderr, writer.stderr[-2000:]
    after = _in_gateway(bed, gateway, s3, _store_state, timeout=90)
    assert after == before  # the store whole: nothing published, nothing moved back
    published, sealed = _in_gateway(bed, gateway, s3, lambda: _publish(2, SEALS[0], SEALS[1]), timeout=120)
    python_current = readers.wait_for(
        "python", lambda line: line["kind"] == "routes" and line["version"] >= 2, "version 2", PICKUP_TIMEOUT
    )
    settled = {
        name: readers.wait_for(
            name, lambda line: line["kind"] == "settled" and line["point"] == SEALS[0], f"point {SEALS[0]} settled",
            PICKUP_TIMEOUT,
        )
        for name in ("python", "java")
    }  # fmt: skip
    assert {name: line["version"] for name, line in settled.items()} == {"python": 2, "java": 2}
    return {
        "kind": store.kind,
        "outage": ended - began,
        "writer_exit": writer.returncode,
        "writer_seconds": gave_up,
        "writer_message": writer.stderr.strip().splitlines()[-1],
        "python_current": python_current["t"] - published,
        "python_schedule": settled["python"]["t"] - sealed,
        "java_schedule": settled["java"]["t"] - sealed,
        "back_to_python_current": python_current["t"] - ended,
        "back_to_schedule": max(line["t"] for line in settled.values()) - ended,
        "window": (began, ended),
    }


def _check_lines(readers: Readers, windows: list[tuple[float, float]]) -> dict[str, int]:
    """Every reader line: routes as the version in force routes them; nothing known ever moves back."""
    expected = expected_routes()
    served = {}
    for name in ("python", "java"):
        lines = readers.lines(name)
        assert [line for line in lines if line["kind"] == "error"] == [], name
        routes = [line for line in lines if line["kind"] == "routes"]
        for line in routes:
            assert line["routes"] == {p: expected[p] for p in line["routes"]}, (name, line)
            assert line["versions"] == {p: version_at(int(p)) for p in line["versions"]}, (name, line)
        for key in ("sealed", "entries", "version"):
            seen = [line[key] for line in routes if key in line]
            assert seen == sorted(seen), f"the {name} reader's {key} moved back: {seen}"
        taken = [line["sealed"] for line in lines if line["kind"] == "taken"]
        assert taken == sorted(taken) and all(s >= SEALS[0] for s in taken), (name, taken)
        for began, ended in windows:
            # It kept serving: sealed points routed throughout each outage (a line every 200 ms when nothing waits).
            during = [line for line in routes if began + 1 <= line["t"] <= ended - 1 and line["routes"]]
            assert len(during) >= ended - began - 2, f"the {name} reader served {len(during)} times"
            # And it saw the outage: its reads of the store failed meanwhile (the router's last refresh; the
            # follower's listener, told once for a run of reads that fail alike).
            failed = [
                line for line in lines if began <= line["t"] <= ended
                and (line.get("last_error") if name == "python" else line["kind"] == "kept")
            ]  # fmt: skip
            assert failed, f"the {name} reader never failed to read the store between {began} and {ended}"
        served[name] = len(routes)
    return served


def test_readers_on_other_servers_ride_out_a_stopped_store_and_a_dropped_link(tmp_path):
    with Testbed(5, rate_mbit=1000, private_files=True) as bed, ExitStack() as running:
        *store_servers, gateway, python_server, java_server = bed.servers
        stores = []
        for kind, server in zip(("stopped", "dropped"), store_servers):
            s3 = running.enter_context(object_store(bed, server, tmp_path / f"{kind}-s3.log", buckets=(BUCKET,)))
            # Version 1 published before its readers start: a Router refuses a store with no version yet.
            _in_gateway(bed, gateway, s3, lambda: _publish(1, 0, SEALS[0]), timeout=120)
            readers = Readers(bed, python_server, java_server, s3, tmp_path, kind)
            running.callback(readers.stop)
            stores.append(OutageStore(kind, server, s3, readers))
        for store in stores:
            for name in ("python", "java"):
                store.readers.wait_for(name, lambda line: line["kind"] == "routes", "a route", START_TIMEOUT)
        with ThreadPoolExecutor(len(stores)) as pool:
            outages = []
            for store in stores:
                outages.append(pool.submit(_outage, bed, gateway, store))
                time.sleep(STAGGER_SECONDS)
            figures = [outage.result() for outage in outages]
        time.sleep(1)
        for store in stores:
            store.readers.check_alive()
            store.readers.stop()
        served = {store.kind: _check_lines(store.readers, [f["window"] for f in figures if f["kind"] == store.kind])
                  for store in stores}  # fmt: skip
        final = [_in_gateway(bed, gateway, store.s3, _store_state, timeout=60) for store in stores]
    for figure in figures:
        print(
            f"store {figure['kind']} {figure['outage']:.1f} s; `locality optimize` exit {figure['writer_exit']} "
            f"after {figure['writer_seconds']:.1f} s ({figure['writer_message']})"
        )
        print(
            f"  picked up "
            f"after the publish: Python router's version {figure['python_current']:.2f} s, Python schedule "
            f"{figure['python_schedule']:.2f} s, Java ScheduleFollower {figure['java_schedule']:.2f} s "
            f"(poll {POLL_SECONDS:g} s); from the store's return: version {figure['back_to_python_current']:.2f} s, "
            f"schedule (both) {figure['back_to_schedule']:.2f} s"
        )
    print(f"route lines logged: {served}")
    (stopped_began, stopped_ended), (dropped_began, _) = (f["window"] for f in figures)
    assert dropped_began < stopped_ended  # side by side
    for state in final:
        assert state["versions"] == state["history"] == [1, 2] and state["schedule"][1] == (1, 2)
    for figure in figures:
        assert figure["outage"] >= OUTAGE_SECONDS
        for what in ("python_current", "python_schedule", "java_schedule"):
            assert figure[what] <= POLL_SECONDS + LOAD_SECONDS, (what, figure)
