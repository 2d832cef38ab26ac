"""Running ``TwoStageCountsApp`` instances, one JVM per server, for the Kafka Streams tests and benchmarks.

Each instance writes what it prints to ``WORK/SERVER.out`` / ``.err``, its state under
``WORK/state-SERVER``, and the logs it is asked for to ``WORK/SERVER.jsonl`` (every record each
stage counted) and ``WORK/SERVER.switch.jsonl`` (switch events); a second start of the same
instances (a restart) names its files ``SERVER.RUN.*`` instead. Start them with
:func:`start_instances`, wait with :func:`wait_until_each_runs_its_tasks`, stop them with
:func:`stop_instances` (also when the test failed: use ``try/finally``).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pandas as pd
import pytest
from confluent_kafka import Producer

from locality.counts import count_keys
from locality.engines.kafka import TablePartitioner
from locality.optimizer import make_fallbacks, optimize
from locality.routing import RoutingConfiguration
from locality.topology import Topology
from testbed.kafka import JVM_OPTIONS, stop_process
from tests.jvm.conftest import KAFKA_EXAMPLES, classpath, java

from .conftest import tweet_values

APP = "io.locality.kafka.TwoStageCountsApp"
READY_TIMEOUT = 240.0  # six JVMs joining one group on a busy 2-core machine take about a minute


def learned_on(rows: pd.DataFrame, topology: Topology) -> RoutingConfiguration:
    """Tables for location -> hashtag on ``topology`` with Kafka's fallback, learned on ``rows``."""
    operators = list(topology.operators)
    return optimize(count_keys(rows, operators).graph(), topology, make_fallbacks(topology, "kafka")).config


def produce_by_location(broker, topic: str, snapshot, records: pd.DataFrame) -> None:
    """The records keyed by location, in their order, each in the partition location's table names."""
    partitioner = TablePartitioner(snapshot, "location")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for key, value in zip(records["location"], tweet_values(records)):
        producer.produce(topic, key=key, value=value, partition=partitioner.partition_for(key))
        producer.poll(0)
    assert producer.flush(120) == 0


