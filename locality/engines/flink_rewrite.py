"""Where a switch rewrites a savepoint: as a job on the Flink cluster, or on a MiniCluster of this machine.

The rewrite (``RewriteSavepoint`` of ``jvm/locality-flink-state``) is a Flink job on the savepoint's files:
it reads each keyed subtask's file once, gives the real keys whose routing key changes their new one, and
writes a new savepoint beside the old, every other entry copied as it is. It needs Flink's runtime and a
file system that reaches the savepoints. Two places have both:

- :class:`ClusterRewrite`: the job's own cluster, through its REST API (``/jars/:jarid/run``). A session
  cluster's slots are free while the stopped job waits, and its processes already reach the savepoints and
  the store. Nothing but HTTP is needed where ``locality`` runs.
- :class:`LocalRewrite`: a JVM started here from a Flink distribution (its ``lib/``, its S3 plugin in
  ``plugins/``), the rewrite on a MiniCluster in it. An application cluster (Flink's Kubernetes Operator's
  ``FlinkDeployment``, ``standalone-job.sh``) runs one job and takes no other jar, and it ends with that
  job: nothing is left there to run the rewrite on. The JVM reads the savepoints and the store with the
  AWS configuration of this process (:mod:`locality.engines.flink_s3`), which must reach the same S3.

Both take a :class:`RewriteRequest` and return a :class:`Rewritten` with the rewrite's counts per
operator (``RewriteSummary``: entries, bytes, moved, moved_bytes, rekeyed).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from locality.engines.flink_rest import FlinkRest
from locality.engines.flink_s3 import flink_s3_configuration, s3_plugins, write_flink_conf
from locality.errors import EngineError, InvalidParameterError
from locality.storage import is_remote

__all__ = ["REWRITE_CLASS", "ClusterRewrite", "LocalRewrite", "RewriteRequest", "Rewritten", "rewriter_jar"]

logger = logging.getLogger(__name__)

#: The main of the savepoint rewrite, in ``locality-flink-state``'s tool jar.
REWRITE_CLASS = "io.locality.flink.state.RewriteSavepoint"
#: What Flink's distribution opens to its own JVMs on Java 17 (its serializers reach into the JDK's classes):
#: the local rewrite's MiniCluster gets the same.
JVM_OPTIONS = ("--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-opens=java.base/java.util=ALL-UNNAMED")
#: The rewrite's counters, ``locality-rewrite/OPERATOR/FIELD`` (Java's ``RewriteSummary``).
_COUNTER_PREFIX = "locality-rewrite/"
COUNT_FIELDS = ("entries", "bytes", "moved", "moved_bytes", "rekeyed")
#: The local JVM logs to stderr, warnings up: its stdout holds the rewrite's one JSON document.
_LOG4J = """rootLogger.level = WARN
rootLogger.appenderRef.console.ref = console
appender.console.name = console
appender.console.type = Console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss,SSS} %-5p %c{1} - %m%n
"""


def rewriter_jar() -> Path:
    """The tool jar built in this checkout (``mvn -f jvm/pom.xml install``): ``locality-flink-state-*-tool.jar``."""
    target = Path(__file__).resolve().parents[2] / "jvm" / "locality-flink-state" / "target"
    found = sorted(target.glob("locality-flink-state-*-tool.jar"))
    if not found:
        raise InvalidParameterError(
            f"no savepoint rewriter jar in {target}: build it with `mvn -f jvm/pom.xml install`, or give the jar",
            parameter="rewriter_jar",
        )
    return found[-1]


@dataclass(frozen=True)
class RewriteRequest:
    """One rewrite: ``savepoint`` of a job on ``from_version`` into ``output`` for ``to_version`` of ``store``.

    ``operators`` are the switch's ``OPERATOR=UID[,...]`` specs, ``names`` their store operators, and
    ``parallelism`` the keyed operators' (the rewritten state keeps the savepoint's shape).
    """

    savepoint: str
    output: str
    store: str
    from_version: int
    to_version: int
    operators: tuple[str, ...]
    names: tuple[str, ...]
    parallelism: int

    def args(self) -> list[str]:
        """``RewriteSavepoint``'s arguments."""
        args = ["--savepoint", self.savepoint, "--output", self.output, "--store", self.store,
                "--from", str(self.from_version), "--to", str(self.to_version),
                "--parallelism", str(self.parallelism)]  # fmt: skip
        for spec in self.operators:
            args += ["--operator", spec]
        return args


@dataclass(frozen=True)
class Rewritten:
    """What a rewrite did: its counts per operator (:data:`COUNT_FIELDS`), and its job when it ran on the cluster."""

    counts: dict[str, dict[str, int]]
    job: str | None = None


