"""A trace's files wherever they are: listed and opened on a local disk, in S3, or on any Hadoop file system.

The checks before Spark starts, the replay's reader (no Spark), the fingerprint and the jobs all need the
same list of a trace's files, with their sizes and dates, and the checks and the replay read them. Where
the trace is decides how:

- a path or a ``file://`` URI: the operating system;
- ``s3://`` and ``s3a://`` (the same objects; Hadoop users write ``s3a://``): boto3, configured by the
  AWS SDKs' standard variables (:mod:`locality._aws`), so a remote trace is checked before Spark starts,
  and read by ``replay``, like a local one;
- any other scheme (``hdfs://``, ``abfs://``, ``gs://``...): Spark's Hadoop ``FileSystem``, through the
  JVM of the Spark session at hand (the one the job started), since only Hadoop serves them all. Without a
  session there is no listing: :func:`can_list` says so, and :func:`list_files` refuses with a message
  that says what to do.

Every backend follows Spark's rules for a directory: its files at any depth, except those whose path
below the directory has a part starting with ``.`` or ``_`` (``_SUCCESS``, ``.crc``, ``_temporary/``).
A glob's ``*`` stays within one path segment, as in Hadoop.
"""

from __future__ import annotations

import glob
import io
import logging
import os
from abc import abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import BinaryIO
from urllib.parse import urlparse

from locality.errors import TraceError

__all__ = ["TraceFile", "list_files", "open_file", "can_list", "is_local", "is_glob"]

logger = logging.getLogger(__name__)

#: Schemes read with boto3 (the rest of the URIs go through Hadoop).
S3_SCHEMES = ("s3", "s3a")
#: Bytes a remote file is read ahead by (a Parquet footer, a CSV prefix: one request each).
_READ_AHEAD = 256 * 1024


@dataclass(frozen=True)
class TraceFile:
    """One file of a trace, as its listing gives it.

    ``path`` is a local path, or the URI Spark reads; ``modified_ns`` the
    modification time in nanoseconds since the epoch; ``etag`` an S3 object's
    ETag (None elsewhere).
    """

    path: str
    size: int
    modified_ns: int
    etag: str | None = None


def is_local(path: str) -> bool:
    """Whether ``path`` is a local path or a ``file://`` URI (not ``s3a://``, ``hdfs://``...)."""
    return "://" not in path or path.startswith("file://")


def is_glob(path: str) -> bool:
    return any(ch in path for ch in "*?[")


def _scheme(path: str) -> str:
    return path.split("://", 1)[0].lower()


def can_list(path: str) -> bool:
    """Whether :func:`list_files` can list ``path`` now (a Hadoop scheme needs a Spark session)."""
    return is_local(path) or _scheme(path) in S3_SCHEMES or _spark_at_hand() is not None


def list_files(path: str) -> list[TraceFile]:
    """The files of the file, directory or glob ``path``, sorted by path; empty when nothing matches.

    Raises
    ------
    TraceError
        The listing failed (the message names the path and why), or ``path``
        has a Hadoop scheme and no Spark session is running.
    """
    if is_local(path):
        files = _local_files(path.removeprefix("file://"))
    elif _scheme(path) in S3_SCHEMES:
        files = _S3Location(path).files()
    else:
        files = _hadoop_files(path)
    return sorted(files, key=lambda f: f.path)


def open_file(file: TraceFile) -> BinaryIO:
    """``file`` opened for reading bytes, seekable (a remote file is read in ranges, as it is read)."""
    if is_local(file.path):
        return open(file.path.removeprefix("file://"), "rb")
    if _scheme(file.path) in S3_SCHEMES:
        raw = _S3Object(file)
    else:
        raw = _HadoopObject(file)
    return io.BufferedReader(raw, buffer_size=_READ_AHEAD)


def _hidden(relative: str) -> bool:
    """Whether Spark skips a file at ``relative`` below the directory it lists."""
    return any(part.startswith((".", "_")) for part in relative.split("/") if part)


