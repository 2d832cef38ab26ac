"""A Spark standalone cluster across the testbed's servers: a master, workers, jobs submitted from a gateway.

The jobs run on ``local[*]`` by default, but a user who outgrows one machine submits them to a
cluster the way the README's "On a cluster" section says: a wheel of the project given to
``spark-submit --py-files`` and ``locality_job.py`` as the application, the trace in S3 read by
Hadoop's ``s3a`` connector and the store in S3. :class:`SparkCluster` starts Spark's own daemons
from the PySpark install (``spark-class org.apache.spark.deploy.master.Master`` in one server,
``...worker.Worker`` in each of the others, each bound to its server's address), waits for every
worker to register with the master (its web UI's ``/json`` document, read from inside a server),
and runs ``spark-submit`` in a gateway server, where PySpark runs the driver (client mode) and
whose address the executors call back.

The servers share nothing but the network (a :class:`~testbed.network.Testbed` with private
files): the gateway holds the wheel and ``locality_job.py`` (:meth:`SparkCluster.stage_job`) and no
trace or store, each worker its own scratch space, and what a job reads and publishes travels over
the network to an object store (:func:`testbed.s3server.object_store`). Executors and Python
workers run the interpreter of the environment that runs this module (``sys.executable``), whose
dependencies they need; it is software, visible in every server.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from pipelines.jars import GRAPHFRAMES_JARS, spark_jars, spark_jars_dir
from testbed.network import Server, Testbed

logger = logging.getLogger(__name__)

__all__ = ["SparkCluster", "build_wheel", "s3a_arguments", "spark_environment", "spark_home"]

MASTER_PORT = 7077
MASTER_UI_PORT = 8080
DRIVER_UI_PORT = 4040
#: Bound of the wait for the master and every worker to be up (seconds).
START_TIMEOUT = 120.0
REPO = Path(__file__).resolve().parents[1]
#: The gateway's folder of the job, in its own ``/tmp``: ``dist/<wheel>`` and ``locality_job.py``, as in a checkout.
JOB_DIR = "/tmp/locality-job"
#: Each worker's scratch space (the applications' files, the executors' logs), in its own ``/tmp``.
WORKER_DIR = "/tmp/spark-worker"


def spark_home() -> Path:
    """The Spark distribution inside the installed PySpark (its ``bin/`` and ``jars/``)."""
    import pyspark

    return Path(pyspark.__file__).parent


def build_wheel(directory: Path, source: Path = REPO) -> Path:
    """``pip wheel --no-deps -w directory source``, as the README builds the wheel a cluster gets.

    setuptools' scratch folder ``source/build`` goes first, as in the README: setuptools never prunes it,
    so a module removed since an earlier build would still be shipped.
    """
    shutil.rmtree(source / "build", ignore_errors=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(directory), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    wheels = sorted(directory.glob("locality-*.whl"))
    if done.returncode != 0 or not wheels:
        raise RuntimeError(f"pip wheel of {source} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return wheels[-1]


def s3a_arguments(s3_env: Mapping[str, str]) -> list[str]:
    """The README line's ``s3a`` options: the connector's jars the set-up fetched, and the S3 of ``s3_env``.

    ``s3_env`` holds the AWS variables of an S3-compatible server (``AWS_ENDPOINT_URL``,
    ``AWS_REGION``): its endpoint, with buckets addressed by path, and the region ``s3a`` signs for.

    Raises
    ------
    FileNotFoundError
        When the set-up fetched no ``hadoop-aws`` jar (``make s3a``).
    """
    jars = sorted(set(spark_jars()) - set(spark_jars(GRAPHFRAMES_JARS)))
    if not any(Path(jar).name.startswith("hadoop-aws-") for jar in jars):
        raise FileNotFoundError(f"no hadoop-aws jar in {spark_jars_dir()}: `make s3a` fetches the s3a connector")
    return [
        "--jars", ",".join(jars),
        "--conf", f"spark.hadoop.fs.s3a.endpoint.region={s3_env['AWS_REGION']}",
        "--conf", f"spark.hadoop.fs.s3a.endpoint={s3_env['AWS_ENDPOINT_URL']}",
        "--conf", "spark.hadoop.fs.s3a.path.style.access=true",
    ]  # fmt: skip


def spark_environment(server: Server) -> dict[str, str]:
    """Environment of a Spark process in ``server``: bound to its address, Python = this interpreter.

    Nothing of this process's S3 settings: a server has the variables it is given, no other. Every
    JVM (daemons, driver, and the executors, which inherit their worker's environment) compiles with
    C1 only: on this two-core machine shared with other work, the testbed's JVMs live for a minute or
    two, and C2's compilations cost more CPU than they save (the Spark tests' CPU time: -36%).
    """
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    env.pop("PYTHONPATH", None)  # the executors get the project from the wheel, nothing else
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP=server.address,
        SPARK_LOCAL_HOSTNAME=server.address,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_NO_DAEMONIZE="1",
        JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1",
    )
    return env


class SparkCluster:
    """A standalone master in ``master``, a worker in each of ``workers``; stopped with the testbed.

    Parameters
    ----------
    bed : Testbed
        The servers, with private files; their teardown stops the daemons.
    master : Server
    workers : list of Server
    workdir : Path
        A host folder for the daemons' logs (``master.log``, ``worker-<i>.log``): the console's
        capture, handed to each daemon as its output; the daemons see none of it.
    worker_cores : int
        Cores each worker offers (one executor of that many cores each).
    worker_memory : str
        Memory each worker offers (an executor takes Spark's default, 1 GB).
    daemon_env : mapping, optional
        Variables of every daemon, and so of its executors: the machines' own settings, such as
        the S3 credentials an instance's role would give.
    """

    def __init__(
        self,
        bed: Testbed,
        master: Server,
        workers: Sequence[Server],
        workdir: Path,
        *,
        worker_cores: int = 1,
        worker_memory: str = "1536m",
        daemon_env: Mapping[str, str] | None = None,
    ) -> None:
        if master in workers:
            raise ValueError("the 'workers' of SparkCluster must be other servers than its master")
        if not bed.private_files:
            raise ValueError("SparkCluster needs a Testbed with private_files=True: no job may lean on shared files")
        self.bed = bed
        self.master = master
        self.workers = list(workers)
        self.workdir = Path(workdir)
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.daemon_env = dict(daemon_env or {})
        self.url = f"spark://{master.address}:{MASTER_PORT}"
        self.home = spark_home()

    def start(self) -> SparkCluster:
        """Start the master, then the workers; return once every worker is ALIVE at the master."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        spark_class = str(self.home / "bin" / "spark-class")
        self.bed.spawn(
            self.master,
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", self.master.address,
             "--port", MASTER_PORT, "--webui-port", MASTER_UI_PORT],
            log=self.workdir / "master.log",
            env=spark_environment(self.master) | self.daemon_env,
        )  # fmt: skip
        for server in self.workers:
            self.bed.spawn(
                server,
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", server.address,
                 "--cores", self.worker_cores, "--memory", self.worker_memory,
                 "--work-dir", WORKER_DIR, "--webui-port", MASTER_UI_PORT + 1, self.url],
                log=self.workdir / f"worker-{server.index}.log",
                env=spark_environment(server) | self.daemon_env,
            )  # fmt: skip
        self._wait_for_workers(len(self.workers))
        return self

    def state(self) -> dict:
        """The master's ``/json`` document (workers, applications), read from inside the master's server."""
        url = f"http://{self.master.address}:{MASTER_UI_PORT}/json/"

        def read() -> dict:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.load(response)

        return self.bed.call_in(self.master, read, timeout=10)

    def _wait_for_workers(self, count: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        alive: list[str] = []
        while time.monotonic() < deadline:
            try:
                alive = [w["host"] for w in self.state()["workers"] if w["state"] == "ALIVE"]
            except (OSError, ValueError):  # the master's UI is not listening yet, or serves its page before its JSON
                alive = []
            if len(alive) >= count:
                logger.info("Spark master %s with %d workers %s", self.url, len(alive), alive)
                return
            time.sleep(0.5)
        raise TimeoutError(
            f"{len(alive)} of {count} Spark workers registered with {self.url} within {START_TIMEOUT} s "
            f"(logs in {self.workdir})"
        )

    def stage_job(self, gateway: Server, wheel: Path) -> None:
        """Put ``dist/<wheel>`` and ``locality_job.py`` in the gateway's :data:`JOB_DIR`, as a checkout has them."""
        self.bed.write_file(gateway, f"{JOB_DIR}/dist/{wheel.name}", wheel.read_bytes())
        self.bed.write_file(gateway, f"{JOB_DIR}/locality_job.py", (REPO / "locality_job.py").read_bytes())

    def submit_command(self, wheel_name: str, s3_env: Mapping[str, str], args: Sequence[str]) -> list[str]:
        """The README's ``spark-submit --master spark://... --py-files dist/WHEEL --jars ... locality_job.py ...``."""
        return [
            str(self.home / "bin" / "spark-submit"),
            "--master", self.url,
            "--py-files", f"dist/{wheel_name}",
            *s3a_arguments(s3_env),
            "locality_job.py",
            *map(str, args),
        ]  # fmt: skip

    def submit(
        self,
        gateway: Server,
        wheel_name: str,
        s3_env: Mapping[str, str],
        args: Sequence[str],
        *,
        stdout: Path,
        stderr: Path,
    ) -> subprocess.Popen:
        """Start ``spark-submit`` in ``gateway``'s :data:`JOB_DIR` (see :meth:`stage_job`); the caller waits.

        The driver runs there with ``s3_env``, the AWS variables its checks and the store read; its
        stdout and stderr go to host files of their own.
        """
        return self.bed.spawn(
            gateway,
            self.submit_command(wheel_name, s3_env, args),
            log=stderr,
            stdout=stdout,
            env=spark_environment(gateway) | dict(s3_env),
            cwd=JOB_DIR,
        )

    def running_tasks(self, gateway: Server) -> dict[str, int]:
        """Active tasks per executor host of the application the driver in ``gateway`` runs (its REST API).

        Empty while the driver's UI is not up, or answers "Spark is starting up" instead of JSON.
        """
        base = f"http://{gateway.address}:{DRIVER_UI_PORT}/api/v1/applications"

        def read() -> dict[str, int]:
            try:
                with urllib.request.urlopen(base, timeout=5) as response:
                    applications = json.load(response)
            except (OSError, ValueError):
                return {}
            tasks: dict[str, int] = {}
            for application in applications:
                with urllib.request.urlopen(f"{base}/{application['id']}/executors", timeout=5) as response:
                    for executor in json.load(response):
                        if executor["id"] != "driver":
                            host = executor["hostPort"].rsplit(":", 1)[0]
                            tasks[host] = tasks.get(host, 0) + executor["activeTasks"]
            return tasks

        return self.bed.call_in(gateway, read, timeout=10)
