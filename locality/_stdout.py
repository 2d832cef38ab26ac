"""Keeping stdout for the one JSON document of ``--json``, whatever else writes to it.

``locality ... --json | jq`` must parse: stdout carries one JSON document and
nothing else. Python code writes its progress and logs to stderr, but native
code writes wherever file descriptor 1 points (METIS, the JVM that PySpark
starts, a library's stray ``printf``), and under ``spark-submit`` the JVM runs
the Python driver with its stdout and stderr joined into one pipe, copied to
spark-submit's stdout: progress on stderr lands ahead of the document there.

:func:`one_document` therefore works on descriptors, not on Python streams:
for the run it points descriptor 1 at stderr (so does ``sys.stdout``) and
writes the document to a duplicate of the original stdout. When stdout and
stderr are one pipe and a JVM gateway is there (``spark-submit``), stderr
goes through a pipe whose reader hands every byte to the JVM's own
``System.err``, which is spark-submit's stderr.
"""

from __future__ import annotations

import ctypes
import io
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["one_document", "document_stream", "write_document", "document_written", "native_stdout_captured"]

#: Seconds to wait for the last of stderr to reach the JVM when the run ends.
_DRAIN_SECONDS = 10.0
#: The stream of the run's one document while :func:`one_document` holds stdout (else None).
_document: TextIO | None = None
#: Whether the run wrote its document (a failure after it must not write a second one).
_written = False


def document_stream() -> TextIO:
    """Where a command writes its one JSON document: the original stdout, also while :func:`one_document` runs."""
    return _document if _document is not None else sys.stdout


def write_document(text: str) -> None:
    """Write the run's one document (a line of JSON) where :func:`document_stream` says."""
    global _written
    stream = document_stream()
    stream.write(text + "\n")
    stream.flush()
    _written = True


def document_written() -> bool:
    """Whether :func:`write_document` wrote the document of the current run."""
    return _written


def _fileno(stream: object) -> int | None:
    try:
        return stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def _same_file(a: int, b: int) -> bool:
    try:
        first, second = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


@contextmanager
def one_document(enabled: bool = True) -> Iterator[TextIO]:
    """Yield the stream for the one document; meanwhile whatever else writes to stdout goes to stderr.

    Without ``enabled``, yields ``sys.stdout`` and changes nothing. When
    ``sys.stdout`` is not descriptor 1 (a test's capture), the document goes
    to that stream, and descriptor 1 is still pointed at stderr.
    """
    global _document, _written
    _written = False
    if not enabled or sys.stdout is None or sys.stderr is None:  # None: the caller closed the stream
        yield sys.stdout
        return
    sys.stdout.flush()
    sys.stderr.flush()
    python_stdout = sys.stdout
    try:
        saved_stdout = os.dup(1)
    except OSError:  # no descriptor 1 (closed by the caller): nothing native can write there either
        yield python_stdout
        return
    document = open(os.dup(saved_stdout), "w", encoding="utf-8") if _fileno(python_stdout) == 1 else python_stdout
    forwarder = _JvmStderr.start() if _same_file(1, 2) else None
    os.dup2(2, 1)
    sys.stdout, _document = sys.stderr, document
    try:
        yield document
    finally:
        _document = None
        for stream in (sys.stderr, document):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        sys.stdout = python_stdout
        os.dup2(saved_stdout, 1)
        os.close(saved_stdout)
        if forwarder is not None:
            forwarder.stop()
        if document is not python_stdout:
            document.close()


@contextmanager
def native_stdout_captured() -> Iterator[list[str]]:
    """Whatever native code prints to descriptor 1 during the block, as lines in the yielded list once it ends.

    METIS prints its complaints with ``printf`` (two lines per empty bisection when the parts outnumber the
    vertices: 200,000 lines for 4,147 keys on 100,000 servers); the caller logs them once, in a line, instead
    of leaving them on the terminal or in the way of a document. C's buffer is flushed before descriptor 1
    is given back, so nothing printed meanwhile reaches it later.
    """
    lines: list[str] = []
    if sys.stdout is not None:
        sys.stdout.flush()
    libc = ctypes.CDLL(None)
    libc.fflush(None)
    try:
        saved = os.dup(1)
    except OSError:  # no descriptor 1: nothing native can print there either
        yield lines
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        try:
            yield lines
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
            sink.seek(0)
            lines.extend(sink.read().decode("utf-8", errors="replace").splitlines())


class _JvmStderr:
    """Descriptor 2 fed to the JVM's ``System.err`` through a pipe (spark-submit joins the driver's two streams)."""

    def __init__(self, err, saved: int, reader: int) -> None:
        self.err, self.saved, self.reader = err, saved, reader
        self.thread = threading.Thread(target=self._pump, name="locality-stderr-to-jvm", daemon=True)
        self.thread.start()

    @classmethod
    def start(cls) -> _JvmStderr | None:
        """Forward stderr to the JVM that started this process, if a JVM did (else None: nothing to do)."""
        if not os.environ.get("PYSPARK_GATEWAY_PORT"):
            return None
        try:
            from pyspark import SparkContext

            SparkContext._ensure_initialized()  # the gateway spark-submit opened; the session reuses it
            err = SparkContext._jvm.System.err
        except Exception:  # no usable gateway: keep the joined streams rather than fail the run
            return None
        reader, writer = os.pipe()
        saved = os.dup(2)
        os.dup2(writer, 2)
        os.close(writer)
        return cls(err, saved, reader)

    def _pump(self) -> None:
        while chunk := os.read(self.reader, 65536):
            try:
                self.err.write(bytearray(chunk), 0, len(chunk))
                self.err.flush()
            except Exception:  # the JVM is gone: the bytes go where stderr went before
                os.write(self.saved, chunk)
        os.close(self.reader)

    def stop(self) -> None:
        """Give descriptor 2 back and wait (bounded) for the pipe's last bytes to reach the JVM."""
        os.dup2(self.saved, 2)  # the pipe's last writer is gone: the pump reads to its end
        self.thread.join(_DRAIN_SECONDS)
        os.close(self.saved)
