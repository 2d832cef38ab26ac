"""What one run of a job across the testbed did: throughput, bytes per link, CPU, and what bounded it.

A :class:`Sample` reads, at one instant, every server's link counters, the CPU time of every
process inside each server, the machine's CPU counters (``/proc/stat``: the machine is shared,
so a busy machine can bound a run that the testbed alone would not), and what each sink subtask
last reported (:func:`sink_counts`: the time and its records so far, written by the job's
``CountingSink`` every 200 ms). :meth:`Interval.between` turns two samples into rates:

- ``throughput``: records per second into the sink (each sink subtask's records over its own
  reporting times, summed);
- per server: payload and wire bytes sent and received, and the busier direction's share of the
  link's rate (``link_use``);
- ``cpu_cores``: cores the testbed's processes used; ``machine_busy``: the machine's busy share;
- ``bound``: ``network`` when a link ran at >= 90% of its rate, ``cpu`` when the machine was >= 90%
  busy, else ``neither`` (a run is usually bounded by one: the figures say which).

What a piece of a job costs it (an engine's sketcher) is told apart by phases: the piece works in the
even phases of some seconds of the epoch only, within one running job, and :func:`phase_rates` turns the
reports of its counters (each ``(seconds since the epoch, records so far)``, by source: a sink subtask, an
instance) into records a second per phase; :func:`phase_ratios` sets each phase with the piece beside the
mean of the two without around it. Two runs apart, or two jobs side by side, differ by more than 5% on
this shared machine (each job's code is JIT-compiled anew); the phases of one job share its code, its
placement and the machine's slow minutes.

The sink's reports are files of the TaskManagers' servers (:class:`SinkFolder`): with private files
each server holds its own subtasks' reports, read from inside it (:meth:`Testbed.call_in`), as one
reads a file on another machine; without, they all see one folder, which the same reads find once.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from testbed.network import LinkCounters, Server, Testbed

__all__ = [
    "Interval",
    "PhaseRate",
    "Sample",
    "SinkFolder",
    "first_phase_without",
    "phase_rates",
    "phase_ratios",
    "process_cpu_seconds",
    "sink_counts",
    "sink_records",
    "take_sample",
]

NETWORK_BOUND_USE = 0.9
CPU_BOUND_BUSY = 0.9
_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` (0 if it has exited)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15 of stat)


def _machine_cpu() -> tuple[float, float]:
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values) - idle) / _TICKS, sum(values) / _TICKS


@dataclass(frozen=True)
class SinkFolder:
    """The folder ``path`` the sink's subtasks report to, in the files of the TaskManagers' ``servers``."""

    bed: Testbed
    servers: tuple[Server, ...]
    path: str

    @classmethod
    def of(cls, bed: Testbed, servers: Sequence[Server], path: str | Path) -> SinkFolder:
        return cls(bed, tuple(servers), str(path))

    def reports(self) -> dict[int, str]:
        """Each sink subtask's last report (``<epoch ms> <records>``), by subtask, from every server."""
        found: dict[int, str] = {}
        for server in self.servers:
            found |= self.bed.call_in(server, lambda: _read_reports(Path(self.path)))
        return found


def _read_reports(folder: Path) -> dict[int, str]:
    """The ``sink-<subtask>.txt`` files of ``folder`` as this process sees its files (none: empty)."""
    if not folder.is_dir():
        return {}
    return {int(path.stem.split("-")[1]): path.read_text() for path in folder.glob("sink-*.txt")}


def sink_counts(sink: SinkFolder | None) -> list[tuple[float, int]]:
    """``(seconds since the epoch, records)`` each sink subtask last reported to ``sink``, by subtask."""
    if sink is None:
        return []
    counts = []
    for _, report in sorted(sink.reports().items()):
        millis, records = report.split()
        counts.append((int(millis) / 1000, int(records)))
    return counts


def sink_records(sink: SinkFolder | None) -> int:
    """The records every sink subtask has reported to ``sink``, summed."""
    return sum(records for _, records in sink_counts(sink))


@dataclass(frozen=True)
class Sample:
    """Counters at one instant."""

    time: float
    links: list[LinkCounters]
    cpu_seconds: list[float]
    machine_busy: float
    machine_total: float
    sink: list[tuple[float, int]]


