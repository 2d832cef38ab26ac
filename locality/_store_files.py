"""Reading the configuration store's objects defensively: every kind of damage is one error naming the object.

A store outlives the jobs that write it: disks fill, backups are restored
half-way, people edit files by hand, a copy turns a file into a directory.
``locality show`` and ``locality rollback`` are the tools that repair it, so
they, the jobs and the Router read every store object through these functions:
a directory where a file belongs (or a file where a directory belongs), a
FIFO, bytes that are not UTF-8, JSON cut short or of another shape, a field
missing or of the wrong type all end in one
:class:`~locality.errors.StoreDamagedError` whose message names the object and
what is wrong with it, never in an ``IsADirectoryError`` or a ``KeyError``
three frames down (nor in a read that never returns).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from locality.errors import StoreDamagedError
from locality.storage import Blob, NotAnObject, Objects

__all__ = [
    "read_blob",
    "read_text",
    "read_json",
    "decode",
    "parse_json",
    "check_fields",
    "damaged",
    "set_aside",
    "FIELD_KINDS",
]

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


def damaged(what: str, where: object, problem: str) -> StoreDamagedError:
    """The error for the object at ``where`` (``what`` says which store object it is) damaged by ``problem``."""
    return StoreDamagedError(f"{what} ({where}) is damaged: {problem}", where, problem)


def read_blob(objects: Objects, name: str, what: str, *, limit: int | None = None) -> Blob | None:
    """The object ``name`` with its ETag; None when there is none.

    Raises
    ------
    StoreDamagedError
        It is not an object of bytes (a directory, a FIFO, a parent that is a file) or holds more than ``limit``.
    StoreError
        It cannot be read (permissions, I/O error); StoreUnavailableError when the store cannot be reached.
    """
    try:
        return objects.get(name, limit=limit)
    except NotAnObject as exc:
        raise damaged(what, exc.where, exc.problem) from None


def decode(data: bytes, what: str, where: str) -> str:
    """The UTF-8 text of ``data``; StoreDamagedError naming the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise damaged(what, where, f"byte {exc.start} ({data[exc.start]:#04x}) is not UTF-8 text") from None


def read_text(objects: Objects, name: str, what: str, *, limit: int | None = None) -> str | None:
    """The UTF-8 text of the object ``name``; None when there is none (damage as :func:`read_blob`, or not UTF-8)."""
    blob = read_blob(objects, name, what, limit=limit)
    return None if blob is None else decode(blob.data, what, objects.where(name))


def parse_json(text: str, what: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, and numbers too long for int()
        raise damaged(what, where, f"not JSON ({exc})") from None


def read_json(objects: Objects, name: str, what: str, *, limit: int | None = None) -> Any:
    """The JSON document in the object ``name`` (any JSON value); None when there is none."""
    text = read_text(objects, name, what, limit=limit)
    return None if text is None else parse_json(text, what, objects.where(name))


def check_fields(doc: object, fields: Mapping[str, tuple[str, bool]], what: str, where: object) -> dict:
    """``doc`` if it is a JSON object whose ``fields`` (name -> (kind, required)) are there and of their kind.

    Kinds are the keys of :data:`FIELD_KINDS`; fields not listed are not checked.
    """
    if not isinstance(doc, dict):
        raise damaged(what, where, f"it holds a JSON {type(doc).__name__}, not an object")
    for name, (kind, required) in fields.items():
        if name not in doc:
            if required:
                raise damaged(what, where, f"it has no field {name!r}")
            continue
        if not FIELD_KINDS[kind](doc[name]):
            raise damaged(what, where, f"its field {name!r} must be {kind}; got {_short(doc[name])}")
    return doc


def set_aside(objects: Objects, name: str, what: str) -> str:
    """Keep the damaged object ``name`` as ``<name>.damaged-<time>-<id>`` beside it (never deleted); its new name.

    Only the lease holder may call it (nobody else moves objects).
    """
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = f"{name}.damaged-{stamp}-{uuid.uuid4().hex[:8]}"
    objects.set_aside(name, aside)
    logger.warning("%s (%s) was damaged; set aside as %s", what, objects.where(name), aside)
    return aside


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
