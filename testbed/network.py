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

Every name it creates starts with ``ltb<run>-`` (``<run>``: the owner's pid in hex, then a sequence number in
letters), and the
run holds a lock file in :data:`RUN_DIR` while it lives. Teardown (on leaving the ``with`` block,
on an exception, on SIGTERM or SIGHUP, which it turns into ``SystemExit``, and on Ctrl-C) kills every
process inside each namespace, deletes the veths, the namespaces and the bridge, and checks that
they are gone. A run killed outright (SIGKILL) leaves them behind with an unlocked lock file: the
next :class:`Testbed`, or ``python -m testbed clean``, finds them by the prefix and removes them.
Every wait is bounded in time.
"""

from __future__ import annotations

import ctypes
import fcntl
import itertools
import logging
import os
import re
import signal
import subprocess
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
    "leftovers",
]

PREFIX = "ltb"
#: Lock files of live runs: a run whose lock can be taken is dead and its leftovers may go.
RUN_DIR = Path("/run/locality-testbed")
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

_RUN_NAME = re.compile(rf"^{PREFIX}([0-9a-z]+)-")
_CLONE_NEWNET = 0x40000000
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
    """One emulated server: its namespace, its address, and the bridge's end of its link."""

    index: int
    namespace: str
    address: str
    host_link: str


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

    Examples
    --------
    >>> with Testbed(3, rate_mbit=100) as bed:  # doctest: +SKIP
    ...     bed.run(bed.servers[1], ["ip", "-br", "addr"]).stdout
    """

    __test__ = False

    def __init__(self, n_servers: int, *, rate_mbit: float | None = None, delay_ms: float = 0.0) -> None:
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
        with _sequence_lock:
            self.run_id = f"{os.getpid():x}{_sequence_name(next(_sequence))}"
        self.name = f"{PREFIX}{self.run_id}"
        self.bridge = f"{self.name}-br"
        self.servers = [
            Server(i, f"{self.name}-s{i}", f"{SUBNET}.{i + 1}", f"{self.name}-h{i}") for i in range(n_servers)
        ]
        self._lock_file: int | None = None
        self._processes: list[subprocess.Popen] = []
        self._previous_handlers: dict[int, object] = {}

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
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "up")
        for server in self.servers:
            self._add_server(server)
        logger.info(
            "testbed %s: %d servers on %s.0/24, links %s Mbit/s, delay %s ms",
            self.name,
            self.n_servers,
            SUBNET,
            self.rate_mbit or "unshaped",
            self.delay_ms,
        )

    def _add_server(self, server: Server) -> None:
        inner = f"{self.name}-n{server.index}"
        _ip("netns", "add", server.namespace)
        _ip("link", "add", server.host_link, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", server.namespace)
        _ip("-n", server.namespace, "link", "set", inner, "name", "eth0")
        # IPv4 only: no router solicitations or multicast reports add traffic to what a link carries.
        _run(["ip", "netns", "exec", server.namespace, "sysctl", "-q", "-w", *_NO_IPV6])
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
    def command(self, server: Server, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``server``'s namespace."""
        return ["ip", "netns", "exec", server.namespace, *map(str, argv)]

    def run(
        self,
        server: Server,
        argv: Sequence[str],
        *,
        timeout: float = COMMAND_TIMEOUT,
        env: dict[str, str] | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess:
        """Run ``argv`` in ``server`` to completion (output captured as text; bounded by ``timeout``)."""
        done = subprocess.run(self.command(server, argv), capture_output=True, text=True, timeout=timeout, env=env)
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
    ) -> subprocess.Popen:
        """Start ``argv`` in ``server`` in the background; stopped at teardown.

        Its stderr is appended to ``log``, and so is its stdout unless ``stdout`` names a file of its own.
        """
        with open(log, "ab") as err, open(stdout or os.devnull, "wb") as out:
            process = subprocess.Popen(
                self.command(server, argv),
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

    def call_in(self, server: Server, function: Callable[[], T], *, timeout: float = COMMAND_TIMEOUT) -> T:
        """``function()`` run by a thread that entered ``server``'s network namespace (its sockets live there)."""
        outcome: dict[str, object] = {}

        def inside() -> None:
            try:
                _enter_namespace(server.namespace)
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
    """Namespaces and links named by this module, of dead runs only (or of every run)."""
    names = {"namespaces": _names(["ip", "netns", "list"]), "links": _names(["ip", "-o", "link", "show"], field=1)}
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


def _enter_namespace(namespace: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    descriptor = os.open(f"/var/run/netns/{namespace}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(descriptor, _CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns into {namespace}: {os.strerror(errno)}")
    finally:
        os.close(descriptor)
