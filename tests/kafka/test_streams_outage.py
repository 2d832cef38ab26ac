"""Kafka Streams instances ride out an outage of their store on a real broker: none stops, no record is lost.

The store is a prefix of a bucket on an S3 server of the test's own (loopback). Its schedule puts v1 in
force and is sealed at S, half-way through the stream (tables for location -> hashtag on 3 servers, two
instances of each operator per server, ``--hash kafka``; v2 is learned on another part of the trace).
Three instances of ``TwoStageCountsApp --follow-schedule`` (one JVM per server, on the Kafka Streams
drop-in jar) count 30,000 records of the tweet trace, record i with the event time T0 + i ms:

1. the first 30% go through with the store up;
2. the store goes out, ``stopped`` (its server killed: connections refused) or ``unreachable`` (its
   process stopped: connections accepted, never answered), for 30 s at least. Meanwhile one instance is
   stopped (a rebalance: the group leader cannot read the store), the records up to S are produced and
   counted, and the records past S are produced: they wait (10 s at least), since only the store can say
   which version is in force there;
3. the store comes back; the publisher schedules v2 from S and seals past the end: the waiting records go
   on, the switch at S hands moved keys' state over; the stopped instance starts again and takes its
   tasks back; the last 30% are produced.

Checked: no instance stopped but the one the test stopped; each stage counted every record exactly once,
by the version in force at its point (v1 before S, v2 from S), each key's counts running 1..n; while the
store was out every record up to S went through and none past it; the rebalance kept every task where it
ran; the instances read the new schedule within one poll of its publication. The figures are printed.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
from confluent_kafka import Consumer, TopicPartition

from locality.store import ConfigStore
from locality.topology import Topology
from tests.jvm.store_outage import OUTAGES, Outage, own_s3_server

from .conftest import read_topic, tweet_values
from .streams_apps import (
    expected_tasks,
    fail_if_exited,
    learned_on,
    produce_at_points,
    read_processed,
    read_switch_events,
    start_instances,
    stop_instances,
    tasks_reported,
    wait_until_each_runs_its_tasks,
)

OPERATORS = ["location", "hashtag"]
SERVERS = Topology.uniform(OPERATORS, 3, instances_per_server=2)
RECORDS = 30_000
INPUT_PARTITIONS = 4
#: 2015-01-01T00:00Z: record i has the event time T0 + i ms.
T0 = 1_420_070_400_000
OUTAGE_SECONDS = 30.0
#: The records past the seal wait at least this long for the store before it comes back (seconds).
WAIT_SECONDS = 10.0
#: A record past the seal waits this long for the schedule at most: longer than the outage and the publication.
SCHEDULE_WAIT_MS = 150_000
PROGRESS_TIMEOUT = 240.0
#: The instance the test stops while the store is out: a rebalance the group leader cannot read the store for.
STOPPED = "s2"
#: The instances' poll of the schedule (TwoStageCountsApp's SCHEDULE_POLL); the new schedule is read within it.
POLL_MS = 100


class TopicCount:
    """How many records a topic holds so far (every partition from its start), counted as they come."""

    def __init__(self, broker, topic: str) -> None:
        self.consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": f"count-{topic}", "enable.auto.commit": False}
        )
        partitions = self.consumer.list_topics(topic, timeout=30).topics[topic].partitions
        self.consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        self.count = 0

    def now(self) -> int:
        while batch := self.consumer.consume(num_messages=10_000, timeout=0.5):
            for message in batch:
                assert not message.error(), message.error()
            self.count += len(batch)
        return self.count

    def wait_for(self, expected: int, instances, work, what: str) -> float:
        """Wait until the topic holds ``expected`` records (bounded); when it did."""
        deadline = time.monotonic() + PROGRESS_TIMEOUT
        while self.now() < expected:
            fail_if_exited(instances, work)
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: {self.count:,} of {expected:,} records within {PROGRESS_TIMEOUT:.0f} s")
        assert self.count == expected, f"{what}: {self.count:,} records, {expected:,} expected"
        return time.time()

    def close(self) -> None:
        self.consumer.close()


def reports(work, server: str, run: str = "") -> list[list[str]]:
    """Every task list an instance printed (``server s1 runs tasks [...]``), in order."""
    out = work / f"{server}{run}.out"
    lines = [line for line in out.read_text().splitlines() if " runs tasks " in line] if out.is_file() else []
    return [sorted(filter(None, line.split("[")[1].rstrip("]").split(", "))) for line in lines]


def wait_for_rebalance(instances, work, before: dict[str, int], every_task: set[str]) -> dict[str, list[str]]:
    """Wait until each instance printed new tasks after ``before`` reports and together they run every task."""
    deadline = time.monotonic() + PROGRESS_TIMEOUT
    latest: dict[str, list[str]] = {}
    while time.monotonic() < deadline:
        fail_if_exited(instances, work)
        seen = {server: reports(work, server) for server in instances}
        if all(len(seen[s]) > before[s] for s in instances):
            latest = {server: seen[server][-1] for server in instances}
            if set().union(*latest.values()) == every_task:
                return latest
        time.sleep(0.5)
    pytest.fail(f"the instances did not take over every task within {PROGRESS_TIMEOUT:.0f} s: {latest}")


def wait_for_events(work, servers, instances, event: str, count: int, field: str, value: int) -> None:
    """Wait until the instances' switch logs hold ``count`` events ``event`` whose ``field`` is at least ``value``."""
    deadline = time.monotonic() + PROGRESS_TIMEOUT
    while time.monotonic() < deadline:
        fail_if_exited(instances, work)
        events = read_switch_events(work, servers)
        if len(events) and field in events:
            if ((events["event"] == event) & (events[field] >= value)).sum() >= count:
                return
        time.sleep(0.5)
    pytest.fail(f"fewer than {count} '{event}' events in the switch logs within {PROGRESS_TIMEOUT:.0f} s")


