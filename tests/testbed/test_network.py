"""The testbed's servers: addresses, shaped links, byte counters, files of their own, and nothing left behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed import HEADER_BYTES, Testbed, TestbedError, clean_leftovers, leftovers
from testbed.network import RUN_DIR
from tests.conftest import trace_path

HOLDER = Path(__file__).with_name("_hold_testbed.py")


def _serve_bytes(address: str, port: int) -> socket.socket:
    listener = socket.create_server((address, port))
    listener.settimeout(20)
    return listener


def _receive_all(listener: socket.socket) -> int:
    connection, _ = listener.accept()
    received = 0
    with connection:
        while chunk := connection.recv(1 << 16):
            received += len(chunk)
    return received


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") < 0


def _nothing_left(name: str, pids: list[int]) -> None:
    names = [n for items in leftovers(dead_only=False).values() for n in items if n.startswith(f"{name}-")]
    assert names == []
    assert name not in subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True).stdout
    assert name not in Path("/proc/self/mountinfo").read_text()  # no namespace file, no folder mounted
    assert not list(RUN_DIR.glob(f"{name}*"))  # no lock file, no folder of namespace files
    assert [pid for pid in pids if _alive(pid)] == []


def _run_names(name: str) -> dict[str, list[str]]:
    return {kind: [n for n in names if n.startswith(f"{name}-")] for kind, names in leftovers(dead_only=False).items()}


def test_servers_reach_each_other_over_shaped_links_and_count_the_bytes(tmp_path):
    size = 4 * 1024 * 1024
    with Testbed(3, rate_mbit=40) as bed:
        sender, receiver, idle = bed.servers
        assert [s.address for s in bed.servers] == ["10.77.0.1", "10.77.0.2", "10.77.0.3"]
        listener = bed.call_in(receiver, lambda: _serve_bytes(receiver.address, 5001))
        before = bed.counters()
        started = time.monotonic()
        script = (
            f"import socket; s = socket.create_connection(('{receiver.address}', 5001), 10); s.sendall(bytes({size}))"
        )
        sending = bed.spawn(sender, [sys.executable, "-c", script], log=tmp_path / "sender.log")
        received = bed.call_in(receiver, lambda: _receive_all(listener))
        elapsed = time.monotonic() - started
        assert sending.wait(30) == 0
        listener.close()
        moved = [after - first for after, first in zip(bed.counters(), before)]
    assert received == size
    # 4 MiB at 40 Mbit/s take at least 0.8 s whatever the machine's load (the token bucket's burst is 64 kB).
    assert elapsed >= size * 8 / 40e6 * 0.95
    # The link counters hold the payload (headers removed) within a few frames of the handshake.
    assert abs(moved[0].sent_payload - size) < 4 * HEADER_BYTES
    assert abs(moved[1].received_payload - size) < 4 * HEADER_BYTES
    assert moved[0].received_payload < 1024 and moved[1].sent_payload < 1024  # acknowledgements only
    assert moved[2].sent_bytes == 0 and moved[2].received_payload < 1024  # the idle server sees broadcasts only


def test_a_server_has_no_route_but_to_the_other_servers():
    with Testbed(2) as bed:
        routes = bed.run(bed.servers[0], ["ip", "-4", "route"]).stdout.splitlines()
        unreachable = bed.run(
            bed.servers[0],
            [sys.executable, "-c", "import socket; socket.create_connection(('192.0.2.1', 80), 2)"],
            check=False,
        )
    assert [r.split()[0] for r in routes] == ["10.77.0.0/24"]
    assert "Network is unreachable" in unreachable.stderr


def _open_in(bed: Testbed, server, path: Path) -> tuple[str, str]:
    """The error opening ``path`` inside ``server`` gives a process of it and a thread that entered it ("": none)."""
    process = bed.run(server, [sys.executable, "-c", f"open({str(path)!r}).close()"], check=False)
    try:
        bed.call_in(server, lambda: path.open().close())
        thread = ""
    except OSError as error:
        thread = type(error).__name__
    return (process.stderr.splitlines()[-1].split(":")[0] if process.returncode else ""), thread


def test_a_server_with_private_files_opens_neither_the_hosts_temporary_files_nor_the_shared_traces(tmp_path):
    on_host = tmp_path / "store" / "CURRENT"  # a test's store, in the host's /tmp
    on_host.parent.mkdir()
    on_host.write_text("7\n")
    shared = trace_path("flights")
    with Testbed(2, private_files=True) as bed:
        first, second = bed.servers
        not_found = ("FileNotFoundError", "FileNotFoundError")
        assert _open_in(bed, first, on_host) == _open_in(bed, first, shared) == not_found
        # A server's files are its own and every process of it sees them: two commands and a thread.
        mine = Path(f"/tmp/{bed.name}.txt")
        bed.run(first, ["sh", "-c", f"echo mine > {mine}"])
        assert bed.run(first, ["cat", mine]).stdout == bed.call_in(first, mine.read_text) == "mine\n"
        assert _open_in(bed, second, mine) == not_found
        assert not mine.exists()
        # Software stays visible: this interpreter and its packages, Spark's distribution among them.
        bed.run(first, [sys.executable, "-c", "import locality, pyspark"])
        # The server's own /sys: its interfaces, as `ip netns exec` shows them.
        assert sorted(bed.run(first, ["ls", "/sys/class/net"]).stdout.split()) == ["eth0", "lo"]
        name = bed.name
    assert on_host.read_text() == "7\n" and shared.is_file()  # the host's files were hidden, not touched
    _nothing_left(name, [])


def test_a_folder_named_hidden_is_empty_inside_and_whole_on_the_host():
    folder = Path(__file__).parent  # any host folder: its files are seen empty inside, left as they are
    with Testbed(1, private_files=True, hidden=[folder]) as bed:
        assert bed.run(bed.servers[0], ["ls", "-A", folder]).stdout == ""
    assert Path(__file__).is_file()


def test_servers_see_the_hosts_files_unless_theirs_are_private(tmp_path):
    on_host = tmp_path / "shared.txt"
    on_host.write_text("shared\n")
    with Testbed(1) as bed:
        assert (
            bed.run(bed.servers[0], ["cat", on_host]).stdout
            == bed.call_in(bed.servers[0], on_host.read_text)
            == "shared\n"
        )
        assert bed.run(bed.servers[0], ["pwd"], cwd=tmp_path).stdout.strip() == str(tmp_path)


def test_a_failing_run_leaves_no_namespace_link_shaper_mount_or_process(tmp_path):
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="the job failed"):
        with Testbed(3, rate_mbit=100, private_files=True) as bed:
            name = bed.name
            for server in bed.servers:
                bed.spawn(server, ["sh", "-c", "sleep 300 & sleep 300"], log=tmp_path / "log")
            deadline = time.monotonic() + 10
            while sum(len(bed.pids(s)) for s in bed.servers) < 6 and time.monotonic() < deadline:
                time.sleep(0.05)
            pids = [pid for server in bed.servers for pid in bed.pids(server)]
            assert "tbf" in bed.run(bed.servers[0], ["tc", "qdisc", "show", "dev", "eth0"]).stdout
            raise RuntimeError("the job failed")
    assert len(pids) >= 6  # the shells and both sleeps of each
    _nothing_left(name, pids)


def _hold(tmp_path: Path) -> tuple[subprocess.Popen, str, list[int]]:
    holder = subprocess.Popen(
        [sys.executable, str(HOLDER), str(tmp_path / "log")], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    line = holder.stdout.readline().split()
    assert line, f"the holder exited with {holder.wait(30)} before its testbed was up"
    return holder, line[0], [int(p) for p in line[1:]]


def test_a_killed_run_is_cleaned_by_the_next_one(tmp_path):
    holder, name, pids = _hold(tmp_path)
    holder.kill()  # SIGKILL: no teardown runs
    holder.wait(30)
    dead = {kind: [n for n in names if n.startswith(f"{name}-")] for kind, names in leftovers().items()}
    assert len(dead["namespaces"]) == 2 and f"{name}-br" in dead["links"]
    # The folder of its mount namespaces' files, and both files, still mounted.
    assert dead["mounts"] == [f"{name}-mnt", f"{name}-mnt/{name}-s0", f"{name}-mnt/{name}-s1"]
    assert all(_alive(pid) for pid in pids)  # its processes outlived it, in its namespaces
    with Testbed(1) as bed:  # the next run removes them before building its own
        assert bed.name != name
        assert _run_names(name) == {"namespaces": [], "links": [], "mounts": []}
    _nothing_left(name, pids)
    assert clean_leftovers() == []


def test_a_live_run_is_not_taken_for_a_leftover(tmp_path):
    holder, name, pids = _hold(tmp_path)
    try:
        assert clean_leftovers() == []
        live = _run_names(name)
        assert len(live["namespaces"]) == 2 and len(live["mounts"]) == 3
        assert all(_alive(pid) for pid in pids)
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait(60)
    _nothing_left(name, pids)


def test_sigterm_tears_the_testbed_down(tmp_path):
    holder, name, pids = _hold(tmp_path)
    holder.send_signal(signal.SIGTERM)
    assert holder.wait(60) == 128 + signal.SIGTERM
    _nothing_left(name, pids)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="'n_servers' parameter of Testbed"):
        Testbed(0)
    with pytest.raises(ValueError, match="'rate_mbit' parameter of Testbed"):
        Testbed(2, rate_mbit=0)
    with pytest.raises(ValueError, match="'delay_ms' parameter of Testbed"):
        Testbed(2, delay_ms=-1)
    with pytest.raises(ValueError, match="'hidden' parameter of Testbed needs private_files=True"):
        Testbed(2, hidden=["/srv"])
    with pytest.raises(
        ValueError, match=r"'hidden' parameter of Testbed takes absolute paths of folders; got \['data'"
    ):
        Testbed(2, private_files=True, hidden=["data", __file__])


def test_a_delay_works_or_names_the_missing_kernel_qdisc():
    netem = (
        "CONFIG_NET_SCH_NETEM=y"
        in subprocess.run(["sh", "-c", "zcat /proc/config.gz 2>/dev/null"], capture_output=True, text=True).stdout
    )
    if netem:
        with Testbed(2, delay_ms=20) as bed:
            text = bed.run(bed.servers[0], ["tc", "qdisc", "show", "dev", "eth0"]).stdout
        assert "netem" in text and "delay 20" in text
    else:
        before = leftovers(dead_only=False)
        with pytest.raises(TestbedError, match="netem"):
            Testbed(2, delay_ms=20).__enter__()
        assert leftovers(dead_only=False) == before  # what it had built is gone


def _shapers(server) -> list[str]:
    """The root qdiscs of both ends of ``server``'s link: its upload (``eth0``), then its download."""
    upload = ["tc", "-n", server.namespace, "qdisc", "show", "dev", "eth0"]
    download = ["tc", "qdisc", "show", "dev", server.host_link]
    return [subprocess.run(argv, capture_output=True, text=True, check=True).stdout for argv in (upload, download)]


def test_set_rate_reshapes_every_link_both_ways():
    with Testbed(2) as bed:
        unshaped = [_shapers(server) for server in bed.servers]
        bed.set_rate(24)
        shaped = [_shapers(server) for server in bed.servers]
        bed.set_rate(1000)
        faster = [_shapers(server) for server in bed.servers]
        bed.set_rate(None)
        back = [_shapers(server) for server in bed.servers]
        with pytest.raises(ValueError, match="'rate_mbit' parameter of set_rate"):
            bed.set_rate(0)
    assert all("tbf" not in end for ends in unshaped + back for end in ends)
    assert all("tbf" in end and "rate 24Mbit" in end for ends in shaped for end in ends)
    assert all("tbf" in end and "rate 1Gbit" in end for ends in faster for end in ends)
