"""Outages of an S3 server of a test's own, for the tests of the JVM readers that must ride them out.

Three kinds, each keeping the server's data (docs/store-protocol.md, "Reading": a reader keeps what it
has while the store cannot be read):

- ``stopped``: the server is killed; a reader's connection is refused at once. :meth:`Outage.end` starts
  it again on the same address.
- ``unreachable``: the server's process is stopped (SIGSTOP). The kernel still accepts connections but
  nothing answers, as behind a link that drops packets: every read runs into the client's timeouts.
  :meth:`Outage.end` lets it go on (SIGCONT), answering what waited.
- ``dropped``: the server runs on a testbed server of its own (:func:`testbed.s3server.object_store`) and
  its link is cut with ``tc`` (:meth:`testbed.network.Testbed.drop_link`): every frame either way is lost,
  nothing is refused or reset, the process runs on. :meth:`Outage.end` restores the link.

The first two are loopback outages (:data:`OUTAGES`); a ``dropped`` one needs the testbed and its server
(``Outage(s3, "dropped", link=(bed, server))``).

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

from testbed.network import Server, Testbed
from testbed.s3server import S3Server

__all__ = ["OUTAGES", "Outage", "own_s3_server"]

#: The kinds of outage on loopback.
OUTAGES = ("stopped", "unreachable")
#: Every kind: the loopback ones and a dropped link between testbed servers.
KINDS = (*OUTAGES, "dropped")
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
    """One outage of ``server``, of kind ``kind`` (one of :data:`KINDS`); times in seconds since the epoch.

    ``link``: the testbed and its server that runs ``server``, for a ``dropped`` outage (and only for one).
    """

    def __init__(self, server: S3Server, kind: str, *, link: tuple[Testbed, Server] | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"the kind of an outage is one of {KINDS}; got {kind!r}")
        if (kind == "dropped") != (link is not None):
            raise ValueError("an outage takes the 'link' parameter (testbed, server) if and only if it is 'dropped'")
        self.server, self.kind, self.link = server, kind, link
        self.began: float | None = None
        self.ended: float | None = None

    def begin(self) -> float:
        """Stop the server now; when it stopped."""
        if self.kind == "stopped":
            self.server.kill()
        elif self.kind == "unreachable":
            os.killpg(self.server.process.pid, signal.SIGSTOP)
        else:
            bed, server = self.link
            bed.drop_link(server)
        self.began = time.time()
        return self.began

    def end(self) -> float:
        """Serve again; when the server could (then a bounded wait until it answers this process).

        A stopped server serves once it has started again; a frozen one once it goes on, a cut-off one
        once its link carries frames: a reader may get through before this process's own first request,
        which can still wait on the client's timeouts or an address resolution the outage left failed.
        """
        if self.kind == "stopped":
            self.server.restart()
            self.ended = time.time()
            return self.ended
        if self.kind == "unreachable":
            os.killpg(self.server.process.pid, signal.SIGCONT)
        else:
            bed, server = self.link
            bed.restore_link(server)
        self.ended = time.time()
        _wait_until_answers(self.server)
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
    """Until ``server`` answers a request where it can be reached (``server.reach``), within :data:`RESUME_TIMEOUT`."""
    deadline = time.monotonic() + RESUME_TIMEOUT
    while time.monotonic() < deadline:
        try:
            server.reach(lambda: server.client().head_bucket(Bucket=server.buckets[0]))
            return
        except Exception:  # not answering yet
            time.sleep(0.2)

    def listens() -> bool:
        with socket.socket() as probe:
            return probe.connect_ex((server.host, server.port)) == 0

    listening = server.reach(listens)  # name what is wrong: nothing listens, or nothing answers
    pytest.fail(f"the S3 server did not answer within {RESUME_TIMEOUT:.0f} s (listening: {listening})")