# ---------------------------------------------------------------------- local
def _local_files(path: str) -> list[TraceFile]:
    if is_glob(path) and not os.path.lexists(path):  # a file whose name holds [ or * is that file, not a pattern
        names = glob.glob(path)
    elif os.path.isdir(path):

        def unreadable(exc: OSError) -> None:
            raise TraceError(f"cannot list the trace directory {exc.filename!r}: {exc.strerror}")

        names = []
        for root, dirs, files in os.walk(path, onerror=unreadable):
            dirs[:] = [d for d in dirs if not _hidden(d)]
            names += [os.path.join(root, name) for name in files if not _hidden(name)]
    else:
        names = [path] if os.path.exists(path) else []
    out = []
    for name in names:
        try:
            stat = os.stat(name)
        except OSError as exc:
            raise TraceError(f"cannot read the trace file {name!r}: {exc.strerror}") from None
        out.append(TraceFile(os.path.abspath(name), stat.st_size, stat.st_mtime_ns))
    return out


# ---------------------------------------------------------------------- S3
class _S3Location:
    """``s3://bucket/key``: an object, the objects under ``key/``, or those matching a glob in ``key``."""

    def __init__(self, path: str) -> None:
        parsed = urlparse(path)
        self.path = path
        self.scheme = parsed.scheme.lower()
        self.bucket = parsed.netloc
        self.key = parsed.path.lstrip("/")
        if not self.bucket:
            raise TraceError(f"the trace {path!r} names no bucket: write s3a://BUCKET/PATH")

    def files(self) -> list[TraceFile]:
        if is_glob(self.key):
            first_wildcard = min(self.key.index(ch) for ch in "*?[" if ch in self.key)
            folder = self.key[:first_wildcard].rpartition("/")[0]
            pattern = "/" + self.key
            objects = self._objects(folder + "/" if folder else "")
            return [self._file(item) for item in objects if PurePosixPath("/" + item["Key"]).match(pattern)]
        if self.key and not self.key.endswith("/"):
            files = [self._file(item) for item in self._objects(self.key + "/")]
            if files:
                return files
            head = _s3_call(self.path, "read", "head_object", Bucket=self.bucket, Key=self.key)
            return [] if head is None else [self._file({"Key": self.key, "Size": head["ContentLength"], **head})]
        return [self._file(item) for item in self._objects(self.key)]

    def _objects(self, prefix: str) -> Iterator[dict]:
        """The listing of the objects below ``prefix`` that Spark reads (not hidden, not folder markers)."""
        token = None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = _s3_call(self.path, "list", "list_objects_v2", Bucket=self.bucket, Prefix=prefix, **extra)
            if page is None:
                raise TraceError(f"no trace file at {self.path!r}: the bucket {self.bucket!r} does not exist")
            for item in page.get("Contents", []):
                relative = item["Key"][len(prefix) :]
                if relative and not relative.endswith("/") and not _hidden(relative):
                    yield item
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def _file(self, item: dict) -> TraceFile:
        """A listing's (or a HEAD's) object as a TraceFile (S3 dates have whole seconds, or milliseconds)."""
        modified = item["LastModified"]
        modified_ns = int(modified.timestamp()) * 1_000_000_000 + modified.microsecond * 1_000
        return TraceFile(f"{self.scheme}://{self.bucket}/{item['Key']}", item["Size"], modified_ns, item.get("ETag"))


def _s3_call(path: str, what: str, operation: str, **arguments):
    """The client's ``operation(**arguments)``; None when the object or bucket does not exist.

    Other failures are a TraceError naming ``path`` and saying what could not be done (``what``).
    """
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    from locality._aws import s3_client

    try:
        return getattr(s3_client(), operation)(**arguments)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") in ("NoSuchKey", "NoSuchBucket", "404", "NotFound"):
            return None
        detail = f"{error.get('Code', '')} {error.get('Message', '')}".strip()
        raise TraceError(f"cannot {what} the trace at {path!r}: {detail}") from None
    except NoCredentialsError:
        raise TraceError(
            f"cannot {what} the trace at {path!r}: no AWS credentials (set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)"
        ) from None
    except BotoCoreError as exc:  # refused connection, timeout, DNS
        raise TraceError(f"cannot {what} the trace at {path!r}: {exc}") from None


