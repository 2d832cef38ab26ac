"""``locality switch flink`` refuses what it cannot do before it touches a cluster, with exit code 2.

The switch itself runs against a real Flink cluster in ``tests/jvm/test_flink_switch.py``;
these are the refusals a user meets first: a wrong jar option, nothing to switch to, a REST
endpoint nobody serves, a malformed option (each named in one line on stderr). Every option,
and what the store says of it, is checked before any request reaches the cluster.
"""

from __future__ import annotations

import http.server
import socket
import threading

import pandas as pd
import pytest

from locality.cli import ExitCode, main
from locality.hashing import make_fallback
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore
from locality.topology import Topology


def flink_tables() -> RoutingConfiguration:
    topology = Topology.uniform(["a", "b"], 4)
    fallback = make_fallback("flink", 4, max_parallelism=128)
    entries = pd.Series({"k1": 1, "k2": 3})
    return RoutingConfiguration(topology, {op: RoutingTable(op, fallback, entries) for op in topology.operators})


@pytest.fixture
def switch_args(tmp_path):
    ConfigStore(tmp_path / "store").publish(flink_tables(), fingerprint="f0")
    jar = tmp_path / "job.jar"
    jar.write_bytes(b"PK")
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return ["switch", "flink", "--rest", f"http://127.0.0.1:{port}", "--job", "0" * 32, "--store",
            str(tmp_path / "store"), "--savepoint-dir", str(tmp_path / "sp"), "--operator", "a=count-per-a",
            "--entry-class", "Job", "--jar", str(jar)]  # fmt: skip


def test_a_rest_endpoint_nobody_serves_is_named(switch_args, capsys):
    assert main([*switch_args, "--to", "1", "--", "--version", "{version}"]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"cannot reach Flink's REST API at {switch_args[3]}" in err and "Traceback" not in err


def test_the_job_jar_is_given_once(switch_args, capsys):
    assert main([*switch_args, "--jar-id", "x_job.jar", "--to", "1"]) == ExitCode.BAD_INPUT
    assert "exactly one of --jar and --jar-id" in capsys.readouterr().err


def test_an_empty_store_needs_a_version_to_switch_to(switch_args, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    args = [*switch_args]
    args[args.index("--store") + 1] = str(empty)
    assert main(args) == ExitCode.BAD_INPUT
    assert "has no current version: give --to" in capsys.readouterr().err


def test_a_switch_without_restart_takes_no_job_to_start(switch_args, capsys):
    """``--no-restart`` (an application cluster, restarted by its deployment) refuses the job's jar and arguments."""
    assert main([*switch_args, "--to", "1", "--no-restart"]) == ExitCode.BAD_INPUT
    assert "--no-restart starts no job: --jar, --jar-id, --entry-class" in capsys.readouterr().err


def test_a_local_rewrite_needs_a_flink_distribution(switch_args, monkeypatch, capsys):
    monkeypatch.delenv("FLINK_HOME", raising=False)
    args = [a for a in switch_args if a not in ("--entry-class", "Job", "--jar")]
    args = [a for a in args if not a.endswith("job.jar")]
    assert main([*args, "--to", "1", "--no-restart", "--rewrite", "local"]) == ExitCode.BAD_INPUT
    assert "--rewrite local needs a Flink distribution" in capsys.readouterr().err


class _CountingRequests(http.server.BaseHTTPRequestHandler):
    """A stand-in JobManager that answers nothing useful: it only counts the requests that reached it."""

    requests = 0

    def do_GET(self):  # noqa: N802 - http.server's name
        type(self).requests += 1
        self.send_error(500)

    do_POST = do_PATCH = do_GET

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(
    "option, value, says",
    [
        ("--rest", "jm:8081", "http://HOST:PORT"),
        ("--rest", "http://:8081", "http://HOST:PORT"),
        ("--rest", "http://jm:port", "http://HOST:PORT"),
        ("--timeout", "0", "--timeout"),
        ("--to", "7", "no version 7"),
        ("--operator", "a=uid,key=float", "key must be string, long or int"),
        ("--operator", "a=uid,shape=round", "unknown part 'shape'"),
        ("--operator", "c=uid", "has no operator 'c'"),
    ],
)
def test_every_option_is_checked_before_the_cluster_is_contacted(switch_args, capsys, option, value, says):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CountingRequests)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        args = [*switch_args, "--to", "1", "--", "--version", "{version}"]
        args[args.index("--rest") + 1] = f"http://127.0.0.1:{server.server_address[1]}"
        args = args[: args.index("--")] + [option, value] + args[args.index("--") :]
        if option in args[: args.index(option)]:  # replace, not repeat, an option the fixture gives
            first = args.index(option)
            del args[first : first + 2]
        assert main(args) == ExitCode.BAD_INPUT
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err, err
        assert _CountingRequests.requests == 0
    finally:
        server.shutdown()
        server.server_close()
