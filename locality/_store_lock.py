"""The writer lock of a configuration store: one writer at a time, across threads and processes.

An exclusive ``fcntl.flock`` on the store's ``LOCK`` file keeps other
processes out [1]_; a re-entrant thread lock in front of it keeps other
threads of this process out (two ``flock`` calls of one process on two file
descriptors would conflict with each other, so the process keeps one lock
object per file). The kernel drops an ``flock`` when its holder dies, even by
``kill -9``, so a crash never leaves a store locked. The holder writes its
pid, host, command and start time into the file for whoever waits; the file
itself is never deleted (a process waiting on a deleted file's lock would
share the store with whoever creates the next one).

References
----------
.. [1] flock(2), Linux man-pages: https://man7.org/linux/man-pages/man2/flock.2.html
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from locality._store_files import read_json, set_aside
from locality.errors import StoreBusyError, StoreError

__all__ = ["WriterLock"]

logger = logging.getLogger(__name__)

_POLL_SECONDS = 0.05


class WriterLock:
    """The process's hold on one store's lock file: a thread lock (threads) over an ``flock`` (processes).

    Re-entrant in the thread that holds it, so a job can hold the lock around
    several writes (the online job: statistics, a version, its decision).
    """

    _registry: dict[Path, WriterLock] = {}
    _registry_guard = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.path = path
        self.thread_lock = threading.RLock()
        self.depth = 0
        self.owner: int | None = None  # thread ident of the holder
        self.fd: int | None = None

    @classmethod
    def of(cls, path: Path) -> WriterLock:
        """The one lock object of this process for the lock file ``path``."""
        path = path.resolve()
        with cls._registry_guard:
            return cls._registry.setdefault(path, cls(path))

    def held(self) -> bool:
        """True in the thread that holds the lock."""
        return self.depth > 0 and self.owner == threading.get_ident()

    def acquire(self, timeout: float, job: str) -> bool:
        """Take the lock; True when this call took it (False: re-entered)."""
        deadline = time.monotonic() + timeout
        if not self.thread_lock.acquire(timeout=max(timeout, 0.0)):
            raise self._busy(timeout)
        if self.depth:
            self.depth += 1
            return False
        try:
            self.fd = self._flock(deadline, timeout)
        except BaseException:
            self.thread_lock.release()
            raise
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": job,
        }
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, (json.dumps(holder) + "\n").encode(), 0)
        self.depth, self.owner = 1, threading.get_ident()
        return True

    def release(self) -> None:
        self.depth -= 1
        if self.depth == 0 and self.fd is not None:
            self.owner = None
            try:
                os.ftruncate(self.fd, 0)
            finally:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
                os.close(self.fd)
                self.fd = None
        self.thread_lock.release()

    def _open(self) -> int:
        """The lock file's descriptor; a directory (or other non-file) in its place is set aside first.

        Nobody can hold a lock on what is not a file (writers open it
        read-write), so setting it aside races only with other writers doing
        the same: whoever renames second finds the new file.
        """
        for _ in range(3):
            try:
                return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except IsADirectoryError:
                try:
                    set_aside(self.path, "the store's lock file")
                except StoreError:
                    if os.path.isdir(self.path):
                        raise
            except OSError as exc:
                raise StoreError(f"cannot lock the store {self.path.parent}: {self.path}: {exc.strerror}") from None
        raise StoreError(f"cannot lock the store {self.path.parent}: {self.path} keeps coming back as a directory")

    def _flock(self, deadline: float, timeout: float) -> int:
        fd = self._open()
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                pass
            except OSError as exc:
                os.close(fd)
                raise StoreError(f"cannot lock the store {self.path.parent}: {exc.strerror}") from None
            if time.monotonic() >= deadline:
                os.close(fd)
                raise self._busy(timeout)
            if not announced:
                logger.warning("store %s is held by %s; waiting up to %g s", self.path.parent, self._holder(), timeout)
                announced = True
            time.sleep(_POLL_SECONDS)

    def _busy(self, timeout: float) -> StoreBusyError:
        return StoreBusyError(
            f"store busy: held by {self._holder()}; gave up waiting for {self.path.parent} after {timeout:g} s "
            "(retry later, or wait longer with --lock-timeout)"
        )

    def _holder(self) -> str:
        try:
            doc = read_json(self.path, "the store's lock file", limit=64 * 1024)
        except StoreError:
            doc = None
        if not isinstance(doc, dict) or any(field not in doc for field in ("pid", "command", "host", "since")):
            return "a process that has not written its name yet"
        return f"pid {doc['pid']} ({doc['command']}, host {doc['host']}) since {doc['since']}"
