"""The nightly and online jobs on a Spark standalone cluster across servers that share only the network.

Five servers on 1 Gb/s links, each with files of its own (``Testbed(private_files=True)``): a master,
a gateway the jobs are submitted from (PySpark runs the driver there), two workers and an object
store. The trace is put into the store's bucket from the host and lives only there; the gateway
holds the wheel and ``locality_job.py``, no trace and no store; the versions are published into the
bucket. What a user checks: the README's "On a cluster" lines (the nightly ``optimize``, then the
online ``reconfigure`` over a store holding the week before) publish the configuration ``local[2]``
publishes from the same objects (same fingerprint, same SHA-256 of every configuration file and of
the migration plan), with the one JSON document on stdout, and a worker server that dies mid-job
costs a retry, not the job: one version, recorded once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from locality.store import ConfigStore
from testbed import Server, Testbed
from testbed.s3server import S3Server, object_store
from testbed.spark import SparkCluster, build_wheel, spark_environment
from tests.conftest import trace_keys, trace_path

#: Bound of a job (seconds): ~1-2 minutes here, but the machine is shared and its load goes up to 30-50.
JOB_TIMEOUT = 600
TRACES, STORES = "traces", "locality"
TRACE = f"s3a://{TRACES}/flights/"
KEYS = ["--keys", ",".join(trace_keys("flights")), "--servers", "6"]
#: The nightly job on the week the online job publishes: the whole year keeps the local[2] runs ~45 s longer here.
NIGHTLY = ["optimize", TRACE, *KEYS, "--ts", "ts", "--start", "2013-06-03", "--end", "2013-06-10"]
ONLINE = ["reconfigure", TRACE, *KEYS, "--ts", "ts", "--window", "7D"]
#: The weeks of the online job: the version in force, then the one each side publishes.
IN_FORCE, NEXT = ["--end", "2013-06-03"], ["--end", "2013-06-10"]
#: ``local[2]`` runs of the CLI in one interpreter (one JVM for all), stopping at the first that fails.
LOCAL_RUNS = """import json, sys
from locality.cli import main
for args in json.loads(sys.argv[1]):
    if main(args) != 0:
        sys.exit(f"locality {' '.join(args)} failed")
