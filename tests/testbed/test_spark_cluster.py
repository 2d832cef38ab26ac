"""The nightly and online jobs on a Spark standalone cluster across emulated servers.

A master in one server, a worker in each of two others, ``spark-submit`` beside the master: the
README's "On a cluster" line (a wheel of this checkout with ``--py-files``, ``locality_job.py``),
against a trace and a store on the shared filesystem. What a user checks: the cluster publishes
the configuration ``local[2]`` publishes (same fingerprint, byte-identical tables), the one JSON
document on stdout, and a server that dies mid-job costs a retry, not the job.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from locality.store import ConfigStore
from testbed import Testbed
from testbed.spark import SparkCluster, build_wheel
from tests.conftest import REPO, trace_keys, trace_path

JOB = REPO / "locality_job.py"
JOB_TIMEOUT = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Server 0: the master, where jobs are submitted from; 1 and 2: workers; 1 Gb/s links."""
    work = tmp_path_factory.mktemp("spark-cluster")
    with Testbed(3, rate_mbit=1000) as bed:
        spark = SparkCluster(bed, bed.servers[0], bed.servers[1:3], work).start()
        yield bed, spark, build_wheel(work / "dist"), work


def _run_local(args: list[str]) -> dict:
    """The same command on ``local[2]``, in this checkout (the script's folder goes first on sys.path)."""
    done = subprocess.run(
        [sys.executable, str(JOB), *args, "--master", "local[2]", "--json", "-q"],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _submit(cluster, args: list[str], name: str, *, kill_a_busy_worker: bool = False) -> tuple[dict, str | None]:
    """Submit ``args`` from the client; optionally kill the first worker seen running a task. Returns the JSON."""
    bed, spark, wheel, work = cluster
    client = spark.master
    stdout, stderr = work / f"{name}.out", work / f"{name}.err"
    job = spark.submit(client, wheel, JOB, [*args, "--json"], stdout=stdout, stderr=stderr)
    killed = None
    deadline = time.monotonic() + JOB_TIMEOUT
    while kill_a_busy_worker and killed is None and job.poll() is None and time.monotonic() < deadline:
        busy = [host for host, tasks in spark.running_tasks(client).items() if tasks > 0]
        if busy:
            killed = busy[0]
            bed.kill_server(next(s for s in spark.workers if s.address == killed))
        time.sleep(0.2)
    returncode = job.wait(max(1.0, deadline - time.monotonic()))
    assert returncode == 0, stderr.read_text()[-3000:]
    return json.loads(stdout.read_text()), killed  # stdout holds the one JSON document, nothing else


def _same_configuration(store_a: Path, store_b: Path) -> None:
    a, b = ConfigStore(store_a).get(), ConfigStore(store_b).get()
    assert a.manifest["fingerprint"] == b.manifest["fingerprint"]
    configuration = {n: c for n, c in a.manifest["checksums"].items() if n.startswith("configuration/")}
    assert len(configuration) >= 3  # header, configuration.json and a table per operator
    assert configuration == {n: c for n, c in b.manifest["checksums"].items() if n.startswith("configuration/")}
    assert a.config.tables.keys() == b.config.tables.keys()


def test_the_online_job_publishes_on_the_cluster_what_it_publishes_locally(cluster, tmp_path):
    trace, keys = trace_path("flights"), ",".join(trace_keys("flights"))
    step = ["reconfigure", str(trace), "--keys", keys, "--ts", "ts", "--window", "7D", "--servers", "6"]
    local, remote = tmp_path / "local", tmp_path / "cluster"
    _run_local([*step, "--end", "2013-06-03", "--store", str(local)])  # the version in force
    shutil.copytree(local, remote)
    expected = _run_local([*step, "--end", "2013-06-10", "--store", str(local)])
    document, _ = _submit(cluster, [*step, "--end", "2013-06-10", "--store", str(remote)], "online")
    assert document["published"] and expected["published"]
    assert ConfigStore(remote).versions() == [1, 2]
    _same_configuration(local, remote)
    plan = "migration_plan.json"
    assert ConfigStore(remote).get().manifest["checksums"][plan] == ConfigStore(local).get().manifest["checksums"][plan]


def test_the_nightly_job_survives_a_dead_server_and_publishes_one_version_as_locally(cluster, tmp_path):
    trace, keys = trace_path("ira"), ",".join(trace_keys("ira"))
    args = ["optimize", str(trace), "--keys", keys, "--servers", "6"]
    _run_local([*args, "--store", str(tmp_path / "local")])
    remote = [*args, "--store", str(tmp_path / "cluster")]
    document, killed = _submit(cluster, remote, "nightly", kill_a_busy_worker=True)
    assert killed is not None, "no worker was seen running a task: nothing was killed mid-job"
    bed, spark, _, _ = cluster
    assert [w["host"] for w in spark.state()["workers"] if w["state"] == "ALIVE"] == [
        s.address for s in spark.workers if s.address != killed
    ]
    assert document["version"] == 1
    assert ConfigStore(tmp_path / "cluster").versions() == [1]
    _same_configuration(tmp_path / "local", tmp_path / "cluster")