class _RemoteObject(io.RawIOBase):
    """A remote file read by ranges: :meth:`_read_at` is the one thing each kind of store says how to do."""

    def __init__(self, file: TraceFile) -> None:
        self.file = file
        self.position = 0

    @abstractmethod
    def _read_at(self, offset: int, size: int) -> bytes:
        """``size`` bytes of the file from ``offset`` (fewer only at its end)."""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        origin = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.file.size}[whence]
        self.position = max(0, origin + offset)
        return self.position

    def readinto(self, buffer) -> int:
        size = min(len(buffer), self.file.size - self.position)
        if size <= 0:
            return 0
        data = self._read_at(self.position, size)
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)

    def readall(self) -> bytes:
        data = self._read_at(self.position, self.file.size - self.position) if self.position < self.file.size else b""
        self.position += len(data)
        return data


class _S3Object(_RemoteObject):
    def __init__(self, file: TraceFile) -> None:
        super().__init__(file)
        self.location = _S3Location(file.path)

    def _read_at(self, offset: int, size: int) -> bytes:
        byte_range = f"bytes={offset}-{offset + size - 1}"
        location = self.location
        response = _s3_call(
            self.file.path, "read", "get_object", Bucket=location.bucket, Key=location.key, Range=byte_range
        )
        if response is None:
            raise TraceError(f"cannot read the trace file {self.file.path!r}: it is gone since it was listed")
        return response["Body"].read()


# ---------------------------------------------------------------------- Hadoop (through Spark's JVM)
def _spark_at_hand():
    """The running Spark session, if any (never starts one)."""
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    try:
        return SparkSession.active()
    except PySparkRuntimeError:
        return None


def _hadoop(path: str):
    """``(FileSystem, Path)`` of ``path`` in the JVM of the Spark session at hand, with its Hadoop settings."""
    session = _spark_at_hand()
    if session is None:
        raise TraceError(
            f"cannot list {path!r} without Spark: {_scheme(path)}:// is read through Spark's Hadoop file "
            "system, and no Spark session is running (replay starts none); copy the trace to a local path or to S3"
        )
    context = session.sparkContext
    hadoop_path = context._jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path.getFileSystem(context._jsc.hadoopConfiguration()), hadoop_path


def _hadoop_files(path: str) -> list[TraceFile]:
    from py4j.protocol import Py4JJavaError

    try:
        fs, hadoop_path = _hadoop(path)
        matches = fs.globStatus(hadoop_path) or []
        return [file for status in matches for file in _hadoop_tree(fs, status)]
    except Py4JJavaError as exc:
        raise TraceError(f"cannot list the trace at {path!r}: {_java_message(exc)}") from None


def _hadoop_tree(fs, status) -> Iterable[TraceFile]:
    """The file ``status``, or the files Spark reads below the directory ``status``."""
    root = status.getPath().toString().rstrip("/") + "/"
    if not status.isDirectory():
        yield TraceFile(status.getPath().toString(), status.getLen(), status.getModificationTime() * 1_000_000)
        return
    files = fs.listFiles(status.getPath(), True)
    while files.hasNext():
        found = files.next()
        name = found.getPath().toString()
        if not _hidden(name.removeprefix(root)):
            yield TraceFile(name, found.getLen(), found.getModificationTime() * 1_000_000)


def _java_message(exc) -> str:
    return str(exc.java_exception.getMessage() or exc.java_exception.toString()).splitlines()[0][:300]


class _HadoopObject(_RemoteObject):
    def _read_at(self, offset: int, size: int) -> bytes:
        from py4j.protocol import Py4JJavaError

        try:
            fs, hadoop_path = _hadoop(self.file.path)
            stream = fs.open(hadoop_path)
            try:
                stream.seek(offset)
                return bytes(stream.readNBytes(size))
            finally:
                stream.close()
        except Py4JJavaError as exc:
            raise TraceError(f"cannot read the trace file {self.file.path!r}: {_java_message(exc)}") from None
