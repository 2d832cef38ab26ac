"""Emulated servers on one machine: a network namespace each, one bridge, every link shaped by ``tc``.

Locality pays where tuples stop crossing the network between servers: the core paper measures
throughput on 8 servers behind a 10 Gb/s switch and a software-throttled 1 Gb/s one (Caneill,
El Rheddane, Leroy, De Palma, "Locality-aware routing in stateful streaming applications",
Middleware 2016, Section 4.1). :class:`Testbed` builds that on one Linux machine, as root:

- each server is a network namespace with loopback up and one veth (``eth0`` inside, its
  other end on a bridge in the root namespace), address ``10.77.0.(index + 1)/24``;
- each server's link is shaped in both directions with a token bucket (``tc qdisc ... tbf``) at
  ``rate_mbit``, the server's upload on ``eth0`` and its download on the bridge's end, with an
  optional one-way ``delay_ms`` (``netem``) on the upload;
- the root namespace holds no address on the bridge and no namespace has a route elsewhere, so a
  process in a server reaches only the other servers' addresses, never the machine's network;
- :meth:`Testbed.counters` reads the bytes and packets each link carried from the bridge's end of
  its veth (the server's sent and received bytes), :meth:`Testbed.shaper_stats` the token
  buckets' drops and overlimits (a shaper that keeps throttling means the link bounded the run).

A server's files. Each server also has a mount namespace of its own, made once and kept by a bind
mount of it (a file in :data:`RUN_DIR`), so that every process of a server (:meth:`Testbed.run`,
:meth:`Testbed.spawn`, :meth:`Testbed.call_in`) sees the same files, as the processes of one host
do; ``/sys`` in it shows the server's own interfaces. With ``private_files`` the servers share
nothing but the network: each has a tmpfs of its own over the temporary directories
(:data:`TEMPORARY_DIRS`) and over ``hidden`` (by default the shared traces' folder), so that no
server sees the host's temporary files (a test's store, trace or savepoints) nor another server's;
software (the venv, the Spark and Flink installs, the built jars, ``~/.m2``, ``~/.cache``) stays
visible. Without it they see the host's disk, as servers sharing a mounted file system would.

Every name it creates starts with ``ltb<run>-`` (``<run>``: the owner's pid in hex, then a sequence
number in letters), and the run holds a lock file in :data:`RUN_DIR` while it lives. Teardown (on
leaving the ``with`` block, on an exception, on SIGTERM or SIGHUP, which it turns into
``SystemExit``, and on Ctrl-C) kills every process inside each namespace, deletes the veths, the
mount namespaces' files and their folder's mount, the network namespaces and the bridge, and checks
that they are gone (a mount namespace goes with its last file and process, and with it the server's
tmpfs). A run killed outright (SIGKILL) leaves them behind with an unlocked lock file: the next
:class:`Testbed`, or ``python -m testbed clean``, finds them by the prefix and removes them. Every
wait is bounded in time.
"""

from __future__ import annotations

import ctypes
import fcntl
import itertools
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

logger = logging.getLogger(__name__)

__all__ = [
    "HEADER_BYTES",
    "LinkCounters",
    "Server",
    "Testbed",
    "TestbedError",
    "clean_leftovers",
    "default_hidden",
    "leftovers",
]

PREFIX = "ltb"
#: Lock files of live runs (a run whose lock can be taken is dead and its leftovers may go), and each
#: run's folder of mount namespace files, ``<run>-mnt``.
RUN_DIR = Path("/run/locality-testbed")
#: Where ``ip netns`` keeps the network namespaces.
NETNS_DIR = Path("/run/netns")
#: The temporary directories a server with private files has of its own (an empty tmpfs each).
TEMPORARY_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
SUBNET = "10.77.0"
#: Bytes of headers per frame on a link: Ethernet 14 + IPv4 20 + TCP 20 + the timestamp option 12
#: (Linux's default). A veth counts a segmentation-offloaded burst as one frame with one header,
#: so ``bytes - HEADER_BYTES * packets`` is the TCP payload either way.
HEADER_BYTES = 66
#: Bound of every wait on a process or on the kernel (seconds).
STOP_TIMEOUT = 10.0
COMMAND_TIMEOUT = 30.0
#: Interface names hold 15 characters: ``ltb`` + a pid in hex (6) + a sequence (2) + ``-h`` + 2 digits.
MAX_SERVERS = 64
#: A token bucket no frame fits (1 byte, refilled at 1 byte/s, a 1-byte queue): :meth:`Testbed.drop_link`.
_DROP_ALL = ["tbf", "rate", "8bit", "burst", "1", "limit", "1"]

