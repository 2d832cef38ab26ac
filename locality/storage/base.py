"""What the store needs of the place it lives in: named objects, read and written whole, two of the writes conditional.

The store's protocol (``docs/store-protocol.md``) is written against this interface only, so a local
directory and an S3 bucket follow one protocol. Five operations, all an object store offers:

- :meth:`Objects.get`: an object's bytes and its ETag (an opaque tag that changes when the object does);
- :meth:`Objects.put`: write an object whole (readers see the old bytes or the new ones);
- :meth:`Objects.create`: write it only if no object has that name (``If-None-Match: *``);
- :meth:`Objects.replace`: write it only if its ETag is still the one read (``If-Match``);
- :meth:`Objects.list` and :meth:`Objects.children`: the names under a prefix.

A conditional write that loses raises :class:`ConditionFailed`; nothing else does. An object that
cannot be one (a directory, a FIFO or a device where a file belongs, more bytes than the caller's
limit) raises :class:`NotAnObject`, which the store reports as damage naming it. A store that cannot
be reached raises :class:`~locality.errors.StoreUnavailableError` (retry later), a store that refuses
the caller (no such bucket, access denied) :class:`~locality.errors.StoreError`.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Objects", "Blob", "ObjectInfo", "ConditionFailed", "NotAnObject", "md5_etag"]


class ConditionFailed(Exception):
    """A conditional write lost: the object exists (create) or changed since it was read (replace)."""


class NotAnObject(Exception):
    """``name`` holds something that is not an object of bytes; ``problem`` says what (for a damage message)."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


@dataclass(frozen=True)
class Blob:
    """An object read whole: its bytes and the ETag they had."""

    data: bytes
    etag: str


@dataclass(frozen=True)
class ObjectInfo:
    """One object of a listing: its name (relative to the store's root), size, ETag and modification time."""

    name: str
    size: int
    etag: str | None
    modified: float | None


def md5_etag(data: bytes) -> str:
    """The ETag S3 gives a plain upload of ``data``: its MD5, quoted (an identity tag, not a security digest)."""
    return f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'


class Objects(ABC):
    """Objects named by ``/``-separated names under one root (a directory, or a prefix of a bucket)."""

    #: The root as the user named it (a path or a URI), for messages.
    location: str

    @property
    @abstractmethod
    def identity(self) -> str:
        """What tells this store from every other one (two roots with one identity are one store)."""

    @abstractmethod
    def where(self, name: str) -> str:
        """The full path or URI of ``name``, for messages."""

    @abstractmethod
    def get(self, name: str, *, limit: int | None = None) -> Blob | None:
        """The object ``name``; None when there is none. NotAnObject if it exceeds ``limit`` bytes."""

    @abstractmethod
    def head(self, name: str) -> ObjectInfo | None:
        """Size (and what else is cheap) of ``name`` without reading it; None when there is none."""

    @abstractmethod
    def put(self, name: str, data: bytes) -> str:
        """Write ``name`` whole; its new ETag."""

    @abstractmethod
    def create(self, name: str, data: bytes) -> str:
        """Write ``name`` only if nothing has that name (ConditionFailed otherwise); its ETag."""

    @abstractmethod
    def replace(self, name: str, data: bytes, etag: str) -> str:
        """Write ``name`` only if its ETag is still ``etag`` (ConditionFailed otherwise, or when it is gone)."""

    @abstractmethod
    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Every object whose name starts with ``prefix`` (a ``/``-ended folder, or ``""`` for all), any order."""

    @abstractmethod
    def children(self, prefix: str = "") -> dict[str, bool]:
        """The names right under the folder ``prefix`` (``""`` or ending in ``/``): name -> whether it is a folder."""

    @abstractmethod
    def delete(self, name: str) -> None:
        """Remove the object ``name`` (nothing when there is none). Writers remove only objects they wrote."""

    def delete_folder(self, prefix: str, *, last: str | None = None) -> None:
        """Remove every object under the folder ``prefix`` (a writer's own: a version it claimed, unfinished).

        ``last`` (a name in the folder) goes after all the others, so that a removal cut short
        leaves it behind to say whose folder this is and the next writer can finish the removal.
        """
        marker = f"{prefix}/{last}" if last is not None else None
        names = [info.name for info in self.list(f"{prefix}/")]
        for name in sorted(names, key=lambda name: name == marker):  # stable: the rest in listing order
            self.delete(name)

    @abstractmethod
    def set_aside(self, name: str, new_name: str) -> None:
        """Keep what is at ``name`` (object or, on a file system, anything) under ``new_name``, and free ``name``."""

    @abstractmethod
    def check_writable(self) -> None:
        """Raise StoreError unless a writer could write here now (tried for real)."""

    def exists(self) -> bool:
        """Whether anything is stored under the root."""
        return bool(self.children(""))
