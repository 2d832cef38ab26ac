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

The sink's reports are files of the TaskManagers' servers (:class:`SinkFolder`): with private files
each server holds its own subtasks' reports, read from inside it (:meth:`Testbed.call_in`), as one
reads a file on another machine; without, they all see one folder, which the same reads find once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from testbed.network import LinkCounters, Server, Testbed

__all__ = ["Interval", "Sample", "SinkFolder", "take_sample", "process_cpu_seconds", "sink_counts", "sink_records"]

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