_RUN_NAME = re.compile(rf"^{PREFIX}([0-9a-z]+)-")
_CLONE_NEWNET = 0x40000000
_CLONE_NEWNS = 0x00020000
_CLONE_FS = 0x00000200
_NO_IPV6 = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]
_sequence = itertools.count()
_sequence_lock = threading.Lock()
#: Letters that are not hex digits: a run's name is its pid in hex, then its sequence number in these.
_SEQUENCE_LETTERS = "ghijklmnopqrstuvwxyz"
T = TypeVar("T")


class TestbedError(RuntimeError):
    """The testbed could not be built, or something of it could not be removed."""

    __test__ = False  # not a pytest class, whatever its name


@dataclass(frozen=True)
class Server:
    """One emulated server: its network namespace, its address, the bridge's end of its link, its mount namespace.

    ``mount_namespace`` is the file that holds the server's mount namespace (``nsenter --mount=`` enters it).
    """

    index: int
    namespace: str
    address: str
    host_link: str
    mount_namespace: Path


@dataclass(frozen=True)
class LinkCounters:
    """What a server's link carried, from the server's side (kernel counters; subtract two readings)."""

    sent_bytes: int
    sent_packets: int
    received_bytes: int
    received_packets: int

    def __sub__(self, other: LinkCounters) -> LinkCounters:
        return LinkCounters(
            self.sent_bytes - other.sent_bytes,
            self.sent_packets - other.sent_packets,
            self.received_bytes - other.received_bytes,
            self.received_packets - other.received_packets,
        )

    @property
    def sent_payload(self) -> int:
        """TCP payload bytes sent (frame headers removed; see :data:`HEADER_BYTES`)."""
        return self.sent_bytes - HEADER_BYTES * self.sent_packets

    @property
    def received_payload(self) -> int:
        """TCP payload bytes received."""
        return self.received_bytes - HEADER_BYTES * self.received_packets


