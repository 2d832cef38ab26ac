"""Reading the configuration store's files defensively: every kind of damage is one error naming the file.

A store outlives the jobs that write it: disks fill, backups are restored
half-way, people edit files by hand, a copy turns a file into a directory.
``locality show`` and ``locality rollback`` are the tools that repair it, so
they, the jobs and the Router read every store file through these functions:
a directory where a file belongs (or a file where a directory belongs), a
FIFO, bytes that are not UTF-8, JSON cut short or of another shape, a field
missing or of the wrong type all end in one
:class:`~locality.errors.StoreDamagedError` whose message names the file and
what is wrong with it, never in an ``IsADirectoryError`` or a ``KeyError``
three frames down (nor in a read that never returns).

Writers repair what blocks them: :func:`set_aside` renames a damaged entry
out of the way (kept, never deleted, for whoever wants to look at it).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from locality.errors import StoreDamagedError, StoreError

__all__ = ["read_text", "read_json", "check_fields", "is_directory", "set_aside", "FIELD_KINDS"]

logger = logging.getLogger(__name__)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: What a field may hold, by the words a message uses for it.
FIELD_KINDS: dict[str, Callable[[object], bool]] = {
    "an integer": _is_int,
    "an integer or null": lambda v: v is None or _is_int(v),
    "a number": lambda v: _is_int(v) or isinstance(v, float),
    "a string": lambda v: isinstance(v, str),
    "a string or null": lambda v: v is None or isinstance(v, str),
    "a list of names": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "a JSON object": lambda v: isinstance(v, dict),
}


def damaged(what: str, path: Path, problem: str) -> StoreDamagedError:
    """The error for ``path`` (``what`` says which store file it is) damaged by ``problem``."""
    return StoreDamagedError(f"{what} ({path}) is damaged: {problem}", path, problem)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


def _stat(path: Path, what: str) -> os.stat_result | None:
    """``os.stat(path)``; None when nothing is there, StoreDamagedError when a parent is a file."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise damaged(what, path, f"a parent of it is a file, not a directory ({_file_parent(path)})") from None
    except OSError as exc:
        raise StoreError(f"cannot read {what} ({path}): {exc.strerror}") from None


def read_text(path: Path, what: str, *, limit: int | None = None) -> str | None:
    """The UTF-8 text of the store file ``path``; None when there is none.

    Raises
    ------
    StoreDamagedError
        ``path`` is a directory or another non-file, a parent of it is a
        file, it is larger than ``limit`` bytes, or it is not UTF-8.
    StoreError
        It cannot be read (permissions, I/O error).
    """
    info = _stat(path, what)
    if info is None:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise damaged(what, path, f"it is {_kind(info.st_mode)}, not a file")
    if limit is not None and info.st_size > limit:
        raise damaged(what, path, f"it holds {info.st_size:,} bytes; it should hold at most {limit:,}")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None  # removed between the stat and the read: as if absent
    except OSError as exc:
        raise StoreError(f"cannot read {what} ({path}): {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise damaged(what, path, f"byte {exc.start} ({data[exc.start]:#04x}) is not UTF-8 text") from None


def read_json(path: Path, what: str, *, limit: int | None = None) -> Any:
    """The JSON document in the store file ``path`` (any JSON value); None when there is none."""
    text = read_text(path, what, limit=limit)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, and numbers too long for int()
        raise damaged(what, path, f"not JSON ({exc})") from None


def check_fields(doc: object, fields: Mapping[str, tuple[str, bool]], what: str, path: Path) -> dict:
    """``doc`` if it is a JSON object whose ``fields`` (name -> (kind, required)) are there and of their kind.

    Kinds are the keys of :data:`FIELD_KINDS`; fields not listed are not checked.
    """
    if not isinstance(doc, dict):
        raise damaged(what, path, f"it holds a JSON {type(doc).__name__}, not an object")
    for name, (kind, required) in fields.items():
        if name not in doc:
            if required:
                raise damaged(what, path, f"it has no field {name!r}")
            continue
        if not FIELD_KINDS[kind](doc[name]):
            raise damaged(what, path, f"its field {name!r} must be {kind}; got {_short(doc[name])}")
    return doc


def is_directory(path: Path, what: str) -> bool:
    """True if ``path`` is a directory, False if nothing is there; StoreDamagedError if something else is."""
    info = _stat(path, what)
    if info is None:
        return False
    if not stat.S_ISDIR(info.st_mode):
        raise damaged(
            what, path, f"it is {'a file' if stat.S_ISREG(info.st_mode) else _kind(info.st_mode)}, not a directory"
        )
    return True


def set_aside(path: Path, what: str) -> Path:
    """Rename the damaged entry ``path`` to ``<name>.damaged-<time>-<id>`` beside it (kept, not deleted).

    Only a writer holding the store's lock may call it (nobody else moves entries).
    """
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.damaged-{stamp}-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(path, target)
    except OSError as exc:
        raise StoreError(f"{what} ({path}) is damaged and cannot be set aside: {exc.strerror}") from None
    logger.warning("%s (%s) was damaged; set aside as %s", what, path, target.name)
    return target


def _file_parent(path: Path) -> Path:
    """The nearest parent of ``path`` that exists and is not a directory."""
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return parent
    return path.parent


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