def take_sample(bed: Testbed, sink_folder: SinkFolder | None = None) -> Sample:
    """Read every counter now (the sink's reports from ``sink_folder``, if given)."""
    sink = sink_counts(sink_folder)
    busy, total = _machine_cpu()
    return Sample(
        time.monotonic(),
        bed.counters(),
        [sum(process_cpu_seconds(pid) for pid in bed.pids(server)) for server in bed.servers],
        busy,
        total,
        sink,
    )


@dataclass(frozen=True)
class Interval:
    """Rates between two samples; per-server lists are by server index."""

    seconds: float
    records: int
    throughput: float
    sent_payload: list[int]
    received_payload: list[int]
    link_use: list[float]
    cpu_cores: list[float]
    testbed_cpu_cores: float
    machine_busy: float
    bound: str

    @classmethod
    def between(cls, first: Sample, last: Sample, rate_mbit: float | None) -> Interval:
        seconds = last.time - first.time
        moved = [b - a for a, b in zip(first.links, last.links)]
        if rate_mbit:
            capacity = rate_mbit * 1e6 / 8 * seconds
            link_use = [max(m.sent_bytes, m.received_bytes) / capacity for m in moved]
        else:
            link_use = [0.0 for _ in moved]
        cpu = [(b - a) / seconds for a, b in zip(first.cpu_seconds, last.cpu_seconds)]
        machine_busy = (last.machine_busy - first.machine_busy) / max(last.machine_total - first.machine_total, 1e-9)
        if max(link_use) >= NETWORK_BOUND_USE:
            bound = "network"
        elif machine_busy >= CPU_BOUND_BUSY:
            bound = "cpu"
        else:
            bound = "neither"
        records = sum(b[1] - a[1] for a, b in zip(first.sink, last.sink))
        throughput = sum((b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(first.sink, last.sink) if b[0] > a[0])
        return cls(
            seconds,
            records,
            throughput,
            [m.sent_payload for m in moved],
            [m.received_payload for m in moved],
            link_use,
            cpu,
            sum(cpu),
            machine_busy,
            bound,
        )

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PhaseRate:
    """Records a second in one phase (its first and last second left out), with the piece under test working
    (an even phase) or not; ``throughput`` is None when a source had fewer than two reports inside the phase."""

    phase: int
    sketching: bool
    throughput: float | None
    sources: dict


#: The budget of sketch updates a second that sketches every record (Java's ``SketcherOptions.EVERY_RECORD``):
#: no instance reaches it, so nothing is sampled and the counts are Space-Saving's of the whole stream.
EVERY_RECORD = 2**31 - 1
#: The sketchers' default budget a second per instance (Java's ``SketcherOptions.DEFAULT_UPDATES_PER_SECOND``).
DEFAULT_BUDGET = 1_000


def budget_label(budget: int) -> str:
    """A sketcher's budget as a plot or a table names it."""
    return "every record" if budget == EVERY_RECORD else f"{budget:,}/s"


def first_phase_without(after: float, seconds: int) -> int:
    """The first whole phase of ``seconds`` beginning after ``after`` (seconds since the epoch) in which the piece
    does not work (an odd one): a run measured from it has a phase without at either end of every phase with."""
    first = math.ceil(after / seconds) + 1
    return first + 1 - first % 2


def phase_rates(
    reports: Mapping[object, Sequence[tuple[float, int]]], first: int, phases: int, seconds: int
) -> list[PhaseRate]:
    """Per phase from ``first``: each source's records a second between its first and last report inside the phase
    (its first and last second left out), and their sum."""
    rates = []
    for phase in range(first, first + phases):
        start, stop = phase * seconds + 1, (phase + 1) * seconds - 1
        by_source: dict = {}
        for source, series in reports.items():
            inside = sorted({at: n for at, n in series if start <= at <= stop}.items())
            span = inside[-1][0] - inside[0][0] if inside else 0
            by_source[source] = (inside[-1][1] - inside[0][1]) / span if span > 0 else None
        known = None not in by_source.values()
        rates.append(PhaseRate(phase, phase % 2 == 0, sum(by_source.values()) if known else None, by_source))
    return rates


def phase_ratios(rates: Sequence[PhaseRate]) -> list[float]:
    """For each phase with the piece working, between two without: its throughput over their mean."""
    return [
        p.throughput / ((before.throughput + after.throughput) / 2)
        for before, p, after in zip(rates, rates[1:], rates[2:])
        if p.sketching and None not in (before.throughput, p.throughput, after.throughput)
    ]