class Testbed:
    """``n_servers`` emulated servers with shaped links, removed on exit (a context manager).

    Parameters
    ----------
    n_servers : int
        Servers to create, 1 to :data:`MAX_SERVERS`.
    rate_mbit : float or None
        Rate of every server's link in each direction, in Mbit/s (``None``: unshaped veths).
    delay_ms : float
        One-way delay added to every server's upload (``0``: none).
    private_files : bool
        Give each server its own temporary directories and hide ``hidden`` from it: the servers
        share nothing but the network (default: they see the host's disk).
    hidden : sequence of path, optional
        Host folders a server with private files sees empty, besides :data:`TEMPORARY_DIRS`
        (default: the shared traces' folder, :func:`default_hidden`).

    Examples
    --------
    >>> with Testbed(3, rate_mbit=100, private_files=True) as bed:  # doctest: +SKIP
    ...     bed.run(bed.servers[1], ["ip", "-br", "addr"]).stdout
    """

    __test__ = False

    def __init__(
        self,
        n_servers: int,
        *,
        rate_mbit: float | None = None,
        delay_ms: float = 0.0,
        private_files: bool = False,
        hidden: Sequence[str | os.PathLike] | None = None,
    ) -> None:
        if not isinstance(n_servers, int) or not 1 <= n_servers <= MAX_SERVERS:
            raise ValueError(
                f"the 'n_servers' parameter of Testbed must be an int in [1, {MAX_SERVERS}]; got {n_servers!r}"
            )
        if rate_mbit is not None and not rate_mbit > 0:
            raise ValueError(f"the 'rate_mbit' parameter of Testbed must be > 0 or None; got {rate_mbit!r}")
        if not delay_ms >= 0:
            raise ValueError(f"the 'delay_ms' parameter of Testbed must be >= 0; got {delay_ms!r}")
        self.n_servers = n_servers
        self.rate_mbit = rate_mbit
        self.delay_ms = delay_ms
        self.private_files = private_files
        self.hidden = _hidden_folders(hidden, private_files)
        with _sequence_lock:
            self.run_id = f"{os.getpid():x}{_sequence_name(next(_sequence))}"
        self.name = f"{PREFIX}{self.run_id}"
        self.bridge = f"{self.name}-br"
        self.mount_dir = _mount_dir(self.name)
        self.servers = [self._server(i) for i in range(n_servers)]
        self._lock_file: int | None = None
        self._processes: list[subprocess.Popen] = []
        self._previous_handlers: dict[int, object] = {}

    def _server(self, index: int) -> Server:
        namespace = f"{self.name}-s{index}"
        return Server(index, namespace, f"{SUBNET}.{index + 1}", f"{self.name}-h{index}", self.mount_dir / namespace)

    # -- life cycle ---------------------------------------------------------------------------
    def __enter__(self) -> Testbed:
        self._trap_signals()
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        """Clean the leftovers of dead runs, then create the bridge, the servers and their shapers."""
        if os.geteuid() != 0:
            raise TestbedError("the testbed needs root (ip netns, veth, bridge, tc)")
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        self._lock_file = os.open(RUN_DIR / f"{self.name}.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
        fcntl.flock(self._lock_file, fcntl.LOCK_EX)
        clean_leftovers()
        _make_private_mount(self.mount_dir)
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "up")
        for server in self.servers:
            self._add_server(server)
            self._add_mount_namespace(server)
        logger.info(
            "testbed %s: %d servers on %s.0/24, links %s Mbit/s, delay %s ms, %s files",
            self.name,
            self.n_servers,
            SUBNET,
            self.rate_mbit or "unshaped",
            self.delay_ms,
            "private" if self.private_files else "the host's",
        )

    def _add_server(self, server: Server) -> None:
        inner = f"{self.name}-n{server.index}"
        _ip("netns", "add", server.namespace)
        _ip("link", "add", server.host_link, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", server.namespace)
        _ip("-n", server.namespace, "link", "set", inner, "name", "eth0")
        # IPv4 only: no router solicitations or multicast reports add traffic to what a link carries.
        _run(["nsenter", f"--net={NETNS_DIR / server.namespace}", "sysctl", "-q", "-w", *_NO_IPV6])
        _ip("-n", server.namespace, "addr", "add", f"{server.address}/24", "dev", "eth0")
        _ip("-n", server.namespace, "link", "set", "eth0", "up")
        _ip("-n", server.namespace, "link", "set", "lo", "up")
        _ip("link", "set", server.host_link, "master", self.bridge, "up")
        upload = ["tc", "-n", server.namespace, "qdisc", "add", "dev", "eth0"]
        if self.delay_ms:
            netem = _run([*upload, "root", "handle", "1:", "netem", "delay", f"{self.delay_ms}ms"], check=False)
            if netem.returncode != 0:
                raise TestbedError(
                    f"the 'delay_ms' parameter of Testbed needs tc's netem qdisc (the kernel's "
                    f"CONFIG_NET_SCH_NETEM), which this kernel refused: {netem.stderr.strip()}"
                )
            upload += ["parent", "1:1", "handle", "10:"]
        else:
            upload += ["root"]
        if self.rate_mbit is not None:
            _run([*upload, *self._tbf()])
            _run(["tc", "qdisc", "add", "dev", server.host_link, "root", *self._tbf()])

    def _add_mount_namespace(self, server: Server) -> None:
        """Create the server's mount namespace from inside its network namespace, and keep it in its file."""
        server.mount_namespace.touch()
        _run(
            ["nsenter", f"--net={NETNS_DIR / server.namespace}", "unshare", f"--mount={server.mount_namespace}",
             "--propagation", "private", "sh", "-c", self._mount_setup()]
        )  # fmt: skip

    def _mount_setup(self) -> str:
        """The shell commands that make a new mount namespace the server's (run once, inside it)."""
        steps = [
            # sysfs lists the interfaces of the network namespace that mounts it: the server's own, as
            # `ip netns exec` shows them.
            "umount -l /sys",
            "mount -t sysfs sysfs /sys",
            # The namespace files of every run are the host's: a server holding copies of them would keep
            # those namespaces alive after their run removed them.
            f'for held in {NETNS_DIR} {RUN_DIR}/*-mnt; do if mountpoint -q "$held"; then umount -l "$held"; fi; done',
        ]
        if self.private_files:
            # The temporary directories first, so that a hidden folder inside this checkout under /tmp is covered
            # in the checkout bound back in; one inside a temporary directory is made again there, then covered.
            steps += [_empty_over(Path(folder), "1777", self.mount_dir) for folder in TEMPORARY_DIRS]
            steps += [f"mkdir -p {shlex.quote(str(folder))}" for folder in self.hidden]
            steps += [_empty_over(folder, "0755", self.mount_dir) for folder in self.hidden]
        return " && ".join(steps)

    def _tbf(self) -> list[str]:
        # A bucket of 10 ms of traffic (at least 64 kB, so a segmentation-offloaded burst passes whole)
        # and a queue of 16 MB: TCP fills the queue, never overflows it, so no retransmission adds
        # bytes to what a link carried.
        rate_bytes = self.rate_mbit * 1e6 / 8
        burst = max(64 * 1024, int(rate_bytes / 100))
        return ["tbf", "rate", f"{self.rate_mbit}mbit", "burst", str(burst), "limit", str(16 * 1024 * 1024)]

    def close(self) -> None:
        """Kill every process in the servers, remove the links, namespaces and bridge (idempotent)."""
        try:
            for process in self._processes:
                _terminate(process)
            self._processes.clear()
            _remove_run(self.name)
        finally:
            if self._lock_file is not None:
                os.close(self._lock_file)
                self._lock_file = None
                (RUN_DIR / f"{self.name}.lock").unlink(missing_ok=True)
            self._restore_signals()

    def _trap_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGHUP):
            self._previous_handlers[signum] = signal.signal(signum, _exit_on_signal)

    def _restore_signals(self) -> None:
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        self._previous_handlers.clear()

    # -- processes ----------------------------------------------------------------------------
    def command(self, server: Server, argv: Sequence[str], *, cwd: str | os.PathLike | None = None) -> list[str]:
        """``argv`` run inside ``server`` (its network and mount namespaces), in ``cwd`` (default: ours).

        ``cwd`` is a path of the server's files: a folder the server does not see fails the command.
        """
        # `env --chdir` moves there inside the server: nsenter's own --wd opens its folder before it enters.
        return [
            "nsenter", f"--net={NETNS_DIR / server.namespace}", f"--mount={server.mount_namespace}", "--",
            "env", f"--chdir={cwd or os.getcwd()}", *map(str, argv),
        ]  # fmt: skip

    def run(
        self,
        server: Server,
        argv: Sequence[str],
        *,
        timeout: float = COMMAND_TIMEOUT,
        env: dict[str, str] | None = None,
        check: bool = True,
        cwd: str | os.PathLike | None = None,
    ) -> subprocess.CompletedProcess:
        """Run ``argv`` in ``server`` to completion (output captured as text; bounded by ``timeout``)."""
        done = subprocess.run(
            self.command(server, argv, cwd=cwd), capture_output=True, text=True, timeout=timeout, env=env
        )
        if check and done.returncode != 0:
            raise TestbedError(
                f"{' '.join(map(str, argv))} in {server.namespace} exited with {done.returncode}: {done.stderr.strip()}"
            )
        return done

    def spawn(
        self,
        server: Server,
        argv: Sequence[str],
        *,
        log: Path,
        env: dict[str, str] | None = None,
        stdout: Path | None = None,
        cwd: str | os.PathLike | None = None,
    ) -> subprocess.Popen:
        """Start ``argv`` in ``server`` in the background; stopped at teardown.

        Its stderr is appended to ``log``, and so is its stdout unless ``stdout`` names a file of its own:
        host files, opened here and handed to the process (a console's capture, not files it sees).
        """
        with open(log, "ab") as err, open(stdout or os.devnull, "wb") as out:
            process = subprocess.Popen(
                self.command(server, argv, cwd=cwd),
                stdin=subprocess.DEVNULL,
                stdout=out if stdout else err,
                stderr=err,
                env=env,
                start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop it in order
            )
        self._processes.append(process)
        return process

    def pids(self, server: Server) -> list[int]:
        """Every process inside ``server``'s namespace (children and daemons included)."""
        return _pids_in(server.namespace)

    def kill_server(self, server: Server) -> None:
        """Kill every process of ``server`` at once (SIGKILL): the server fails."""
        for pid in self.pids(server):
            _signal(pid, signal.SIGKILL)

    def drop_link(self, server: Server) -> None:
        """Cut ``server``'s link: every frame either way is dropped, as on a dead cable; :meth:`restore_link` ends it.

        Nothing is refused or reset: the server's processes keep running, and a connection to or from
        it times out. Both ends of its veth get a token bucket no frame fits (``tc qdisc replace ... tbf
        rate 8bit burst 1 limit 1``: every frame is larger than the 1-byte bucket, so tbf drops it);
        this kernel has neither netem's ``loss`` nor ``tc filter``'s drop action. The link's counters
        and shaper statistics go on counting (its drops among them).
        """
        if self.delay_ms:
            raise TestbedError("drop_link cannot keep a testbed's delay_ms (its netem qdisc): use delay_ms=0")
        for tc, device in self._link_ends(server):
            _run([*tc, "replace", "dev", device, "root", *_DROP_ALL])

    def restore_link(self, server: Server) -> None:
        """End :meth:`drop_link`: ``server``'s link carries frames again, shaped as the testbed's links are."""
        self._shape(server, shaped=True)

    def set_rate(self, rate_mbit: float | None) -> None:
        """Shape every server's link at ``rate_mbit`` Mbit/s in each direction from now on (``None``: unshaped).

        For runs that need other links than the testbed was made with (a fast one to deploy and count bytes,
        a slow one to throttle a job), without starting its servers again.
        """
        if rate_mbit is not None and not rate_mbit > 0:
            raise ValueError(f"the 'rate_mbit' parameter of set_rate must be > 0 or None; got {rate_mbit!r}")
        if self.delay_ms:
            raise TestbedError("set_rate cannot keep a testbed's delay_ms (its netem qdisc): use delay_ms=0")
        shaped, self.rate_mbit = self.rate_mbit is not None, rate_mbit
        for server in self.servers:
            self._shape(server, shaped=shaped)

    def _shape(self, server: Server, *, shaped: bool) -> None:
        """Both ends of ``server``'s link shaped at the testbed's rate; ``shaped``: they have a root qdisc now."""
        for tc, device in self._link_ends(server):
            if self.rate_mbit is not None:
                _run([*tc, "replace", "dev", device, "root", *self._tbf()])
            elif shaped:
                _run([*tc, "del", "dev", device, "root"])

    @staticmethod
    def _link_ends(server: Server) -> list[tuple[list[str], str]]:
        """``tc qdisc`` and the device of each end of the link: the server's upload (``eth0``), its download."""
        return [(["tc", "-n", server.namespace, "qdisc"], "eth0"), (["tc", "qdisc"], server.host_link)]

    def call_in(self, server: Server, function: Callable[[], T], *, timeout: float = COMMAND_TIMEOUT) -> T:
        """``function()`` run by a thread that entered ``server``: its sockets and the files it opens are the server's.

        Each call has a thread of its own: a thread moved into a server serves nothing else.
        """
        outcome: dict[str, object] = {}

        def inside() -> None:
            try:
                _enter_server(server)
                outcome["value"] = function()
            except BaseException as error:  # handed to the caller's thread
                outcome["error"] = error

        thread = threading.Thread(target=inside, name=f"in-{server.namespace}", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"a call inside {server.namespace} took more than {timeout} s")
        if "error" in outcome:
            raise outcome["error"]  # type: ignore[misc]
        return outcome["value"]  # type: ignore[return-value]

    def write_file(self, server: Server, path: str | os.PathLike, data: bytes) -> None:
        """Write ``data`` to ``path`` in ``server``'s files (its folders made): how a file reaches a private server."""

        def write() -> None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(data)

        self.call_in(server, write)

    # -- measurements -------------------------------------------------------------------------
    def counters(self) -> list[LinkCounters]:
        """Each server's link counters, by server index (read on the bridge's end: its rx is the server's tx)."""
        return [_link_counters(server.host_link) for server in self.servers]

    def shaper_stats(self, server: Server) -> dict[str, int]:
        """The upload shaper's ``dropped`` and ``overlimits`` counts (a growing overlimits: the link throttled)."""
        text = _run(["tc", "-n", server.namespace, "-s", "qdisc", "show", "dev", "eth0"]).stdout
        found = re.search(r"qdisc tbf .*?dropped (\d+), overlimits (\d+)", text, re.S)
        if not found:
            return {"dropped": 0, "overlimits": 0}
        return {"dropped": int(found.group(1)), "overlimits": int(found.group(2))}


