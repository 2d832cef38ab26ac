"""A Spark standalone cluster across the testbed's servers: a master, workers, jobs submitted from a client.

The jobs run on ``local[*]`` by default, but a user who outgrows one machine submits them to a
cluster the way the README's "On a cluster" section says: a wheel of the project given to
``spark-submit --py-files`` and ``locality_job.py`` as the application. :class:`SparkCluster`
starts Spark's own daemons from the PySpark install (``spark-class
org.apache.spark.deploy.master.Master`` in one server, ``...worker.Worker`` in each of the others,
each bound to its server's address), waits for every worker to register with the master (its
web UI's ``/json`` document, read from inside a server), and runs ``spark-submit`` in a client
server whose address the executors call back. Executors and Python workers run the interpreter
of the environment that runs this module (``sys.executable``), whose dependencies they need.
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
from collections.abc import Sequence
from pathlib import Path

from testbed.network import Server, Testbed

logger = logging.getLogger(__name__)

__all__ = ["SparkCluster", "build_wheel", "spark_home"]

MASTER_PORT = 7077
MASTER_UI_PORT = 8080
DRIVER_UI_PORT = 4040
#: Bound of the wait for the master and every worker to be up (seconds).
START_TIMEOUT = 120.0
REPO = Path(__file__).resolve().parents[1]


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


class SparkCluster:
    """A standalone master in ``master``, a worker in each of ``workers``; stopped with the testbed.

    Parameters
    ----------
    bed : Testbed
        The servers; their teardown stops the daemons.
    master : Server
    workers : list of Server
    workdir : Path
        Logs (``master.log``, ``worker-<i>.log``) and the workers' scratch space.
    worker_cores : int
        Cores each worker offers (one executor of that many cores each).
    worker_memory : str
        Memory each worker offers; executors take ``executor_memory`` of it.
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
        executor_memory: str = "1g",
    ) -> None:
        if master in workers:
            raise ValueError("the 'workers' of SparkCluster must be other servers than its master")
        self.bed = bed
        self.master = master
        self.workers = list(workers)
        self.workdir = Path(workdir)
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.executor_memory = executor_memory
        self.url = f"spark://{master.address}:{MASTER_PORT}"
        self.home = spark_home()

    def environment(self, server: Server) -> dict[str, str]:
        """Environment of a Spark process in ``server``: bound to its address, Python = this interpreter."""
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(self.home),
            SPARK_LOCAL_IP=server.address,
            SPARK_LOCAL_HOSTNAME=server.address,
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            SPARK_NO_DAEMONIZE="1",
        )
        env.pop("PYTHONPATH", None)  # the executors get the project from the wheel, nothing else
        return env

    def start(self) -> SparkCluster:
        """Start the master, then the workers; return once every worker is ALIVE at the master."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        spark_class = str(self.home / "bin" / "spark-class")
        self.bed.spawn(
            self.master,
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", self.master.address,
             "--port", MASTER_PORT, "--webui-port", MASTER_UI_PORT],
            log=self.workdir / "master.log",
            env=self.environment(self.master),
        )  # fmt: skip
        for server in self.workers:
            scratch = self.workdir / f"worker-{server.index}"
            scratch.mkdir(exist_ok=True)
            self.bed.spawn(
                server,
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", server.address,
                 "--cores", self.worker_cores, "--memory", self.worker_memory,
                 "--work-dir", scratch, "--webui-port", MASTER_UI_PORT + 1, self.url],
                log=self.workdir / f"worker-{server.index}.log",
                env=self.environment(server),
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
            except OSError:  # the master's UI is not listening yet
                alive = []
            if len(alive) >= count:
                logger.info("Spark master %s with %d workers %s", self.url, len(alive), alive)
                return
            time.sleep(0.5)
        raise TimeoutError(
            f"{len(alive)} of {count} Spark workers registered with {self.url} within {START_TIMEOUT} s "
            f"(logs in {self.workdir})"
        )

    def submit_command(self, client: Server, wheel: Path, application: Path, args: Sequence[str]) -> list[str]:
        """The README's ``spark-submit --py-files WHEEL locality_job.py ...`` line against this master."""
        return [
            str(self.home / "bin" / "spark-submit"),
            "--master", self.url,
            "--conf", f"spark.driver.host={client.address}",
            "--conf", f"spark.executor.memory={self.executor_memory}",
            "--conf", f"spark.ui.port={DRIVER_UI_PORT}",
            "--py-files", str(wheel),
            str(application),
            *map(str, args),
        ]  # fmt: skip

    def submit(
        self, client: Server, wheel: Path, application: Path, args: Sequence[str], *, stdout: Path, stderr: Path
    ) -> subprocess.Popen:
        """Start ``spark-submit`` in ``client`` (stdout and stderr to their own files); the caller waits."""
        return self.bed.spawn(
            client,
            self.submit_command(client, wheel, application, args),
            log=stderr,
            stdout=stdout,
            env=self.environment(client),
        )

    def running_tasks(self, client: Server) -> dict[str, int]:
        """Active tasks per executor host of the application the driver in ``client`` runs (its REST API).

        Empty while the driver's UI is not up, or answers "Spark is starting up" instead of JSON.
        """
        base = f"http://{client.address}:{DRIVER_UI_PORT}/api/v1/applications"

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

        return self.bed.call_in(client, read, timeout=10)
