"""Running the JVM modules' mains (``jvm/``) from Python: the testbed's state reads and the JVM tests.

``mvn -f jvm/pom.xml install`` (``make jvm``, and ``make test`` before pytest) leaves every module's
classes in ``target/classes`` (its test classes, such as a topology run on an engine's local
cluster, in ``target/test-classes``) and its classpath in ``target/classpath.txt``. A module that
was not built, or a missing ``java``, raises :class:`FileNotFoundError` with the command that
builds it (the JVM tests' conftest turns it into a failure).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

__all__ = ["FLINK_JVM_OPTIONS", "JVM", "classpath", "java", "run_java"]

JVM = Path(__file__).resolve().parents[1] / "jvm"
#: What Flink's distribution opens to its own JVMs and a ``java -cp`` run of the State Processor API needs too:
#: it hands a savepoint's operator states to Kryo, which must reach Flink's private classes on Java 17.
FLINK_JVM_OPTIONS = ("--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-opens=java.base/java.util=ALL-UNNAMED")


def java() -> str:
    """The ``java`` of ``JAVA_HOME``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).is_file():
        raise FileNotFoundError("java (JDK 17+) is needed to run locality's JVM modules")
    return found


def classpath(*modules: str) -> str:
    """Classes and runtime dependencies of ``modules`` (built by ``mvn -f jvm/pom.xml install``)."""
    parts = []
    for module in modules:
        built = JVM / module / "target"
        if not (built / "classpath.txt").is_file() or not (built / "classes").is_dir():
            raise FileNotFoundError(f"{module} is not built: run `make test` or `mvn -f {JVM}/pom.xml install`")
        tests = [str(built / "test-classes")] if (built / "test-classes").is_dir() else []
        parts += [str(built / "classes"), *tests, (built / "classpath.txt").read_text().strip()]
    return os.pathsep.join(p for p in parts if p)


def run_java(
    modules: list[str],
    main: str,
    *args: object,
    timeout: float = 300,
    jvm_options: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run ``main`` of the given modules; output captured as text, bounded by ``timeout`` seconds.

    ``env`` holds variables set for the JVM on top of this process's environment (e.g. an S3 server's
    :attr:`~testbed.s3server.S3Server.env`).
    """
    command = [java(), *jvm_options, "-cp", classpath(*modules), main, *map(str, args)]
    environment = None if env is None else {**os.environ, **env}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment)
