"""Durable file writes for the configuration store: write and fsync, fsync a tree, checksums, removal.

A rename is atomic, but neither it nor the file it moves is durable until the
files and the directory that holds the new name are synced [1]_: a power cut
after ``os.rename`` may otherwise leave a version whose name exists and whose
tables are empty.

References
----------
.. [1] fsync(2), Linux man-pages ("Calling fsync() does not necessarily ensure that the entry in
   the directory containing the file has also reached disk"):
   https://man7.org/linux/man-pages/man2/fsync.2.html
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

__all__ = ["as_bytes", "write_bytes", "replace_file", "checksums", "fsync", "fsync_tree", "remove"]

logger = logging.getLogger(__name__)


def as_bytes(content: bytes | str | Mapping) -> bytes:
    """Bytes as they are, text as UTF-8, a mapping as indented, sorted JSON."""
    if isinstance(content, bytes):
        return content
    if isinstance(content, str):
        return content.encode()
    return json.dumps(content, indent=2, sort_keys=True, default=str).encode()


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (parents created) and fsync it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def replace_file(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` as the file ``path`` all at once: aside in its directory, fsynced, renamed over it.

    A reader sees the old file or the new one, never half of one; a failure leaves
    no file behind (and the old one, if any, in place).
    """
    path = Path(path)
    aside = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write_bytes(aside, data)
        os.replace(aside, path)
        fsync(path.parent)
    finally:
        remove(aside)
    return path


def checksums(directory: Path) -> dict:
    """Size and SHA-256 of every file under ``directory``, by path relative to it."""
    out = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        data = path.read_bytes()
        out[path.relative_to(directory).as_posix()] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return out


def fsync(path: Path) -> None:
    """fsync one file or directory."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: Path) -> None:
    """fsync a file, or every file and directory under a directory (children first)."""
    if path.is_dir():
        for root, _dirs, files in os.walk(path, topdown=False):
            for name in files:
                fsync(Path(root) / name)
            fsync(Path(root))
    else:
        fsync(path)


def remove(path: Path) -> None:
    """Remove a file or directory if it exists (a failure to clean up is logged, not raised)."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError as exc:
        logger.warning("could not remove %s: %s", path, exc)
