"""Stage progress of a job on stderr (rich), with the time each stage took kept for the report."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Stages"]

logger = logging.getLogger(__name__)


class Stages:
    """Shows each stage of a job as it runs (spinner, bar when the work is counted, elapsed time).

    ``timings`` maps each finished stage to its seconds. With ``show=False``
    nothing is drawn (tests, ``--json`` runs in pipes still get the timings).
    """

    def __init__(self, show: bool = True) -> None:
        self.timings: dict[str, float] = {}
        self._progress = None
        self._task = None
        if show:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=False,
            )

    def __enter__(self) -> Stages:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block under ``name`` and show it while it runs."""
        started = time.perf_counter()
        if self._progress is not None:
            self._task = self._progress.add_task(name, total=None)
        try:
            yield
        finally:
            self.timings[name] = round(time.perf_counter() - started, 3)
            if self._progress is not None:
                self._progress.update(self._task, total=1, completed=1)
            logger.info("%s: %.2f s", name, self.timings[name])

    def advance(self, done: int, total: int) -> None:
        """Counted progress inside the current stage (e.g. partitions merged)."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, total=total, completed=done)
