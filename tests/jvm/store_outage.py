"""Outages of an S3 server of a test's own, for the tests of the JVM readers that must ride them out.

Two kinds, both on loopback, both keeping the server's data (docs/store-protocol.md, "Reading": a reader
keeps what it has while the store cannot be read):

- ``stopped``: the server is killed; a reader's connection is refused at once. :meth:`Outage.end` starts
  it again on the same address.
- ``unreachable``: the server's process is stopped (SIGSTOP). The kernel still accepts connections but
  nothing answers, as behind a link that drops packets: every read runs into the client's timeouts.
  :meth:`Outage.end` lets it go on (SIGCONT), answering what waited.

An :class:`Outage` used as a context manager always ends, also when the test fails, so that the server
can be stopped and its data removed.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from testbed.s3server import S3Server

__all__ = ["OUTAGES", "Outage", "own_s3_server"]

#: The kinds of outage the tests put their readers through.
OUTAGES = ("stopped", "unreachable")
#: How long the server may take to answer again after an outage (seconds).
RESUME_TIMEOUT = 30.0


@contextmanager
def own_s3_server() -> Iterator[S3Server]:
    """An S3 server of the test's own on loopback (its bucket ``locality``), with this process's AWS variables
    pointing at it (for the Python store), restored on leaving; the server is stopped and its data removed."""
    try:
        server = S3Server()
    except FileNotFoundError as exc:
        pytest.fail(str(exc), pytrace=False)
    with server, pytest.MonkeyPatch.context() as patch:
        for name, value in server.env.items():
            patch.setenv(name, value)
        yield server


class Outage:
    """One outage of ``server``, of kind ``kind`` (one of :data:`OUTAGES`); times in seconds since the epoch."""

    def __init__(self, server: S3Server, kind: str) -> None:
        if kind not in OUTAGES:
            raise ValueError(f"the kind of an outage is one of {OUTAGES}; got {kind!r}")
        self.server, self.kind = server, kind
        self.began: float | None = None
        self.ended: float | None = None

    def begin(self) -> float:
        """Stop the server now; when it stopped."""
        if self.kind == "stopped":
            self.server.kill()
        else:
            os.killpg(self.server.process.pid, signal.SIGSTOP)
        self.began = time.time()
        return self.began

    def end(self) -> float:
        """Serve again (bounded wait until the server answers); when it did."""
        if self.kind == "stopped":
            self.server.restart()
        else:
            os.killpg(self.server.process.pid, signal.SIGCONT)
            _wait_until_answers(self.server)
        self.ended = time.time()
        return self.ended

    @property
    def seconds(self) -> float:
        """How long the server was out."""
        return (self.ended or time.time()) - self.began

    def __enter__(self) -> Outage:
        return self

    def __exit__(self, *exc) -> None:
        if self.began is not None and self.ended is None:
            self.end()


def _wait_until_answers(server: S3Server) -> None:
    deadline = time.monotonic() + RESUME_TIMEOUT
    while time.monotonic() < deadline:
        try:
            server.client().head_bucket(Bucket=server.buckets[0])
            return
        except Exception:  # not answering yet
            time.sleep(0.2)
    with socket.socket() as probe:  # name what is wrong: nothing listens, or nothing answers
        listening = probe.connect_ex((server.host, server.port)) == 0
    pytest.fail(f"the S3 server did not answer within {RESUME_TIMEOUT:.0f} s (listening: {listening})")
