"""Where a computation's time goes: wall-clock and CPU seconds per named stage.

CPU seconds (this process's, :func:`time.process_time`) are the figure to
compare on a shared machine, where wall-clock time depends on what else runs;
the optimizer records both so that its report says which stage costs what.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Stopwatch"]


class Stopwatch:
    """Seconds per stage, summed over the stage's runs; ``wall`` and ``cpu`` map stage names to seconds."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the ``with`` block as (part of) stage ``name``."""
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - wall
            self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - cpu

    def merge(self, other: Stopwatch) -> Stopwatch:
        """Add ``other``'s stages to this one's; returns self."""
        for name, seconds in other.wall.items():
            self.wall[name] = self.wall.get(name, 0.0) + seconds
            self.cpu[name] = self.cpu.get(name, 0.0) + other.cpu[name]
        return self

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{stage: {"wall": s, "cpu": s}}`` in the order the stages first ran."""
        return {name: {"wall": self.wall[name], "cpu": self.cpu[name]} for name in self.wall}