"""


def store(name: str) -> str:
    return f"s3://{STORES}/{name}"


@dataclass(frozen=True)
class Servers:
    """The testbed, its object store (the trace in it), and the host folder of the logs and the wheel."""

    bed: Testbed
    s3: S3Server
    work: Path

    @property
    def gateway(self) -> Server:
        return self.bed.servers[1]

    def read(self, function):
        """``function()`` from inside the gateway, where the object store is reached (the host reaches no server)."""
        return self.bed.call_in(self.gateway, function, timeout=60)


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[Servers]:
    """Server 0: the master; 1: the gateway; 2 and 3: workers; 4: the object store holding the trace.

    The host's AWS variables name the object store, for the stores read from inside the gateway
    (no server is given them but through its command's environment).
    """
    work = tmp_path_factory.mktemp("spark-cluster")  # the host's: logs and the wheel, which no server sees
    with Testbed(5, rate_mbit=1000, private_files=True) as bed, pytest.MonkeyPatch.context() as env:
        with object_store(bed, bed.servers[4], work / "s3.log", buckets=(TRACES, STORES)) as s3:
            for name, value in s3.env.items():
                env.setenv(name, value)
            _put_trace(bed, bed.servers[4], s3)
            yield Servers(bed, s3, work)


def _put_trace(bed: Testbed, server: Server, s3: S3Server) -> None:
    """Upload the flights into the bucket from the host, through the object store's server."""
    path = trace_path("flights")
    data = path.read_bytes()  # here: inside the servers, the shared data folder is empty
    bed.call_in(server, lambda: s3.client().put_object(Bucket=TRACES, Key=f"flights/{path.name}", Body=data))


@dataclass(frozen=True)
class LocalRuns:
    """The ``local[2]`` runs, going on in the gateway."""

    servers: Servers
    process: subprocess.Popen
    log: Path

    def wait(self) -> None:
        assert self.process.wait(2 * JOB_TIMEOUT) == 0, self.log.read_text()[-3000:]

    def wait_for_version(self, name: str, version: int) -> None:
        """Until the store ``name`` serves ``version`` (bounded; fails when the runs failed)."""
        deadline = time.monotonic() + JOB_TIMEOUT
        while self.servers.read(lambda: ConfigStore(store(name)).current_version()) != version:
            assert self.process.poll() in (None, 0), self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"{store(name)} did not reach version {version} in {JOB_TIMEOUT} s"
            time.sleep(1)


@pytest.fixture(scope="module")
def local_runs(servers) -> LocalRuns:
    """The same commands on ``local[2]`` in the gateway, from the same objects, into stores of their own.

    Started in the background, beside the cluster's start and its jobs, in the order the tests need
    them (each waits for what it compares). The online job's version in force (the week before) goes
    first into the store the cluster then publishes into, as ``reconfigure`` ran the week before,
    later into the local one.
    """
    runs = [
        [*ONLINE, *IN_FORCE, "--store", store("online-cluster")],
        [*NIGHTLY, "--store", store("nightly-local")],
        [*ONLINE, *IN_FORCE, "--store", store("online-local")],
        [*ONLINE, *NEXT, "--store", store("online-local")],
    ]
    runs = [[*args, "--master", "local[2]", "--json", "-q"] for args in runs]
    log = servers.work / "local.err"
    env = spark_environment(servers.gateway) | servers.s3.env
    command = [sys.executable, "-c", LOCAL_RUNS, json.dumps(runs)]
    return LocalRuns(servers, servers.bed.spawn(servers.gateway, command, log=log, env=env), log)


@dataclass(frozen=True)
class Cluster:
    servers: Servers
    spark: SparkCluster
    wheel: str


@pytest.fixture(scope="module")
def cluster(servers, local_runs) -> Cluster:
    """The Spark daemons (started after the ``local[2]`` runs, so that both start at once) and the staged job."""
    bed, s3 = servers.bed, servers.s3
    # The workers' S3 credentials are theirs, as an instance's role would be; where S3 is comes with the job.
    credentials = {name: s3.env[name] for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    with ThreadPoolExecutor(1) as pool:
        wheel = pool.submit(build_wheel, servers.work / "dist")  # pip builds it while the daemons start
        spark = SparkCluster(bed, bed.servers[0], bed.servers[2:4], servers.work, daemon_env=credentials).start()
        spark.stage_job(servers.gateway, wheel.result())
    return Cluster(servers, spark, wheel.result().name)


def _submit(cluster: Cluster, args: list[str], name: str, *, kill_a_busy_worker: bool = False) -> tuple[dict, str]:
    """Submit ``args`` from the gateway; optionally kill the first worker seen running a task. Returns the JSON."""
    servers, spark = cluster.servers, cluster.spark
    stdout, stderr = servers.work / f"{name}.out", servers.work / f"{name}.err"
    job = spark.submit(servers.gateway, cluster.wheel, servers.s3.env, [*args, "--json"], stdout=stdout, stderr=stderr)
    killed = ""
    deadline = time.monotonic() + JOB_TIMEOUT
    while kill_a_busy_worker and not killed and job.poll() is None and time.monotonic() < deadline:
        busy = [host for host, tasks in spark.running_tasks(servers.gateway).items() if tasks > 0]
        if busy:
            killed = busy[0]
            servers.bed.kill_server(next(s for s in spark.workers if s.address == killed))
        time.sleep(0.2)
    returncode = job.wait(max(1.0, deadline - time.monotonic()))
    assert returncode == 0, stderr.read_text()[-3000:]
    return json.loads(stdout.read_text()), killed  # stdout holds the one JSON document, nothing else


@dataclass(frozen=True)
class Published:
    """What a store in the bucket holds: its versions, its history's, and its current version's manifest."""

    versions: list[int]
    history: list[int]
    manifest: dict
    operators: list[str]


def _published(servers: Servers, name: str) -> Published:
    def read() -> Published:
        published = ConfigStore(store(name))
        current = published.get()  # its files checked against the manifest
        history = [move["version"] for move in published.history()]
        return Published(published.versions(), history, current.manifest, sorted(current.config.tables))

    return servers.read(read)


def _same_configuration(local: Published, remote: Published) -> None:
    assert local.manifest["fingerprint"] == remote.manifest["fingerprint"]
    configuration = {n: c for n, c in local.manifest["checksums"].items() if n.startswith("configuration/")}
    assert len(configuration) >= 3  # header, configuration.json and a table per operator
    assert configuration == {n: c for n, c in remote.manifest["checksums"].items() if n.startswith("configuration/")}
    assert local.operators == remote.operators


def test_the_nightly_job_publishes_on_the_cluster_what_it_publishes_locally(cluster, local_runs):
    document, _ = _submit(cluster, [*NIGHTLY, "--store", store("nightly-cluster")], "nightly")
    assert document["version"] == 1
    local_runs.wait_for_version("nightly-local", 1)
    remote = _published(cluster.servers, "nightly-cluster")
    assert remote.versions == [1]
    _same_configuration(_published(cluster.servers, "nightly-local"), remote)


def test_the_online_job_survives_a_dead_server_and_publishes_one_version_as_locally(cluster, local_runs):
    local_runs.wait_for_version("online-cluster", 1)  # the version in force, published while the nightly ran
    args = [*ONLINE, *NEXT, "--store", store("online-cluster")]
    document, killed = _submit(cluster, args, "online", kill_a_busy_worker=True)
    assert killed, "no worker was seen running a task: nothing was killed mid-job"
    spark = cluster.spark
    alive = [w["host"] for w in spark.state()["workers"] if w["state"] == "ALIVE"]
    assert alive == [s.address for s in spark.workers if s.address != killed]
    assert document["published"] and document["version"] == 2
    local_runs.wait()
    local, remote = _published(cluster.servers, "online-local"), _published(cluster.servers, "online-cluster")
    assert remote.versions == local.versions == [1, 2]
    assert remote.history == [1, 2]  # each version made current once
    _same_configuration(local, remote)
    plan = "migration_plan.json"
    assert remote.manifest["checksums"][plan] == local.manifest["checksums"][plan]
