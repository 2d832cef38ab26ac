"""Storm topologies ride out an outage of their store: the running one never notices, new ones start anyway.

The store is a prefix of a bucket on an S3 server of the test's own: v1 (tables for location ->
hashtag on 3 servers, two tasks of each bolt per server, ``--hash storm``) is current when the test starts a
``LocalCluster`` (``OutageTopologies``, on locality-storm's drop-in jar) and its first topology, ``steady``,
grouped by the current version, its spout streaming 12,000 tweet records at 200 per second. Once it runs,
v2 is published (and made current) and the store goes out for 30 s, ``stopped`` (its server killed, on
loopback beside the JVM: connections refused) or ``dropped`` (the JVM on one testbed server, the S3 server on
another, files their own, and the S3 server's link dropped with ``tc``: every frame lost, nothing refused, so
every read runs into the client's timeouts). Meanwhile two more topologies
are deployed on the same cluster: ``redeployed``, grouped by the current version, and ``pinned``, grouped by
v2, which no worker of this JVM ever loaded.

Checked: every topology logged every record exactly once, each on the task its version names (table keys)
or where Storm's own fields grouping puts it (every other key), each key counting 1..n on one task;
``steady`` went on streaming while the store was out; ``redeployed`` started on v1, the version its worker
JVM had read, without waiting for the store (v2 became current before the outage, which it could not
know); ``pinned`` waited for the store, said so in the log, and started once the store was back. The
figures are printed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from locality.counts import count_keys
from locality.hashing import StormFieldsGrouping
from locality.optimizer import make_fallbacks, optimize
from locality.store import ConfigStore
from locality.topology import Topology
from testbed import Server, Testbed
from testbed.s3server import S3Server, object_store
from tests.conftest import trace_keys
from tests.jvm.conftest import STORM_EXAMPLES, classpath, java
from tests.jvm.store_outage import Outage, own_s3_server

OPERATORS = trace_keys("geotweets")  # location -> hashtag
SERVERS = Topology.uniform(OPERATORS, 3, instances_per_server=2)
TASKS = 6
RECORDS = 12_000
#: The steady topology's spout: its records keep streaming through the outage.
RATE = 200
OUTAGE_SECONDS = 30.0
#: The outages: the S3 server killed (on loopback, beside the JVM), and its link dropped with ``tc`` (the JVM on
#: another testbed server).
KINDS = ("stopped", "dropped")
NAMES = ("steady", "redeployed", "pinned")
VERSION = {"steady": 1, "redeployed": 1, "pinned": 2}
START_TIMEOUT = 180.0
RUN_TIMEOUT = 480.0
#: How often a grouping that waits for its store reads it again (LocalityGrouping.POLL_SECONDS).
POLL_SECONDS = 1.0


def learned(rows: pd.DataFrame):
    return optimize(count_keys(rows, OPERATORS).graph(), SERVERS, make_fallbacks(SERVERS, "storm")).config


def wait_for_file(place, path: Path, process, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not place.call(path.exists):
        if process.poll() is not None:
            pytest.fail(f"the topologies exited with {process.returncode} before {what}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {START_TIMEOUT:.0f} s", pytrace=False)
        time.sleep(0.2)


class Here:
    """The topologies' JVM on this machine, beside its store's S3 server on loopback: files are this machine's."""

    def __init__(self, work: Path) -> None:
        self.work = work

    def call(self, function):
        return function()

    def spawn(self, command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
        with open(log, "wb") as out:
            return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)

    def write(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def copy_out(self, folder: Path) -> Path:
        return folder


class OnTestbed:
    """The topologies' JVM on a testbed server, its store's S3 server on another: they share only the network.

    Its files are its server's own (under its private ``/tmp``): written and read through the server.
    """

    def __init__(self, bed: Testbed, server: Server, host_work: Path) -> None:
        self.bed, self.server, self.host_work = bed, server, host_work
        self.work = Path("/tmp/storm-outage")

    def call(self, function):
        return self.bed.call_in(self.server, function, timeout=120)

    def spawn(self, command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
        return self.bed.spawn(self.server, command, log=log, env=env, cwd=self.work)

    def write(self, path: Path, data: bytes) -> None:
        self.bed.write_file(self.server, path, data)

    def copy_out(self, folder: Path) -> Path:
        """``folder`` of the server copied into the host's work folder; the copy."""

        def files() -> dict[str, bytes]:
            return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

        copy = self.host_work / folder.name
        for name, data in self.call(files).items():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            (copy / name).write_bytes(data)
        return copy


@contextmanager
def outage_setting(kind: str, work: Path) -> Iterator[tuple[Here | OnTestbed, S3Server, Outage]]:
    """Where the JVM runs, its store's S3 server, and the outage of kind ``kind`` (ended on leaving)."""
    if kind != "dropped":
        with own_s3_server() as s3, Outage(s3, kind) as outage:
            yield Here(work), s3, outage
        return
    with Testbed(2, rate_mbit=1000, private_files=True) as bed, pytest.MonkeyPatch.context() as patch:
        store_server, jvm_server = bed.servers
        with object_store(bed, store_server, work / "s3.log") as s3:
            for name, value in s3.env.items():  # for the library, called in the JVM's server
                patch.setenv(name, value)
            with Outage(s3, kind, link=(bed, store_server)) as outage:
                yield OnTestbed(bed, jvm_server, work), s3, outage


@pytest.fixture(scope="module", params=KINDS)
def storm_outage(request, geotweets, tmp_path_factory):
    """The topologies through one kind of outage; what the checks need (a dict)."""
    kind = request.param
    work = tmp_path_factory.mktemp(f"storm-outage-{kind}")
    half = len(geotweets) // 2
    first = geotweets.iloc[:half]
    records = geotweets.iloc[half : half + RECORDS][["seq", *OPERATORS]].reset_index(drop=True)
    versions = {1: learned(first), 2: learned(first.iloc[: half // 2])}
    run: dict = {"kind": kind, "records": records, "versions": versions}
    with outage_setting(kind, work) as (place, s3, outage):
        records_file, out, tmp = place.work / "records.jsonl", place.work / "out", place.work / "tmp"
        place.write(records_file, records.to_json(orient="records", lines=True, force_ascii=False).encode())
        place.call(lambda: tmp.mkdir(parents=True, exist_ok=True))
        store = ConfigStore(f"s3://locality/storm-{kind}")
        place.call(lambda: store.publish(versions[1], fingerprint="storm-first-half"))
        command = [java(), f"-Djava.io.tmpdir={tmp}", "-cp", classpath(STORM_EXAMPLES)]
        command += ["io.locality.storm.OutageTopologies", records_file, out, store.location, *OPERATORS, TASKS, RATE]
        command += [2]
        # the workers' log (the groupings say what they do) and errors
        process = place.spawn(list(map(str, command)), {**os.environ, **s3.env}, work / "log.txt")
        try:
            wait_for_file(place, out / "control" / "steady-running", process, "the steady topology's first tuple")
            # current from now: unknown to the JVM
            place.call(lambda: store.publish(versions[2], fingerprint="storm-first-quarter"))
            outage.begin()
            place.write(out / "control" / "store-down", str(outage.began).encode())
            time.sleep(OUTAGE_SECONDS)
            outage.end()
            returncode = process.wait(timeout=RUN_TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(30)
        out = place.copy_out(out)
    run["returncode"] = returncode
    run["log"] = (work / "log.txt").read_text(errors="replace")
    run["outage"] = (outage.began * 1000, outage.ended * 1000)
    run["summary"] = json.loads((out / "summary.json").read_text())
    run["progress"] = pd.read_json(out / "progress.jsonl", lines=True)
    run["routes"] = {
        name: pd.concat(
            pd.read_json(p, lines=True, dtype={op: str for op in OPERATORS}) for p in (out / name / "routes").glob("*")
        )
        .sort_values("seq")
        .reset_index(drop=True)
        for name in NAMES
    }
    return run


def test_every_topology_logged_every_record_once_by_its_version(storm_outage):
    assert storm_outage["returncode"] == 0, storm_outage["log"][-5000:]
    records = storm_outage["records"]
    for name in NAMES:
        routes, config = storm_outage["routes"][name], storm_outage["versions"][VERSION[name]]
        assert routes["seq"].tolist() == sorted(records["seq"]), name  # nothing lost, nothing twice
        for op in OPERATORS:
            keys, task = routes[op].to_numpy(dtype=object), routes[f"{op}_task"].to_numpy()
            entries = config.tables[op].entries
            in_table = routes[op].isin(entries.index).to_numpy()
            assert in_table.any() and (task[in_table] == entries[keys[in_table]].to_numpy()).all(), (name, op)
            fields = StormFieldsGrouping(TASKS).instances_of(keys[~in_table])
            assert (task[~in_table] == fields).all(), (name, op)
            by_key = routes.groupby(op).agg(
                tasks=(f"{op}_task", "nunique"), top=(f"{op}_count", "max"), n=("seq", "size")
            )
            assert (by_key["tasks"] == 1).all() and (by_key["top"] == by_key["n"]).all(), (name, op)


def test_the_steady_topology_streamed_through_the_outage(storm_outage):
    began, ended = storm_outage["outage"]
    progress = storm_outage["progress"].set_index("at_ms")["steady"]
    during = progress[(progress.index >= began) & (progress.index <= ended)]
    streamed = int(during.max() - during.min())
    print(f"{storm_outage['kind']}: the steady topology logged {streamed:,} tuples while the store was out")
    assert streamed >= 0.5 * RATE * OUTAGE_SECONDS
    assert "cannot load its table" not in storm_outage["log"]  # no grouping failed its worker


def test_a_topology_deployed_during_the_outage_starts_on_the_version_its_jvm_read(storm_outage):
    log, summary = storm_outage["log"], storm_outage["summary"]
    began, ended = storm_outage["outage"]
    for op in OPERATORS:
        assert f"'{op}' starts on version 1, the last this worker loaded, because the store cannot be read" in log
    started = summary["redeployed"]["first_tuple_ms"]
    print(
        f"{storm_outage['kind']}: the redeployed topology logged its first tuple "
        f"{(started - summary['redeployed']['submitted_ms']) / 1000:.1f} s after its submission, "
        f"{(ended - started) / 1000:.1f} s before the store came back"
    )
    assert started < ended


def seconds_of_day(epoch_ms: float) -> float:
    """The local time of day of an instant, as the workers' log writes it."""
    local = time.localtime(epoch_ms / 1000)
    return local.tm_hour * 3600 + local.tm_min * 60 + local.tm_sec + (epoch_ms / 1000) % 1


def logged_at(log: str, pattern: str) -> float:
    """The time of day (seconds) of the first log line matching ``pattern``."""
    found = re.search(r"^(\d\d):(\d\d):(\d\d)\.(\d\d\d) .*" + pattern, log, flags=re.M)
    assert found, f"no log line matches {pattern!r}"
    hours, minutes, seconds, millis = map(int, found.groups()[:4])
    return hours * 3600 + minutes * 60 + seconds + millis / 1000


def test_a_topology_with_no_version_in_its_jvm_waits_for_the_store_and_starts_once_it_is_back(storm_outage):
    log, summary = storm_outage["log"], storm_outage["summary"]
    began, ended = storm_outage["outage"]
    waits = r"'(location|hashtag)' waits for the store: version 2 of s3://\S+ cannot be read \(.+\); reading it again"
    waits += r" every 1 s, for at most 90000 ms"
    read = r"read version 2 of s3://\S+ after waiting \d+ ms for the store"
    waited, back = logged_at(log, waits), logged_at(log, read)
    assert summary["pinned"]["first_tuple_ms"] > ended
    # it read the store within one poll of the store's return (a day's wrap aside)
    after = (back - seconds_of_day(ended)) % 86400
    print(
        f"{storm_outage['kind']}: the pinned topology waited {(back - waited) % 86400:.1f} s for the store, read v2 "
        f"{after:.2f} s after the store came back, logged its first tuple "
        f"{(summary['pinned']['first_tuple_ms'] - ended) / 1000:.1f} s after"
    )
    assert after < POLL_SECONDS + 2
