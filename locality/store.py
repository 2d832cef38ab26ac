"""The configuration store: numbered, immutable versions, a ``CURRENT`` pointer moved by conditional writes, one writer.

A store is a local directory or a prefix of an S3 bucket (:mod:`locality.storage`); both follow one
protocol, written down step by step with why each step is safe in ``docs/store-protocol.md``.
Layout, relative to the store's root::

    CURRENT                      # "7\\n", then "writer <token>\\n": the current version, and who wrote it last
    SCHEDULE                     # which version is in force from which point (locality.schedule)
    LEASE                        # the writers' lease (locality._store_lease)
    history.jsonl                # one line per move of CURRENT: version, previous, when, action, reason
    digests.json                 # SHA-256 of the local input files seen (a cache: locality._digests)
    versions/000007/claim.json          # which writer claimed the number (created first, if absent)
    versions/000007/configuration/      # RoutingConfiguration.to_files(): header.json, configuration.json,
                                        #   tables/NN.parquet
    versions/000007/<artifacts>         # report.json, report.txt, load.png, migration_plan.json (REPORT ...)
    versions/000007/manifest.json       # fingerprint, summary, size + SHA-256 of every file (created last)
    statistics/<window>/, statistics/LATEST, decisions/<window>.json, balance/<since>.json   # the online job

**One writer at a time**, by a lease taken and renewed with conditional writes; the holder's token
*fences* ``CURRENT`` and ``SCHEDULE`` (it rewrites them under its token when it takes the lease,
so their ETags move and a writer whose lease lapsed fails its conditional write of either). Readers
never wait: what they read is immutable (a version) or replaced whole.

**Publishing**, under the lease: claim the next number (create ``claim.json`` if absent), write
the version's files, create its manifest last; then the schedule, then ``CURRENT`` (each replaced
on the ETag this writer holds), then a line of history. A kill at any point leaves the previous
version current and whole. What it leaves behind (a claimed number without a manifest, a complete
version that never became current, a move missing from the history) is handled by the next writer:
a complete version never current is adopted by a rerun of the same input, or when the schedule
already names it, and is retired (never current) once a newer version is; a move is recorded.

**Reruns never roll back.** A publish whose fingerprint (input content + parameters) matches a
version that was current once writes nothing and leaves ``CURRENT`` where it is, even when that
version is older than the current one: moving back is explicit, with :meth:`ConfigStore.rollback`.

**Damage is named.** The manifest records the size and SHA-256 of every file of the version; a
reader checks them on the bytes it then parses, so a truncated or altered table is refused naming
the file, never served. Every other store object is read through :mod:`locality._store_files`:
any damage is a :class:`~locality.errors.StoreDamagedError` naming it, a damaged old version never
blocks a publish, and :meth:`ConfigStore.survey` lists every damaged object for ``locality show``.
Writers set aside (keep under another name, never delete) a damaged ``CURRENT``, history or lease
that blocks them, so ``locality rollback`` repairs a store whatever the damage.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from locality._durable import as_bytes
from locality._store_files import (
    check_fields,
    damaged,
    decode,
    parse_json,
    read_blob,
    read_json,
    read_text,
    set_aside,
)
from locality._store_lease import LEASE, WriterLease, is_gone, process_is_gone, this_process
from locality._validation import check_interval, check_wait
from locality.counts import KeyCounts
from locality.defaults import DEFAULT_LEASE_SECONDS, DEFAULT_LOCK_TIMEOUT
from locality.errors import (
    LeaseLostError,
    LocalityError,
    StoreBusyError,
    StoreDamagedError,
    StoreError,
    parameters_of,
)
from locality.routing import RoutingConfiguration
from locality.schedule import SCHEDULE_FILE, SwitchSchedule
from locality.storage import ConditionFailed, NotAnObject, Objects, open_objects
from locality.storage.local import DirectoryObjects

__all__ = [
    "REPORT",
    "REPORT_TEXT",
    "LOAD_PLOT",
    "MIGRATION_PLAN",
    "ConfigStore",
    "StoredVersion",
    "PublishResult",
    "StoreSurvey",
    "fingerprint",
    "is_store_directory",
    "parse_current",
]

logger = logging.getLogger(__name__)

CURRENT = "CURRENT"
HISTORY = "history.jsonl"
#: The artifacts a job publishes beside a version's configuration (:func:`locality.publication.publish_run`):
#: the JSON report, its text, the instance loads beside their bound, and the migration plan from the version
#: before (read back by :class:`locality.router.Router`).
REPORT = "report.json"
REPORT_TEXT = "report.txt"
LOAD_PLOT = "load.png"
MIGRATION_PLAN = "migration_plan.json"
VERSIONS = "versions"
MANIFEST = "manifest.json"
CLAIM = "claim.json"
CONFIGURATION = "configuration"
DIGESTS = "digests.json"
_STATISTICS = "statistics"
_LATEST = f"{_STATISTICS}/LATEST"
_DECISIONS = "decisions"
_BALANCE = "balance"
#: A window's name in the store (statistics/<name>/, decisions/<name>.json): a file name, never a path.
_WINDOW_NAME = re.compile(r"(?!\.\.?$)[^/\\\x00]+")

#: A version number as CURRENT and the version folders spell it: ASCII digits (not "٣", not "-1").
_NUMBER = re.compile(r"[0-9]{1,18}")
#: CURRENT: a version number, then (written by this protocol) the token of the writer that wrote it.
_CURRENT_TEXT = re.compile(r"([0-9]{1,18})[ \t\r]*(?:\n(?:writer ([0-9a-f]{32})\n?)?)?")
#: Bytes CURRENT may hold (a number, a newline and a writer's token); more is not a CURRENT.
_CURRENT_LIMIT = 64
#: Bytes a manifest may hold (its checksums grow with the files of a version: a few hundred bytes each).
_MANIFEST_LIMIT = 64 * 1024 * 1024
#: Bytes the history may hold (one line of ~150 bytes per move: a million moves).
_HISTORY_LIMIT = 256 * 1024 * 1024
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
    "fingerprint": ("a string or null", False),
}
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: Numbers a writer tries to claim before it concludes that writers it cannot see are racing it.
_CLAIM_ATTEMPTS = 3


def fingerprint(inputs: Iterable[tuple], parameters: Mapping) -> str:
    """SHA-256 over the inputs' identities and the parameters (as sorted JSON).

    ``inputs`` identify the input's content, one tuple per file in any order:
    ``(size, SHA-256)`` for local files (``pipelines.trace.input_identity``),
    so that touching a file changes nothing; ``(path, size, ETag or time)`` for a remote file.
    """
    digest = hashlib.sha256()
    for identity in sorted(tuple(map(str, item)) for item in inputs):
        digest.update(("\0".join(identity) + "\n").encode())
    digest.update(json.dumps(parameters, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def is_store_directory(folder: str | os.PathLike) -> bool:
    """Whether the local directory ``folder`` is a configuration store's root (it has ``CURRENT`` or ``LEASE``)."""
    return any(os.path.lexists(os.path.join(folder, name)) for name in (CURRENT, LEASE))