def produce_at_points(broker, topic: str, records: pd.DataFrame) -> None:
    """The records keyed by location, in their order, each stamped with its ``point`` (librdkafka's partitioning)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for key, value, point in zip(records["location"], tweet_values(records), records["point"]):
        producer.produce(topic, key=key, value=value, timestamp=int(point))
        producer.poll(0)
    assert producer.flush(120) == 0


def expected_tasks(topology, first_subtopology: int = 0) -> dict[str, list[str]]:
    """Per server, the tasks ``g_i`` whose instance ``i`` of the operator of sub-topology ``g`` it holds.

    The operators' sub-topologies are numbered from ``first_subtopology`` in pipeline order (1 for the
    switching job, whose sub-topology 0 routes the input and may run anywhere).
    """
    tasks: dict[str, list[str]] = {server: [] for server in topology.servers}
    for g, op in enumerate(topology.operators, start=first_subtopology):
        for i, server in enumerate(topology.placement[op]):
            tasks[server].append(f"{g}_{i}")
    return {server: sorted(names) for server, names in tasks.items()}


def tasks_reported(out: Path) -> list[str] | None:
    """The tasks an instance said it runs last (``server s3 runs tasks [0_3, 1_3]``), None before it said any."""
    lines = [line for line in out.read_text().splitlines() if " runs tasks " in line] if out.is_file() else []
    return sorted(filter(None, lines[-1].split("[")[1].rstrip("]").split(", "))) if lines else None


def fail_if_exited(instances: dict[str, subprocess.Popen], work: Path, run: str = "") -> None:
    """Fail with its stderr when an instance has stopped."""
    for server, process in instances.items():
        if process.poll() is not None:
            pytest.fail(
                f"the instance on {server} exited with {process.returncode}:\n"
                f"{(work / f'{server}{run}.err').read_text()[-3000:]}",
                pytrace=False,
            )


def wait_until_each_runs_its_tasks(
    instances: dict[str, subprocess.Popen], work: Path, expected: dict[str, list[str]], anywhere: int = 0, run: str = ""
) -> float:
    """Wait until every instance reports the tasks of its server; the seconds it took.

    ``anywhere`` tasks of sub-topology 0 (the switching job's source) may run on any instance:
    together the instances must report them all, besides their server's.
    """
    started = time.monotonic()
    deadline = started + READY_TIMEOUT
    reported: dict[str, list[str] | None] = {}
    while time.monotonic() < deadline:
        fail_if_exited(instances, work, run)
        reported = {server: tasks_reported(work / f"{server}{run}.out") for server in instances}
        if all(tasks is not None for tasks in reported.values()):
            placed = {s: [t for t in tasks if anywhere == 0 or not t.startswith("0_")] for s, tasks in reported.items()}
            sources = sorted(t for tasks in reported.values() for t in tasks if anywhere and t.startswith("0_"))
            if placed == expected and sources == sorted(f"0_{i}" for i in range(anywhere)):
                return time.monotonic() - started
        time.sleep(0.5)
    pytest.fail(f"the instances did not settle on their tasks within {READY_TIMEOUT:.0f} s: {reported}", pytrace=False)


def start_instances(
    servers,
    work: Path,
    run: str = "",
    env: Mapping[str, str] | None = None,
    *,
    launch: Callable[[str], Sequence[str]] | None = None,
    files: str | os.PathLike | None = None,
    **options,
) -> dict[str, subprocess.Popen]:
    """One ``TwoStageCountsApp`` per server with ``options`` (``--name value``; ``True`` for a flag).

    Every instance logs what it counts to ``FILES/SERVER[RUN].jsonl``; with ``switch_log=True`` its
    switch events to ``FILES/SERVER[RUN].switch.jsonl``. Its state directory is the same in every run.
    ``env`` holds variables set for the JVMs on top of this process's (an S3 server's AWS variables).
    ``launch(server)`` is the command prefix the instance of ``server`` runs under (default: none, here;
    a testbed server's :meth:`~testbed.network.Testbed.command`), and ``files`` the folder of its state
    and logs as it sees its files (default: ``work``; a folder of the server's own, which must exist).
    Its stdout and stderr go to ``WORK/SERVER[RUN].out`` / ``.err`` in any case (host files).
    """
    environment = None if env is None else {**os.environ, **env}
    command = [java(), *JVM_OPTIONS, "-XX:TieredStopAtLevel=1", "-cp", classpath(KAFKA_EXAMPLES), APP]
    files = Path(files) if files is not None else work
    switch_log = options.pop("switch_log", False)
    instances: dict[str, subprocess.Popen] = {}
    try:
        for server in servers:
            mine = {
                **options,
                "server": server,
                "state-dir": files / f"state-{server}",
                "processed-log": files / f"{server}{run}.jsonl",
            }
            if switch_log:
                mine["switch-log"] = files / f"{server}{run}.switch.jsonl"
            arguments = []
            for name, value in mine.items():
                arguments += [f"--{name}"] if value is True else [f"--{name}", str(value)]
            prefix = list(launch(server)) if launch is not None else []
            with open(work / f"{server}{run}.out", "wb") as out, open(work / f"{server}{run}.err", "wb") as err:
                instances[server] = subprocess.Popen(
                    [*prefix, *command, *arguments], stdout=out, stderr=err, env=environment
                )
    except BaseException:
        stop_instances(instances)
        raise
    return instances


def stop_instances(instances: dict[str, subprocess.Popen]) -> None:
    for process in instances.values():
        stop_process(process, timeout=60)


def read_processed(work: Path, servers, run: str = "") -> pd.DataFrame:
    """Every record the instances counted: server, operator, task, partition, key, count, value, seq."""
    columns = {"key": str, "task": str}  # pandas would read task "0_3" as the number 3
    processed = pd.concat([pd.read_json(work / f"{s}{run}.jsonl", lines=True, dtype=columns) for s in servers])
    processed["seq"] = [json.loads(v)["seq"] for v in processed["value"]]
    return processed.reset_index(drop=True)


def read_switch_events(work: Path, servers, run: str = "") -> pd.DataFrame:
    """Every switch event of the instances (one row per line of their switch logs)."""
    rows = []
    for server in servers:
        path = work / f"{server}{run}.switch.jsonl"
        if path.is_file():
            rows += [json.loads(line) for line in path.read_text().splitlines() if line]
    return pd.DataFrame(rows)
