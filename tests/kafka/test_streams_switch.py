"""A two-stage Kafka Streams job switches versions twice, with its state, on a real broker: one instance per server.

Three versions of the tweet tables (location -> hashtag, 6 servers, ``--hash kafka``) learned on
different parts of the trace's first half: v1 on all of it, v2 on its first half, v3 on its second.
The store schedules v2 from point T1 (sealed there) before the job starts; the test schedules v3 at
T2 and then seals past the end while the job runs, once a router says it waits at the seal. Six
instances of ``TwoStageCountsApp --follow-schedule`` (one JVM per server, one stream thread each)
count the trace's second half, whose records carry the event times ``T0 + position`` ms; T1 and T2
fall at a third and two thirds of it. 1% of the records before T1 are produced last, after the
switches, as out-of-order input would bring them.

What a user checks: every record counted once by each stage, in the task the version in force at its
point names (out-of-order records where their key's state went); every key's counts run 1..n across
all its owners (nothing lost, nothing counted twice: a new owner that counted before the state arrived
would count 1 twice); the state each new owner received is what the old one had counted; after the run
the stores' changelogs hold every key's final count on its v3 owner, and nowhere else; records of moved
keys were held until their state came (how long is printed); the output topic is partitioned by
hashtag's version at each record's point.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
from confluent_kafka import Consumer, TopicPartition

from locality.evaluation import evaluate
from locality.store import ConfigStore
from locality.topology import Topology

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
    wait_until_each_runs_its_tasks,
)

INPUT, OUTPUT, APP_ID = "switch-input", "switch-output", "locality-switch"
#: The input topic's partitions: any number works, the job routes by the tables itself.
INPUT_PARTITIONS = 4
#: 2015-01-01T00:00Z: record i of the streamed half has the event time T0 + i ms.
T0 = 1_420_070_400_000
LATE_SHARE = 0.01
PROGRESS_TIMEOUT = 240.0


#: Location -> hashtag on 6 servers, one instance of each operator on each.
SERVERS = Topology.uniform(["location", "hashtag"], 6)


def wait_for_event(work, servers, instances, event: str, at_least: int) -> None:
    """Wait until some instance's switch log has ``event`` for a point at or past ``at_least``."""
    deadline = time.monotonic() + PROGRESS_TIMEOUT
    while time.monotonic() < deadline:
        fail_if_exited(instances, work)
        events = read_switch_events(work, servers)
        if len(events) and ((events["event"] == event) & (events["point"] >= at_least)).any():
            return
        time.sleep(0.5)
    pytest.fail(f"no instance logged '{event}' for a point from {at_least} within {PROGRESS_TIMEOUT:.0f} s")