def parse_current(text: str) -> tuple[int, str | None] | None:
    """The version ``CURRENT``'s text names and the writer's token (None for an older store); None if not a CURRENT."""
    match = _CURRENT_TEXT.fullmatch(text)
    return None if match is None else (int(match.group(1)), match.group(2))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _version_prefix(version: int) -> str:
    return f"{VERSIONS}/{version:06d}"


@dataclass(frozen=True)
class StoredVersion:
    """One complete version of the store: its manifest, and its files read verified."""

    version: int
    objects: Objects
    manifest: dict

    @property
    def prefix(self) -> str:
        return _version_prefix(self.version)

    @property
    def path(self) -> Path:
        """The version's directory (a store in a local directory only)."""
        if not isinstance(self.objects, DirectoryObjects):
            raise StoreError(f"version {self.version} of {self.objects.location} is not in a local directory")
        return self.objects.root / self.prefix

    def where(self, name: str = "") -> str:
        return self.objects.where(f"{self.prefix}/{name}" if name else self.prefix)

    @property
    def config(self) -> RoutingConfiguration:
        """The routing configuration, parsed from bytes checked against the manifest's sizes and SHA-256.

        Raises
        ------
        StoreDamagedError
            A file of the configuration is missing, truncated, altered or unreadable, or the manifest
            leaves out ``configuration.json`` (what the Java reader reads): the message names it.
        """
        checksums = self.manifest.get("checksums")
        if checksums is not None and f"{CONFIGURATION}/configuration.json" not in checksums:
            # Python reads the Parquet tables, Java the JSON document: both must be covered, or the two
            # readers could serve one version differently.
            raise self._damaged(f"{self.where(CONFIGURATION + '/configuration.json')} is not recorded in its manifest")
        try:
            return RoutingConfiguration.from_files(
                lambda name: self.read_bytes(f"{CONFIGURATION}/{name}"), self.where(CONFIGURATION)
            )
        except StoreError:
            raise
        except (LocalityError, KeyError, TypeError, ValueError, AttributeError) as exc:
            # A version published before the manifest held checksums is checked only by reading it.
            raise StoreDamagedError(f"version {self.version} of the store is damaged: {exc}", self.where()) from None

    def read_bytes(self, name: str) -> bytes:
        """The file ``name`` of the version, checked against its manifest (size and SHA-256) on the bytes returned.

        Raises
        ------
        StoreDamagedError
            It is missing, not a file, of another size or SHA-256, or the manifest does not record it.
        """
        where = self.where(name)
        expected = self.manifest.get("checksums", {}).get(name) if "checksums" in self.manifest else None
        if "checksums" in self.manifest and expected is None:
            raise self._damaged(f"{where} is not recorded in its manifest")
        blob = self._found(name, self.objects.get)
        if expected is not None:
            self._check(where, len(blob.data), expected, _sha256(blob.data))
        return blob.data

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
            if not quick:
                self.read_bytes(name)
                continue
            self._check(self.where(name), self._found(name, self.objects.head).size, expected, None)

    def _found(self, name: str, look):
        """``look(object)`` (a get or a head) of the version's file ``name``; damage when it is missing or no file."""
        try:
            found = look(f"{self.prefix}/{name}")
        except NotAnObject as exc:
            raise self._damaged(f"cannot read {exc.where}: {exc.problem}") from None
        if found is None:
            raise self._damaged(f"cannot read {self.where(name)}: No such file or directory")
        return found

    def _check(self, where: str, size: int, expected: dict, digest: str | None) -> None:
        if size != expected["size"]:
            raise self._damaged(
                f"{where} has {size:,} bytes, its manifest recorded {expected['size']:,} (truncated or rewritten)"
            )
        if digest is not None and digest != expected["sha256"]:
            raise self._damaged(f"{where} does not match its manifest's SHA-256")

    def _damaged(self, problem: str) -> StoreDamagedError:
        return StoreDamagedError(f"version {self.version} of the store is damaged: {problem}", self.where(), problem)

    def read_json(self, name: str) -> dict:
        """An artifact stored as JSON (e.g. ``report.json``, ``migration_plan.json``), checked against the manifest.

        Raises
        ------
        StoreError
            The version has no such file.
        StoreDamagedError
            It does not match its manifest, or is not JSON text.
        """
        if name not in self.manifest.get("checksums", {}) and self._head(name) is None:
            raise StoreError(f"version {self.version} has no {name!r}")
        what = f"{name} of version {self.version}"
        return parse_json(decode(self.read_bytes(name), what, self.where(name)), what, self.where(name))

    def _head(self, name: str):
        try:
            return self.objects.head(f"{self.prefix}/{name}")
        except NotAnObject as exc:
            raise self._damaged(f"cannot read {exc.where}: {exc.problem}") from None


