"""The writers' lease of a configuration store: one writer at a time, with only conditional writes of one object.

A store in an S3 bucket has no lock to take, so writers share a *lease*: the object ``LEASE`` names
its holder (a random ``writer`` token, the job, host and pid) and when the lease ``expires``. A writer
takes it with a conditional write (create when there is none; replace, on the ETag read, when the one
there was released or has expired), renews it in the background every third of its length, and
releases it when done. A conditional write that loses means another writer took it first: read again.
The lease alone does not make writes safe (a writer can stall past its expiry without noticing):
the store fences such a writer out of ``CURRENT`` and ``SCHEDULE`` with the holder's token
(``docs/store-protocol.md``, step 3).

A holder on this host whose process is gone (its pid runs no more, or runs another process) frees the
lease at once: a ``kill -9`` on one machine blocks nobody for the lease's length. Within a process, a
re-entrant thread lock in front of the lease keeps other threads out, and lets a job hold the lease
around several writes (the online job: statistics, a version, its decision).
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import threading
import time
import uuid
from datetime import datetime, timezone
from functools import cache

from locality.errors import LeaseLostError, StoreBusyError, StoreError, StoreUnavailableError
from locality.storage import ConditionFailed, NotAnObject, Objects

__all__ = ["WriterLease", "LEASE", "process_is_gone", "this_process", "is_gone"]

logger = logging.getLogger(__name__)

LEASE = "LEASE"
_LEASE_LIMIT = 64 * 1024
_FIRST_POLL, _LAST_POLL = 0.02, 2.0


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")


@cache
def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from /proc); None when it runs no more (or is a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        # fields[0] is stat(5)'s field 3, the state; fields[19] its field 22, starttime
        return None if fields[0] in (b"Z", b"X") else fields[19].decode()
    except (OSError, IndexError):
        return None


def process_is_gone(pid: int, start: str | None = None) -> bool:
    """Whether process ``pid`` (started at ``start``, when known) has ended on this host."""
    if not os.path.isdir("/proc"):
        return False  # cannot tell: wait for the lease to expire
    running = _process_start(pid)
    return running is None or (start is not None and running != start)


def this_process() -> dict:
    """Who this process is, so that another process on this host can tell when it is gone."""
    return {
        "host": socket.gethostname(),
        "boot": _boot_id(),
        "pid": os.getpid(),
        "pid_start": _process_start(os.getpid()),
    }


def is_gone(doc: dict) -> bool:
    """Whether the process ``doc`` names (:func:`this_process`'s fields) ran on this host and has ended."""
    same_machine = doc.get("host") == socket.gethostname() and doc.get("boot") == _boot_id() and _boot_id()
    pid = doc.get("pid")
    return bool(same_machine and isinstance(pid, int) and process_is_gone(pid, doc.get("pid_start")))


class WriterLease:
    """The process's hold on the lease of one store (one object per store and process: :meth:`of`)."""

    _registry: dict[str, WriterLease] = {}
    _registry_guard = threading.Lock()

    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self.thread_lock = threading.RLock()
        self.depth = 0
        self.owner: int | None = None  # thread ident of the holder
        self.token: str | None = None
        self.etag: str | None = None
        self.doc: dict = {}
        self.lost: str | None = None  # why the lease was lost, once it was
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._guard = threading.Lock()  # the renewer and the holder replace LEASE one at a time

    @classmethod
    def of(cls, objects: Objects) -> WriterLease:
        """The one lease object of this process for the store of ``objects`` (by its :attr:`~Objects.identity`)."""
        key = objects.identity
        with cls._registry_guard:
            lease = cls._registry.get(key)
            if lease is None:
                lease = cls._registry[key] = cls(objects)
            return lease

    def held(self) -> bool:
        """True in the thread that holds the lease."""
        return self.depth > 0 and self.owner == threading.get_ident()

    # ------------------------------------------------------------------ taking and giving back
    def acquire(self, timeout: float, job: str, seconds: float) -> bool:
        """Take the lease for ``seconds`` (renewed while held); True when this call took it (False: re-entered).

        Raises
        ------
        StoreBusyError
            Another writer held it for ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        if not self.thread_lock.acquire(timeout=max(timeout, 0.0)):  # another thread of this process holds it
            raise StoreBusyError(self._busy(self.doc or None, timeout), parameter="lock_timeout")
        if self.depth:
            self.depth += 1
            return False
        try:
            self._take(deadline, timeout, job, seconds)
        except BaseException:
            self.thread_lock.release()
            raise
        self.depth, self.owner, self.lost = 1, threading.get_ident(), None
        self._stop.clear()
        self._renewer = threading.Thread(
            target=self._renew_until_released, args=(seconds,), name=f"locality-lease-{self.token[:8]}", daemon=True
        )
        self._renewer.start()
        return True

    def release(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.owner = None
            self._stop.set()
            if self._renewer is not None:
                self._renewer.join()
            if self.lost is None:
                self._write({**self.doc, "released": True, "expires": time.time()}, quiet=True)
            self.token = self.etag = None
        self.thread_lock.release()

    def check(self) -> None:
        """Raise LeaseLostError unless this writer still holds a live lease (called before each write)."""
        if self.lost is None and time.time() >= self.doc.get("expires", 0):
            self.lost = f"it expired at {_iso(self.doc.get('expires', 0))} before it could be renewed"
        if self.lost is not None:
            raise LeaseLostError(
                f"this writer lost the lease of the store {self.objects.location}: {self.lost}; "
                "nothing more is written (retry later)"
            )

    def _take(self, deadline: float, timeout: float, job: str, seconds: float) -> None:
        token = uuid.uuid4().hex
        poll = _FIRST_POLL
        announced = False
        while True:
            now = time.time()
            mine = {
                "writer": token,
                "job": job,
                **this_process(),
                "since": _iso(now),
                "expires": now + seconds,
                "seconds": seconds,
                "released": False,
            }
            held, etag = self._read()
            try:
                if etag is None:
                    self.etag = self.objects.create(LEASE, _encode(mine))
                elif _is_free(held, now):
                    self.etag = self.objects.replace(LEASE, _encode(mine), etag)
                else:
                    if time.monotonic() >= deadline:
                        raise StoreBusyError(self._busy(held, timeout), parameter="lock_timeout")
                    if not announced:
                        logger.warning(
                            "store %s is held by %s; waiting up to %g s", self.objects.location, _holder(held), timeout
                        )
                        announced = True
                    time.sleep(random.uniform(poll / 2, poll))  # jitter: waiters do not knock together
                    poll = min(poll * 2, _LAST_POLL)
                    continue
            except ConditionFailed:
                continue  # another writer took it (or renewed it) between our read and our write: read again
            self.token, self.doc = token, mine
            return

    def _read(self) -> tuple[dict | None, str | None]:
        """The lease as held now (None when unreadable) and its ETag (None when there is no lease)."""
        try:
            blob = self.objects.get(LEASE, limit=_LEASE_LIMIT)
        except NotAnObject as exc:
            # A directory or a FIFO where the lease belongs: nobody can hold that. Keep it aside, take the name.
            aside = f"{LEASE}.damaged-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
            logger.warning("the store's lease (%s) was damaged (%s); set aside as %s", exc.where, exc.problem, aside)
            self.objects.set_aside(LEASE, aside)
            return None, None
        if blob is None:
            return None, None
        try:
            doc = json.loads(blob.data)
        except ValueError:
            doc = None
        return (doc if isinstance(doc, dict) else None), blob.etag

    # ------------------------------------------------------------------ renewing
    def _renew_until_released(self, seconds: float) -> None:
        while not self._stop.wait(seconds / 3):
            if self.lost is not None:
                return
            now = time.time()
            try:
                self._write({**self.doc, "expires": now + seconds})
            except ConditionFailed:
                self.lost = "another writer took it over (its renewal was refused)"
                logger.error("store %s: %s", self.objects.location, self.lost)
                return
            except (StoreUnavailableError, StoreError) as exc:
                if time.time() >= self.doc["expires"]:
                    self.lost = f"it could not be renewed before it expired ({exc})"
                    logger.error("store %s: %s", self.objects.location, self.lost)
                    return
                logger.warning("store %s: renewing the lease failed (%s); trying again", self.objects.location, exc)

    def _write(self, doc: dict, *, quiet: bool = False) -> None:
        with self._guard:
            try:
                self.etag = self.objects.replace(LEASE, _encode(doc), self.etag)
                self.doc = doc
            except (ConditionFailed, StoreError):
                if not quiet:
                    raise
                logger.info("store %s: the lease was not released (taken over, or unreachable)", self.objects.location)

    def _busy(self, held: dict | None, timeout: float) -> str:
        return (
            f"store busy: held by {_holder(held)}; gave up waiting for {self.objects.location} after {timeout:g} s "
            "(retry later, or wait longer: lock_timeout)"
        )


def _encode(doc: dict) -> bytes:
    return (json.dumps(doc, sort_keys=True) + "\n").encode()


def _is_free(doc: dict | None, now: float) -> bool:
    """Whether a writer may take over the lease ``doc``: unreadable, released, expired, or its process gone."""
    if doc is None or doc.get("released") is True:
        return True
    expires = doc.get("expires")
    return not isinstance(expires, (int, float)) or now >= expires or is_gone(doc)


def _holder(doc: dict | None) -> str:
    if not isinstance(doc, dict) or any(field not in doc for field in ("pid", "job", "host", "since")):
        return "a writer that has not written its name yet"
    until = f", its lease runs until {_iso(doc['expires'])}" if isinstance(doc.get("expires"), (int, float)) else ""
    return f"pid {doc['pid']} ({doc['job']}, host {doc['host']}) since {doc['since']}{until}"