@dataclass(frozen=True)
class ClusterRewrite:
    """The rewrite as a Flink job on the cluster at ``rest``, from the tool jar uploaded as ``jar_id``."""

    rest: FlinkRest
    jar_id: str
    where: str = "cluster"

    def check(self, savepoint_dir: str) -> None:
        """Before the stop: the tool jar is on the cluster."""
        if not self.rest.has_jar(self.jar_id):
            raise EngineError(f"Flink at {self.rest.url} has no uploaded jar {self.jar_id!r}")

    def run(self, request: RewriteRequest, *, timeout: float) -> Rewritten:
        """Run the rewrite job and wait for its end (bounded).

        Raises
        ------
        EngineError
            The cluster refused it, or it did not finish (the message quotes its failure).
        """
        job = self.rest.run_jar(self.jar_id, REWRITE_CLASS, request.args(), parallelism=request.parallelism)
        state = self.rest.wait_for_end(job, timeout=timeout)
        if state != "FINISHED":
            raise EngineError(f"the savepoint rewrite (job {job}) ended {state}: {self.rest.failure(job)}")
        return Rewritten(counts_of_accumulators(self.rest.accumulators(job), request.names), job)


@dataclass(frozen=True)
class LocalRewrite:
    """The rewrite on a MiniCluster in a JVM of this machine: ``tool_jar`` over the Flink of ``flink_home``.

    The JVM's file systems are Flink's own, set up as a Flink process sets them up
    (``FLINK_CONF_DIR``: the ``s3.*`` keys of :func:`~locality.engines.flink_s3.flink_s3_configuration`;
    ``FLINK_PLUGINS_DIR``: the distribution's ``plugins/``, its S3 plugin included).
    """

    flink_home: Path
    tool_jar: Path
    where: str = "local"

    def check(self, savepoint_dir: str) -> None:
        """Before the stop: a Flink distribution, with an S3 plugin when the savepoints go to S3, and ``java``."""
        if is_remote(savepoint_dir):
            s3_plugins(self.flink_home)
        elif not list(Path(self.flink_home).glob("lib/flink-dist-*.jar")):
            raise InvalidParameterError(
                f"the Flink home {self.flink_home} is not a Flink distribution", parameter="flink_home"
            )
        if not Path(self.tool_jar).is_file():
            raise InvalidParameterError(f"the savepoint rewriter jar {self.tool_jar} does not exist")
        _java()

    def run(self, request: RewriteRequest, *, timeout: float) -> Rewritten:
        """Run the rewrite in a JVM of its own and wait for it (bounded); its counts from its JSON document.

        Raises
        ------
        EngineError
            The JVM failed or took longer than ``timeout`` (the message quotes its last lines).
        """
        with tempfile.TemporaryDirectory(prefix="locality-rewrite-") as conf:
            done = self._java(request, Path(conf), timeout)
        if done.returncode != 0:
            tail = " | ".join(done.stderr.strip().splitlines()[-6:])[-2000:]
            raise EngineError(f"the local savepoint rewrite exited with {done.returncode}: {tail}")
        document = json.loads(done.stdout)
        return Rewritten(counts_of_document(document.get("operators", {}), request.names))

    def _java(self, request: RewriteRequest, conf: Path, timeout: float) -> subprocess.CompletedProcess:
        write_flink_conf(conf, flink_s3_configuration())
        (conf / "log4j.properties").write_text(_LOG4J)
        env = {**os.environ, "FLINK_CONF_DIR": str(conf), "FLINK_PLUGINS_DIR": str(Path(self.flink_home) / "plugins")}
        classpath = os.pathsep.join([str(self.tool_jar), str(Path(self.flink_home) / "lib" / "*")])
        command = [_java(), *JVM_OPTIONS, f"-Dlog4j.configurationFile={conf / 'log4j.properties'}",
                   "-cp", classpath, REWRITE_CLASS, *request.args()]  # fmt: skip
        logger.info("rewriting locally: %s", " ".join(command))
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise EngineError(f"the local savepoint rewrite took more than {timeout:g} s") from None


def counts_of_accumulators(accumulators: dict[str, str], operators: Sequence[str]) -> dict[str, dict[str, int]]:
    """The rewrite job's counters (``locality-rewrite/OPERATOR/FIELD``), per operator."""
    counts: dict[str, dict[str, int]] = {op: {} for op in operators}
    for name, value in accumulators.items():
        if name.startswith(_COUNTER_PREFIX):
            op, _, what = name[len(_COUNTER_PREFIX) :].partition("/")
            counts.setdefault(op, {})[what] = int(value)
    return counts_of_document(counts, operators)


def counts_of_document(operators_doc: dict, operators: Sequence[str]) -> dict[str, dict[str, int]]:
    """Every operator's :data:`COUNT_FIELDS` (0 when absent: an operator that held no state)."""
    names = list(dict.fromkeys([*operators, *operators_doc]))
    return {op: {f: int(operators_doc.get(op, {}).get(f, 0)) for f in COUNT_FIELDS} for op in names}


def _java() -> str:
    """The ``java`` of ``JAVA_HOME``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).is_file():
        raise InvalidParameterError("a local rewrite needs java (JDK 17+): set JAVA_HOME or put java on PATH")
    return found