def _served_loads_what(since: datetime) -> str:
    """How messages name the ledger of the balance window that began at ``since``."""
    return f"the ledger of what was served since {since.isoformat()}"


def _checked_manifest(doc: object, version: int, where: str) -> dict:
    """The manifest ``doc`` of ``version``, if its fields have their types and its checksums name its own files."""
    what = f"the manifest of version {version}"
    manifest = check_fields(doc, _MANIFEST_FIELDS, what, where)
    if manifest.get("version", version) != version:
        raise damaged(what, where, f"it says version {manifest['version']}, in the directory of version {version}")
    for name, entry in manifest.get("checksums", {}).items():
        parts = name.split("/")
        if name.startswith("/") or ".." in parts or "" in parts:
            raise damaged(what, where, f"its checksums name {name!r}, a file outside the version")
        size, sha = (entry.get("size"), entry.get("sha256")) if isinstance(entry, dict) else (None, None)
        if not (isinstance(size, int) and not isinstance(size, bool) and size >= 0) or not (
            isinstance(sha, str) and _SHA256.fullmatch(sha)
        ):
            raise damaged(what, where, f"its checksum of {name!r} must be a size and a SHA-256; got {entry!r:.80}")
    return manifest


@dataclass(frozen=True)
class StoreSurvey:
    """Everything ``locality show`` lists, read defensively: what is readable, and every damaged object named.

    ``current`` is None when ``CURRENT`` is missing or damaged; ``versions``
    holds the versions whose manifest reads; ``damage`` one line per damaged
    object (empty for a sound store); ``current_damage`` why the current version
    cannot be used (None when it can); ``schedule`` the switch schedule (empty
    when it is missing or damaged); ``retired`` the complete versions that never
    became current and never will (written by interrupted runs).
    """

    current: int | None
    versions: list[StoredVersion]
    history: list[dict]
    damage: list[str]
    current_damage: str | None
    schedule: SwitchSchedule
    retired: list[int]


@dataclass(frozen=True)
class PublishResult:
    """What :meth:`ConfigStore.publish` did.

    ``version`` is the version made from the fingerprint (new, adopted, or
    found); ``previous_version`` and ``current_version`` are what ``CURRENT``
    named before and after. A rerun of an older input has ``created=False``
    and ``version != current_version``: nothing moved.
    """

    version: int
    previous_version: int | None
    created: bool
    current_version: int | None


class _JsonObject:
    """A JSON object of the store kept as a cache (written best effort, a damaged one read as absent)."""

    def __init__(self, objects: Objects, name: str, what: str) -> None:
        self.objects, self.name, self.what = objects, name, what

    def load(self):
        try:
            return read_json(self.objects, self.name, self.what)
        except StoreError as exc:
            logger.warning("%s; it is rebuilt", exc)
            return None

    def save(self, doc) -> None:
        try:
            self.objects.put(self.name, json.dumps(doc).encode())
        except (StoreError, NotAnObject) as exc:  # a read-only store: computed again next time
            logger.debug("could not write %s: %s", self.what, exc)


