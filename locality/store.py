"""The configuration store: numbered, immutable versions and an atomically moved ``CURRENT`` pointer.

Layout of a store rooted at ``ROOT``::

    ROOT/CURRENT                      # text: the number of the current version
    ROOT/versions/000007/manifest.json      # version, created, fingerprint, parameters, files
    ROOT/versions/000007/configuration/     # RoutingConfiguration.write(): header.json,
                                            #   configuration.json, tables/NN.parquet
    ROOT/versions/000007/<artifacts>        # report.json, report.txt, load.png, migration_plan.json ...

Publishing writes everything into ``versions/.tmp-<random>``, renames that
directory to the next number (a directory rename is atomic on POSIX file
systems and HDFS), then replaces ``CURRENT`` through a temporary file and
``os.replace``. A failure at any point leaves the previous current version
intact and readable; what a killed run leaves behind is either a hidden
``.tmp-*`` directory (removed by the next publish) or a complete version that
is not current. A publish whose fingerprint (input + parameters) matches an
existing version creates nothing new and points ``CURRENT`` at that version,
so reruns are idempotent.

One writer per store at a time (the nightly and online jobs of one pipeline
are scheduled, not concurrent); readers may run any time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from locality.errors import SerializationError, StoreError
from locality.routing import RoutingConfiguration

__all__ = ["ConfigStore", "StoredVersion", "PublishResult", "fingerprint"]

logger = logging.getLogger(__name__)

_CURRENT = "CURRENT"
_VERSIONS = "versions"
_MANIFEST = "manifest.json"
_CONFIG_DIR = "configuration"


def fingerprint(inputs: Iterable[tuple[str, int, int]], parameters: Mapping) -> str:
    """SHA-256 over the input files ``(path, size, mtime_ns)`` and the parameters (as sorted JSON)."""
    digest = hashlib.sha256()
    for path, size, mtime in sorted(inputs):
        digest.update(f"{path}\0{size}\0{mtime}\n".encode())
    digest.update(json.dumps(parameters, sort_keys=True, default=str).encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class StoredVersion:
    """One complete version of the store."""

    version: int
    path: Path
    manifest: dict

    @property
    def config(self) -> RoutingConfiguration:
        """The routing configuration, read from its Parquet tables."""
        return RoutingConfiguration.read(self.path / _CONFIG_DIR)

    def read_json(self, name: str) -> dict:
        """An artifact stored as JSON (e.g. ``report.json``, ``migration_plan.json``)."""
        try:
            return json.loads((self.path / name).read_text())
        except FileNotFoundError:
            raise StoreError(f"version {self.version} has no {name!r}") from None


@dataclass(frozen=True)
class PublishResult:
    """What :meth:`ConfigStore.publish` did."""

    version: int
    previous_version: int | None
    created: bool


class ConfigStore:
    """A directory of versioned routing configurations (see the module docstring for the layout).

    Parameters
    ----------
    root : str or Path
        The store's directory; created on the first publish.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    # ------------------------------------------------------------------ reading
    def versions(self) -> list[int]:
        """Numbers of the complete versions, oldest first."""
        directory = self.root / _VERSIONS
        if not directory.is_dir():
            return []
        return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit() and (p / _MANIFEST).is_file())

    def current_version(self) -> int | None:
        """The version ``CURRENT`` points at, or None for an empty store."""
        try:
            text = (self.root / _CURRENT).read_text().strip()
        except FileNotFoundError:
            return None
        if not text.isdigit():
            raise StoreError(f"{self.root / _CURRENT} is damaged: {text!r} is not a version number")
        return int(text)

    def get(self, version: int | None = None) -> StoredVersion:
        """A version (default: the current one).

        Raises
        ------
        StoreError
            The store is empty or has no such version.
        """
        if version is None:
            version = self.current_version()
            if version is None:
                raise StoreError(f"the store {self.root} has no published version yet")
        path = self._version_dir(version)
        try:
            manifest = json.loads((path / _MANIFEST).read_text())
        except FileNotFoundError:
            raise StoreError(f"the store {self.root} has no version {version}; versions: {self.versions()}") from None
        except json.JSONDecodeError as exc:
            raise SerializationError(f"the manifest of version {version} is damaged: {exc}") from None
        return StoredVersion(version, path, manifest)

    def find(self, fingerprint: str) -> int | None:
        """The newest version published with ``fingerprint``, if any."""
        for version in reversed(self.versions()):
            if self.get(version).manifest.get("fingerprint") == fingerprint:
                return version
        return None

    # ------------------------------------------------------------------ writing
    def publish(
        self,
        config: RoutingConfiguration,
        *,
        fingerprint: str,
        artifacts: Mapping[str, bytes | str | dict] | None = None,
        metadata: Mapping | None = None,
    ) -> PublishResult:
        """Write ``config`` and its artifacts as a new version and make it current, atomically.

        Parameters
        ----------
        config : RoutingConfiguration
        fingerprint : str
            Identity of the input and parameters (:func:`fingerprint`). A
            version with the same fingerprint is reused instead of duplicated.
        artifacts : mapping of file name -> bytes, str or JSON-ready dict
            Files stored beside the configuration (report, plot, plan).
        metadata : mapping, optional
            Stored in the manifest (e.g. the report's summary, the input paths).
        """
        reused = self.reuse(fingerprint)
        if reused is not None:
            return reused
        previous = self.current_version()
        versions_dir = self.root / _VERSIONS
        versions_dir.mkdir(parents=True, exist_ok=True)
        self._remove_leftovers(versions_dir)
        tmp = versions_dir / f".tmp-{uuid.uuid4().hex}"
        try:
            tmp.mkdir()
            config.write(tmp / _CONFIG_DIR)
            files = [_CONFIG_DIR]
            for name, content in (artifacts or {}).items():
                _write_artifact(tmp / name, content)
                files.append(name)
            version = self._claim_number(tmp, fingerprint, files, metadata)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._point_current(version)
        logger.info("store %s: published version %d (previous %s)", self.root, version, previous)
        return PublishResult(version, previous, created=True)

    def reuse(self, fingerprint: str) -> PublishResult | None:
        """If a version was published with ``fingerprint``, make it current and say so; else None."""
        existing = self.find(fingerprint)
        if existing is None:
            return None
        previous = self.current_version()
        if existing != previous:
            self._point_current(existing)
        logger.info("store %s: same input and parameters as version %d; nothing new published", self.root, existing)
        return PublishResult(existing, previous, created=False)

    def _claim_number(self, tmp: Path, fingerprint: str, files: list[str], metadata: Mapping | None) -> int:
        """Write the manifest and rename ``tmp`` to the next free version number."""
        while True:
            version = (self.versions() or [0])[-1] + 1
            manifest = {
                "version": version,
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "fingerprint": fingerprint,
                "files": files,
                **dict(metadata or {}),
            }
            _write_artifact(tmp / _MANIFEST, manifest)
            try:
                os.rename(tmp, self._version_dir(version))
                return version
            except OSError:
                if not self._version_dir(version).exists():
                    raise
                # another publisher took this number between listing and renaming: take the next one

    def _point_current(self, version: int) -> None:
        """Replace ``CURRENT`` atomically (write a temporary file, fsync, ``os.replace``)."""
        tmp = self.root / f".{_CURRENT}.{uuid.uuid4().hex}"
        with open(tmp, "w") as fh:
            fh.write(f"{version}\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.root / _CURRENT)

    def _version_dir(self, version: int) -> Path:
        return self.root / _VERSIONS / f"{version:06d}"

    @staticmethod
    def _remove_leftovers(versions_dir: Path) -> None:
        for leftover in versions_dir.glob(".tmp-*"):
            logger.info("removing %s left by an interrupted publish", leftover)
            shutil.rmtree(leftover, ignore_errors=True)


def _write_artifact(path: Path, content: bytes | str | Mapping) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        data = content
    elif isinstance(content, str):
        data = content.encode()
    else:
        data = json.dumps(content, indent=2, sort_keys=True, default=str).encode()
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
