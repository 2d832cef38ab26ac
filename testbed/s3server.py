"""A real S3-compatible object store for the tests, the benchmarks and the testbed: the Versity S3 Gateway.

The store's protocol (``docs/store-protocol.md``) rests on two conditional writes that the server,
not the client, must enforce: a create that fails when the object exists (``If-None-Match: *``) and
a replace that fails when the object's ETag moved (``If-Match``), both answered with HTTP 412. A
server that ignores them (S3Proxy) cannot check the protocol, and an emulator (moto) checks only its
own reading of S3. The Versity S3 Gateway is a production S3 server (Apache-2.0, Go) that serves a
POSIX directory as buckets; it refuses both writes with ``PreconditionFailed`` under concurrent
writers, and ``go install`` builds it from the Go module proxy in about 2.5 minutes on two cores
(``make s3server``, run by ``make test``; :func:`server_binary` finds it).

:class:`S3Server` runs one on an address of the caller's choosing (loopback, or a testbed server's
address through ``launch`` and ``reach``), keeps its data under a directory it removes on
:meth:`S3Server.stop`, waits for it with a bound, and hands out the standard AWS variables a client
needs (:attr:`S3Server.env`): the store's Python and Java readers, Spark's ``s3a`` and Flink's S3
plugin all read the same ones. :func:`object_store` runs one on a testbed server of its own, its
objects in that server's private files: the other servers reach it by its address, the host only
through the server (``bed.call_in``).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from testbed.network import Server, Testbed

logger = logging.getLogger(__name__)

__all__ = ["S3Server", "object_store", "server_binary", "VERSITYGW_VERSION"]

#: The version ``make s3server`` installs (keep it in step with the Makefile).
VERSITYGW_VERSION = "v1.8.0"
ACCESS_KEY = "locality-test"
SECRET_KEY = "locality-test-secret"
REGION = "us-east-1"
#: The port of :func:`object_store` (the server it runs in serves nothing else).
TESTBED_PORT = 9000
#: Where :func:`object_store` keeps the objects: under the server's own ``/tmp``.
TESTBED_DATA = "/tmp/locality-s3"
_START_SECONDS = 30.0
T = TypeVar("T")


def server_binary() -> Path:
    """The gateway's binary: ``$LOCALITY_S3_SERVER``, else where ``make s3server`` puts it.

    Raises
    ------
    FileNotFoundError
        Naming the command that installs it.
    """
    configured = os.environ.get("LOCALITY_S3_SERVER")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = Path(configured) if configured else cache / "locality" / "bin" / "versitygw"
    if not path.is_file():
        raise FileNotFoundError(
            f"the S3 server of the tests is not installed at {path}: run `make s3server` (or `make test`), "
            f"which runs `go install github.com/versity/versitygw/cmd/versitygw@{VERSITYGW_VERSION}`"
        )
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``host`` now."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


class S3Server:
    """One S3 gateway process serving ``buckets`` from a data directory of its own.

    Parameters
    ----------
    host, port : where it listens (port: a free one on ``host``).
    buckets : created once it answers.
    data_dir : where its objects live, as the server sees its files (default: a new temporary directory,
        removed by :meth:`stop`).
    launch : a command prefix the server and its data directory's ``mkdir`` run under
        (e.g. :meth:`testbed.network.Testbed.command` of a server).
    reach : runs a function where ``host`` can be reached, for the waits and the buckets' creation
        (default: here; e.g. ``functools.partial(bed.call_in, server)``).
    log_path : the server's log, a file of this process (default: beside ``data_dir``).

    Use it as a context manager: it stops and removes its data even when the block fails.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        buckets: Sequence[str] = ("locality",),
        data_dir: str | os.PathLike | None = None,
        launch: Sequence[str] = (),
        reach: Callable[[Callable[[], T]], T] | None = None,
        log_path: str | os.PathLike | None = None,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.buckets = tuple(buckets)
        self._owns_data = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="locality-s3-"))
        self.launch = list(launch)
        self.reach = reach or _here
        self.process: subprocess.Popen | None = None
        self.log_path = Path(log_path) if log_path else self.data_dir.with_name(self.data_dir.name + ".log")

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The AWS SDKs' standard variables that point a client at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
        }

    def client(self):
        """A boto3 S3 client of this server (path-style, as S3-compatible servers are addressed)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}, connect_timeout=5),
        )

    # ------------------------------------------------------------------ life
    def start(self) -> S3Server:
        """Start the server and wait (bounded) until it answers; create the buckets."""
        # Where the server runs: through the launch prefix, the data directory may be another machine's file.
        made = subprocess.run(
            [*self.launch, "mkdir", "-p", str(self.data_dir / "objects"), str(self.data_dir / "meta")],
            capture_output=True,
            text=True,
            timeout=_START_SECONDS,
        )
        if made.returncode != 0:
            raise RuntimeError(f"cannot make the S3 server's data directory {self.data_dir}: {made.stderr.strip()}")
        self._spawn()
        self._wait_until_ready()
        self.reach(self._create_buckets)
        return self

    def _create_buckets(self) -> None:
        client = self.client()
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        for bucket in self.buckets:
            if bucket not in existing:
                client.create_bucket(Bucket=bucket)

    def _spawn(self) -> None:
        command = [
            *self.launch,
            str(server_binary()),
            "--port",
            f"{self.host}:{self.port}",
            "--access",
            ACCESS_KEY,
            "--secret",
            SECRET_KEY,
            "--region",
            REGION,
            "--quiet",
            "posix",
            # Metadata (ETags) beside the objects, not in extended attributes: any filesystem holds it.
            "--sidecar",
            str(self.data_dir / "meta"),
            str(self.data_dir / "objects"),
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child writes it for its whole life
        try:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + _START_SECONDS
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"the S3 server exited with {self.process.returncode}: {self._log_tail()}")
            if self.reach(self._answers):
                return
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"the S3 server at {self.endpoint} did not answer within {_START_SECONDS:.0f} s")

    def _answers(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1):
                return True
        except OSError:
            return False

    def kill(self) -> None:
        """Stop serving at once (SIGKILL), keeping the data: an outage; :meth:`restart` ends it."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def restart(self) -> None:
        """Serve the same data again on the same address."""
        self.kill()
        self._spawn()
        self._wait_until_ready()

    def stop(self) -> None:
        """Stop the server (bounded) and remove its data and log when it made them."""
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
            except ProcessLookupError:
                pass
        if self._owns_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.log_path.unlink(missing_ok=True)

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def __enter__(self) -> S3Server:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


def object_store(bed: Testbed, server: Server, log: Path, *, buckets: Sequence[str] = ("locality",)) -> S3Server:
    """An :class:`S3Server` in ``server`` of a testbed with private files: the other servers' object store.

    It listens on the server's address (port :data:`TESTBED_PORT`) and keeps its objects in the
    server's own ``/tmp``, so they live there only: the host puts and reads them through the server
    (``bed.call_in(server, ...)``), the other servers with the AWS variables of :attr:`S3Server.env`.
    Its log is ``log``, a host file. Start it with ``with``; the testbed's teardown stops it too.
    """
    if not bed.private_files:
        raise ValueError("object_store needs a Testbed with private_files=True: its objects must be its server's own")
    return S3Server(
        host=server.address,
        port=TESTBED_PORT,
        buckets=buckets,
        data_dir=TESTBED_DATA,
        launch=bed.command(server, []),
        reach=partial(bed.call_in, server),
        log_path=log,
    )


def _here(function: Callable[[], T]) -> T:
    return function()