# -- leftovers ---------------------------------------------------------------------------------
def leftovers(*, dead_only: bool = True) -> dict[str, list[str]]:
    """Namespaces, links and mounts named by this module, of dead runs only (or of every run).

    ``mounts`` names each run's folder of mount namespace files and the files mounted in it, relative to
    :data:`RUN_DIR` (``<run>-mnt``, ``<run>-mnt/<run>-s0``...).
    """
    names = {
        "namespaces": _names(["ip", "netns", "list"]),
        "links": _names(["ip", "-o", "link", "show"], field=1),
        "mounts": _run_mounts(),
    }
    found: dict[str, list[str]] = {}
    for kind, items in names.items():
        found[kind] = [n for n in items if _RUN_NAME.match(n) and (not dead_only or not _run_alive(_run_of(n)))]
    return found


def clean_leftovers() -> list[str]:
    """Remove what dead runs left behind (their processes, veths, namespaces, bridge); returns the runs."""
    runs = sorted({_run_of(name) for items in leftovers().values() for name in items})
    for run in runs:
        logger.warning("removing the leftovers of the dead testbed run %s", run)
        _remove_run(run)
        (RUN_DIR / f"{run}.lock").unlink(missing_ok=True)
    return runs


def _run_of(name: str) -> str:
    return PREFIX + _RUN_NAME.match(name).group(1)


