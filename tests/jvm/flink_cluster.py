"""A standalone Flink cluster on loopback, run from the Flink distribution of the ``apache-flink`` wheel.

What a platform engineer runs, scaled to one machine: Flink's own
``bin/jobmanager.sh`` and ``bin/taskmanager.sh start-foreground`` with the
distribution's ``lib/`` jars, one JobManager and one TaskManager of ``slots``
task slots, their configuration (``config.yaml``) and logs in a work
directory (temporary files and pid files too), the REST API on a free loopback port. The TaskManager starts once
the JobManager answers (so it registers at once), the cluster is ready when
its REST API counts the slots, every wait is bounded, and both processes
(each in its own process group) are killed when the ``with`` block ends,
failed or not. Used by the switch test and ``benchmarks/bench_flink_switch.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

__all__ = ["LocalFlinkCluster", "flink_home"]

START_TIMEOUT = 180.0


def flink_home(python_environment: Path) -> Path:
    """The Flink distribution (``bin/``, ``lib/``, ``conf/``) inside a PyFlink environment."""
    found = sorted(Path(python_environment).glob("lib/python*/site-packages/pyflink"))
    if not found or not (found[0] / "bin" / "jobmanager.sh").is_file():
        raise FileNotFoundError(f"no Flink distribution (pyflink/bin/jobmanager.sh) in {python_environment}")
    return found[0]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _java_options(home: Path) -> str:
    """The JVM options the distribution's own ``conf/config.yaml`` gives its processes (``--add-opens`` ...)."""
    found = re.search(r"^\s*all:\s*(--add-.*)$", (home / "conf" / "config.yaml").read_text(), re.MULTILINE)
    return found.group(1).strip() if found else ""


class LocalFlinkCluster:
    """One JobManager and one TaskManager of ``slots`` slots on loopback; ``url`` is the REST endpoint.

    Parameters
    ----------
    home : Path
        The Flink distribution (:func:`flink_home`).
    workdir : Path
        Configuration, logs, uploaded jars and temporary files.
    slots : int
        Task slots of the TaskManager.
    settings : dict, optional
        More configuration (Flink's keys), e.g. ``{"metrics.fetcher.update-interval": 500}``.
    """

    def __init__(self, home: Path, workdir: Path, *, slots: int = 6, settings: dict | None = None) -> None:
        self.home = Path(home)
        self.workdir = Path(workdir)
        self.slots = slots
        self.rest_port = _free_port()
        self.url = f"http://127.0.0.1:{self.rest_port}"
        self.settings = {
            "env.java.opts.all": _java_options(self.home),
            "jobmanager.rpc.address": "localhost",
            "jobmanager.bind-host": "localhost",
            "jobmanager.rpc.port": _free_port(),
            "jobmanager.memory.process.size": "1024m",
            "taskmanager.host": "localhost",
            "taskmanager.bind-host": "localhost",
            "taskmanager.numberOfTaskSlots": slots,
            "taskmanager.memory.process.size": "1600m",
            "rest.address": "127.0.0.1",
            "rest.bind-address": "127.0.0.1",
            "rest.port": self.rest_port,
            "parallelism.default": 1,
            "web.upload.dir": str(self.workdir / "uploads"),
            "web.tmpdir": str(self.workdir / "tmp"),
            "io.tmp.dirs": str(self.workdir / "tmp"),
            "blob.storage.directory": str(self.workdir / "tmp"),
            # The TaskManager starts beside the JobManager: if it asks before the ResourceManager listens, it
            # would wait Flink's default 10 s to ask again.
            "cluster.registration.error-delay": "1 s",
            **(settings or {}),
        }
        self._processes: list[subprocess.Popen] = []

    def __enter__(self) -> LocalFlinkCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        conf = self.workdir / "conf"
        for folder in (conf, self.workdir / "log", self.workdir / "uploads", self.workdir / "tmp"):
            folder.mkdir(parents=True, exist_ok=True)
        for name in ("log4j-console.properties", "logback-console.xml"):
            shutil.copy(self.home / "conf" / name, conf / name)
        (conf / "config.yaml").write_text(json.dumps(self.settings, indent=1))  # JSON is YAML
        # pid files too: Flink's scripts write them to /tmp by default, beside any other cluster's
        log = str(self.workdir / "log")
        env = {**os.environ, "FLINK_CONF_DIR": str(conf), "FLINK_LOG_DIR": log, "FLINK_PID_DIR": log}
        deadline = time.monotonic() + START_TIMEOUT
        self._launch("jobmanager", env)
        self._wait(lambda overview: True, deadline, "the JobManager's REST API")
        self._launch("taskmanager", env)
        self._wait(lambda overview: overview["slots-total"] == self.slots, deadline, f"{self.slots} task slots")

    def _launch(self, role: str, env: dict) -> None:
        log = open(self.workdir / "log" / f"{role}.out", "wb")
        with log:
            self._processes.append(
                subprocess.Popen(
                    [str(self.home / "bin" / f"{role}.sh"), "start-foreground"],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: stop() kills the JVM and its script
                )
            )

    def _wait(self, ready, deadline: float, what: str) -> None:
        while True:
            for process in self._processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a Flink process exited ({process.returncode}) before {what} was up; "
                                       f"logs in {self.workdir / 'log'}")  # fmt: skip
            try:
                with urllib.request.urlopen(self.url + "/overview", timeout=5) as response:
                    if ready(json.load(response)):
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} not up within {START_TIMEOUT:g} s; logs in {self.workdir / 'log'}")
            time.sleep(0.5)

    def stop(self) -> None:
        """Kill both processes' groups and wait for them (bounded)."""
        for process in reversed(self._processes):
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self._processes.clear()
