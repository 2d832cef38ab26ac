"""An online switch of the replay job on the testbed: from hash routing to the tables, measured at the sink.

The core paper's Figure 13 (Caneill et al., Middleware 2016, Section 4.4): a running application
starts on hash routing, the online reconfiguration computes tables, the application switches to them
while it runs, and its throughput after the switch is set beside its throughput before. Here:

1. the replay job (``jvm/locality-flink-bench``, :mod:`testbed.replay`) runs on version 1 of a
   store, a version with no entries (every key where Flink's hash puts it), replaying the trace
   ``passes`` times at full speed and then idling (``--end wait``);
2. after ``warmup`` seconds, an :class:`~testbed.measure.Interval` of ``duration`` seconds: *before*;
3. the online job, ``locality reconfigure`` on the replayed records, publishes version 2 and its
   migration plan;
4. ``locality switch flink``, the command a user runs, from inside the JobManager's server against its
   REST address: stop with a savepoint, rewrite the savepoint by the plan (locality-flink-state),
   restart on version 2. The source resumes exactly: each source subtask's position is in the
   savepoint, and the restarted sources replay, on version 2's partition, every record the old job
   had not emitted and no other (``TraceReplaySource``);
5. after ``warmup`` seconds, an interval of ``duration`` seconds: *after*;
6. once the sink has counted every record of the ``passes`` replays, the job is stopped with a last
   savepoint and every key's count in both operators is read from it (locality-flink-state's
   ``ReadRealKeyState``) and set beside its number of records: zero lost, zero counted twice.

A thread samples the records at the sink every :data:`SAMPLE_SECONDS` throughout, for the time series.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from locality.engines.flink_switch import VERSION_FIELD
from testbed.flink import FINAL_STATES, FlinkCluster
from testbed.jvm import FLINK_JVM_OPTIONS, run_java
from testbed.measure import Interval, sink_records
from testbed.network import Testbed
from testbed.replay import JAR, MAIN, Routing, check_colocated, measure

logger = logging.getLogger(__name__)

__all__ = ["FIRST_UID", "SECOND_UID", "CountCheck", "SwitchRun", "operator_args", "run_switch", "read_counts"]

REPO = Path(__file__).resolve().parents[1]
#: The counting operators' uids in the replay job (``ReplayJob.FIRST_UID``, ``SECOND_UID``); their MapState is "count".
FIRST_UID, SECOND_UID = "count-first", "count-second"
SAMPLE_SECONDS = 0.25
#: Bounds (seconds) of the switch command, of the last savepoint and of reading its state.
SWITCH_TIMEOUT = 900.0
SAVEPOINT_TIMEOUT = 300.0
READ_TIMEOUT = 600.0
FIRST_RECORD_TIMEOUT = 120.0
#: How long the sink may stand still short of the last record before the run goes on to the check (bounds the wait).
STILL_SECONDS = 20.0


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

    def __init__(self, sink_dirs: list[Path], start: float) -> None:
        super().__init__(daemon=True)
        self.sink_dirs, self.start_time = sink_dirs, start
        self.samples: list[tuple[float, int]] = []
        self.stopping = threading.Event()

    def total(self) -> int:
        return sum(sink_records(folder) for folder in self.sink_dirs)

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


def read_counts(savepoint: str, operators: list[str], out: Path) -> pd.DataFrame:
    """Every real key's state of the ``operators`` (:func:`operator_args`) in ``savepoint``, by ``ReadRealKeyState``."""
    args = ["--savepoint", savepoint, "--output", out, *operators]
    modules = ["locality-core", "locality-flink", "locality-flink-state"]
    main = "io.locality.flink.state.ReadRealKeyState"
    done = run_java(modules, main, *args, timeout=READ_TIMEOUT, jvm_options=FLINK_JVM_OPTIONS)
    if done.returncode != 0:
        raise RuntimeError(f"ReadRealKeyState exited with {done.returncode}: {done.stderr[-3000:]}")
    return pd.read_json(out, lines=True, dtype={"key": str, "routing_key": str})


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


