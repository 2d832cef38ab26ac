"""Durable file writes: write and fsync, replace a file whole, fsync a directory, removal.

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

import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

__all__ = ["as_bytes", "write_bytes", "replace_file", "fsync", "remove"]

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


def fsync(path: Path) -> None:
    """fsync one file or directory."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove(path: Path) -> None:
    """Remove a file or directory if it exists (a failure to clean up is logged, not raised)."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError as exc:
        logger.warning("could not remove %s: %s", path, exc)