def _run_alive(run: str) -> bool:
    lock = RUN_DIR / f"{run}.lock"
    try:
        descriptor = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False


def _remove_run(run: str) -> None:
    """Everything named ``run``: processes inside its namespaces first, then links, namespaces, bridge."""
    prefix = f"{run}-"
    namespaces = [n for n in _names(["ip", "netns", "list"]) if n.startswith(prefix)]
    for namespace in namespaces:
        _stop_all(namespace)
    for link in _names(["ip", "-o", "link", "show"], field=1):
        if link.startswith(prefix) and not link.endswith("-br"):
            _run(["ip", "link", "del", link], check=False)  # a veth takes its peer along
    _remove_mount_dir(_mount_dir(run))
    for namespace in namespaces:
        _run(["ip", "netns", "del", namespace], check=False)
    _run(["ip", "link", "del", f"{run}-br"], check=False)
    left = [n for items in leftovers(dead_only=False).values() for n in items if n.startswith(prefix)]
    if left:
        raise TestbedError(f"could not remove {left} of testbed run {run}")


def _stop_all(namespace: str) -> None:
    """SIGTERM every process in ``namespace``, SIGKILL what still runs after :data:`STOP_TIMEOUT`."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for pid in _pids_in(namespace):
            _signal(pid, signum)
        deadline = time.monotonic() + STOP_TIMEOUT
        while _pids_in(namespace) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not _pids_in(namespace):
            return
    raise TestbedError(f"processes {_pids_in(namespace)} in {namespace} survived SIGKILL for {STOP_TIMEOUT} s")


def _hidden_folders(hidden: Sequence[str | os.PathLike] | None, private_files: bool) -> tuple[Path, ...]:
    """The folders a server with private files sees empty, checked: absolute folders of the host."""
    if hidden is None:
        return default_hidden() if private_files else ()
    if not private_files:
        raise ValueError("the 'hidden' parameter of Testbed needs private_files=True (servers see the host's files)")
    folders = tuple(Path(folder) for folder in hidden)
    wrong = [str(folder) for folder in folders if not (folder.is_absolute() and folder.is_dir())]
    if wrong:
        raise ValueError(f"the 'hidden' parameter of Testbed takes absolute paths of folders; got {wrong}")
    return folders


def software_folders() -> tuple[Path, ...]:
    """What every server runs: this checkout, the Python environment, and the set-up's folders of jars and binaries.

    A server with private files keeps seeing them even where they lie inside a folder it sees empty (a
    checkout under ``/tmp``, as a CI runner may make).
    """
    named = [os.environ.get(name) for name in ("LOCALITY_SPARK_JARS", "LOCALITY_FLINK_PLUGINS", "LOCALITY_BIN")]
    folders = [Path(__file__).resolve().parents[1], Path(sys.prefix), *(Path(n) for n in named if n)]
    return tuple(dict.fromkeys(f.resolve() for f in folders if f.is_dir()))


def _empty_over(folder: Path, mode: str, mount_dir: Path) -> str:
    """Shell steps that cover ``folder`` with an empty tmpfs, the software folders inside it bound back in.

    The tmpfs is filled at a staging point first (``mount_dir/stage``) and then moved over ``folder``: once
    covered, what was inside could no longer be bound.
    """
    inside = [kept for kept in software_folders() if folder.resolve() in kept.parents]
    if not inside:
        return f"mount -t tmpfs -o mode={mode} tmpfs {shlex.quote(str(folder))}"
    stage = mount_dir / "stage"
    steps = [f"mkdir -p {stage}", f"mount -t tmpfs -o mode={mode} tmpfs {stage}"]
    for kept in inside:
        target = shlex.quote(str(stage / kept.relative_to(folder.resolve())))
        steps += [f"mkdir -p {target}", f"mount --bind {shlex.quote(str(kept))} {target}"]
    steps.append(f"mount --move {stage} {shlex.quote(str(folder))}")
    return " && ".join(steps)


def default_hidden() -> tuple[Path, ...]:
    """The shared traces' folder (``$LOCALITY_SHARED_DATA``, else ``../shared/data``), when the host has it."""
    from locality.datasets.catalog import shared_data_dir

    folder = shared_data_dir().resolve()
    return (folder,) if folder.is_dir() else ()