def run_switch(
    bed: Testbed,
    cluster: FlinkCluster,
    *,
    tsv: Path,
    publish: Callable[[], dict],
    frame: pd.DataFrame,
    keys: list[str],
    store: Path,
    padding: int,
    passes: int,
    warmup: float,
    duration: float,
    work: Path,
) -> SwitchRun:
    """Start on version 1 of ``store`` (hash routing), reconfigure, switch, measure; see the module's docstring.

    ``publish`` is the online job: it publishes version 2 in ``store`` while the job runs and returns
    ``locality reconfigure``'s JSON document (:func:`~testbed.workload.reconfigure_tables`).
    """
    work.mkdir(parents=True, exist_ok=True)
    sink = str(work / f"sink-v{VERSION_FIELD}")
    job_args = [*Routing("tables", store).args(), "--version", VERSION_FIELD, "--trace", tsv, "--padding", padding,
                "--passes", passes, "--end", "wait", "--sink-dir", sink]  # fmt: skip
    job_args = [str(a) for a in job_args]
    operators = operator_args(keys)
    total = passes * len(frame)
    sink_dirs = [Path(sink.replace(VERSION_FIELD, str(v))) for v in (1, 2)]
    start = time.time()
    events: dict[str, float] = {}
    job = cluster.submit(JAR, MAIN, [a.replace(VERSION_FIELD, "1") for a in job_args])
    sampler = SinkSampler(sink_dirs, start)
    sampler.start()
    try:
        cluster.wait_running(job)
        check_colocated(cluster.vertices(job))
        before, window = _interval(bed, sink_dirs[0], warmup, duration, start)
        windows = {"before": window}
        logger.warning("switch: before %.0f records/s (%s); reconfiguring", before.throughput, before.bound)
        events["reconfigure started"] = time.time() - start
        reconfigured = publish()
        events["version 2 published"] = time.time() - start
        if not reconfigured.get("published"):
            raise RuntimeError(f"locality reconfigure published nothing: {reconfigured.get('reason')}")
        figures = {k: reconfigured[k] for k in ("locality_before", "locality_after", "moved_keys") if k in reconfigured}
        logger.warning("switch: version %s published %s; switching", reconfigured.get("version"), figures)
        switched = _switch_command(bed, cluster, job, store, job_args, operators, work / "savepoints")
        events["stop requested"] = switched["stopped_at"] - start
        events["running on version 2"] = switched["running_at"] - start
        job = switched["new_job"]
        check_colocated(cluster.vertices(job))
        after, window = _interval(bed, sink_dirs[1], warmup, duration, start)
        windows["after"] = window
        if sampler.total() >= total:
            raise RuntimeError(
                f"the replay reached its end ({passes} passes) before the after-switch interval ended: raise the passes"
            )
        logger.warning("switch: after %.0f records/s (%s); replaying to the end", after.throughput, after.bound)
        _wait_for(sampler, total)
        events["last record"] = time.time() - start
        final = cluster.stop_with_savepoint(job, work / "savepoints", SAVEPOINT_TIMEOUT)
    finally:
        sampler.stopping.set()
        sampler.join(timeout=5)
        for running in [j["id"] for j in cluster.rest("/jobs")["jobs"] if j["status"] not in FINAL_STATES]:
            cluster.cancel(running)
    state = read_counts(final, operators, work / "final-state.jsonl")
    counts = check_counts(state, frame, keys, passes, sampler.total())  # the last savepoint flushed every sink
    return SwitchRun(before, after, sampler.samples, events, switched, reconfigured, counts, windows)


def _interval(bed: Testbed, sink_dir: Path, warmup: float, duration: float, start: float) -> tuple:
    """An :class:`Interval` of ``duration`` seconds, ``warmup`` seconds after the first record reached the sink.

    (A job restarted from a savepoint runs before its sources emit: they read the trace and route it first.)
    """
    deadline = time.monotonic() + FIRST_RECORD_TIMEOUT
    while sink_records(sink_dir) == 0:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no record reached the sink ({sink_dir}) in {FIRST_RECORD_TIMEOUT:.0f} s")
        time.sleep(0.2)
    interval, (began, ended) = measure(bed, sink_dir, warmup=warmup, duration=duration)
    return interval, (began - start, ended - start)


def _switch_command(bed, cluster, job: str, store: Path, job_args: list[str], operators, savepoints: Path) -> dict:
    """``locality switch flink`` to the store's current version, run in the JobManager's server; its JSON."""
    command = [sys.executable, "-m", "locality.cli", "switch", "flink",
               "--rest", cluster.url, "--job", job, "--store", str(store),
               "--savepoint-dir", savepoints.as_uri(), "--jar", str(JAR), "--entry-class", MAIN,
               *operators, "--json", "--", *job_args]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = bed.run(cluster.jobmanager, command, timeout=SWITCH_TIMEOUT, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"locality switch flink exited with {done.returncode}: {done.stderr[-4000:]}")
    logger.info("locality switch flink: %s", done.stderr.strip())
    return json.loads(done.stdout)


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
