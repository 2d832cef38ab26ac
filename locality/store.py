"""The configuration store: numbered, immutable versions, an atomically moved ``CURRENT`` pointer, one writer.

Layout of a store rooted at ``ROOT``::

    ROOT/CURRENT                      # text: the number of the current version
    ROOT/LOCK                         # the writers' lock file (never delete it); holds the holder's pid
    ROOT/history.jsonl                # one line per move of CURRENT: version, previous, when, action, reason
    ROOT/digests.json                 # SHA-256 of the input files seen, by file identity (a cache: locality._digests)
    ROOT/SCHEDULE                     # which version is in force from which point (locality.schedule)
    ROOT/versions/000007/manifest.json      # version, created, fingerprint, files, checksums, metadata
    ROOT/versions/000007/configuration/     # RoutingConfiguration.write(): header.json,
                                            #   configuration.json, tables/NN.parquet
    ROOT/versions/000007/<artifacts>        # report.json, report.txt, load.png, migration_plan.json ...
    ROOT/statistics/<window>/         # the online job: blended counts after that window (KeyCounts.write)
    ROOT/statistics/LATEST            #   the window whose counts the next run blends with
    ROOT/decisions/<window>.json      #   the outcome of each window (a rerun returns it)
    ROOT/balance/<since>.json         #   what each instance served since a balance window began

The online job's state is read and written through the methods of
:class:`ConfigStore` that name it (:meth:`ConfigStore.statistics`,
:meth:`ConfigStore.decision`, :meth:`ConfigStore.served_loads` and their
``record_`` twins), under the writers' lock like every write.

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

**Reruns never roll back.** A publish whose fingerprint (input content + parameters)
matches an existing version writes nothing and leaves ``CURRENT`` where it is,
even when that version is older than the current one: moving back is
explicit, with :meth:`ConfigStore.rollback` (``locality rollback``).

**Damage is named.** The manifest records the size and SHA-256 of every file
of the version; reading a configuration checks them first, so a truncated or
altered table raises :class:`~locality.errors.SerializationError` naming the
file instead of routing with half a table. Every store file is read through
:mod:`locality._store_files`: any other damage (a directory where a file
belongs, bytes that are not UTF-8, a field missing or of the wrong type) is a
:class:`~locality.errors.StoreDamagedError` naming the file, a damaged old
version never blocks a publish, and :meth:`ConfigStore.survey` lists every
damaged file for ``locality show``. Writers set aside (rename, never delete)
a damaged ``CURRENT``, ``history.jsonl`` or ``LOCK`` that blocks them, so
``locality rollback`` repairs a store whatever the damage.

Why one module of about 800 lines: the store's invariants (one writer, atomic
versions, no silent roll-back, checksums, damage named) hold only together,
and a reader of any one operation needs the others; the lock, the durable
writes, the defensive reading of each file and the input digests live in
:mod:`locality._store_lock`, :mod:`locality._durable`,
:mod:`locality._store_files` and :mod:`locality._digests`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from locality._durable import as_bytes, checksums, fsync, fsync_tree, remove, write_bytes
from locality._store_files import check_fields, damaged, is_directory, read_json, read_text, set_aside
from locality._store_lock import WriterLock
from locality._validation import check_wait
from locality.counts import KeyCounts
from locality.defaults import DEFAULT_LOCK_TIMEOUT
from locality.errors import InvalidParameterError, LocalityError, StoreDamagedError, StoreError
from locality.routing import RoutingConfiguration
from locality.schedule import SCHEDULE_FILE, SwitchSchedule

__all__ = ["ConfigStore", "StoredVersion", "PublishResult", "StoreSurvey", "fingerprint"]

logger = logging.getLogger(__name__)

_CURRENT = "CURRENT"
_LOCK = "LOCK"
_HISTORY = "history.jsonl"
_VERSIONS = "versions"
_MANIFEST = "manifest.json"
_CONFIG_DIR = "configuration"
_DIGESTS = "digests.json"
_TMP = ".tmp-"
_STATISTICS = "statistics"
_LATEST = f"{_STATISTICS}/LATEST"
_DECISIONS = "decisions"
_BALANCE = "balance"
#: A window's name in the store (statistics/<name>/, decisions/<name>.json): a file name, never a path.
_WINDOW_NAME = re.compile(r"(?!\.\.?$)[^/\\\x00]+")

#: A version number as CURRENT and the version directories spell it: ASCII digits (not "٣", not "-1").
_NUMBER = re.compile(r"[0-9]{1,18}")
#: Bytes CURRENT may hold (a number and a newline); more is not a CURRENT.
_CURRENT_LIMIT = 64
#: Bytes a manifest may hold (its checksums grow with the files of a version: a few hundred bytes each).
_MANIFEST_LIMIT = 64 * 1024 * 1024
_MANIFEST_FIELDS = {
    "version": ("an integer", False),
    "created": ("a string", False),
    "fingerprint": ("a string", False),
    "files": ("a list of names", False),
    "checksums": ("a JSON object", False),
    "summary": ("a JSON object", False),
    "job": ("a string", False),
}
_HISTORY_FIELDS = {
    "version": ("an integer", True),
    "previous": ("an integer or null", False),
    "at": ("a string or null", False),
    "action": ("a string or null", False),
    "reason": ("a string or null", False),
}
_SHA256 = re.compile(r"[0-9a-f]{64}")


def fingerprint(inputs: Iterable[tuple], parameters: Mapping) -> str:
    """SHA-256 over the inputs' identities and the parameters (as sorted JSON).

    ``inputs`` identify the input's content, one tuple per file in any order:
    ``(size, SHA-256)`` for local files (``pipelines.trace.input_identity``),
    so that touching a file changes nothing; ``(path,)`` for a remote path.
    """
    digest = hashlib.sha256()
    for identity in sorted(tuple(map(str, item)) for item in inputs):
        digest.update(("\0".join(identity) + "\n").encode())
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
        except (LocalityError, KeyError, TypeError, ValueError, AttributeError) as exc:
            # A version published before the manifest held checksums is checked only by reading it.
            raise StoreDamagedError(f"version {self.version} of the store is damaged: {exc}", self.path) from None

    def verify(self, under: str = "", *, quick: bool = False) -> None:
        """Check the files recorded in the manifest (all, or those under ``under``) against their size and SHA-256.

        ``quick`` compares sizes only (no file is read: what ``locality show``
        does for every version). Versions published before the manifest
        recorded checksums pass unchecked.

        Raises
        ------
        StoreDamagedError
            A file is missing, is not a file, has another size, or (unless ``quick``) another SHA-256.
        """
        for name, expected in self.manifest.get("checksums", {}).items():
            if under and not name.startswith(f"{under}/"):
                continue
            path = self.path / name
            try:
                info = os.stat(path)
                if not stat.S_ISREG(info.st_mode):
                    raise IsADirectoryError(
                        21,
                        "it is a directory, not a file" if stat.S_ISDIR(info.st_mode) else "it is not a regular file",
                    )
                digest = None if quick else _sha256(path)
            except OSError as exc:
                raise StoreDamagedError(
                    f"version {self.version} of the store is damaged: cannot read {path}: {exc.strerror}", path
                ) from None
            if info.st_size != expected["size"]:
                raise StoreDamagedError(
                    f"version {self.version} of the store is damaged: {path} has {info.st_size:,} bytes, "
                    f"its manifest recorded {expected['size']:,} (truncated or rewritten)",
                    path,
                )
            if digest is not None and digest != expected["sha256"]:
                raise StoreDamagedError(
                    f"version {self.version} of the store is damaged: {path} does not match its manifest's SHA-256",
                    path,
                )

    def read_json(self, name: str) -> dict:
        """An artifact stored as JSON (e.g. ``report.json``, ``migration_plan.json``).

        Raises
        ------
        StoreError
            The version has no such file.
        StoreDamagedError
            It is not a file of JSON text.
        """
        doc = read_json(self.path / name, f"{name} of version {self.version}")
        if doc is None:
            raise StoreError(f"version {self.version} has no {name!r}")
        return doc


def _served_loads_what(since: datetime) -> str:
    """How messages name the ledger of the balance window that began at ``since``."""
    return f"the ledger of what was served since {since.isoformat()}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _checked_manifest(doc: object, version: int, path: Path) -> dict:
    """The manifest ``doc`` of ``version``, if its fields have their types and its checksums name its own files."""
    what = f"the manifest of version {version}"
    manifest = check_fields(doc, _MANIFEST_FIELDS, what, path)
    if manifest.get("version", version) != version:
        raise damaged(what, path, f"it says version {manifest['version']}, in the directory of version {version}")
    for name, entry in manifest.get("checksums", {}).items():
        inside = not Path(name).is_absolute() and ".." not in Path(name).parts
        if not inside:
            raise damaged(what, path, f"its checksums name {name!r}, a file outside the version")
        size, sha = (entry.get("size"), entry.get("sha256")) if isinstance(entry, dict) else (None, None)
        if not (isinstance(size, int) and not isinstance(size, bool) and size >= 0) or not (
            isinstance(sha, str) and _SHA256.fullmatch(sha)
        ):
            raise damaged(what, path, f"its checksum of {name!r} must be a size and a SHA-256; got {entry!r:.80}")
    return manifest


@dataclass(frozen=True)
class StoreSurvey:
    """Everything ``locality show`` lists, read defensively: what is readable, and every damaged file named.

    ``current`` is None when ``CURRENT`` is missing or damaged; ``versions``
    holds the versions whose manifest reads; ``damage`` one line per damaged
    file (empty for a sound store); ``current_damage`` why the current version
    cannot be used (None when it can); ``schedule`` the switch schedule (empty
    when it is missing or damaged).
    """

    current: int | None
    versions: list[StoredVersion]
    history: list[dict]
    damage: list[str]
    current_damage: str | None
    schedule: SwitchSchedule


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
        if not isinstance(root, (str, os.PathLike)) or not str(os.fspath(root)).strip():
            # Path("") is the working directory: an empty --store (an unset variable) must not write there
            raise InvalidParameterError(
                f"the 'root' parameter of ConfigStore (--store) must name a directory; got {root!r}"
            )
        self.root = Path(root)
        self.lock_timeout = check_wait(lock_timeout, "lock_timeout", "ConfigStore")
        self.job = job or " ".join([Path(sys.argv[0]).name, *sys.argv[1:3]]).strip()

    @property
    def digests_path(self) -> Path:
        """Where the input files' digests are remembered between runs (:mod:`locality._digests`)."""
        return self.root / _DIGESTS

    # ------------------------------------------------------------------ reading (never locked)
    def versions(self) -> list[int]:
        """Numbers of the complete versions, oldest first (damaged ones included: :meth:`get` names the damage).

        A version directory without a manifest is a write that never
        completed, not a version; an entry that is not a directory is a
        damaged version.
        """
        return [n for n, path in self._numbered() if not path.is_dir() or os.path.lexists(path / _MANIFEST)]

    def current_version(self) -> int | None:
        """The version ``CURRENT`` points at, or None for an empty store.

        Raises
        ------
        StoreError
            The store path is not a directory, or ``CURRENT`` does not hold a version number.
        """
        self._check_is_directory()
        path = self.root / _CURRENT
        repair = f"`locality rollback --store {self.root} --to N` repairs it"
        try:
            text = read_text(path, "the store's CURRENT", limit=_CURRENT_LIMIT)
        except StoreDamagedError as exc:
            raise StoreDamagedError(f"{exc}; versions: {self._listing()} ({repair})", path) from None
        if text is None:
            return None
        if not _NUMBER.fullmatch(text.strip()):
            raise damaged(
                "the store's CURRENT",
                path,
                f"{text.strip()[:40]!r} is not a version number; versions: {self._listing()} ({repair})",
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
        named_by_current = version is None
        if named_by_current:
            version = self.current_version()
            if version is None:
                raise StoreError(f"the store {self.root} has no published version yet")
        path = self._version_dir(version)
        what = f"the manifest of version {version}"
        doc = read_json(path / _MANIFEST, what, limit=_MANIFEST_LIMIT) if self._version_exists(version) else None
        if doc is None and named_by_current:
            raise StoreError(
                f"{self.root / _CURRENT} names version {version}, which the store does not have; "
                f"versions: {self._listing()} (`locality rollback --store {self.root} --to N` repairs it)"
            )
        if doc is None:
            raise StoreError(f"the store {self.root} has no version {version}; versions: {self._listing()}")
        return StoredVersion(version, path, _checked_manifest(doc, version, path / _MANIFEST))

    def find(self, fingerprint: str) -> int | None:
        """The newest version published with ``fingerprint``, if any (damaged versions are skipped, and logged)."""
        for version in reversed(self.versions()):
            try:
                manifest = self.get(version).manifest
            except StoreError as exc:
                logger.warning("skipping a damaged version: %s", exc)
                continue
            if manifest.get("fingerprint") == fingerprint:
                return version
        return None

    def history(self) -> list[dict]:
        """Every recorded move of ``CURRENT``, oldest first: ``version``, ``previous``, ``at``, ``action``, ``reason``.

        A line a crash cut short (or otherwise damaged) is skipped and logged.

        Raises
        ------
        StoreDamagedError
            ``history.jsonl`` is not a file (the next writer sets it aside).
        """
        entries, damaged_lines = self._read_history()
        for number, line in damaged_lines:
            logger.warning("%s line %d is damaged and skipped: %r", self.root / _HISTORY, number, line[:80])
        return entries

    def survey(self) -> StoreSurvey:
        """Read the whole store defensively: the current version (whole), every manifest, the history.

        Every damaged file is named in :attr:`StoreSurvey.damage`; the versions
        other than the current one are checked by size (:meth:`StoredVersion.verify`
        with ``quick``), the current one by size, SHA-256 and a full read.

        Raises
        ------
        StoreError
            ``root`` is not a store: missing, or a file.
        """
        if not self.root.is_dir():
            raise StoreError(f"there is no store at {self.root}" + (": it is a file" if self.root.exists() else ""))
        damage: list[str] = []
        current = current_damage = None
        try:
            current = self.current_version()
            if current is not None:
                _ = self.get().config  # CURRENT names a version; sizes, checksums, every table read
        except StoreError as exc:
            current, current_damage = None, str(exc)
            damage.append(current_damage)
        versions = []
        try:
            numbers = self.versions()
        except StoreError as exc:
            numbers = []
            damage.append(str(exc))
        for number in numbers:
            try:
                stored = self.get(number)
                if number != current:
                    stored.verify(quick=True)
                versions.append(stored)
            except StoreError as exc:
                if str(exc) not in damage:
                    damage.append(str(exc))
        history: list[dict] = []
        try:
            history, damaged_lines = self._read_history()
            damage += [
                f"{self.root / _HISTORY} line {n} is damaged (skipped): {line[:60]!r}" for n, line in damaged_lines
            ]
        except StoreError as exc:
            damage.append(f"{exc} (the next publish or rollback sets it aside)")
        lock = self.root / _LOCK
        if os.path.lexists(lock) and not lock.is_file():
            damage.append(
                f"the store's lock file ({lock}) is damaged: it is not a file (the next writer sets it aside)"
            )
        try:
            schedule = self.schedule()
        except StoreError as exc:
            schedule = SwitchSchedule()
            damage.append(str(exc))
        return StoreSurvey(current, versions, history, damage, current_damage, schedule)

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

    def read_state(self, relative: str, what: str, *, fields: Mapping[str, tuple[str, bool]] | None = None):
        """Job state at ``ROOT/relative`` (what :meth:`write_atomically` wrote): text, or with ``fields`` a JSON object.

        None when there is none. ``what`` names the file in messages;
        ``fields`` (name -> (kind, required), kinds of
        :data:`locality._store_files.FIELD_KINDS`) asks for a JSON object
        with those fields.

        Raises
        ------
        StoreDamagedError
            The file is not a file of UTF-8 text, or not the JSON object ``fields`` describes.
        """
        path = self.root / relative
        if fields is None:
            return read_text(path, what)
        doc = read_json(path, what)
        return None if doc is None else check_fields(doc, fields, what, path)

    # ------------------------------------------------------------------ the online job's state
    def statistics(self, window: str | None = None) -> KeyCounts | None:
        """The blended counts stored after ``window`` (default: the latest window's); None when there are none."""
        window = self.latest_window() if window is None else window
        path = None if window is None else self.root / _STATISTICS / window
        return KeyCounts.read(path) if path is not None and path.is_dir() else None

    def latest_window(self) -> str | None:
        """The window whose blended counts the next online run blends with (None before the first).

        Raises
        ------
        StoreDamagedError
            ``statistics/LATEST`` is not the name of a window.
        """
        what = "the online job's statistics/LATEST"
        latest = self.read_state(_LATEST, what)
        if latest is not None and not _WINDOW_NAME.fullmatch(latest.strip()):
            raise damaged(what, self.root / _LATEST, f"{latest[:40]!r} names no window")
        return None if latest is None else latest.strip()

    def record_statistics(self, window: str, counts: KeyCounts) -> None:
        """Store the blended counts after ``window`` and make it the latest window (under :meth:`lock`)."""
        self.write_atomically(f"{_STATISTICS}/{window}", counts.write)
        self.write_atomically(_LATEST, lambda p: p.write_text(window))

    def decision(self, window: str) -> dict | None:
        """The outcome an online run recorded for ``window``; None when no run decided it."""
        return self.read_state(f"{_DECISIONS}/{window}.json", f"the decision recorded for window {window}", fields={})

    def record_decision(self, window: str, outcome: Mapping) -> None:
        """Record the outcome of ``window`` (under :meth:`lock`), so that a rerun returns it."""
        self.write_atomically(f"{_DECISIONS}/{window}.json", lambda p: p.write_text(json.dumps(outcome, default=str)))

    def served_loads_file(self, since: datetime) -> Path:
        """Where the ledger of the balance window that began at ``since`` is kept."""
        return self.root / _BALANCE / f"{since.strftime('%Y%m%dT%H%M%S%z')}.json"

    def served_loads(self, since: datetime) -> dict | None:
        """The ledger of what each instance served since ``since`` (``loads``, ``until``, ``rows``); None before it."""
        relative = str(self.served_loads_file(since).relative_to(self.root))
        fields = {"loads": ("a JSON object", True), "until": ("a string", True), "rows": ("an integer", True)}
        return self.read_state(relative, _served_loads_what(since), fields=fields)

    def served_loads_damaged(self, since: datetime, problem: str) -> StoreDamagedError:
        """The error for the ledger of ``since`` damaged by ``problem`` (what its reader finds wrong in its fields)."""
        return damaged(_served_loads_what(since), self.served_loads_file(since), problem)

    def record_served_loads(self, since: datetime, ledger: Mapping) -> None:
        """Store the ledger of the balance window that began at ``since`` (under :meth:`lock`)."""
        relative = str(self.served_loads_file(since).relative_to(self.root))
        self.write_atomically(relative, lambda p: p.write_text(json.dumps(ledger)))

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
        self._clear_for_file(self.root / _CURRENT, "the store's CURRENT")
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
            self._clear_for_file(path, "the store's history")
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                # A crash may have cut the last line short: start on a line of our own.
                torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
                os.write(fd, (("\n" if torn else "") + json.dumps(entry) + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)
        except (OSError, StoreError) as exc:
            logger.warning(
                "store %s: could not record %s of version %d in %s: %s", self.root, action, version, path, exc
            )

    @staticmethod
    def _clear_for_file(path: Path, what: str) -> None:
        """Set aside whatever is at ``path`` if it is not a file (a directory where a store file belongs)."""
        if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
            set_aside(path, what)

    def _recover(self) -> None:
        """What the first lock holder after a crash does: remove ``.tmp-*`` leftovers, record an unrecorded move."""
        for directory in [self.root, *(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))]:
            for leftover in directory.glob(f"{_TMP}*"):
                logger.info("removing %s left by an interrupted write", leftover)
                remove(leftover)
        history = self._repair_history()
        try:
            current = self.current_version()
        except StoreError:
            return  # a damaged CURRENT is repaired by the next publish or rollback, and recorded then
        if current is None:
            return
        if not history or int(history[-1]["version"]) != current:
            reason = (
                "CURRENT moved without a history entry (a writer was interrupted)"
                if history
                else "current when the store started keeping a history"
            )
            self._record(current, int(history[-1]["version"]) if history else None, "recorded", reason)

    def _repair_history(self) -> list[dict]:
        """The history's entries, after setting aside a history with damaged lines (rewritten with the others).

        A crash may cut the last line short, and hands or disks may damage
        others; the damaged file is kept beside the store
        (``history.jsonl.damaged-*``) so that ``show`` lists a sound history again.
        """
        path = self.root / _HISTORY
        try:
            entries, bad = self._read_history()
        except StoreDamagedError:
            return []  # not a file: _record sets it aside and starts a new one
        if bad:
            tmp = self.root / f"{_TMP}{uuid.uuid4().hex}-{_HISTORY}"
            try:
                write_bytes(tmp, "".join(json.dumps(entry) + "\n" for entry in entries).encode())
                set_aside(path, f"the store's history ({len(bad)} damaged lines, first {bad[0][0]})")
                os.replace(tmp, path)
                fsync(self.root)
            except (OSError, StoreError) as exc:
                logger.warning("store %s: could not set aside the damaged lines of %s: %s", self.root, path, exc)
            finally:
                remove(tmp)
        return entries

    def _current_or_none(self) -> int | None:
        try:
            return self.current_version()
        except StoreError as exc:
            logger.warning("%s; the next move of CURRENT replaces it", exc)
            return None

    def _numbered(self) -> list[tuple[int, Path]]:
        directory = self.root / _VERSIONS
        if not is_directory(directory, "the store's versions directory"):
            return []
        return sorted((int(p.name), p) for p in directory.iterdir() if _NUMBER.fullmatch(p.name))

    def _version_exists(self, version: int) -> bool:
        """True if version ``version`` has a directory; StoreDamagedError if a file (or else) is in its place."""
        return is_directory(self._version_dir(version), f"version {version} of the store")

    def _listing(self) -> str:
        """The version numbers, for a message (or why they cannot be listed)."""
        try:
            return str(self.versions())
        except StoreError as exc:
            return f"none readable ({exc})"

    def _read_history(self) -> tuple[list[dict], list[tuple[int, str]]]:
        """The history's valid entries and its damaged lines ``(number, text)``.

        Lines are ASCII JSON objects (``json.dumps`` escapes the rest), so a
        line with a byte that is not is damaged, like one cut short.
        """
        path = self.root / _HISTORY
        what = "the store's history"
        try:
            text = read_text(path, what)
        except StoreDamagedError as exc:
            if "UTF-8" not in str(exc):
                raise
            text = path.read_bytes().decode("utf-8", errors="replace")
        entries, bad = [], []
        for number, line in enumerate((text or "").splitlines(), 1):
            try:
                entry = check_fields(json.loads(line), _HISTORY_FIELDS, what, path)
                if entry["version"] < 1 or "\ufffd" in line:
                    raise ValueError(line)
                entries.append(entry)
            except (ValueError, StoreDamagedError):
                bad.append((number, line))
        return entries, bad

    def _check_is_directory(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"the store {self.root} is a file, not a directory")

    def _version_dir(self, version: int) -> Path:
        return self.root / _VERSIONS / f"{version:06d}"