def _mount_dir(run: str) -> Path:
    return RUN_DIR / f"{run}-mnt"


def _make_private_mount(folder: Path) -> None:
    """Make ``folder`` a mount of its own that propagates nothing: mount namespace files may only be kept there.

    The kernel refuses to bind a mount namespace's file where the mount would propagate into that
    namespace itself (a loop); a private mount propagates nowhere.
    """
    folder.mkdir(parents=True, exist_ok=True)
    _run(["mount", "--bind", str(folder), str(folder)])
    _run(["mount", "--make-private", str(folder)])


def _remove_mount_dir(folder: Path) -> None:
    """Unmount the mount namespace files in ``folder`` (a namespace goes with its last file and process), then it."""
    for point in sorted(_mount_points(folder), reverse=True):  # the files inside before the folder's own mount
        _run(["umount", str(point)], check=False)
    if folder.is_dir() and not _mount_points(folder):
        for file in folder.iterdir():
            file.rmdir() if file.is_dir() else file.unlink()  # the staging point of private files is a folder
        folder.rmdir()


def _mount_points(folder: Path) -> list[Path]:
    """The mount points at or under ``folder`` (from this process's ``/proc/self/mountinfo``)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = Path(line.split()[4])
        if point == folder or folder in point.parents:
            points.append(point)
    return points


def _run_mounts() -> list[str]:
    """Every run's mount namespace folder and the files mounted in it, relative to :data:`RUN_DIR`."""
    folders = {path for path in RUN_DIR.glob(f"{PREFIX}*-mnt")} if RUN_DIR.is_dir() else set()
    points = set(_mount_points(RUN_DIR)) - {RUN_DIR}
    return sorted(str(path.relative_to(RUN_DIR)) for path in folders | points)


