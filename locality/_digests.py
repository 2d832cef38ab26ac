"""SHA-256 digests of input files, remembered by what the file system says about each file.

The store's fingerprint (:func:`locality.store.fingerprint`) must identify an
input by its content: a file touched, copied with its dates or restored from
a backup is the same input, and a file rewritten with the same size and date
is not. Reading every byte of a trace on every run of a nightly or a
15-minute job would cost about what the job's own pass costs, so each digest
is remembered beside the store with the file's identity: device, inode, size,
and modification and change times in nanoseconds. While none of them moves,
neither did the bytes (every write, and every ``touch``, moves the change
time, which no user can set back), so the digest is reused; when one moves,
the file is read again, and a file touched but not changed gets the same
digest, so its rerun publishes nothing. Measured cost: ``docs/unattended.md``.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["file_digests", "DigestCache", "MAX_REMEMBERED"]

logger = logging.getLogger(__name__)

#: Files whose digests a cache remembers (the latest run's first); about 200 bytes each.
MAX_REMEMBERED = 100_000
_BLOCK = 1 << 20


def _identity(info: os.stat_result) -> list[int]:
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


class DigestCache(Protocol):
    """Where digests are remembered: a JSON document read (None when absent or damaged) and written, best effort."""

    def load(self) -> Any: ...

    def save(self, doc: Any) -> None: ...


def file_digests(paths: Sequence[str], cache: DigestCache | None = None) -> list[tuple[int, str]]:
    """``(size, SHA-256)`` of each file of ``paths``, in order; ``cache`` remembers them between runs.

    The cache is a JSON document (``ConfigStore.digest_cache``: a damaged one is
    ignored and replaced); writing it is best effort (a read-only store still
    gets its digests).

    Raises
    ------
    OSError
        A file cannot be read.
    """
    remembered = _load(cache) if cache is not None else {}
    fresh: dict[str, list] = {}
    out = []
    for path in paths:
        absolute = os.path.abspath(path)
        before = os.stat(absolute)
        known = remembered.get(absolute)
        if known is not None and known[:5] == _identity(before):
            digest = known[5]
        else:
            digest = _sha256(absolute)
            if _identity(os.stat(absolute)) == _identity(before):  # not written while it was read
                fresh[absolute] = [*_identity(before), digest]
        out.append((before.st_size, digest))
    if cache is not None and fresh:
        _save(cache, remembered, fresh)
    return out


def _load(cache: DigestCache) -> dict[str, list]:
    doc = cache.load()
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, dict):
        return {}
    valid = {}
    for path, entry in files.items():
        if (
            isinstance(entry, list)
            and len(entry) == 6
            and all(isinstance(v, int) for v in entry[:5])
            and isinstance(entry[5], str)
        ):
            valid[path] = entry
    return valid


def _save(cache: DigestCache, remembered: dict[str, list], fresh: dict[str, list]) -> None:
    files = {path: entry for path, entry in remembered.items() if path not in fresh}
    files.update(fresh)  # the latest last: the oldest are forgotten first
    if len(files) > MAX_REMEMBERED:
        files = dict(list(files.items())[-MAX_REMEMBERED:])
    cache.save({"files": files})
