"""The store's objects as files of a local (or mounted) directory, with the conditional writes of an object store.

- :meth:`~DirectoryObjects.put` writes aside (``.tmp-<host>-<pid>-<random>`` in the same directory),
  fsyncs, renames over the name and fsyncs the directory: a rename is atomic on POSIX file systems,
  and durable once its directory is synced [1]_.
- :meth:`~DirectoryObjects.create` links a synced file to the name: ``link(2)`` fails if the name
  exists [2]_, which makes create-if-absent atomic without a lock.
- :meth:`~DirectoryObjects.replace` holds an ``flock`` of the object's directory while it compares the
  ETag and renames (every replace of a name takes the same lock, so two cannot interleave; a create
  cannot slip in, as the name exists). The lock is on the directory itself: no lock file.
- ETags are the MD5 of the bytes, as S3 gives a plain upload.

Anything that is not a regular file where an object belongs (a directory, a FIFO, a device) is
reported, never opened (a FIFO would block a read forever).

References
----------
.. [1] fsync(2), Linux man-pages: https://man7.org/linux/man-pages/man2/fsync.2.html
.. [2] link(2), Linux man-pages ("EEXIST newpath already exists"): https://man7.org/linux/man-pages/man2/link.2.html
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import shutil
import socket
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

from locality._durable import fsync
from locality.errors import StoreError
from locality.storage.base import Blob, ConditionFailed, NotAnObject, ObjectInfo, Objects, md5_etag

__all__ = ["DirectoryObjects"]

logger = logging.getLogger(__name__)

#: Names of files being written (by this module, in the directory of their target).
TMP_PREFIX = ".tmp-"
_HOST = socket.gethostname()
#: What :meth:`DirectoryObjects._aside` names a file being written: whose it is, and a random part.
_TMP_NAME = re.compile(rf"{re.escape(TMP_PREFIX)}(?P<host>.+)-(?P<pid>[0-9]+)-[0-9a-f]{{32}}")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


def _file_parent(path: Path) -> Path:
    """The nearest parent of ``path`` that exists and is not a directory."""
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return parent
    return path.parent


class DirectoryObjects(Objects):
    """Objects stored as files under ``root`` (created by the first write)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.location = str(root)

    @property
    def identity(self) -> str:
        return str(self.root.resolve())

    def where(self, name: str) -> str:
        return str(self.root / name) if name else str(self.root)

    # ------------------------------------------------------------------ reading
    def _stat(self, path: Path) -> os.stat_result | None:
        try:
            return os.stat(path)
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            self._check_root()
            raise NotAnObject(str(path), f"a parent of it is a file, not a directory ({_file_parent(path)})") from None
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc.strerror}") from None

    def _check_root(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"the store {self.root} is a file, not a directory")

    def get(self, name: str, *, limit: int | None = None) -> Blob | None:
        path = self.root / name
        info = self._regular(path)
        if info is None:
            return None
        if limit is not None and info.st_size > limit:
            raise NotAnObject(str(path), f"it holds {info.st_size:,} bytes; it should hold at most {limit:,}")
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None  # removed between the stat and the read: as if absent
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc.strerror}") from None
        return Blob(data, md5_etag(data))

    def _regular(self, path: Path) -> os.stat_result | None:
        info = self._stat(path)
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise NotAnObject(str(path), f"it is {_kind(info.st_mode)}, not a file")
        return info

    def head(self, name: str) -> ObjectInfo | None:
        info = self._regular(self.root / name)
        return None if info is None else ObjectInfo(name, info.st_size, None, info.st_mtime)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        start = self.root / prefix
        for folder, dirs, files in os.walk(start):
            dirs[:] = [d for d in dirs if not d.startswith(TMP_PREFIX)]
            for file in files:
                if file.startswith(TMP_PREFIX):
                    continue
                path = Path(folder) / file
                try:
                    info = os.stat(path)
                except OSError:
                    continue  # removed while listed
                yield ObjectInfo(path.relative_to(self.root).as_posix(), info.st_size, None, info.st_mtime)

    def children(self, prefix: str = "") -> dict[str, bool]:
        folder = self.root / prefix
        info = self._stat(folder)
        if info is None:
            return {}
        if not stat.S_ISDIR(info.st_mode):
            kind = "a file" if stat.S_ISREG(info.st_mode) else _kind(info.st_mode)
            raise NotAnObject(str(folder), f"it is {kind}, not a directory")
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            raise StoreError(f"cannot list {folder}: {exc.strerror}") from None
        return {e.name: e.is_dir() for e in entries if not e.name.startswith(TMP_PREFIX)}

    # ------------------------------------------------------------------ writing
    def _aside(self, path: Path, data: bytes) -> Path:
        """A synced file holding ``data`` beside ``path`` (parents created), under a name readers skip."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise NotAnObject(str(path), f"a parent of it is a file, not a directory ({_file_parent(path)})") from None
        except NotADirectoryError:
            raise NotAnObject(str(path), f"a parent of it is a file, not a directory ({_file_parent(path)})") from None
        tmp = path.with_name(f"{TMP_PREFIX}{_HOST}-{os.getpid()}-{uuid.uuid4().hex}")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return tmp

    def put(self, name: str, data: bytes) -> str:
        return self._place(name, data, os.replace)

    def create(self, name: str, data: bytes) -> str:
        return self._place(name, data, os.link)  # link(2) fails when the name exists: create-if-absent

    def _place(self, name: str, data: bytes, place) -> str:
        """Write ``data`` aside, synced, then ``place(aside, target)`` (a rename, or a link) and sync the folder."""
        path = self.root / name
        tmp = None
        try:
            tmp = self._aside(path, data)
            place(tmp, path)
            fsync(path.parent)
        except FileExistsError:
            raise ConditionFailed(str(path)) from None
        except IsADirectoryError:
            raise NotAnObject(str(path), "it is a directory, not a file") from None
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None
        finally:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
        return md5_etag(data)

    def replace(self, name: str, data: bytes, etag: str) -> str:
        path = self.root / name
        try:
            fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            raise ConditionFailed(str(path)) from None
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            blob = self.get(name)
            if blob is None or blob.etag != etag:
                raise ConditionFailed(str(path))
            return self.put(name, data)
        finally:
            os.close(fd)  # releases the flock

    def delete(self, name: str) -> None:
        path = self.root / name
        try:
            path.unlink(missing_ok=True)
            for parent in path.parents:  # folders exist only for their objects: remove the ones left empty
                if parent == self.root or self.root not in parent.parents:
                    break
                parent.rmdir()
        except IsADirectoryError:
            raise NotAnObject(str(path), "it is a directory, not a file") from None
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                raise StoreError(f"cannot remove {path}: {exc.strerror}") from None

    def delete_folder(self, prefix: str, *, last: str | None = None) -> None:
        folder = self.root / prefix
        try:
            if last is not None:
                for child in folder.iterdir():
                    if child.name == last:
                        continue
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child)
                    else:
                        child.unlink(missing_ok=True)
            shutil.rmtree(folder)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(f"cannot remove {self.root / prefix}: {exc.strerror}") from None

    def remove_empty_folder(self, prefix: str) -> None:
        """Remove the folder ``prefix`` if nothing at all is in it (a writer died before writing anything there)."""
        try:
            (self.root / prefix).rmdir()
        except OSError:
            pass  # not empty (a live writer's file in progress, on this host or another), or gone

    def set_aside(self, name: str, new_name: str) -> None:
        path, target = self.root / name, self.root / new_name
        try:
            os.rename(path, target)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"{path} cannot be set aside: {exc.strerror}") from None

    def check_writable(self) -> None:
        self._check_root()
        probe_dir = self.root
        while not probe_dir.exists():
            probe_dir = probe_dir.parent
        if not probe_dir.is_dir():
            raise StoreError(f"the store {self.root} cannot be created: {probe_dir} is a file, not a directory")
        probe = probe_dir / f".probe-{uuid.uuid4().hex}"  # not .tmp-*: a sweep must not race it
        try:
            probe.touch(exist_ok=False)
            probe.unlink()
        except OSError as exc:
            where = "" if probe_dir == self.root else f" (it would be created in {probe_dir})"
            raise StoreError(f"the store {self.root} is not writable{where}: {exc.strerror}") from None

    def exists(self) -> bool:
        self._check_root()
        return self.root.is_dir()

    def sweep(self, is_dead) -> None:
        """Remove the files being written that dead writers left: this host's (``is_dead(pid)``), and older locality's.

        A name of this module's (``.tmp-<host>-<pid>-<random>``) is removed when its writer ran on this host and
        ``is_dead(pid)``; one of another host may be a live writer's, and stays. Any other ``.tmp-*`` entry was
        left by a locality from before the lease (whose writers must be stopped before this one writes).
        """
        for folder, dirs, files in os.walk(self.root):
            for entry in [*dirs, *files]:
                if not entry.startswith(TMP_PREFIX):
                    continue
                ours = _TMP_NAME.fullmatch(entry)
                if ours and not (ours["host"] == _HOST and is_dead(int(ours["pid"]))):
                    continue
                path = Path(folder) / entry
                logger.info("removing %s left by a writer that died", path)
                try:
                    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
                except OSError as exc:
                    if exc.errno != errno.ENOENT:
                        logger.warning("could not remove %s: %s", path, exc)
