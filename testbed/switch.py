"""An online switch of the replay job on the testbed: from hash routing to the tables, measured at the sink.

The core paper's Figure 13 (Caneill et al., Middleware 2016, Section 4.4): a running application
starts on hash routing, the online reconfiguration computes tables, the application switches to them
while it runs, and its throughput after the switch is set beside its throughput before. Here, on
servers that share nothing but the network (:class:`SwitchSetup`: a Flink cluster, a gateway, an
object store on a server of its own):

1. the replay job (``jvm/examples/locality-flink-bench``, :mod:`testbed.replay`) runs on version 1 of a
   store in the bucket, a version with no entries (every key where Flink's hash puts it), replaying the
   trace ``passes`` times at full speed and then idling (``--end wait``); each TaskManager's server
   fetched the trace from the bucket into its own files first (the job reads a local file);
2. after ``warmup`` seconds, an :class:`~testbed.measure.Interval` of ``duration`` seconds: *before*;
3. the online job (``publish``: ``locality reconfigure`` in the gateway, on the trace in the bucket, or
   with ``sketch_interval`` on the sketches the job itself published into the store,
   :meth:`SwitchSetup.reconfigure_from_sketches`: no trace) publishes version 2 and its migration plan;
4. ``locality switch flink``, the command a user runs, in the gateway (neither JobManager nor
   TaskManager) against the JobManager's REST address: stop with a savepoint in the bucket, rewrite it
   there by the plan (locality-flink-state, a job on the cluster), restart on version 2 from it. The
   source resumes exactly: each source subtask's position is in the savepoint, and the restarted
   sources replay, on version 2's partition, every record the old job had not emitted and no other
   (``TraceReplaySource``);
5. after ``warmup`` seconds, an interval of ``duration`` seconds: *after*;
6. once the sink has counted every record of the ``passes`` replays, the job is stopped with a last
   savepoint (in the bucket) and every key's count in both operators is read from it by
   locality-flink-state's ``ReadRealKeyState`` in the gateway and set beside its number of records:
   zero lost, zero counted twice.

A thread samples the records at the sink every :data:`SAMPLE_SECONDS` throughout, for the time series.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path

import pandas as pd

from locality.engines.flink_s3 import flink_s3_configuration, write_flink_conf
from locality.engines.flink_switch import VERSION_FIELD
from locality.optimizer import make_fallbacks
from locality.routing import RoutingConfiguration
from locality.store import ConfigStore
from locality.topology import Topology
from testbed.flink import FINAL_STATES, FlinkCluster, s3_settings_of
from testbed.jvm import FLINK_JVM_OPTIONS, classpath, java
from testbed.measure import Interval, SinkFolder, sink_records
from testbed.network import Server, Testbed
from testbed.replay import JAR, MAIN, Routing, check_colocated, measure
from testbed.s3server import S3Server

logger = logging.getLogger(__name__)

__all__ = [
    "FIRST_UID",
    "SECOND_UID",
    "CountCheck",
    "SwitchRun",
    "SwitchSetup",
    "check_counts",
    "operator_args",
    "read_counts",
    "run_switch",
    "switch_command",
]

REPO = Path(__file__).resolve().parents[1]
#: The counting operators' uids in the replay job (``ReplayJob.FIRST_UID``, ``SECOND_UID``); their MapState is "count".
FIRST_UID, SECOND_UID = "count-first", "count-second"
SAMPLE_SECONDS = 0.25
#: Where each TaskManager's server keeps the trace it fetched from the bucket (its own files).
TRACE_PATH = "/tmp/locality-trace/keys.tsv"
#: The gateway's Flink configuration folder for the state reader (the S3 plugin's keys), in its own files.
READER_CONF = "/tmp/locality-state-reader/conf"
#: Bounds (seconds) of the switch command, of the last savepoint, of reading its state, of a gateway command.
SWITCH_TIMEOUT = 900.0
SAVEPOINT_TIMEOUT = 300.0
READ_TIMEOUT = 600.0
FIRST_RECORD_TIMEOUT = 120.0
COMMAND_TIMEOUT = 900.0
#: The counters of each sketch of a job that sketches: more than the tweets' distinct pairs, so exact.
SKETCH_CAPACITY = 100_000
#: Bound (seconds) of the wait for the job's sketches of an interval (a few of its intervals).
SKETCHES_TIMEOUT = 120.0
#: How long the sink may stand still short of the last record before the run goes on to the check (bounds the wait).
STILL_SECONDS = 20.0


@dataclass(frozen=True)
class SwitchSetup:
    """Who runs what, and where the run's objects are: only URIs and the network cross between servers.

    ``cluster``'s JobManager and TaskManagers run the job; ``gateway`` (another server) runs the online
    job, ``locality switch flink`` and the last savepoint's read; ``s3`` serves the bucket from a server
    of its own, holding ``trace`` (the job's TSV: ``s3://bucket/key``), the ``store`` and the ``savepoints``.
    """

    bed: Testbed
    cluster: FlinkCluster
    gateway: Server
    s3: S3Server
    trace: str
    store: str
    savepoints: str

    def gateway_env(self) -> dict[str, str]:
        """The gateway's variables: this checkout on the path, the object store's AWS variables and no other.

        Spark (the online job's ``local[2]``) binds to the gateway's address: the machine's name resolves to
        an address the server does not have.
        """
        env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
        path = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        return env | self.s3.env | {"PYTHONPATH": path, "SPARK_LOCAL_IP": self.gateway.address}

    def run_in_gateway(self, command: list[object], *, timeout: float = COMMAND_TIMEOUT, env: dict | None = None):
        """``command`` run to completion in the gateway (output captured); raises naming it when it fails."""
        done = self.bed.run(self.gateway, command, timeout=timeout, env=env or self.gateway_env(), check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, command[:6]))} ... exited with {done.returncode}: "
                               f"{done.stderr[-4000:]}")  # fmt: skip
        return done

    def locality(self, *args: object) -> dict:
        """``locality_job.py ARGS --master local[2] --json`` in the gateway (the store and traces in the bucket)."""
        command = [sys.executable, REPO / "locality_job.py", *args, "--master", "local[2]", "--json", "-q"]
        return json.loads(self.run_in_gateway(command).stdout)

    def publish_hash(self, keys: list[str], servers: int) -> None:
        """Version 1 of the store from the gateway: no entries, every key where Flink's hash puts it, no trace read.

        The library reads the object store's variables from this process's environment: set them first.
        """
        topology = Topology.uniform(keys, servers)
        config = RoutingConfiguration.hash_routing(topology, make_fallbacks(topology, "flink"))
        self.bed.call_in(self.gateway, lambda: ConfigStore(self.store).publish(config, fingerprint="hash"), timeout=60)

    def reconfigure_from_sketches(self, after: float, publishers: int, *options: object) -> dict:
        """``locality reconfigure --sketches`` in the gateway once the job's sketches of an interval that began at
        ``after`` (seconds since the epoch) or later are in the store from all its ``publishers``; its JSON.

        It reads every interval the store holds (no Spark, no trace); the wait is bounded by
        :data:`SKETCHES_TIMEOUT`.
        """
        self.wait_for_sketches(after, publishers)
        command = [sys.executable, REPO / "locality_job.py", "reconfigure", "--sketches", "--store", self.store,
                   *options, "--json", "-q"]  # fmt: skip
        return json.loads(self.run_in_gateway(command).stdout)

    def wait_for_sketches(self, after: float, publishers: int) -> None:
        """Wait until the store holds the pairs of an interval beginning at ``after`` or later from ``publishers``."""
        bucket, _, prefix = self.store.removeprefix("s3://").partition("/")
        folder = f"{prefix}/sketches/"
        deadline = time.monotonic() + SKETCHES_TIMEOUT

        def published() -> dict[int, int]:
            pages = self.s3.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=folder)
            keys = [o["Key"].removeprefix(folder) for page in pages for o in page.get("Contents", [])]
            starts = [int(k.split("-", 1)[0]) for k in keys if "/pairs/" in k]
            return {start: starts.count(start) for start in set(starts)}

        while time.monotonic() < deadline:
            counts = self.bed.call_in(self.gateway, published, timeout=60)
            if any(start >= after * 1000 and n >= publishers for start, n in counts.items()):
                return
            time.sleep(0.5)
        raise TimeoutError(f"no interval from {after:.0f} s had sketches from {publishers} publishers in "
                           f"{self.store} within {SKETCHES_TIMEOUT:.0f} s")  # fmt: skip


@dataclass(frozen=True)
class CountCheck:
    """Every key's final count beside its number of records, for each operator."""

    keys: dict[str, int]
    wrong_keys: dict[str, int]
    lost: int
    duplicated: int
    sink_records: int
    expected_records: int

    @property
    def exact(self) -> bool:
        return not any(self.wrong_keys.values()) and self.sink_records == self.expected_records


@dataclass
class SwitchRun:
    """What one online switch measured (times in seconds since the job was submitted)."""

    before: Interval
    after: Interval
    series: list[tuple[float, int]]
    events: dict[str, float]
    switch: dict
    reconfigure: dict
    counts: CountCheck
    windows: dict[str, tuple[float, float]] = field(default_factory=dict)


class SinkSampler(threading.Thread):
    """``(seconds since start, records at the sink over every version's folder)`` every :data:`SAMPLE_SECONDS`."""

    def __init__(self, sinks: list[SinkFolder], start: float) -> None:
        super().__init__(daemon=True)
        self.sinks, self.start_time = sinks, start
        self.samples: list[tuple[float, int]] = []
        self.stopping = threading.Event()

    def total(self) -> int:
        return sum(sink_records(sink) for sink in self.sinks)

    def latest(self) -> int:
        """The records of the last sample (0 before the first)."""
        return self.samples[-1][1] if self.samples else 0

    def run(self) -> None:
        while not self.stopping.wait(SAMPLE_SECONDS):
            try:
                self.samples.append((time.time() - self.start_time, self.total()))
            except (OSError, ValueError):  # a file replaced while read: the next sample has it
                continue


def operator_args(keys: list[str]) -> list[str]:
    """``--operator table operator=uid,state=count`` of both counting operators (``keys``), for the state tools."""
    return ["--operator", f"{keys[0]}={FIRST_UID},state=count", "--operator", f"{keys[1]}={SECOND_UID},state=count"]


def run_switch(
    setup: SwitchSetup,
    *,
    publish: Callable[[], dict],
    frame: pd.DataFrame,
    keys: list[str],
    padding: int,
    passes: int,
    warmup: float,
    duration: float,
    sketch_interval: int | None = None,
) -> SwitchRun:
    """Start on version 1 of the store (hash routing), reconfigure, switch, measure; see the module's docstring.

    ``publish`` is the online job: it publishes version 2 in the store while the job runs and returns
    ``locality reconfigure``'s JSON document. With ``sketch_interval`` (seconds), the job on either version
    sketches its key pairs (``ReplayJob --sketches``, :data:`SKETCH_CAPACITY` counters) into the store every
    ``sketch_interval``, for an online job that reads them (:meth:`SwitchSetup.reconfigure_from_sketches`).
    """
    stage_trace(setup)
    job_args, sinks = _job_args(setup, padding, passes, sketch_interval)
    start, events = time.time(), {}
    job = setup.cluster.submit(JAR, MAIN, [a.replace(VERSION_FIELD, "1") for a in job_args])
    sampler = SinkSampler(sinks, start)
    sampler.start()
    try:
        before, windows = _before(setup, job, sinks[0], warmup, duration, start)
        reconfigured = _reconfigure(publish, events, start)
        switched = _switch_command(setup, job, job_args, operator_args(keys))
        events["stop requested"] = switched["stopped_at"] - start
        events["running on version 2"] = switched["running_at"] - start
        job = switched["new_job"]
        _check_records_left(sinks[0], passes * len(frame), "the switch")
        after = _after(setup, job, sinks[1], warmup, duration, start, windows)
        _check_records_left(sampler, passes * len(frame), "the after-switch interval ended")
        _wait_for(sampler, passes * len(frame))
        events["last record"] = time.time() - start
        final = setup.cluster.stop_with_savepoint(job, setup.savepoints, SAVEPOINT_TIMEOUT)
    finally:
        sampler.stopping.set()
        sampler.join(timeout=5)
        _cancel_running(setup.cluster)
    state = read_counts(setup, final, operator_args(keys))
    counts = check_counts(state, frame, keys, passes, sampler.total())  # the last savepoint flushed every sink
    return SwitchRun(before, after, sampler.samples, events, switched, reconfigured, counts, windows)


def stage_trace(setup: SwitchSetup) -> None:
    """Each TaskManager's server fetches the trace from the bucket into its own files (:data:`TRACE_PATH`).

    The replay job reads its trace as a local file; a server reads it from the object store over its link,
    as any input of a cluster without a shared disk arrives.
    """
    bucket, _, key = setup.trace.removeprefix("s3://").partition("/")

    def fetch() -> None:
        Path(TRACE_PATH).parent.mkdir(parents=True, exist_ok=True)
        setup.s3.client().download_file(bucket, key, TRACE_PATH)

    for server in setup.cluster.taskmanagers:
        setup.bed.call_in(server, fetch, timeout=120)


def _job_args(
    setup: SwitchSetup, padding: int, passes: int, sketch_interval: int | None
) -> tuple[list[str], list[SinkFolder]]:
    """The replay job's arguments with ``{version}`` in them, and the sink folder of each version (1, 2)."""
    sink = f"/tmp/locality-sink-{uuid.uuid4().hex[:12]}-v{VERSION_FIELD}"
    args = [*Routing("tables", setup.store).args(), "--version", VERSION_FIELD, "--trace", TRACE_PATH,
            "--padding", padding, "--passes", passes, "--end", "wait", "--sink-dir", sink]  # fmt: skip
    if sketch_interval is not None:
        args += ["--sketches", setup.store, "--sketch-interval", sketch_interval, "--sketch-capacity", SKETCH_CAPACITY]
    taskmanagers = setup.cluster.taskmanagers
    folders = [SinkFolder.of(setup.bed, taskmanagers, sink.replace(VERSION_FIELD, str(v))) for v in (1, 2)]
    return [str(a) for a in args], folders


def _before(setup: SwitchSetup, job: str, sink: SinkFolder, warmup: float, duration: float, start: float):
    """The job on version 1 running, placed as the tables say, measured: the interval and its window."""
    setup.cluster.wait_running(job)
    check_colocated(setup.cluster.vertices(job))
    before, window = _interval(setup.bed, sink, warmup, duration, start)
    logger.warning("switch: before %.0f records/s (%s); reconfiguring", before.throughput, before.bound)
    return before, {"before": window}


def _reconfigure(publish: Callable[[], dict], events: dict[str, float], start: float) -> dict:
    """The online job publishes version 2 while the job runs; its JSON document."""
    events["reconfigure started"] = time.time() - start
    reconfigured = publish()
    events["version 2 published"] = time.time() - start
    if not reconfigured.get("published"):
        raise RuntimeError(f"locality reconfigure published nothing: {reconfigured.get('reason')}")
    figures = {k: reconfigured[k] for k in ("locality_before", "locality_after", "moved_keys") if k in reconfigured}
    logger.warning("switch: version %s published %s; switching", reconfigured.get("version"), figures)
    return reconfigured


def _after(setup: SwitchSetup, job: str, sink: SinkFolder, warmup: float, duration: float, start: float, windows):
    """The job on version 2 running, placed as the tables say, measured (its window added to ``windows``)."""
    check_colocated(setup.cluster.vertices(job))
    after, windows["after"] = _interval(setup.bed, sink, warmup, duration, start)
    logger.warning("switch: after %.0f records/s (%s); replaying to the end", after.throughput, after.bound)
    return after


def _check_records_left(counted, total: int, before: str) -> None:
    """Raise when the sink(s) ``counted`` have every record: the replay ended too early to measure what follows.

    (The restarted job then emits nothing: its sources resume after the last record.)
    """
    records = counted.total() if isinstance(counted, SinkSampler) else sink_records(counted)
    if records >= total:
        raise RuntimeError(f"the replay reached its end ({total:,} records) before {before}: raise the passes")


def _interval(bed: Testbed, sink: SinkFolder, warmup: float, duration: float, start: float) -> tuple:
    """An :class:`Interval` of ``duration`` seconds, ``warmup`` seconds after the first record reached the sink.

    (A job restarted from a savepoint runs before its sources emit: they read the trace and route it first.)
    """
    deadline = time.monotonic() + FIRST_RECORD_TIMEOUT
    while sink_records(sink) == 0:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no record reached the sink ({sink.path}) in {FIRST_RECORD_TIMEOUT:.0f} s")
        time.sleep(0.2)
    interval, (began, ended) = measure(bed, sink, warmup=warmup, duration=duration)
    return interval, (began - start, ended - start)


def switch_command(setup: SwitchSetup, job: str, job_args: list[str], operators: list[str]) -> list[object]:
    """``locality switch flink`` of ``job`` to the store's current version, as the gateway runs it (``--json``)."""
    return [sys.executable, "-m", "locality.cli", "switch", "flink",
            "--rest", setup.cluster.url, "--job", job, "--store", setup.store,
            "--savepoint-dir", setup.savepoints, "--jar", str(JAR), "--entry-class", MAIN,
            *operators, "--json", "--", *job_args]  # fmt: skip


def _switch_command(setup: SwitchSetup, job: str, job_args: list[str], operators: list[str]) -> dict:
    """:func:`switch_command` run in the gateway; its JSON document."""
    done = setup.run_in_gateway(switch_command(setup, job, job_args, operators), timeout=SWITCH_TIMEOUT)
    logger.info("locality switch flink: %s", done.stderr.strip())
    return json.loads(done.stdout)


def read_counts(setup: SwitchSetup, savepoint: str, operators: list[str]) -> pd.DataFrame:
    """Every real key's state of the ``operators`` (:func:`operator_args`) in ``savepoint``, by ``ReadRealKeyState``.

    It runs in the gateway, reading the savepoint from the bucket through Flink's S3 plugin (the
    configuration of :func:`~locality.engines.flink_s3.flink_s3_configuration` in :data:`READER_CONF`,
    the plugins of the cluster's distribution); its JSON lines come back on its stdout.
    """
    settings = flink_s3_configuration(s3_settings_of(setup.s3.env))
    setup.bed.call_in(setup.gateway, lambda: write_flink_conf(READER_CONF, settings))
    env = setup.gateway_env() | {"FLINK_CONF_DIR": READER_CONF,
                                 "FLINK_PLUGINS_DIR": str(setup.cluster.home / "plugins")}  # fmt: skip
    modules = ("locality-core", "locality-flink", "locality-flink-state")
    command = [java(), *FLINK_JVM_OPTIONS, "-cp", classpath(*modules), "io.locality.flink.state.ReadRealKeyState",
               "--savepoint", savepoint, *operators]  # fmt: skip
    done = setup.run_in_gateway(command, timeout=READ_TIMEOUT, env=env)
    return pd.read_json(StringIO(done.stdout), lines=True, dtype={"key": str, "routing_key": str})


def check_counts(state: pd.DataFrame, frame: pd.DataFrame, keys: list[str], passes: int, sink: int) -> CountCheck:
    """Each operator's counts in ``state`` beside ``passes`` x each key's records in ``frame``."""
    found, wrong, lost, duplicated = {}, {}, 0, 0
    for operator in keys:
        expected = frame[operator].astype(str).value_counts() * passes
        counted = state[state["operator"] == operator].set_index("key")["state"]
        both = pd.concat([expected.rename("expected"), counted.rename("counted")], axis=1).fillna(0)
        difference = both["counted"] - both["expected"]
        found[operator] = len(counted)
        wrong[operator] = int((difference != 0).sum())
        lost += int(-difference[difference < 0].sum())
        duplicated += int(difference[difference > 0].sum())
    return CountCheck(found, wrong, lost, duplicated, sink, passes * len(frame))


def _cancel_running(cluster: FlinkCluster) -> None:
    for running in [j["id"] for j in cluster.rest("/jobs")["jobs"] if j["status"] not in FINAL_STATES]:
        cluster.cancel(running)


def _wait_for(sampler: SinkSampler, total: int) -> None:
    """Until the sink has counted ``total`` records, or has stood still for :data:`STILL_SECONDS` (the check says why).

    Each sink subtask reports its count every 200 ms, also when no record comes (``CountingSink``); the
    sampler's latest sample has it (a sink file replaced while read only delays the next one).
    """
    last, still_since = -1, time.monotonic()
    while (counted := sampler.latest()) < total:
        now = time.monotonic()
        if counted != last:
            last, still_since = counted, now
        elif now - still_since >= STILL_SECONDS:
            logger.warning("switch: the sink stands still at %d of %d records", counted, total)
            return
        time.sleep(0.5)
