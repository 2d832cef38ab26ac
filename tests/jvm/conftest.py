"""Running the JVM modules' mains from the Python tests.

``make test`` builds and tests the Maven project in ``jvm/`` before pytest starts
(``mvn -f jvm/pom.xml install``); every module then holds its classes in
``target/classes`` (its test classes, such as a topology run on an engine's local
cluster, in ``target/test-classes``) and its classpath in ``target/classpath.txt``. A module
that was not built fails the test with the command that builds it, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

JVM = Path(__file__).resolve().parents[2] / "jvm"


def java() -> str:
    """The ``java`` of ``JAVA_HOME``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).is_file():
        pytest.fail("java (JDK 17+) is needed to run locality's JVM modules", pytrace=False)
    return found


def classpath(*modules: str) -> str:
    """Classes and runtime dependencies of ``modules`` (built by ``mvn -f jvm/pom.xml install``)."""
    parts = []
    for module in modules:
        built = JVM / module / "target"
        if not (built / "classpath.txt").is_file() or not (built / "classes").is_dir():
            pytest.fail(f"{module} is not built: run `make test` or `mvn -f {JVM}/pom.xml install`", pytrace=False)
        tests = [str(built / "test-classes")] if (built / "test-classes").is_dir() else []
        parts += [str(built / "classes"), *tests, (built / "classpath.txt").read_text().strip()]
    return os.pathsep.join(p for p in parts if p)


#: What Flink's distribution opens to its own JVMs and a ``java -cp`` run of the State Processor API needs too:
#: it hands a savepoint's operator states to Kryo, which must reach Flink's private classes on Java 17.
FLINK_JVM_OPTIONS = ("--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-opens=java.base/java.util=ALL-UNNAMED")


def run_java(
    modules: list[str], main: str, *args: object, timeout: float = 300, jvm_options: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """Run ``main`` of the given modules; output captured as text, bounded by ``timeout`` seconds."""
    command = [java(), *jvm_options, "-cp", classpath(*modules), main, *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


#: Max parallelism of the tweet tables for Flink's Java jobs: Flink's default for parallelism 6, set by the job.
TWEET_MAX_PARALLELISM = 128


@pytest.fixture(scope="session")
def flink_tweet_tables(geotweets):
    """Tables for location -> hashtag on 6 subtasks, learned from the first half of the tweet trace (by ``seq``)
    with Flink's own fallback (``--hash flink``); returns (configuration, first half, second half)."""
    from locality.counts import count_keys
    from locality.optimizer import make_fallbacks, optimize
    from locality.topology import Topology

    half = len(geotweets) // 2
    first, second = geotweets.iloc[:half], geotweets.iloc[half:]
    topology = Topology.uniform(["location", "hashtag"], 6)
    fallbacks = make_fallbacks(topology, "flink", max_parallelism=TWEET_MAX_PARALLELISM)
    config = optimize(count_keys(first, list(topology.operators)).graph(), topology, fallbacks).config
    return config, first, second


@pytest.fixture(scope="session")
def flink_distribution() -> Path:
    """The Flink distribution of the ``apache-flink`` wheel, in the PyFlink environment of the Flink tests."""
    from tests.flink.conftest import ensure_flink_env
    from tests.jvm.flink_cluster import flink_home

    try:
        return flink_home(ensure_flink_env().root)
    except (RuntimeError, FileNotFoundError) as error:
        pytest.fail(str(error), pytrace=False)
