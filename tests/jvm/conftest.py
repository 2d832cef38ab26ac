"""Running the JVM modules' mains from the Python tests.

``make test`` builds and tests the Maven project in ``jvm/`` before pytest starts
(``mvn -f jvm/pom.xml install``); every module then holds its classes in
``target/classes`` (its test classes, such as a topology run on an engine's local
cluster, in ``target/test-classes``) and its classpath in ``target/classpath.txt``. A module
that was not built fails the test with the command that builds it, never a skip.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from testbed import jvm
from testbed.jvm import FLINK_JVM_OPTIONS, JVM

__all__ = [
    "CORE_EXAMPLES",
    "FLINK_EXAMPLES",
    "FLINK_JVM_OPTIONS",
    "JVM",
    "KAFKA_EXAMPLES",
    "STORM_EXAMPLES",
    "TWEET_MAX_PARALLELISM",
    "classpath",
    "java",
    "run_java",
]

#: The modules of the programs on the library jars (``jvm/examples``), as :func:`classpath` takes them: the
#: command-line helpers over locality-core, and the apps and helpers of each engine, on its drop-in jar.
CORE_EXAMPLES = "examples/locality-core-examples"
FLINK_EXAMPLES = "examples/locality-flink-examples"
KAFKA_EXAMPLES = "examples/locality-kafka-streams-examples"
STORM_EXAMPLES = "examples/locality-storm-examples"


@contextlib.contextmanager
def _failing_unbuilt():
    """A missing ``java`` or an unbuilt module fails the test with the command that builds it, never a skip."""
    try:
        yield
    except FileNotFoundError as error:
        pytest.fail(str(error), pytrace=False)


def java() -> str:
    """:func:`testbed.jvm.java`, failing the test without one."""
    with _failing_unbuilt():
        return jvm.java()


def classpath(*modules: str) -> str:
    """:func:`testbed.jvm.classpath`, failing the test on a module not built."""
    with _failing_unbuilt():
        return jvm.classpath(*modules)


def run_java(
    modules: list[str],
    main: str,
    *args: object,
    timeout: float = 300,
    jvm_options: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """:func:`testbed.jvm.run_java`, failing the test without ``java`` or on a module not built."""
    with _failing_unbuilt():
        return jvm.run_java(modules, main, *args, timeout=timeout, jvm_options=jvm_options, env=env)


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


@pytest.fixture(scope="module")
def job_input(flink_tweet_tables, tmp_path_factory):
    """The input of the Flink Java job's tests (``TwoStageJob`` on the tweets): (store, input file, records streamed).

    The store holds the tables of :func:`flink_tweet_tables`; the records are the second half of the trace, then
    one record of each table key it lacks (its first in the first half), ``second`` marking the former.
    """
    import pandas as pd

    from locality.store import ConfigStore

    operators = ["location", "hashtag"]
    config, first, second = flink_tweet_tables
    work = tmp_path_factory.mktemp("flink-java-job")
    store = ConfigStore(work / "store")
    store.publish(config, fingerprint="flink-tweets")
    cover = []
    for op in operators:
        missing = set(config.tables[op].entries.index) - set(second[op]) - {k for c in cover for k in c[op]}
        cover.append(first[first[op].isin(missing)].drop_duplicates(op))
    records = pd.concat([second.assign(second=True), *(c.assign(second=False) for c in cover)])
    records = records[["seq", *operators, "second"]].drop_duplicates("seq").reset_index(drop=True)
    path = work / "records.jsonl"
    records[["seq", *operators]].to_json(path, orient="records", lines=True, force_ascii=False)
    return store, path, records


@pytest.fixture(scope="session")
def flink_distribution() -> Path:
    """The Flink distribution of the ``apache-flink`` wheel, in the PyFlink environment of the Flink tests."""
    from tests.flink.conftest import ensure_flink_env
    from tests.jvm.flink_cluster import flink_home

    try:
        return flink_home(ensure_flink_env().root)
    except (RuntimeError, FileNotFoundError) as error:
        pytest.fail(str(error), pytrace=False)