class ConfigStore:
    """Versioned routing configurations in a directory or an S3 bucket (the module docstring: layout and protocol).

    Parameters
    ----------
    location : str or Path
        A local directory (created on the first write), or ``s3://bucket/prefix``
        (``s3a://`` too): :func:`locality.storage.open_objects`.
    lock_timeout : float, default 300
        Seconds a write waits for another writer's lease before raising
        :class:`~locality.errors.StoreBusyError`.
    job : str, optional
        What this writer is, recorded in the lease and the history
        (default: the command line).
    lease_seconds : float, default 60
        How long the lease lasts unless renewed (every third of it): how long a
        writer that died on another host keeps others waiting.
    """

    def __init__(
        self,
        location: str | os.PathLike,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        job: str | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> None:
        with parameters_of("store"):  # the location is what the jobs and the command line call the store
            self.objects = open_objects(location, owner="ConfigStore", parameter="location")
        self.location = self.objects.location
        self.lock_timeout = check_wait(lock_timeout, "lock_timeout", "ConfigStore")
        self.lease_seconds = check_interval(lease_seconds, "lease_seconds", "ConfigStore", lower=0.3)
        self.job = job or " ".join([Path(sys.argv[0]).name, *sys.argv[1:3]]).strip()
        self._lease = WriterLease.of(self.objects)
        # The ETag of CURRENT and SCHEDULE as this writer last wrote them (None: absent): its conditional writes
        # succeed only while nobody else wrote them (docs/store-protocol.md, Fencing).
        self._fenced: dict[str, str | None] = {}
        # What this writer read of the store while it holds the lease (CURRENT, the history, the claimed numbers):
        # only the lease holder changes them, so it reads each once and forgets what it writes itself.
        self._memo: dict[str, object] = {}

    @property
    def is_local(self) -> bool:
        return isinstance(self.objects, DirectoryObjects)

    @property
    def root(self) -> Path:
        """The store's directory (a local store only)."""
        if not self.is_local:
            raise StoreError(f"the store {self.location} is not a local directory")
        return self.objects.root

    @property
    def digest_cache(self) -> _JsonObject:
        """Where the input files' digests are remembered between runs (:mod:`locality._digests`)."""
        return _JsonObject(self.objects, DIGESTS, "the input digests remembered by the store")

    # ------------------------------------------------------------------ reading (never locked)
    def versions(self) -> list[int]:
        """Numbers of the complete versions, oldest first (damaged ones included: :meth:`get` names the damage).

        A number claimed without a manifest is a write that never completed,
        not a version; an object where a version's folder belongs is a damaged version.
        """
        return sorted(n for n, complete in self._numbered().items() if complete)

    def current_version(self) -> int | None:
        """The version ``CURRENT`` points at, or None for an empty store.

        Raises
        ------
        StoreError
            The store is not a directory or bucket, or ``CURRENT`` does not hold a version number.
        """
        return self._read_current()[0]

    def _remembered(self, key: str, read):
        """``read()``, read once while this thread holds the lease (see ``_memo``)."""
        if not self._lease.held():
            return read()
        if key not in self._memo:
            self._memo[key] = read()
        return self._memo[key]

    def _forget(self, *keys: str) -> None:
        for key in keys:
            self._memo.pop(key, None)

    def _read_current(self) -> tuple[int | None, str | None]:
        """The current version and ``CURRENT``'s ETag (None, None for an empty store)."""
        return self._remembered("current", self._read_current_now)

    def _read_current_now(self) -> tuple[int | None, str | None]:
        what = "the store's CURRENT"
        repair = f"`locality rollback --store {self.location} --to N` repairs it"
        try:
            blob = read_blob(self.objects, CURRENT, what, limit=_CURRENT_LIMIT)
            text = None if blob is None else decode(blob.data, what, self.objects.where(CURRENT))
        except StoreDamagedError as exc:
            raise StoreDamagedError(f"{exc}; versions: {self._listing()} ({repair})", exc.path, exc.problem) from None
        if blob is None:
            return None, None
        parsed = parse_current(text)
        if parsed is None:
            raise damaged(
                what,
                self.objects.where(CURRENT),
                f"{text.strip()[:40]!r} is not a version number; versions: {self._listing()} ({repair})",
            )
        return parsed[0], blob.etag

    def get(self, version: int | None = None) -> StoredVersion:
        """A version (default: the current one).

        Raises
        ------
        StoreError
            The store is missing or empty, ``CURRENT`` is damaged, or there is no such version.
        StoreDamagedError
            The version's manifest is damaged.
        """
        named_by_current = version is None
        if named_by_current:
            version = self.current_version()
            if version is None:
                raise StoreError(f"the store {self.location} has no published version yet")
        name = f"{_version_prefix(version)}/{MANIFEST}"
        doc = read_json(self.objects, name, f"the manifest of version {version}", limit=_MANIFEST_LIMIT)
        if doc is None and named_by_current:
            raise StoreError(
                f"{self.objects.where(CURRENT)} names version {version}, which the store does not have; "
                f"versions: {self._listing()} (`locality rollback --store {self.location} --to N` repairs it)"
            )
        if doc is None:
            raise StoreError(f"the store {self.location} has no version {version}; versions: {self._listing()}")
        return StoredVersion(version, self.objects, _checked_manifest(doc, version, self.objects.where(name)))

    def find(self, fingerprint: str) -> int | None:
        """The newest version once current that was published with ``fingerprint`` (damaged ones skipped, logged).

        The history names each move's fingerprint, so only the versions it names
        with that fingerprint (or with none: stores from before it did) are read.
        """
        try:
            recorded = {e["version"]: e.get("fingerprint") for e in self._read_history()[0]}
        except StoreError:
            recorded = {}
        current = self._current_or_none()
        published = set(recorded) | ({current} if current is not None else set())
        return self._newest_with(fingerprint, sorted(v for v in published if recorded.get(v) in (fingerprint, None)))

    def _newest_with(self, fingerprint: str, versions: list[int]) -> int | None:
        for version in reversed(versions):
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
        entries, damaged_lines, _ = self._read_history()
        for number, line in damaged_lines:
            logger.warning("%s line %d is damaged and skipped: %r", self.objects.where(HISTORY), number, line[:80])
        return entries

    def retired(self) -> list[int]:
        """Complete versions that never became current and never will: a newer version became current after them."""
        published = self._ever_current()
        newest = max(published, default=0)
        return [v for v in self.versions() if v not in published and v < newest]

    def survey(self) -> StoreSurvey:
        """Read the whole store defensively: the current version (whole), every manifest, the history.

        Every damaged object is named in :attr:`StoreSurvey.damage`; the versions
        other than the current one are checked by size (:meth:`StoredVersion.verify`
        with ``quick``), the current one by size, SHA-256 and a full read.

        Raises
        ------
        StoreError
            ``location`` is not a store: nothing is there, or a file is.
        """
        if not self.objects.exists():
            raise StoreError(f"there is no store at {self.location}")
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
            history, damaged_lines, _ = self._read_history()
            damage += [
                f"{self.objects.where(HISTORY)} line {n} is damaged (skipped): {line[:60]!r}"
                for n, line in damaged_lines
            ]
        except StoreError as exc:
            damage.append(f"{exc} (the next publish or rollback sets it aside)")
        try:
            self.objects.get(LEASE, limit=64 * 1024)
        except NotAnObject as exc:
            damage.append(f"the store's lease ({exc.where}) is damaged: {exc.problem} (the next writer sets it aside)")
        try:
            schedule = self.schedule()
        except StoreError as exc:
            schedule = SwitchSchedule()
            damage.append(str(exc))
        readable = {stored.version for stored in versions}
        for version in sorted(set(schedule.versions) - readable):
            damage.append(
                f"the store's schedule ({self.objects.where(SCHEDULE_FILE)}) is damaged: it names version {version}, "
                f"which the store does not have whole (versions: {sorted(readable)})"
            )
        published = {e["version"] for e in history} | ({current} if current is not None else set())
        newest = max(published, default=0)
        retired = [s.version for s in versions if s.version not in published and s.version < newest]
        return StoreSurvey(current, versions, history, damage, current_damage, schedule, retired)

    # ------------------------------------------------------------------ checks before a job starts
    def check_writable(self) -> None:
        """Raise :class:`StoreError` unless a writer could use the store (it may not exist yet).

        A local store: the directory (or the nearest existing parent it would be
        created in) accepts a new file, tried for real. A bucket: it exists and answers.
        """
        self.objects.check_writable()
        self._numbered()  # a file where versions/ belongs is named now, not after the job ran

    # ------------------------------------------------------------------ writing (always under the lease)
    @contextmanager
    def lock(self) -> Iterator[ConfigStore]:
        """Hold the store's lease for the block (re-entrant in this thread).

        The first holder fences ``CURRENT`` and ``SCHEDULE`` with its token and
        handles what an interrupted writer left (docs/store-protocol.md, steps 3 and 4).

        Raises
        ------
        StoreBusyError
            Another writer kept the lease for ``lock_timeout`` seconds.
        StoreError
            The store cannot be written.
        """
        first = self._lease.acquire(self.lock_timeout, self.job, self.lease_seconds)
        try:
            if first:
                self._fenced, self._memo = {}, {}
                self._recover()
            yield self
        finally:
            if self._lease.depth == 1:
                self._memo = {}
            self._lease.release()

    def publish(
        self,
        config: RoutingConfiguration,
        *,
        fingerprint: str,
        artifacts: Mapping[str, bytes | str | dict] | None = None,
        metadata: Mapping | None = None,
        in_force_from: int | None = None,
    ) -> PublishResult:
        """Write ``config`` and its artifacts as a new version and make it current, under the lease.

        Parameters
        ----------
        config : RoutingConfiguration
        fingerprint : str
            Identity of the input and parameters (:func:`fingerprint`). When a
            version once current already has it, nothing is written and
            ``CURRENT`` stays where it is (see :class:`PublishResult`); when a
            complete version that never became current has it (the same run,
            interrupted), that version is adopted.
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
            Another writer held the store for ``lock_timeout`` seconds, or this
            writer lost its lease while it worked (:class:`~locality.errors.LeaseLostError`).
        StoreUnavailableError
            The store could not be reached: nothing was published.
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
                        self.location,
                        existing,
                        previous,
                        self.location,
                        existing,
                    )
                return PublishResult(existing, previous, created=False, current_version=previous)
            orphan = self._newest_with(fingerprint, self._orphans())
            if orphan is not None and self._is_whole(orphan):
                self._make_current(
                    orphan,
                    previous,
                    in_force_from,
                    "publish",
                    f"{self.job} (adopted version {orphan}, written by an interrupted run of the same input)",
                )
                logger.info("store %s: adopted version %d (previous %s)", self.location, orphan, previous)
                return PublishResult(orphan, previous, created=True, current_version=orphan)
            if in_force_from is not None:  # a point before the seal is refused before anything is written
                self.schedule().scheduled(self.next_version(), in_force_from, previous)
            version = self._claim()
            manifest = {
                "version": version,
                "created": _now(),
                "fingerprint": fingerprint,
                "files": [CONFIGURATION, *(artifacts or {})],
                "job": self.job,
                **dict(metadata or {}),
            }
            if in_force_from is not None:
                manifest["in_force_from"] = in_force_from
            files = {f"{CONFIGURATION}/{name}": data for name, data in config.to_files().items()}
            files.update({name: as_bytes(content) for name, content in (artifacts or {}).items()})
            self._write_version(version, files, manifest)
            self._make_current(version, previous, in_force_from, "publish", self.job)
        logger.info("store %s: published version %d (previous %s)", self.location, version, previous)
        return PublishResult(version, previous, created=True, current_version=version)

    def rollback(self, version: int, *, reason: str | None = None, in_force_from: int | None = None) -> PublishResult:
        """Make an existing, readable ``version`` current again (recorded in the history with ``reason``).

        With ``in_force_from``, routers by point switch back to it from that
        point on (see :meth:`publish`).

        Raises
        ------
        StoreError
            No such version.
        StoreDamagedError
            The version's files are damaged (then it cannot become current).
        InvalidParameterError
            ``in_force_from`` lies before the schedule's seal.
        """
        with self.lock():
            previous = self._current_or_none()
            self._check_whole(version)
            if in_force_from is not None or version != previous:
                self._make_current(
                    version, previous, in_force_from, "rollback", reason or f"no reason given ({self.job})"
                )
        return PublishResult(version, previous, created=False, current_version=version)

    # ------------------------------------------------------------------ the switch schedule
    def schedule(self) -> SwitchSchedule:
        """Which version is in force from which point, for routers that route by point (:mod:`locality.schedule`)."""
        return self._read_schedule()[0]

    def _read_schedule(self) -> tuple[SwitchSchedule, str | None]:
        what = "the store's schedule"
        where = self.objects.where(SCHEDULE_FILE)
        try:
            blob = read_blob(self.objects, SCHEDULE_FILE, what)
            if blob is None:
                return SwitchSchedule(), None
            return SwitchSchedule.from_document(
                parse_json(decode(blob.data, what, where), what, where), where
            ), blob.etag
        except StoreDamagedError as exc:
            raise StoreDamagedError(
                f"the store's schedule {where} is damaged: {exc.problem}", where, exc.problem
            ) from None

    def seal(self, until: int) -> SwitchSchedule:
        """Promise that no version will be scheduled before ``until``, so routers by point route up to it.

        Under the lease; a seal never moves back (an earlier ``until`` changes nothing).
        """
        with self.lock():
            schedule = self.schedule().sealed(until, self._current_or_none())
            self._write_pointer(SCHEDULE_FILE, self._schedule_bytes(schedule))
        return schedule

    def _schedule_bytes(self, schedule: SwitchSchedule) -> bytes:
        return as_bytes({**schedule.to_dict(), "writer": self._lease.token})

    # ------------------------------------------------------------------ the online job's state
    def write_state(self, relative: str, content: bytes | Mapping[str, bytes]) -> None:
        """Write job state at ``relative``: one object (bytes), or a folder of objects (name -> bytes).

        Under :meth:`lock` only. A folder is written once: when it is complete
        already (its last object exists), it is left as it is.
        """
        if not self._lease.held():
            raise RuntimeError(f"write_state({relative!r}) needs the store's lease: use `with store.lock():`")
        self._lease.check()
        try:
            if isinstance(content, bytes):
                self.objects.put(relative, content)
                return
            names = list(content)
            if names and self.objects.head(f"{relative}/{names[-1]}") is not None:
                return
            for name in names:  # the last one written last: its presence says the folder is whole
                self.objects.put(f"{relative}/{name}", content[name])
        except NotAnObject as exc:
            raise StoreError(f"cannot write {exc.where} in the store: {exc.problem}") from None

    def read_state(self, relative: str, what: str, *, fields: Mapping[str, tuple[str, bool]] | None = None):
        """Job state at ``relative`` (what :meth:`write_state` wrote): text, or with ``fields`` a JSON object.

        None when there is none. ``what`` names the object in messages;
        ``fields`` (name -> (kind, required), kinds of
        :data:`locality._store_files.FIELD_KINDS`) asks for a JSON object
        with those fields.

        Raises
        ------
        StoreDamagedError
            The object is not UTF-8 text, or not the JSON object ``fields`` describes.
        """
        if fields is None:
            return read_text(self.objects, relative, what)
        doc = read_json(self.objects, relative, what)
        return None if doc is None else check_fields(doc, fields, what, self.objects.where(relative))

    def statistics(self, window: str | None = None) -> KeyCounts | None:
        """The blended counts stored after ``window`` (default: the latest window's); None when there are none."""
        window = self.latest_window() if window is None else window
        if window is None:
            return None
        folder = f"{_STATISTICS}/{window}"
        if self.objects.head(f"{folder}/counts.json") is None:
            return None

        def read(name: str) -> bytes:
            blob = read_blob(self.objects, f"{folder}/{name}", f"the statistics of window {window}")
            if blob is None:
                raise OSError(f"{self.objects.where(folder + '/' + name)} is missing")
            return blob.data

        return KeyCounts.from_files(read, self.objects.where(folder))

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
            raise damaged(what, self.objects.where(_LATEST), f"{latest[:40]!r} names no window")
        return None if latest is None else latest.strip()

    def record_statistics(self, window: str, counts: KeyCounts) -> None:
        """Store the blended counts after ``window`` and make it the latest window (under :meth:`lock`)."""
        files = counts.to_files()
        order = sorted(files, key=lambda name: name == "counts.json")  # counts.json last: the folder is whole
        self.write_state(f"{_STATISTICS}/{window}", {name: files[name] for name in order})
        self.write_state(_LATEST, window.encode())

    def decision(self, window: str) -> dict | None:
        """The outcome an online run recorded for ``window``; None when no run decided it."""
        return self.read_state(f"{_DECISIONS}/{window}.json", f"the decision recorded for window {window}", fields={})

    def record_decision(self, window: str, outcome: Mapping) -> None:
        """Record the outcome of ``window`` (under :meth:`lock`), so that a rerun returns it."""
        self.write_state(f"{_DECISIONS}/{window}.json", json.dumps(outcome, default=str).encode())

    def _served_loads_name(self, since: datetime) -> str:
        return f"{_BALANCE}/{since.strftime('%Y%m%dT%H%M%S%z')}.json"

    def served_loads(self, since: datetime) -> dict | None:
        """The ledger of what each instance served since ``since`` (``loads``, ``until``, ``rows``); None before it."""
        fields = {"loads": ("a JSON object", True), "until": ("a string", True), "rows": ("an integer", True)}
        return self.read_state(self._served_loads_name(since), _served_loads_what(since), fields=fields)

    def served_loads_damaged(self, since: datetime, problem: str) -> StoreDamagedError:
        """The error for the ledger of ``since`` damaged by ``problem`` (what its reader finds wrong in its fields)."""
        return damaged(_served_loads_what(since), self.objects.where(self._served_loads_name(since)), problem)

    def record_served_loads(self, since: datetime, ledger: Mapping) -> None:
        """Store the ledger of the balance window that began at ``since`` (under :meth:`lock`)."""
        self.write_state(self._served_loads_name(since), json.dumps(ledger).encode())

    def next_version(self) -> int:
        """The number the next publish claims (one more than any number claimed, complete or not)."""
        return max(self._numbered(), default=0) + 1

    # ------------------------------------------------------------------ the protocol's steps
    def _write_pointer(self, name: str, data: bytes) -> None:
        """Replace ``CURRENT`` or ``SCHEDULE`` on the ETag this writer holds (created if absent): fenced."""
        self._lease.check()
        etag = self._fenced.get(name)
        self._forget("current")
        try:
            self._fenced[name] = (
                self.objects.create(name, data) if etag is None else self.objects.replace(name, data, etag)
            )
        except ConditionFailed:
            self._lease.lost = self._lease.lost or f"another writer wrote {name} after this one took the lease"
            raise LeaseLostError(
                f"this writer lost the lease of the store {self.location}: another writer wrote its {name} "
                f"(nothing more is written by this one; retry later)"
            ) from None
        except NotAnObject as exc:
            raise StoreError(f"cannot write {exc.where}: {exc.problem}") from None

    def _make_current(
        self, version: int, previous: int | None, in_force_from: int | None, action: str, reason: str
    ) -> None:
        """Schedule ``version`` (when a point is given), point ``CURRENT`` at it, record the move."""
        if in_force_from is not None:  # before CURRENT: a crash in between leaves the schedule right for its routers
            schedule = self.schedule().scheduled(version, in_force_from, previous)
            self._write_pointer(SCHEDULE_FILE, self._schedule_bytes(schedule))
        self._point_current(version)
        self._record(version, previous, action, reason)

    def _point_current(self, version: int) -> None:
        self._write_pointer(CURRENT, f"{version}\nwriter {self._lease.token}\n".encode())

    def _claim(self) -> int:
        """Claim the next version number (create its ``claim.json`` if absent): only its claimer writes under it."""
        version = self.next_version()
        claim = as_bytes({"writer": self._lease.token, "job": self.job, "at": _now(), **this_process()})
        self._forget("numbered")
        for _ in range(_CLAIM_ATTEMPTS):
            self._lease.check()
            try:
                self.objects.create(f"{_version_prefix(version)}/{CLAIM}", claim)
                return version
            except ConditionFailed:
                logger.warning("store %s: version %d was claimed by another writer", self.location, version)
                version += 1
            except NotAnObject as exc:
                raise StoreError(f"cannot claim version {version} of the store: {exc.where}: {exc.problem}") from None
        raise StoreBusyError(
            f"the store {self.location}: version numbers up to {version - 1} were claimed by other writers while this "
            "one held the lease (a writer whose lease lapsed is still writing); nothing was published (retry later)"
        )

    def _write_version(self, version: int, files: Mapping[str, bytes], manifest: dict) -> None:
        """Write the claimed version's files, then its manifest with their sizes and SHA-256 (created last).

        A write that fails removes what it wrote (its own objects, its claim
        included), so a rerun takes the same number.
        """
        prefix = _version_prefix(version)
        self._forget("numbered")
        claim = self.objects.get(f"{prefix}/{CLAIM}")
        checksums = {CLAIM: {"size": len(claim.data), "sha256": _sha256(claim.data)}} if claim else {}
        name = ""
        try:
            for name, data in files.items():
                self._lease.check()
                self.objects.put(f"{prefix}/{name}", data)
                checksums[name] = {"size": len(data), "sha256": _sha256(data)}
            name = MANIFEST
            self._lease.check()
            self.objects.create(f"{prefix}/{MANIFEST}", as_bytes({**manifest, "checksums": checksums}))
        except BaseException as exc:
            self._remove_own(prefix)
            if isinstance(exc, (StoreError, NotAnObject)) and not isinstance(exc, StoreBusyError):
                problem = exc.problem if isinstance(exc, NotAnObject) else str(exc)
                error = type(exc) if isinstance(exc, StoreError) else StoreError
                raise error(
                    f"cannot write version {version} into the store {self.location} "
                    f"({self.objects.where(f'{prefix}/{name}')}): {problem}; nothing was published"
                ) from None
            raise

    def _remove_own(self, prefix: str) -> None:
        """Remove the version this writer claimed and could not finish (best effort: a claim left is never reused).

        Only the claimer writes under a claimed number, so everything there is its own. The claim goes
        last: a removal cut short (this process killed) leaves it, and the next writer finishes the job.
        """
        self._forget("numbered")
        try:
            self.objects.delete_folder(prefix, last=CLAIM)
        except (StoreError, NotAnObject) as exc:
            logger.warning("store %s: could not remove %s: %s", self.location, self.objects.where(prefix), exc)

    def _record(self, version: int, previous: int | None, action: str, reason: str) -> None:
        """Append a move of ``CURRENT`` to the history (replaced on its ETag: an object store cannot append)."""
        entry = {"version": version, "previous": previous, "at": _now(), "action": action, "reason": reason}
        try:
            entry["fingerprint"] = self.get(version).manifest.get("fingerprint")
        except StoreError:
            pass  # a version whose manifest does not read is found by reading it, as before the history said
        line = json.dumps(entry) + "\n"
        self._forget("history")
        for _ in range(3):
            try:
                _, _, blob = self._read_history_now()
                if blob is None:
                    self.objects.create(HISTORY, line.encode())
                    return
                torn = blob.data and not blob.data.endswith(b"\n")  # a crash cut the last line short
                self.objects.replace(HISTORY, blob.data + (b"\n" if torn else b"") + line.encode(), blob.etag)
                return
            except ConditionFailed:
                continue
            except StoreDamagedError:
                set_aside(self.objects, HISTORY, "the store's history")
            except (StoreError, NotAnObject) as exc:
                logger.warning("store %s: could not record %s of version %d: %s", self.location, action, version, exc)
                return
        logger.warning(
            "store %s: could not record %s of version %d: the history kept changing", self.location, action, version
        )

    def _recover(self) -> None:
        """What each new lease holder does first: fence, clean, record an unrecorded move, adopt a scheduled orphan."""
        if isinstance(self.objects, DirectoryObjects):
            self.objects.sweep(process_is_gone)
        self._fence()
        self._remove_abandoned_claims()
        history = self._repair_history()
        current = self._current_or_none()
        if current is None:
            return
        if not history or int(history[-1]["version"]) != current:
            reason = (
                "CURRENT moved without a history entry (a writer was interrupted)"
                if history
                else "current when the store started keeping a history"
            )
            self._record(current, int(history[-1]["version"]) if history else None, "recorded", reason)
        try:
            scheduled = set(self.schedule().versions)
        except StoreError:
            return
        for orphan in self._orphans():
            if orphan in scheduled and self._is_whole(orphan):  # routers by point already route by it: in force
                self._make_current(
                    orphan, current, None, "recorded", "scheduled by a writer interrupted before CURRENT moved"
                )
                return

    def _remove_abandoned_claims(self) -> None:
        """Remove the versions claimed, never finished, by writers that died on this host (nobody else can finish them).

        A claim made on another host is left alone: its writer may be alive, stalled, and
        about to write again (it never becomes a version: its number is past, and it is never current).
        """
        for number, complete in self._numbered().items():
            if complete:
                continue
            prefix = _version_prefix(number)
            try:
                claim = self.objects.get(f"{prefix}/{CLAIM}")
                doc = None if claim is None else json.loads(claim.data)
            except (ValueError, NotAnObject, StoreError):
                continue  # an unreadable claim: not ours to judge
            if doc is None:
                if isinstance(self.objects, DirectoryObjects):  # a folder made for a claim that never came
                    self.objects.remove_empty_folder(prefix)
                continue
            if isinstance(doc, dict) and is_gone(doc):
                logger.info(
                    "store %s: removing version %d, claimed by a writer that died (%s)",
                    self.location,
                    number,
                    doc.get("job"),
                )
                self._remove_own(prefix)

    def _fence(self) -> None:
        """Rewrite ``CURRENT`` and ``SCHEDULE`` under this writer's token, each on the ETag read.

        A ``CURRENT`` that is no object (a directory, a FIFO) is set aside: the next move replaces it. A
        damaged ``SCHEDULE`` is left as it is, named by ``show``: routers by point need what it held.
        """
        for name in (CURRENT, SCHEDULE_FILE):
            try:
                blob = read_blob(self.objects, name, f"the store's {name}", limit=None if name != CURRENT else 4096)
            except StoreDamagedError:
                if name == SCHEDULE_FILE:
                    continue
                set_aside(self.objects, name, f"the store's {name}")
                blob = None
            if blob is None:
                self._fenced[name] = None
                continue
            self._fenced[name] = blob.etag
            stamped = self._stamped(name, blob.data)
            if stamped is not None and stamped != blob.data:
                self._write_pointer(name, stamped)

    def _stamped(self, name: str, data: bytes) -> bytes | None:
        """``data`` (of ``CURRENT`` or ``SCHEDULE``) under this writer's token; None when it is damaged."""
        try:
            if name == CURRENT:
                parsed = parse_current(data.decode("ascii"))
                return None if parsed is None else f"{parsed[0]}\nwriter {self._lease.token}\n".encode()
            return self._schedule_bytes(SwitchSchedule.from_document(json.loads(data), self.objects.where(name)))
        except (ValueError, StoreError):
            return None  # a damaged pointer is replaced by the next move, and named by show until then

    def _repair_history(self) -> list[dict]:
        """The history's entries, after setting aside a history with damaged lines (rewritten with the others).

        A crash may cut the last line short, and hands or disks may damage
        others; the damaged object is kept beside the store
        (``history.jsonl.damaged-*``) so that ``show`` lists a sound history again.
        """
        self._forget("history")
        try:
            entries, bad, blob = self._read_history_now()
        except StoreDamagedError:
            set_aside(self.objects, HISTORY, "the store's history")
            return []
        if bad and blob is not None:
            try:
                aside = set_aside(
                    self.objects, HISTORY, f"the store's history ({len(bad)} damaged lines, first {bad[0][0]})"
                )
                logger.info("the damaged history is kept as %s", aside)
                self.objects.create(HISTORY, "".join(json.dumps(e) + "\n" for e in entries).encode())
            except (ConditionFailed, StoreError, NotAnObject) as exc:
                logger.warning("store %s: could not set aside the damaged lines of its history: %s", self.location, exc)
        return entries

    def _read_history(self) -> tuple[list[dict], list[tuple[int, str]], object]:
        """The history's valid entries, its damaged lines ``(number, text)`` and the object read (None: none).

        Lines are ASCII JSON objects (``json.dumps`` escapes the rest), so a
        line with a byte that is not is damaged, like one cut short.
        """
        return self._remembered("history", self._read_history_now)

    def _read_history_now(self) -> tuple[list[dict], list[tuple[int, str]], object]:
        what = "the store's history"
        where = self.objects.where(HISTORY)
        blob = read_blob(self.objects, HISTORY, what, limit=_HISTORY_LIMIT)
        text = "" if blob is None else blob.data.decode("utf-8", errors="replace")
        entries, bad = [], []
        for number, line in enumerate(text.splitlines(), 1):
            try:
                entry = check_fields(json.loads(line), _HISTORY_FIELDS, what, where)
                if entry["version"] < 1 or "\ufffd" in line:
                    raise ValueError(line)
                entries.append(entry)
            except (ValueError, StoreDamagedError):
                bad.append((number, line))
        return entries, bad, blob

    # ------------------------------------------------------------------ helpers
    def _check_whole(self, version: int) -> None:
        """Raise StoreError unless ``version`` reads whole: a damaged version must not become current."""
        stored = self.get(version)
        stored.verify()
        _ = stored.config

    def _is_whole(self, version: int) -> bool:
        """Whether ``version`` reads whole (its damage logged when not)."""
        try:
            self._check_whole(version)
            return True
        except StoreError as exc:
            logger.warning("store %s: version %d is not adopted: %s", self.location, version, exc)
            return False

    def _ever_current(self) -> set[int]:
        """The versions that were current once: the history's, and the current one."""
        try:
            published = {e["version"] for e in self._read_history()[0]}
        except StoreError:
            published = set()
        current = self._current_or_none()
        return published | ({current} if current is not None else set())

    def _orphans(self) -> list[int]:
        """Complete versions newer than every version once current: written by runs interrupted before CURRENT moved."""
        newest = max(self._ever_current(), default=0)
        return [v for v in self.versions() if v > newest]

    def _current_or_none(self) -> int | None:
        try:
            return self.current_version()
        except StoreError as exc:
            if isinstance(exc, StoreBusyError):
                raise
            logger.warning("%s; the next move of CURRENT replaces it", exc)
            return None

    def _numbered(self) -> dict[int, bool]:
        """Every claimed version number -> whether its version is complete (or is an object where a folder belongs)."""
        return self._remembered("numbered", self._numbered_now)

    def _numbered_now(self) -> dict[int, bool]:
        try:
            children = self.objects.children(f"{VERSIONS}/")
        except NotAnObject as exc:
            raise damaged("the store's versions directory", exc.where, exc.problem) from None
        numbered = {int(name): is_folder for name, is_folder in children.items() if _NUMBER.fullmatch(name)}
        if self.is_local:  # a manifest is one stat away: no listing of every version's files
            root = self.objects.root / VERSIONS
            return {n: not folder or os.path.lexists(root / f"{n:06d}" / MANIFEST) for n, folder in numbered.items()}
        complete = {
            int(info.name.split("/")[1])
            for info in self.objects.list(f"{VERSIONS}/")
            if info.name.count("/") == 2
            and info.name.endswith(f"/{MANIFEST}")
            and _NUMBER.fullmatch(info.name.split("/")[1])
        }
        return {n: not folder or n in complete for n, folder in numbered.items()}

    def _listing(self) -> str:
        """The version numbers, for a message (or why they cannot be listed)."""
        try:
            return str(self.versions())
        except StoreError as exc:
            return f"none readable ({exc})"
