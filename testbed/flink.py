"""A Flink standalone cluster across the testbed's servers, and the jobs it runs.

The core paper runs its application on a cluster of servers, one instance of each stateful
operator per server (Caneill et al., Middleware 2016, Section 4.1). :class:`FlinkCluster` does
that with Flink's own scripts from the ``apache-flink`` wheel (``bin/jobmanager.sh`` and
``bin/taskmanager.sh start-foreground``, the jars in ``lib/``): a JobManager in one server and a
TaskManager in each of the others, each bound to its server's address, with ``slots`` task slots
(one by default: server *i* runs subtask *i* of every operator).

The servers may share nothing but the network (a :class:`~testbed.network.Testbed` with private
files): each daemon's configuration (``config.yaml``, written as JSON, which YAML reads, and Flink's
own log4j files) is written into its server's own files (:data:`CONF_DIR`), its logs go there too
and its console to a host file, and what the jobs read and write travels to an object store by URI:
with ``s3_env`` (the AWS variables of an S3 server, :attr:`testbed.s3server.S3Server.env`), every
daemon has them, as an instance's role and settings would give them, and Flink's own S3 file system
(``flink-s3-fs-hadoop``, fetched by ``make flink-s3`` and installed into the distribution's
``plugins/`` by :func:`install_s3_plugin`) is pointed at the same server
(:func:`locality.engines.flink_s3.flink_s3_configuration`): savepoints go to ``s3://...``.

Jobs are submitted with ``bin/flink run --detached`` from the JobManager's server and followed
through the REST API, read from inside that server (:meth:`Testbed.call_in`): a job's state,
where each subtask runs, its failure, cancellation.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from locality._aws import S3Settings
from locality.engines.flink_rest import FlinkRest
from locality.engines.flink_s3 import S3_PLUGINS, flink_s3_configuration
from testbed.network import Server, Testbed

logger = logging.getLogger(__name__)

__all__ = [
    "FlinkCluster",
    "JobVertex",
    "fetched_s3_plugin",
    "flink_home_of",
    "install_s3_plugin",
    "s3_settings_of",
]

REST_PORT = 8081
#: Bounds (seconds) of the waits for the cluster, a submission, a job's state.
START_TIMEOUT = 180.0
SUBMIT_TIMEOUT = 180.0
STATE_TIMEOUT = 120.0
FINAL_STATES = {"FINISHED", "CANCELED", "FAILED"}
#: Each daemon's configuration and log folders, in its server's files (``{run}``: the testbed run's name,
#: so that runs seeing the host's ``/tmp`` do not share them).
CONF_DIR, LOG_DIR = "/tmp/locality-flink-{run}/conf", "/tmp/locality-flink-{run}/log"
#: Flink's own files a daemon's configuration folder holds besides ``config.yaml``.
_CONF_FILES = ("log4j-console.properties", "log4j-cli.properties", "logback-console.xml")


def fetched_s3_plugin() -> Path:
    """The S3 plugin jar ``make flink-s3`` fetched (``$LOCALITY_FLINK_PLUGINS/s3-fs-hadoop/``).

    Raises
    ------
    FileNotFoundError
        Naming the command that fetches it.
    """
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = Path(os.environ.get("LOCALITY_FLINK_PLUGINS") or cache / "locality" / "flink-plugins") / S3_PLUGINS[0]
    found = sorted(folder.glob("flink-s3-fs-hadoop-*.jar"))
    if not found:
        raise FileNotFoundError(f"Flink's S3 plugin is not in {folder}: run `make flink-s3` (or `make test`)")
    return found[-1]


def install_s3_plugin(flink_home: Path) -> Path:
    """Flink's S3 plugin installed in ``flink_home/plugins/s3-fs-hadoop/`` (once: copied aside, then renamed in).

    Flink loads every folder of ``plugins/`` as a plugin of its own when a process starts (the
    JobManager, a TaskManager, the ``flink`` command, a tool that sets its file systems up as they
    do: ``LocalFileSystems`` in locality-flink-state). Returns the installed jar.
    """
    jar = fetched_s3_plugin()
    folder = Path(flink_home) / "plugins" / S3_PLUGINS[0]
    installed = folder / jar.name
    if not installed.is_file() or installed.stat().st_size != jar.stat().st_size:
        folder.mkdir(parents=True, exist_ok=True)
        aside = folder / f".{jar.name}.{os.getpid()}"
        shutil.copyfile(jar, aside)
        os.replace(aside, installed)  # a Flink process starting meanwhile sees the whole jar or none
        logger.info("installed Flink's S3 plugin %s", installed)
    return installed


def flink_home_of(python_environment: Path) -> Path:
    """The Flink distribution (``bin/``, ``lib/``, ``conf/``) inside a PyFlink environment."""
    found = sorted(Path(python_environment).glob("lib/python*/site-packages/pyflink"))
    if not found or not (found[0] / "bin" / "jobmanager.sh").is_file():
        raise FileNotFoundError(f"no Flink distribution (pyflink/bin/jobmanager.sh) in {python_environment}")
    return found[0]


@dataclass(frozen=True)
class JobVertex:
    """One vertex of a job: its name and the host of each subtask.

    (Its record counts are left out: the REST API caches them for up to 10 s, without a timestamp.)
    """

    id: str
    name: str
    hosts: tuple[str, ...]


class FlinkCluster:
    """A JobManager in ``jobmanager``, a TaskManager in each of ``taskmanagers``; stopped with the testbed.

    Parameters
    ----------
    bed : Testbed
    jobmanager : Server
    taskmanagers : list of Server
    workdir : Path
        A host folder for the daemons' consoles (``jobmanager.log``, ``taskmanager-<i>.log``): captured
        here, handed to each daemon as its output; the daemons see none of it.
    flink_home : Path
        The Flink distribution (:func:`flink_home_of`).
    slots : int
        Task slots per TaskManager.
    taskmanager_memory, jobmanager_memory : str
        Process memory of each (Flink's ``*.memory.process.size``).
    s3_env : mapping, optional
        The AWS variables of the object store the jobs use (endpoint, region, credentials): every daemon
        gets them (the store's Java reader in a job reads them) and Flink's S3 plugin, installed into
        ``flink_home`` here, is configured for the same server.
    """

    def __init__(
        self,
        bed: Testbed,
        jobmanager: Server,
        taskmanagers: Sequence[Server],
        workdir: Path,
        flink_home: Path,
        *,
        slots: int = 1,
        taskmanager_memory: str = "1024m",
        jobmanager_memory: str = "1024m",
        s3_env: Mapping[str, str] | None = None,
    ) -> None:
        if jobmanager in taskmanagers:
            raise ValueError("the 'taskmanagers' of FlinkCluster must be other servers than its jobmanager")
        self.bed = bed
        self.jobmanager = jobmanager
        self.taskmanagers = list(taskmanagers)
        self.workdir = Path(workdir)
        self.home = Path(flink_home)
        self.slots = slots
        self.s3_env = dict(s3_env or {})
        self.conf_dir = CONF_DIR.format(run=bed.name)
        self.settings = {
            "jobmanager.rpc.address": jobmanager.address,
            "jobmanager.bind-host": jobmanager.address,
            "jobmanager.memory.process.size": jobmanager_memory,
            "rest.address": jobmanager.address,
            "rest.bind-address": jobmanager.address,
            "rest.port": REST_PORT,
            "taskmanager.numberOfTaskSlots": slots,
            "taskmanager.memory.process.size": taskmanager_memory,
            "parallelism.default": len(self.taskmanagers) * slots,
            "env.java.opts.all": _java_options(self.home / "conf" / "config.yaml"),
            # The REST API fetches every TaskManager's metrics when a job's details are read: traffic on
            # the links being measured. Once an hour at most: the harness reads no metric from REST.
            "metrics.fetcher.update-interval": 3_600_000,
            # The machine is shared: a loaded TaskManager can answer a task deployment after the default 10 s.
            "pekko.ask.timeout": "60 s",
            # The TaskManagers start beside the JobManager: one that asks before its ResourceManager listens
            # would wait Flink's default 10 s to ask again.
            "cluster.registration.error-delay": "1 s",
            **(flink_s3_configuration(s3_settings_of(self.s3_env)) if self.s3_env else {}),
        }

    def environment(self, server: Server) -> dict[str, str]:
        """A daemon's variables: its configuration and log folders, and the object store's, no other AWS ones."""
        env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
        return env | self.s3_env | {"FLINK_CONF_DIR": self.conf_dir, "FLINK_LOG_DIR": LOG_DIR.format(run=self.bed.name)}

    def configure(self, server: Server) -> None:
        """Write the cluster's configuration into ``server``'s files (a daemon, or a server running ``flink``)."""
        config = json.dumps(self.settings, indent=1) + "\n"
        self.bed.write_file(server, f"{self.conf_dir}/config.yaml", config.encode())
        for name in _CONF_FILES:
            self.bed.write_file(server, f"{self.conf_dir}/{name}", (self.home / "conf" / name).read_bytes())

    def start(self) -> FlinkCluster:
        """Write the configuration, start the JobManager and TaskManagers; return once all registered."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.s3_env:
            install_s3_plugin(self.home)
        for server in [self.jobmanager, *self.taskmanagers]:
            self.configure(server)
        self.bed.spawn(
            self.jobmanager,
            [self.home / "bin" / "jobmanager.sh", "start-foreground"],
            log=self.workdir / "jobmanager.log",
            env=self.environment(self.jobmanager),
        )
        for server in self.taskmanagers:
            self.bed.spawn(
                server,
                [self.home / "bin" / "taskmanager.sh", "start-foreground",
                 f"-Dtaskmanager.host={server.address}", f"-Dtaskmanager.bind-host={server.address}"],
                log=self.workdir / f"taskmanager-{server.index}.log",
                env=self.environment(server),
            )  # fmt: skip
        self._wait(
            lambda: len(self.rest("/taskmanagers")["taskmanagers"]) >= len(self.taskmanagers),
            START_TIMEOUT,
            f"{len(self.taskmanagers)} TaskManagers registered with the JobManager at {self.jobmanager.address}",
        )
        logger.info("Flink cluster up: JobManager %s, %d TaskManagers", self.jobmanager.address, len(self.taskmanagers))
        return self

    # -- REST ---------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The JobManager's REST address (reachable from inside the testbed's servers)."""
        return f"http://{self.jobmanager.address}:{REST_PORT}"

    def rest(self, path: str, *, method: str = "GET") -> dict:
        """A REST call to the JobManager, from inside its server."""
        url = f"{self.url}{path}"

        def call() -> dict:
            request = urllib.request.Request(url, method=method)
            with urllib.request.urlopen(request, timeout=10) as response:
                body = response.read()
            return json.loads(body) if body else {}

        return self.bed.call_in(self.jobmanager, call, timeout=15)

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if ready():
                    return
            except (OSError, ValueError, KeyError):  # not up yet, or a half-built answer
                pass
            time.sleep(0.5)
        raise TimeoutError(f"waited {timeout:.0f} s for {what} (logs in {self.workdir})")

    # -- jobs ---------------------------------------------------------------------------------
    def submit(self, jar: Path, main_class: str, args: Sequence[object]) -> str:
        """``flink run --detached`` from the JobManager's server; returns the job id."""
        done = self.bed.run(
            self.jobmanager,
            [self.home / "bin" / "flink", "run", "--detached", "-m", f"{self.jobmanager.address}:{REST_PORT}",
             "-c", main_class, jar, *args],
            timeout=SUBMIT_TIMEOUT,
            env=self.environment(self.jobmanager),
            check=False,
        )  # fmt: skip
        found = re.search(r"JobID ([0-9a-f]{32})", done.stdout)
        if done.returncode != 0 or not found:
            raise RuntimeError(f"flink run exited with {done.returncode}: {(done.stdout + done.stderr)[-3000:]}")
        return found.group(1)

    def state(self, job: str) -> str:
        """The job's status (``/jobs/<id>/status``, which, unlike ``/jobs/<id>``, asks no TaskManager for metrics)."""
        return self.rest(f"/jobs/{job}/status")["status"]

    def vertices(self, job: str) -> list[JobVertex]:
        """The job's vertices in topological order, with their subtasks' hosts."""
        detail = self.rest(f"/jobs/{job}")
        vertices = []
        for vertex in detail["vertices"]:
            subtasks = self.rest(f"/jobs/{job}/vertices/{vertex['id']}")["subtasks"]
            hosts = tuple(_host_of(s) for s in sorted(subtasks, key=lambda s: s["subtask"]))
            vertices.append(JobVertex(vertex["id"], vertex["name"], hosts))
        return vertices

    def wait_running(self, job: str) -> None:
        """Until every subtask of ``job`` runs (bounded)."""

        def all_running() -> bool:
            detail = self.rest(f"/jobs/{job}")
            if detail["state"] in FINAL_STATES:
                raise RuntimeError(f"job {job} ended {detail['state']} before running")
            # A job still initializing lists no vertex yet: all() of none is no answer.
            return bool(detail["vertices"]) and all(v["status"] == "RUNNING" for v in detail["vertices"])

        self._wait(all_running, STATE_TIMEOUT, f"every subtask of job {job} to run")

    def wait_final(self, job: str, timeout: float = STATE_TIMEOUT) -> str:
        """Until ``job`` is finished, canceled or failed (bounded); returns that state."""
        final: list[str] = []

        def ended() -> bool:
            final[:] = [self.state(job)]
            return final[0] in FINAL_STATES

        self._wait(ended, timeout, f"job {job} to end")
        return final[0]

    def cancel(self, job: str) -> str:
        """Cancel ``job`` unless it has ended, and wait until it has; returns its final state."""
        if self.state(job) not in FINAL_STATES:
            self.rest(f"/jobs/{job}?mode=cancel", method="PATCH")
        return self.wait_final(job)

    def stop_with_savepoint(self, job: str, directory: str, timeout: float) -> str:
        """Stop ``job`` with a savepoint in the URI ``directory`` (REST, from the JobManager's server); its path."""
        rest = FlinkRest(self.url)
        return self.bed.call_in(
            self.jobmanager,
            lambda: rest.stop_with_savepoint(job, directory, timeout=timeout),
            timeout=timeout + 30,
        )

    def failure(self, job: str) -> str:
        """The root exception of a failed job (for error messages)."""
        history = self.rest(f"/jobs/{job}/exceptions")
        return str(history.get("root-exception") or history)[:3000]


def _host_of(subtask: dict) -> str:
    # Flink 2.x names it "endpoint" (host:port); older versions "host".
    return str(subtask.get("endpoint") or subtask.get("host", "")).rsplit(":", 1)[0]


def _java_options(default_config: Path) -> str:
    """``env.java.opts.all`` of the distribution's own config.yaml (the JDK 17 opens Flink needs)."""
    found = re.search(r"^\s+all:\s*(--add-\S.*)$", default_config.read_text(), re.M)
    if not found:
        raise RuntimeError(f"no env.java.opts.all in {default_config}: is it Flink 2.x's config.yaml?")
    return found.group(1).strip()


def s3_settings_of(s3_env: Mapping[str, str]) -> S3Settings:
    """Where the AWS variables ``s3_env`` point (the endpoint variable the store reads first wins)."""
    endpoint = s3_env.get("AWS_ENDPOINT_URL_S3") or s3_env.get("AWS_ENDPOINT_URL")
    return S3Settings(endpoint, s3_env.get("AWS_REGION") or "us-east-1")