def _terminate(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT)


def _sequence_name(number: int) -> str:
    letters = _SEQUENCE_LETTERS[number % len(_SEQUENCE_LETTERS)]
    while number >= len(_SEQUENCE_LETTERS):
        number //= len(_SEQUENCE_LETTERS)
        letters = _SEQUENCE_LETTERS[number % len(_SEQUENCE_LETTERS)] + letters
    return letters


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


# -- the kernel --------------------------------------------------------------------------------
def _run(argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    if check and done.returncode != 0:
        raise TestbedError(f"{' '.join(argv)} exited with {done.returncode}: {done.stderr.strip()}")
    return done


def _ip(*args: str) -> None:
    _run(["ip", *args])


def _names(argv: list[str], field: int = 0) -> list[str]:
    names = []
    for line in _run(argv).stdout.splitlines():
        parts = line.split()
        if len(parts) > field:
            names.append(parts[field].rstrip(":").split("@")[0])
    return names


def _pids_in(namespace: str) -> list[int]:
    done = _run(["ip", "netns", "pids", namespace], check=False)
    return [int(p) for p in done.stdout.split()]


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _link_counters(link: str) -> LinkCounters:
    statistics = Path("/sys/class/net") / link / "statistics"

    def read(name: str) -> int:
        return int((statistics / name).read_text())

    # The bridge's end of the veth: what it receives the server sent, what it transmits the server received.
    return LinkCounters(read("rx_bytes"), read("rx_packets"), read("tx_bytes"), read("tx_packets"))


def _enter_server(server: Server) -> None:
    """Move the calling thread into ``server``'s network and mount namespaces (only this thread)."""
    libc = ctypes.CDLL(None, use_errno=True)
    # Both files are opened first: once in the server's mount namespace, the host's paths may be gone.
    network = os.open(NETNS_DIR / server.namespace, os.O_RDONLY | os.O_CLOEXEC)
    mounts = os.open(server.mount_namespace, os.O_RDONLY | os.O_CLOEXEC)
    try:
        # setns into a mount namespace refuses (EINVAL) a thread that shares its root and working folder with
        # the process's other threads: this thread takes a copy of its own first.
        _check(libc.unshare(_CLONE_FS), f"unshare(CLONE_FS) for {server.namespace}")
        _check(libc.setns(mounts, _CLONE_NEWNS), f"setns into the mount namespace of {server.namespace}")
        _check(libc.setns(network, _CLONE_NEWNET), f"setns into {server.namespace}")
    finally:
        os.close(network)
        os.close(mounts)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
