"""The configuration store: numbered, immutable versions, an atomically moved ``CURRENT`` pointer, one writer.

Layout of a store rooted at ``ROOT``::

    ROOT/CURRENT                      # text: the number of the current version
    ROOT/LOCK                         # the writers' lock file (never delete it); holds the holder's pid
    ROOT/history.jsonl                # one line per move of CURRENT: version, previous, when, action, reason
    ROOT/SCHEDULE                     # which version is in force from which point (locality.schedule)
    ROOT/versions/000007/manifest.json      # version, created, fingerprint, files, checksums, metadata
    ROOT/versions/000007/configuration/     # RoutingConfiguration.write(): header.json,
                                            #   configuration.json, tables/NN.parquet
    ROOT/versions/000007/<artifacts>        # report.json, report.txt, load.png, migration_plan.json ...
    ROOT/<job state>/...              # e.g. the online job's statistics/ and decisions/ (write_atomically)

**One writer at a time.** Every write happens while holding an exclusive
``fcntl.flock`` on ``ROOT/LOCK`` (:mod:`locality._store_lock`): a second writer (another process, or
another thread of this one) waits up to ``lock_timeout`` seconds, then fails
with :class:`~locality.errors.StoreBusyError` naming the holder. The kernel
releases the lock when its holder dies, even by ``kill -9``, so a crash never
leaves the store locked. Readers never take the lock: everything they read is
either immutable (a numbered version) or replaced by an atomic rename.

**Publishing**, under the lock: remove what an interrupted writer left
(``.tmp-*`` entries; only the lock holder may, since only it knows no writer
is using them), write the version into ``versions/.tmp-<random>``, fsync every
file, rename the directory to the next number and fsync ``versions/`` (a
rename is atomic on POSIX file systems, and durable once its directory is
synced: :mod:`locality._durable`), replace ``CURRENT`` through a synced temporary file and
``os.replace``, fsync ``ROOT``, append a line to ``history.jsonl``. A kill at
any point leaves the previous current version current and whole; what it
leaves behind is a ``.tmp-*`` entry (removed by the next writer), a complete
version that never became current, or a move of ``CURRENT`` missing from the
history (recorded by the next writer).

**Reruns never roll back.** A publish whose fingerprint (input + parameters)
matches an existing version writes nothing and leaves ``CURRENT`` where it is,
even when that version is older than the current one: moving back is
explicit, with :meth:`ConfigStore.rollback` (``locality rollback``).

**Damage is named.** The manifest records the size and SHA-256 of every file
of the version; reading a configuration checks them first, so a truncated or
altered table raises :class:`~locality.errors.SerializationError` naming the
file instead of routing with half a table.

Why one module of about 500 lines: the store's invariants (one writer, atomic
versions, no silent roll-back, checksums) hold only together, and a reader of
any one operation needs the others; the lock and the durable writes live in
:mod:`locality._store_lock` and :mod:`locality._durable`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from locality._durable import as_bytes, checksums, fsync, fsync_tree, remove, write_bytes
from locality._store_lock import DEFAULT_LOCK_TIMEOUT, WriterLock
from locality.errors import SerializationError, StoreError
from locality.routing import RoutingConfiguration
from locality.schedule import SCHEDULE_FILE, SwitchSchedule

__all__ = ["ConfigStore", "StoredVersion", "PublishResult", "fingerprint", "DEFAULT_LOCK_TIMEOUT"]

logger = logging.getLogger(__name__)

_CURRENT = "CURRENT"
_LOCK = "LOCK"
_HISTORY = "history.jsonl"
_VERSIONS = "versions"
_MANIFEST = "manifest.json"
_CONFIG_DIR = "configuration"
_TMP = ".tmp-"


def fingerprint(inputs: Iterable[tuple[str, int, int]], parameters: Mapping) -> str:
    """SHA-256 over the input files ``(path, size, mtime_ns)`` and the parameters (as sorted JSON)."""
    digest = hashlib.sha256()
    for path, size, mtime in sorted(inputs):
        digest.update(f"{path}\0{size}\0{mtime}\n".encode())
    digest.update(json.dumps(parameters, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class StoredVersion:
    """One complete version of the store."""

    version: int
    path: Path
    manifest: dict

    @property
    def config(self) -> RoutingConfiguration:
        """The routing configuration, read from its Parquet tables after checking their sizes and checksums.

        Raises
        ------
        SerializationError
            A file of the configuration is missing, truncated, altered or unreadable; the message names it.
        """
        self.verify(_CONFIG_DIR)
        try:
            return RoutingConfiguration.read(self.path / _CONFIG_DIR)
        except SerializationError as exc:
            raise SerializationError(f"version {self.version} of the store is damaged: {exc}") from None

    def verify(self, under: str = "") -> None:
        """Check the files recorded in the manifest (all, or those under ``under``) against their size and SHA-256.

        Versions published before the manifest recorded checksums pass unchecked.
        """
        for name, expected in self.manifest.get("checksums", {}).items():
            if under and not name.startswith(f"{under}/"):
                continue
            path = self.path / name
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise SerializationError(
                    f"version {self.version} of the store is damaged: cannot read {path}: {exc.strerror}"
                ) from None
            if len(data) != expected["size"]:
                raise SerializationError(
                    f"version {self.version} of the store is damaged: {path} has {len(data):,} bytes, "
                    f"its manifest recorded {expected['size']:,} (truncated or rewritten)"
                )
            if hashlib.sha256(data).hexdigest() != expected["sha256"]:
                raise SerializationError(
                    f"version {self.version} of the store is damaged: {path} does not match its manifest's SHA-256"
                )

    def read_json(self, name: str) -> dict:
        """An artifact stored as JSON (e.g. ``report.json``, ``migration_plan.json``)."""
        path = self.path / name
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            raise StoreError(f"version {self.version} has no {name!r}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SerializationError(f"version {self.version} of the store is damaged: {path}: {exc}") from None


@dataclass(frozen=True)
class PublishResult:
    """What :meth:`ConfigStore.publish` did.

    ``version`` is the version made from the fingerprint (new, or found);
    ``previous_version`` and ``current_version`` are what ``CURRENT`` named
    before and after. A rerun of an older input has ``created=False`` and
    ``version != current_version``: nothing moved.
    """

    version: int
    previous_version: int | None
    created: bool
    current_version: int | None


class ConfigStore:
    """A directory of versioned routing configurations (see the module docstring for the layout and protocol).

    Parameters
    ----------
    root : str or Path
        The store's directory; created on the first write.
    lock_timeout : float, default 300
        Seconds a write waits for another writer before raising
        :class:`~locality.errors.StoreBusyError`.
    job : str, optional
        What this writer is, recorded in the lock file and the history
        (default: the command line).
    """

    def __init__(
        self, root: str | os.PathLike, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT, job: str | None = None
    ) -> None:
        self.root = Path(root)
        self.lock_timeout = float(lock_timeout)
        self.job = job or " ".join([Path(sys.argv[0]).name, *sys.argv[1:3]]).strip()

    # ------------------------------------------------------------------ reading (never locked)
    def versions(self) -> list[int]:
        """Numbers of the complete versions, oldest first."""
        return [n for n, path in self._numbered() if (path / _MANIFEST).is_file()]

    def current_version(self) -> int | None:
        """The version ``CURRENT`` points at, or None for an empty store.

        Raises
        ------
        StoreError
            The store path is not a directory, or ``CURRENT`` does not hold a version number.
        """
        self._check_is_directory()
        path = self.root / _CURRENT
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"{path} is damaged: {exc}") from None
        if not text.isdigit():
            raise StoreError(
                f"{path} is damaged: {text[:40]!r} is not a version number; versions: {self.versions()} "
                f"(`locality rollback --store {self.root} --to N` repairs it)"
            )
        return int(text)

    def get(self, version: int | None = None) -> StoredVersion:
        """A version (default: the current one).

        Raises
        ------
        StoreError
            The store is missing or empty, ``CURRENT`` is damaged, or there is no such version.
        SerializationError
            The version's manifest is damaged.
        """
        if version is None:
            version = self.current_version()
            if version is None:
                raise StoreError(f"the store {self.root} has no published version yet")
            if not (self._version_dir(version) / _MANIFEST).is_file():
                raise StoreError(
                    f"{self.root / _CURRENT} names version {version}, which the store does not have; "
                    f"versions: {self.versions()} (`locality rollback --store {self.root} --to N` repairs it)"
                )
        path = self._version_dir(version)
        try:
            manifest = json.loads((path / _MANIFEST).read_text())
        except FileNotFoundError:
            raise StoreError(f"the store {self.root} has no version {version}; versions: {self.versions()}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SerializationError(
                f"the manifest of version {version} ({path / _MANIFEST}) is damaged: {exc}"
            ) from None
        if not isinstance(manifest, dict):
            raise SerializationError(f"the manifest of version {version} ({path / _MANIFEST}) is not a JSON object")
        return StoredVersion(version, path, manifest)

    def find(self, fingerprint: str) -> int | None:
        """The newest version published with ``fingerprint``, if any."""
        for version in reversed(self.versions()):
            if self.get(version).manifest.get("fingerprint") == fingerprint:
                return version
        return None

    def history(self) -> list[dict]:
        """Every recorded move of ``CURRENT``, oldest first: ``version``, ``previous``, ``at``, ``action``, ``reason``.

        A line a crash cut short is skipped (and logged).
        """
        try:
            lines = (self.root / _HISTORY).read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return []
        entries = []
        for number, line in enumerate(lines, 1):
            try:
                entry = json.loads(line)
                int(entry["version"])
                entries.append(entry)
            except (ValueError, KeyError, TypeError):
                logger.warning("%s line %d is damaged and skipped: %r", self.root / _HISTORY, number, line[:80])
        return entries

    # ------------------------------------------------------------------ checks before a job starts
    def check_writable(self) -> None:
        """Raise :class:`StoreError` unless a writer could use the store (it may not exist yet).

        Checks, by trying, that the directory (or the nearest existing parent
        it would be created in) accepts a new file.
        """
        self._check_is_directory()
        probe_dir = self.root
        while not probe_dir.exists():
            probe_dir = probe_dir.parent
        if not probe_dir.is_dir():
            raise StoreError(f"the store {self.root} cannot be created: {probe_dir} is a file, not a directory")
        probe = probe_dir / f".probe-{uuid.uuid4().hex}"  # not .tmp-*: a writer's cleanup must not race it
        try:
            probe.touch(exist_ok=False)
            probe.unlink()
        except OSError as exc:
            where = "" if probe_dir == self.root else f" (it would be created in {probe_dir})"
            raise StoreError(f"the store {self.root} is not writable{where}: {exc.strerror}") from None
        versions = self.root / _VERSIONS
        if versions.exists() and not versions.is_dir():
            raise StoreError(f"the store {self.root} is damaged: {versions} is a file, not a directory")

    # ------------------------------------------------------------------ writing (always locked)
    @contextmanager
    def lock(self) -> Iterator[ConfigStore]:
        """Hold the store's writer lock for the block (re-entrant in this thread).

        The first holder after a crash cleans what the crash left: ``.tmp-*``
        entries, and a move of ``CURRENT`` the history does not record.

        Raises
        ------
        StoreBusyError
            Another writer kept the lock for ``lock_timeout`` seconds.
        StoreError
            The store is not a writable directory.
        """
        self._check_is_directory()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the store {self.root}: {exc.strerror}") from None
        writer = WriterLock.of(self.root / _LOCK)
        first = writer.acquire(self.lock_timeout, self.job)
        try:
            if first:
                self._recover()
            yield self
        finally:
            writer.release()

    def publish(
        self,
        config: RoutingConfiguration,
        *,
        fingerprint: str,
        artifacts: Mapping[str, bytes | str | dict] | None = None,
        metadata: Mapping | None = None,
        in_force_from: int | None = None,
    ) -> PublishResult:
        """Write ``config`` and its artifacts as a new version and make it current, atomically, under the lock.

        Parameters
        ----------
        config : RoutingConfiguration
        fingerprint : str
            Identity of the input and parameters (:func:`fingerprint`). When a
            version already has it, nothing is written and ``CURRENT`` stays
            where it is (see :class:`PublishResult`).
        artifacts : mapping of file name -> bytes, str or JSON-ready dict
            Files stored beside the configuration (report, plot, plan).
        metadata : mapping, optional
            Stored in the manifest (e.g. the report's summary, the input paths).
        in_force_from : int, optional
            The point (event time in ms, or the engine's epoch) from which the
            version is in force for routers that route by point
            (:meth:`Router.at <locality.router.Router.at>`): it enters the
            store's :class:`~locality.schedule.SwitchSchedule`, which it also
            seals up to that point. None: routers by point keep the schedule
            they have; routers that follow ``CURRENT`` switch when they see it.

        Raises
        ------
        StoreBusyError
            Another writer held the store for ``lock_timeout`` seconds.
        StoreError
            The version could not be written (read-only store, disk full,
            file size limit): nothing was published.
        InvalidParameterError
            ``in_force_from`` lies before the schedule's seal (nothing was published).
        """
        with self.lock():
            previous = self._current_or_none()
            existing = self.find(fingerprint)
            if existing is not None:
                if existing != previous:
                    logger.warning(
                        "store %s: version %d was made from the same input and parameters; nothing published and "
                        "CURRENT stays at %s (`locality rollback --store %s --to %d` makes it current)",
                        self.root,
                        existing,
                        previous,
                        self.root,
                        existing,
                    )
                return PublishResult(existing, previous, created=False, current_version=previous)
            version = self.next_version()
            schedule = None if in_force_from is None else self.schedule().scheduled(version, in_force_from, previous)
            manifest = {
                "version": version,
                "created": _now(),
                "fingerprint": fingerprint,
                "files": [_CONFIG_DIR, *(artifacts or {})],
                **dict(metadata or {}),
            }
            self._write_version(version, config, artifacts or {}, manifest)
            if schedule is not None:  # before CURRENT: a crash in between leaves the schedule right for its routers
                self._write_schedule(schedule)
            self._move_current(version, previous, "publish", self.job)
        logger.info("store %s: published version %d (previous %s)", self.root, version, previous)
        return PublishResult(version, previous, created=True, current_version=version)

    def rollback(self, version: int, *, reason: str | None = None, in_force_from: int | None = None) -> PublishResult:
        """Make an existing, readable ``version`` current again (recorded in the history with ``reason``).

        With ``in_force_from``, routers by point switch back to it from that
        point on (see :meth:`publish`).

        Raises
        ------
        StoreError
            No such version.
        SerializationError
            The version's files are damaged (then it cannot become current).
        InvalidParameterError
            ``in_force_from`` lies before the schedule's seal.
        """
        with self.lock():
            previous = self._current_or_none()
            stored = self.get(version)
            stored.verify()
            _ = stored.config  # read it whole: a damaged version must not become current
            if in_force_from is not None:
                self._write_schedule(self.schedule().scheduled(version, in_force_from, previous))
            if version != previous:
                self._move_current(version, previous, "rollback", reason or f"no reason given ({self.job})")
        return PublishResult(version, previous, created=False, current_version=version)

    # ------------------------------------------------------------------ the switch schedule
    def schedule(self) -> SwitchSchedule:
        """Which version is in force from which point, for routers that route by point (:mod:`locality.schedule`)."""
        self._check_is_directory()
        return SwitchSchedule.read(self.root)

    def seal(self, until: int) -> SwitchSchedule:
        """Promise that no version will be scheduled before ``until``, so routers by point route up to it.

        Under the lock; a seal never moves back (an earlier ``until`` changes nothing).
        """
        with self.lock():
            schedule = self.schedule().sealed(until, self._current_or_none())
            self._write_schedule(schedule)
        return schedule

    def _write_schedule(self, schedule: SwitchSchedule) -> None:
        self.write_atomically(SCHEDULE_FILE, lambda path: write_bytes(path, as_bytes(schedule.to_dict())))

    def write_atomically(self, relative: str, writer: Callable[[Path], None]) -> Path:
        """Write job state (a file or a directory) at ``ROOT/relative`` through a temporary sibling and a rename.

        Must be called while holding :meth:`lock`. ``writer(path)`` writes the
        file or directory at ``path``. An existing directory is not replaced
        (job state written once per key, like the online job's statistics).
        """
        if not WriterLock.of(self.root / _LOCK).held():
            raise RuntimeError(f"write_atomically({relative!r}) needs the store's lock: use `with store.lock():`")
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{_TMP}{uuid.uuid4().hex}-{target.name}")
        try:
            writer(tmp)
            fsync_tree(tmp)
            os.replace(tmp, target)
            fsync(target.parent)
        except OSError as exc:
            raise StoreError(f"cannot write {target} in the store: {exc.strerror or exc}") from None
        finally:
            remove(tmp)
        return target

    def next_version(self) -> int:
        """The number the next publish takes (one more than any numbered directory, complete or not)."""
        return max((n for n, _ in self._numbered()), default=0) + 1

    # ------------------------------------------------------------------ helpers
    def _write_version(self, version: int, config: RoutingConfiguration, artifacts: Mapping, manifest: dict) -> None:
        versions_dir = self.root / _VERSIONS
        tmp = versions_dir / f"{_TMP}{uuid.uuid4().hex}"
        current_file = ""
        try:
            versions_dir.mkdir(exist_ok=True)
            tmp.mkdir()
            current_file = str(tmp / _CONFIG_DIR)
            config.write(tmp / _CONFIG_DIR)
            for name, content in artifacts.items():
                current_file = str(tmp / name)
                write_bytes(tmp / name, as_bytes(content))
            manifest["checksums"] = checksums(tmp)
            current_file = str(tmp / _MANIFEST)
            write_bytes(tmp / _MANIFEST, as_bytes(manifest))
            fsync_tree(tmp)
            os.rename(tmp, self._version_dir(version))
            fsync(versions_dir)
        except OSError as exc:
            raise StoreError(
                f"cannot write version {version} into the store {self.root} ({current_file or versions_dir}): "
                f"{exc.strerror or exc}; nothing was published"
            ) from None
        finally:
            remove(tmp)

    def _move_current(self, version: int, previous: int | None, action: str, reason: str) -> None:
        """Point ``CURRENT`` at ``version``, then record the move in the history."""
        self._point_current(version)
        self._record(version, previous, action, reason)

    def _point_current(self, version: int) -> None:
        """Replace ``CURRENT`` atomically and durably (a synced temporary file, ``os.replace``, a synced directory)."""
        tmp = self.root / f"{_TMP}{uuid.uuid4().hex}-{_CURRENT}"
        try:
            write_bytes(tmp, f"{version}\n".encode())
            os.replace(tmp, self.root / _CURRENT)
            fsync(self.root)
        except OSError as exc:
            raise StoreError(f"cannot move {self.root / _CURRENT} to version {version}: {exc.strerror}") from None
        finally:
            remove(tmp)

    def _record(self, version: int, previous: int | None, action: str, reason: str) -> None:
        entry = {"version": version, "previous": previous, "at": _now(), "action": action, "reason": reason}
        path = self.root / _HISTORY
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                # A crash may have cut the last line short: start on a line of our own.
                torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
                os.write(fd, (("\n" if torn else "") + json.dumps(entry) + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            logger.warning(
                "store %s: could not record %s of version %d in %s: %s", self.root, action, version, path, exc
            )

    def _recover(self) -> None:
        """What the first lock holder after a crash does: remove ``.tmp-*`` leftovers, record an unrecorded move."""
        for directory in [self.root, *(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))]:
            for leftover in directory.glob(f"{_TMP}*"):
                logger.info("removing %s left by an interrupted write", leftover)
                remove(leftover)
        try:
            current = self.current_version()
        except StoreError:
            return  # a damaged CURRENT is repaired by the next publish or rollback, and recorded then
        if current is None:
            return
        history = self.history()
        if not history or int(history[-1]["version"]) != current:
            reason = (
                "CURRENT moved without a history entry (a writer was interrupted)"
                if history
                else "current when the store started keeping a history"
            )
            self._record(current, int(history[-1]["version"]) if history else None, "recorded", reason)

    def _current_or_none(self) -> int | None:
        try:
            return self.current_version()
        except StoreError as exc:
            logger.warning("%s; the next move of CURRENT replaces it", exc)
            return None

    def _numbered(self) -> list[tuple[int, Path]]:
        directory = self.root / _VERSIONS
        if not directory.is_dir():
            return []
        return sorted((int(p.name), p) for p in directory.iterdir() if p.name.isdigit())

    def _check_is_directory(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"the store {self.root} is a file, not a directory")

    def _version_dir(self, version: int) -> Path:
        return self.root / _VERSIONS / f"{version:06d}"
