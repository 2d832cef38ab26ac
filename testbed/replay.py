"""The replay job (``jvm/examples/locality-flink-bench``) on a :class:`~testbed.flink.FlinkCluster`, measured.

Two kinds of run, as the core paper's evaluation needs them (Caneill et al., Middleware 2016,
Section 4):

- :func:`run_bounded` replays the trace ``passes`` times and finishes: the bytes every server
  sent while it ran, less what the idle cluster sends over as long (:func:`idle_rates`:
  heartbeats) and less what the same job sends for no records (:func:`job_overhead`: its
  deployment, status reports and end, about 40-50 kB per server), are the bytes it moved between
  servers, to set beside ``(1 - locality) x records x record size``;
- :func:`run_steady` replays without end, waits ``warmup`` seconds, measures an interval of
  ``duration`` seconds (:class:`~testbed.measure.Interval`: throughput at the sink, bytes per
  link, CPU) and cancels the job;
- :func:`run_phased` replays without end with the job's sketcher working in every other phase of
  a few seconds, and measures the throughput of each phase: what the sketcher costs, told apart on a
  machine too noisy for two runs apart, or two jobs side by side, to tell 5% (the same job's
  throughput varied 2x between runs, and two identical jobs at once differed by up to 52%).

Each checks that subtask *i* of every operator ran on the same server (the tables' topology puts
instance *i* of each operator on server *i*); otherwise the locality measured would not be the
locality ``locality evaluate`` computes, and the run fails.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from testbed.flink import FlinkCluster, JobVertex
from testbed.measure import (
    Interval,
    PhaseRate,
    SinkFolder,
    first_phase_without,
    phase_rates,
    sink_counts,
    sink_records,
    take_sample,
)
from testbed.network import Testbed

logger = logging.getLogger(__name__)

__all__ = [
    "JAR",
    "MAIN",
    "BoundedRun",
    "Routing",
    "Sketching",
    "check_colocated",
    "idle_rates",
    "job_overhead",
    "measure",
    "run_phased",
    "run_bounded",
    "run_steady",
    "sink_folder",
]

REPO = Path(__file__).resolve().parents[1]
JAR = REPO / "jvm" / "examples" / "locality-flink-bench" / "target" / "locality-flink-bench-0.1.0-job.jar"
MAIN = "io.locality.flink.bench.ReplayJob"
BOUNDED_TIMEOUT = 900.0
#: How often the sink's reports are read in :func:`run_phased` (its subtasks report every 200 ms).
REPORT_SECONDS = 0.2
#: The trace of :func:`job_overhead`'s run, in each TaskManager's files.
EMPTY_TRACE = "/tmp/locality-trace/empty.tsv"


@dataclass(frozen=True)
class Routing:
    """What the job keys its operators by: ``tables`` (the current version of ``store``) or ``hash``.

    Both read ``store`` (a directory the servers see, or an ``s3://`` URI) for the parallelism and max
    parallelism its tables are for.
    """

    name: str
    store: Path | str

    def args(self) -> list[object]:
        return ["--store", self.store, "--mode", self.name]


@dataclass(frozen=True)
class BoundedRun:
    """A finished replay: records at the sink, its duration, payload each server sent (idle traffic removed)."""

    records: int
    seconds: float
    sent_payload: list[float]


def sink_folder(cluster: FlinkCluster) -> SinkFolder:
    """A fresh folder for a run's sink reports, in the TaskManagers' files."""
    return SinkFolder.of(cluster.bed, cluster.taskmanagers, f"/tmp/locality-sink-{uuid.uuid4().hex[:12]}")


@dataclass(frozen=True)
class Sketching:
    """The replay job's sketcher: the store it publishes into, its budget of sketch updates a second per subtask
    (``ReplayJob --sketch-updates-per-second``; None: the sketcher's default), and the phases it works in (``ReplayJob
    --sketch-phases``: every other phase of that many seconds; None: always)."""

    store: Path | str
    updates_per_second: int | None = None
    phases: int | None = None

    def args(self) -> list:
        budget = [] if self.updates_per_second is None else ["--sketch-updates-per-second", self.updates_per_second]
        phases = [] if self.phases is None else ["--sketch-phases", self.phases]
        return ["--sketches", self.store, *budget, *phases]


def _submit(
    cluster: FlinkCluster,
    jar: Path,
    trace: Path,
    routing: Routing,
    padding: int,
    passes: int,
    sketches: Sketching | None = None,
) -> tuple:
    """Submit the replay (with its sketcher, if given); returns the job id and the fresh folder its sink reports
    to."""
    if not jar.is_file():
        raise FileNotFoundError(f"{jar} is not built: run `make jvm` (mvn -f jvm/pom.xml install)")
    sink = sink_folder(cluster)
    args = ["--trace", trace, "--padding", padding, "--passes", passes, "--sink-dir", sink.path, *routing.args()]
    if sketches is not None:
        args += sketches.args()
    return cluster.submit(jar, MAIN, args), sink


def check_colocated(vertices: list[JobVertex]) -> None:
    hosts = {vertex.hosts for vertex in vertices}
    if len(hosts) != 1:
        placement = {vertex.name: vertex.hosts for vertex in vertices}
        raise RuntimeError(f"subtask i of the operators ran on different servers: {placement}")


def idle_rates(bed: Testbed, seconds: float) -> list[float]:
    """Payload bytes per second each server sends with the cluster up and no job running."""
    first = take_sample(bed)
    time.sleep(seconds)
    last = take_sample(bed)
    elapsed = last.time - first.time
    return [(b - a).sent_payload / elapsed for a, b in zip(first.links, last.links)]


def job_overhead(
    bed: Testbed, cluster: FlinkCluster, routing: Routing, *, idle: list[float], jar: Path = JAR
) -> list[float]:
    """Payload each server sends for the replay job on no records (idle traffic removed): the run's fixed cost.

    The empty trace is written into each TaskManager's files (servers with files of their own see no other).
    """
    for server in cluster.taskmanagers:
        bed.write_file(server, EMPTY_TRACE, b"")
    return run_bounded(bed, cluster, Path(EMPTY_TRACE), routing, padding=0, passes=1, idle=idle, jar=jar).sent_payload


def run_bounded(
    bed: Testbed,
    cluster: FlinkCluster,
    trace: Path,
    routing: Routing,
    *,
    padding: int,
    passes: int,
    idle: list[float],
    overhead: list[float] | None = None,
    jar: Path = JAR,
) -> BoundedRun:
    """Replay ``trace`` ``passes`` times; the payload each server sent, less ``idle`` rates and ``overhead``."""
    first = take_sample(bed)
    job, sink = _submit(cluster, jar, trace, routing, padding, passes)
    state = cluster.wait_final(job, BOUNDED_TIMEOUT)
    last = take_sample(bed)
    if state != "FINISHED":
        raise RuntimeError(f"the replay job ended {state}: {cluster.failure(job)}")
    vertices = cluster.vertices(job)
    check_colocated(vertices)
    seconds = last.time - first.time
    fixed = overhead or [0.0] * len(idle)
    sent = [(b - a).sent_payload - rate * seconds - f for a, b, rate, f in zip(first.links, last.links, idle, fixed)]
    return BoundedRun(sink_records(sink), seconds, sent)


def run_steady(
    bed: Testbed,
    cluster: FlinkCluster,
    trace: Path,
    routing: Routing,
    *,
    padding: int,
    warmup: float,
    duration: float,
    jar: Path = JAR,
) -> Interval:
    """Replay ``trace`` without end; measure ``duration`` seconds after ``warmup``; cancel."""
    job, sink = _submit(cluster, jar, trace, routing, padding, 0)
    try:
        cluster.wait_running(job)
        check_colocated(cluster.vertices(job))
        interval, _ = measure(bed, sink, warmup=warmup, duration=duration)
        if cluster.state(job) != "RUNNING":
            raise RuntimeError(f"the replay job stopped while measured: {cluster.failure(job)}")
    finally:
        cluster.cancel(job)
    return interval


def run_phased(
    bed: Testbed,
    cluster: FlinkCluster,
    trace: Path,
    routing: Routing,
    sketching: Sketching,
    *,
    padding: int,
    warmup: float,
    phase_seconds: int,
    phases: int,
    jar: Path = JAR,
) -> list[PhaseRate]:
    """Replay ``trace`` without end, its sketcher working in every other phase of ``phase_seconds`` (``ReplayJob
    --sketch-phases``: the even phases of the epoch); after ``warmup`` seconds, the throughput at the sink in each
    of the next ``phases`` whole phases, from one without the sketcher (:func:`testbed.measure.phase_rates`); cancel.
    """
    job, sink = _submit(cluster, jar, trace, routing, padding, 0, replace(sketching, phases=phase_seconds))
    reports: dict[int, list[tuple[float, int]]] = {}
    try:
        cluster.wait_running(job)
        check_colocated(cluster.vertices(job))
        time.sleep(warmup)
        first = first_phase_without(time.time(), phase_seconds)
        end = (first + phases) * phase_seconds
        while time.time() < end + 1:  # bounded: the phases' end, and the reports of the last one
            for subtask, report in enumerate(sink_counts(sink)):
                reports.setdefault(subtask, []).append(report)
            time.sleep(REPORT_SECONDS)
        if cluster.state(job) != "RUNNING":
            raise RuntimeError(f"the replay job stopped while measured: {cluster.failure(job)}")
    finally:
        cluster.cancel(job)
    return phase_rates(reports, first, phases, phase_seconds)


def measure(bed: Testbed, sink: SinkFolder, *, warmup: float, duration: float) -> tuple[Interval, tuple[float, float]]:
    """After ``warmup`` seconds, an :class:`Interval` of ``duration`` seconds at the sink reporting to ``sink``.

    Also returns when its first and last samples were taken (seconds since the epoch).
    """
    time.sleep(warmup)
    first = take_sample(bed, sink)
    began = time.time()
    time.sleep(duration)
    last = take_sample(bed, sink)
    return Interval.between(first, last, bed.rate_mbit), (began, time.time())