@pytest.fixture(scope="module", params=OUTAGES)
def outage_run(request, kafka_broker, kafka_tables, tmp_path_factory):
    """The run through one kind of outage; what the checks need (a dict)."""
    kind = request.param
    work = tmp_path_factory.mktemp(f"kafka-outage-{kind}")
    _, first, second = kafka_tables
    half = len(first) // 2
    versions = {1: learned_on(first, SERVERS), 2: learned_on(first.iloc[:half], SERVERS)}
    records = second.iloc[:RECORDS].reset_index(drop=True)
    n = len(records)
    records["point"] = T0 + np.arange(n)
    seal, end = T0 + n // 2, T0 + n
    app, topics = f"locality-outage-{kind}", (f"outage-input-{kind}", f"outage-output-{kind}")
    kafka_broker.create_topic(topics[0], INPUT_PARTITIONS, {"retention.ms": "-1"})
    kafka_broker.create_topic(topics[1], 6, {"retention.ms": "-1"})
    run: dict = {"kind": kind, "records": records, "versions": versions, "seal": seal, "end": end}
    with own_s3_server() as s3, Outage(s3, kind) as outage:
        store = ConfigStore(f"s3://locality/{kind}")
        store.publish(versions[1], fingerprint="tweets-first-half")
        store.seal(seal)
        options = {"bootstrap-servers": kafka_broker.bootstrap, "store": store.location, "input": topics[0]}
        options |= {"output": topics[1], "application-id": app, "follow-schedule": True}
        options |= {"schedule-wait-ms": SCHEDULE_WAIT_MS}
        instances = start_instances(SERVERS.servers, work, switch_log=True, env=s3.env, **options)
        restarted: dict = {}
        output = TopicCount(kafka_broker, topics[1])
        try:
            placed = expected_tasks(SERVERS, first_subtopology=1)
            wait_until_each_runs_its_tasks(instances, work, placed, anywhere=INPUT_PARTITIONS)
            every_task = {t for tasks in reports_of(work, instances).values() for t in tasks}
            before_outage = reports_of(work, instances)
            produce_at_points(kafka_broker, topics[0], records.iloc[: int(0.3 * n)])
            output.wait_for(int(0.3 * n), instances, work, "before the outage")

            outage.begin()
            stopped = instances.pop(STOPPED)
            stop_instances({STOPPED: stopped})
            run["stopped_exit"] = stopped.returncode
            run["stopped_err"] = (work / f"{STOPPED}.err").read_text()
            counts = {server: len(reports(work, server)) for server in instances}
            run["during"] = wait_for_rebalance(instances, work, counts, every_task)
            run["before"] = before_outage
            run["rebalanced_s"] = time.time() - outage.began
            produce_at_points(kafka_broker, topics[0], records.iloc[int(0.3 * n) : n // 2])
            run["sealed_through_s"] = (
                output.wait_for(n // 2, instances, work, "up to the seal, store out") - outage.began
            )
            produce_at_points(kafka_broker, topics[0], records.iloc[n // 2 : int(0.7 * n)])
            wait_for_events(work, SERVERS.servers, instances, "waiting", 1, "point", seal)
            waiting = time.time()
            time.sleep(max(0.0, outage.began + OUTAGE_SECONDS - time.time(), waiting + WAIT_SECONDS - time.time()))
            run["counted_while_out"] = output.now()
            run["still_out"] = outage.ended is None
            outage.end()

            store.publish(versions[2], fingerprint="tweets-first-quarter", in_force_from=seal)
            store.seal(end)
            run["published_ms"] = time.time() * 1000
            output.wait_for(int(0.7 * n), instances, work, "past the seal, store back")
            wait_for_events(work, SERVERS.servers, instances, "switched", 2 * 6, "switch", seal)

            restarted = start_instances([STOPPED], work, run=".b", switch_log=True, env=s3.env, **options)
            everyone = {**instances, **restarted}
            runs = {server: ".b" if server == STOPPED else "" for server in everyone}
            wait_for_tasks(everyone, work, runs, placed, INPUT_PARTITIONS)
            produce_at_points(kafka_broker, topics[0], records.iloc[int(0.7 * n) :])
            output.wait_for(n, everyone, work, "after the outage")
            run["alive_at_end"] = {server: process.poll() is None for server, process in everyone.items()}
        finally:
            output.close()
            stop_instances({**instances, **restarted})
    run["outage_s"] = outage.seconds
    run["output"] = read_topic(kafka_broker, topics[1], n)
    processed = pd.concat([read_processed(work, SERVERS.servers), read_processed(work, [STOPPED], ".b")])
    run["processed"] = processed.merge(records[["seq", "point"]], on="seq")
    run["events"] = pd.concat([read_switch_events(work, SERVERS.servers), read_switch_events(work, [STOPPED], ".b")])
    return run


def reports_of(work, instances) -> dict[str, list[str]]:
    """The tasks each instance said it runs last."""
    return {server: tasks_reported(work / f"{server}.out") for server in instances}


def wait_for_tasks(instances, work, runs: dict[str, str], placed: dict[str, list[str]], sources: int) -> None:
    """Wait until every instance (its files named with ``runs[server]``) runs the tasks of its server."""
    deadline = time.monotonic() + PROGRESS_TIMEOUT
    reported: dict = {}
    while time.monotonic() < deadline:
        for server, process in instances.items():
            if process.poll() is not None:
                pytest.fail(f"the instance on {server} exited with {process.returncode}", pytrace=False)
        reported = {s: tasks_reported(work / f"{s}{runs[s]}.out") for s in instances}
        if all(tasks is not None for tasks in reported.values()):
            mine = {s: [t for t in tasks if not t.startswith("0_")] for s, tasks in reported.items()}
            everywhere = sorted(t for tasks in reported.values() for t in tasks if t.startswith("0_"))
            if mine == placed and everywhere == sorted(f"0_{i}" for i in range(sources)):
                return
        time.sleep(0.5)
    pytest.fail(f"the instances did not take their tasks back within {PROGRESS_TIMEOUT:.0f} s: {reported}")


def version_at(points, run) -> np.ndarray:
    return np.where(np.asarray(points) >= run["seal"], 2, 1)


def test_no_instance_stopped_but_the_one_the_test_stopped(outage_run):
    # closed by its SIGTERM (the JVM's status for it, once its shutdown hook closed Kafka Streams), not failed
    assert outage_run["stopped_exit"] == 128 + 15 and "error:" not in outage_run["stopped_err"]
    assert all(outage_run["alive_at_end"].values()), outage_run["alive_at_end"]
    assert outage_run["still_out"] and outage_run["outage_s"] >= OUTAGE_SECONDS


def test_each_stage_counted_every_record_once_by_the_version_in_force_at_its_point(outage_run):
    records, processed, versions = outage_run["records"], outage_run["processed"], outage_run["versions"]
    for g, op in enumerate(OPERATORS, start=1):
        stage = processed[processed["operator"] == op]
        assert sorted(stage["seq"]) == sorted(records["seq"])  # nothing lost, nothing counted twice
        sizes = records.groupby(op).size()
        for key, counts in stage.groupby("key")["count"]:  # each key's count goes on from owner to owner
            assert sorted(counts) == list(range(1, sizes[key] + 1)), (op, key)
        assert (stage["task"] == [f"{g}_{p}" for p in stage["partition"]]).all()
        in_force = version_at(stage["point"], outage_run)
        keys = stage["key"].to_numpy(dtype=object)
        for version, config in versions.items():
            mine = in_force == version
            assert mine.any()
            assert (stage["partition"].to_numpy()[mine] == config.route_many(op, keys[mine])).all(), (op, version)
    output, in_force = outage_run["output"], version_at(records["point"], outage_run)
    wanted = np.zeros(len(records), dtype=int)
    for version, config in versions.items():
        mine = in_force == version
        wanted[mine] = config.route_many("hashtag", records["hashtag"].to_numpy(dtype=object)[mine])
    by_value = dict(zip(output["value"], output["partition"]))
    assert len(output) == len(by_value) == len(records)
    assert [by_value[v] for v in tweet_values(records)] == wanted.tolist()


def test_while_the_store_was_out_every_sealed_record_went_through_and_no_other(outage_run):
    n, events = len(outage_run["records"]), outage_run["events"]
    assert outage_run["counted_while_out"] == n // 2
    assert outage_run["sealed_through_s"] < outage_run["outage_s"]
    waits = events[events["event"] == "waited"]
    assert len(waits) and (waits["point"] >= outage_run["seal"]).all()
    kept = events[events["event"] == "schedule_kept"]
    assert len(kept) and kept["why"].str.contains("cannot be read").all(), kept["why"].tolist()
    print(
        f"{outage_run['kind']}: store out {outage_run['outage_s']:.1f} s; rebalanced without it in "
        f"{outage_run['rebalanced_s']:.1f} s; the {n // 2:,} records up to the seal counted "
        f"{outage_run['sealed_through_s']:.1f} s into the outage, none past it; records past the seal waited "
        f"up to {int(waits['ms'].max()):,} ms"
    )


def test_the_rebalance_without_the_store_kept_every_task_where_it_ran(outage_run):
    before, during = outage_run["before"], outage_run["during"]
    for server, tasks in during.items():
        routed = {t for t in before[server] if not t.startswith("0_")}  # sub-topology 0 may run anywhere
        assert routed <= set(tasks), (server, before[server], tasks)
    moved = set().union(*during.values()) - set().union(*(before[s] for s in during))
    assert moved == set(before[STOPPED]), "only the stopped instance's tasks moved"


def test_the_new_schedule_was_read_within_a_poll_of_its_publication(outage_run):
    events, end = outage_run["events"], outage_run["end"]
    taken = events[(events["event"] == "schedule_taken") & (events["sealed_until"] >= end)]
    first = taken.groupby("server")["at"].min() - outage_run["published_ms"]
    assert set(first.index) >= set(SERVERS.servers) - {STOPPED}
    print(f"{outage_run['kind']}: the new schedule read {first.to_dict()} ms after its publication")
    assert (first < 10 * POLL_MS + 2000).all(), first.to_dict()