def read_changelog(broker, topic: str) -> pd.DataFrame:
    """The last value of every (partition, key) of a count store's changelog: NaN where the key was deleted."""
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        last: dict[tuple[int, str], float] = {}
        read = dict.fromkeys(partitions, 0)
        deadline = time.monotonic() + 120
        while any(read[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=1.0):
                assert not message.error(), message.error()
                value = message.value()
                last[(message.partition(), message.key().decode())] = (
                    np.nan if value is None else int.from_bytes(value, "big", signed=True)
                )
                read[message.partition()] = message.offset() + 1
    finally:
        consumer.close()
    assert all(read[p] >= ends[p] for p in partitions), f"{topic}: read {read} of {ends}"
    rows = [(p, k, v) for (p, k), v in last.items()]
    return pd.DataFrame(rows, columns=["partition", "key", "count"])


@pytest.fixture(scope="module")
def switch_run(kafka_broker, kafka_tables, tmp_path_factory):
    """Run the switching job over the second half; returns what the checks need (a dict)."""
    work = tmp_path_factory.mktemp("kafka-streams-switch")
    v1, first, second = kafka_tables
    half = len(first) // 2
    versions = {1: v1, 2: learned_on(first.iloc[:half], SERVERS), 3: learned_on(first.iloc[half:], SERVERS)}
    records = second.reset_index(drop=True)
    n = len(records)
    records["point"] = T0 + np.arange(n)
    t1, t2 = T0 + n // 3, T0 + 2 * n // 3
    late = np.zeros(n, dtype=bool)
    late[np.random.default_rng(0).choice(n // 3, size=int(LATE_SHARE * n), replace=False)] = True
    records["late"] = late
    store = ConfigStore(work / "store")
    store.publish(versions[1], fingerprint="tweets-first-half")
    store.publish(versions[2], fingerprint="tweets-first-quarter", in_force_from=t1)  # sealed until t1
    topology = versions[1].topology
    # the records' timestamps are from 2015: the broker must not delete them as expired (a replay's setting)
    kafka_broker.create_topic(INPUT, INPUT_PARTITIONS, {"retention.ms": "-1"})
    kafka_broker.create_topic(OUTPUT, 6, {"retention.ms": "-1"})
    options = {"bootstrap-servers": kafka_broker.bootstrap, "store": store.root, "input": INPUT, "output": OUTPUT}
    options |= {"application-id": APP_ID, "follow-schedule": True, "schedule-wait-ms": 200_000}
    instances = start_instances(topology.servers, work, switch_log=True, **options)
    try:
        expected = expected_tasks(topology, first_subtopology=1)
        settled = wait_until_each_runs_its_tasks(instances, work, expected, anywhere=INPUT_PARTITIONS)
        produce_at_points(kafka_broker, INPUT, pd.concat([records[~late], records[late]]))
        wait_for_event(work, topology.servers, instances, "waiting", t1)  # a router waits at the seal t1
        store.publish(versions[3], fingerprint="tweets-second-quarter", in_force_from=t2)
        wait_for_event(work, topology.servers, instances, "waiting", t2)
        store.seal(T0 + n)
        output = read_topic(kafka_broker, OUTPUT, n, timeout=PROGRESS_TIMEOUT)
    finally:
        stop_instances(instances)
    changelogs = {op: read_changelog(kafka_broker, f"{APP_ID}-{op}-counts-changelog") for op in topology.operators}
    processed = read_processed(work, topology.servers).merge(records[["seq", "point", "late"]], on="seq")
    events = read_switch_events(work, topology.servers)
    print(f"6 instances ran their tasks {settled:.0f} s after starting")
    return {
        "records": records,
        "versions": versions,
        "switches": [(t1, 1, 2), (t2, 2, 3)],
        "processed": processed,
        "events": events,
        "changelogs": changelogs,
        "output": output,
    }


def version_at(points, switches) -> np.ndarray:
    """The version in force at each point."""
    versions = np.ones(len(points), dtype=int)
    for start, _, to in switches:
        versions[np.asarray(points) >= start] = to
    return versions


def test_each_stage_counted_every_record_once_and_every_key_counts_one_to_n(switch_run):
    records, processed = switch_run["records"], switch_run["processed"]
    for op in ("location", "hashtag"):
        stage = processed[processed["operator"] == op]
        assert sorted(stage["seq"]) == sorted(records["seq"])
        # a key's count goes on from owner to owner: 1..n once each, n its number of records
        sizes = records.groupby(op).size()
        for key, counts in stage.groupby("key")["count"]:
            assert sorted(counts) == list(range(1, sizes[key] + 1)), (op, key)


def test_every_record_is_counted_where_the_version_in_force_at_its_point_routes_it(switch_run):
    processed, versions, switches = switch_run["processed"], switch_run["versions"], switch_run["switches"]
    for g, op in enumerate(("location", "hashtag"), start=1):
        stage = processed[(processed["operator"] == op) & ~processed["late"]]
        assert (stage["task"] == [f"{g}_{p}" for p in stage["partition"]]).all()
        in_force = version_at(stage["point"], switches)
        keys = stage["key"].to_numpy(dtype=object)
        for version, config in versions.items():
            mine = in_force == version
            assert mine.any()
            wanted = config.route_many(op, keys[mine])
            assert (stage["partition"].to_numpy()[mine] == wanted).all(), (op, version)
        placed = np.array(versions[1].topology.placement[op])[stage["partition"].to_numpy()]
        assert (placed == stage["server"].to_numpy()).all()  # task g_i ran on the server of instance i


def test_keys_really_moved_and_their_state_went_to_the_new_owner(switch_run):
    records, versions, events = switch_run["records"], switch_run["versions"], switch_run["events"]
    received = events[events["event"] == "state_received"]
    sent = events[events["event"] == "state_sent"]
    for op in ("location", "hashtag"):
        for start, before, after in switch_run["switches"]:
            old, new = versions[before].tables[op], versions[after].tables[op]
            keys = np.array(sorted(set(old.entries.index) | set(new.entries.index)), dtype=object)
            moved = keys[old.route_many(keys) != new.route_many(keys)]
            counted_before = records[(records["point"] < start) & ~records["late"]].groupby(op).size()
            with_state = set(counted_before.index) & set(moved)
            assert len(with_state) > 50, (op, start)  # the versions really move keys that have state
            got = received[(received["operator"] == op) & (received["switch"] == start)].set_index("key")
            assert set(got.index) <= set(moved)  # only keys the switch moves change owner
            assert with_state <= set(got.index)  # and every one of them with a count went
            # each state is at least the key's count before the switch (out-of-order records may add to it)
            states = got.loc[sorted(with_state), "state"].astype(int)
            assert (states >= counted_before[sorted(with_state)]).all()
            wanted = new.route_many(np.array(got.index, dtype=object))
            assert (got["task"].str.split("_").str[1].astype(int).to_numpy() == wanted).all()
            went = sent[(sent["operator"] == op) & (sent["switch"] == start)]
            assert len(went) == len(got) and (went["bytes"] > 0).all()


def assert_counts_end_on_final_owners(records: pd.DataFrame, changelogs: dict, final, operators) -> None:
    """Every key's changelog ends with its whole count on the partition ``final`` routes it to, and only there."""
    for op in operators:
        live = changelogs[op].dropna()
        assert live["key"].is_unique  # one live state per key: none left behind on an old owner
        live = live.set_index("key")
        sizes = records.groupby(op).size()
        assert set(live.index) == set(sizes.index)
        assert (live.loc[sizes.index, "count"].astype(int) == sizes).all()
        owners = final.route_many(op, np.array(sizes.index, dtype=object))
        assert (live.loc[sizes.index, "partition"].to_numpy() == owners).all()
        assert changelogs[op]["count"].isna().any()  # moved keys were deleted where they lived


def test_the_stores_end_with_every_count_on_its_final_owner_only(switch_run):
    records, changelogs, final = switch_run["records"], switch_run["changelogs"], switch_run["versions"][3]
    assert_counts_end_on_final_owners(records, changelogs, final, ("location", "hashtag"))


def test_records_of_moved_keys_were_held_until_their_state_came(switch_run):
    events, processed = switch_run["events"], switch_run["processed"]
    released = events[events["event"] == "released"]
    assert len(released) > 0
    assert (released["point"] >= released["switch"]).all()  # only records from the switch point on wait
    late = events[events["event"] == "late"]
    assert len(late) > 0  # out-of-order records went on to where their key's state was
    waits = events[events["event"] == "waited"]
    assert (waits["point"] >= switch_run["switches"][0][0]).all() and len(waits) > 0
    switched = events[events["event"] == "switched"]
    assert len(switched) == 2 * 2 * 6  # each task of both stages went through both switches
    for (op, start), held in released.groupby(["operator", "switch"]):
        ms = held["held_ms"]
        print(
            f"{op} at switch {int(start)}: {len(held):,} records held, {ms.median():.0f} ms median, "
            f"{ms.quantile(0.99):.0f} ms p99, {int(ms.max()):,} ms max; "
            f"{(processed['operator'] == op).sum():,} records counted"
        )
    print(
        f"{len(late):,} out-of-order records forwarded to their key's new owner; "
        f"{len(waits)} waits at the seal, longest {int(waits['ms'].max()):,} ms"
    )


def test_output_is_partitioned_by_the_version_at_each_point_and_locality_follows(switch_run):
    records, output, versions, switches = (switch_run[k] for k in ("records", "output", "versions", "switches"))
    assert len(output) == len(records)
    by_value = dict(zip(output["value"], output["partition"]))
    in_force = version_at(records["point"], switches)
    wanted = np.zeros(len(records), dtype=int)
    for version, config in versions.items():
        mine = in_force == version
        wanted[mine] = config.route_many("hashtag", records["hashtag"].to_numpy(dtype=object)[mine])
    assert [by_value[v] for v in tweet_values(records)] == wanted.tolist()
    # locality, per version: the share of records whose two stages ran on one server is what evaluate says
    processed = switch_run["processed"]
    servers = processed.pivot(index="seq", columns="operator", values="server")
    for version, config in versions.items():
        segment = records[(in_force == version) & ~records["late"]]
        measured = float((servers.loc[segment["seq"], "location"] == servers.loc[segment["seq"], "hashtag"]).mean())
        expected = evaluate(segment, config).optimized.locality
        print(f"v{version}: {len(segment):,} records, measured locality {measured:.4f}, evaluate {expected:.4f}")
        assert abs(measured - expected) < 0.005
