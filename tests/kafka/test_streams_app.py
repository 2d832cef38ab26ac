"""A two-stage Kafka Streams application follows the tweet tables on a real broker, one instance per server.

The tables (location -> hashtag, 6 servers) are learned with ``--hash kafka`` from the first
half of the tweet trace. Six instances of ``TwoStageCountsApp`` (``jvm/examples``, on the drop-in jar),
one JVM per server, each with one stream thread, join one application; ``ServerTaskAssignor``
gives each the tasks of its server's partitions. Once every instance runs its tasks, the second
half of the trace is produced into the input topic by location's table (confluent-kafka with
``partition_for``). The app counts by location (tasks ``0_i``), re-keys by hashtag through
hashtag's table (``TablePartitioner`` on the repartition and output topics) and counts by
hashtag (tasks ``1_j``); each instance logs every record it counted. Locality is measured from
those logs, beside ``evaluate`` on the same records.
"""

from __future__ import annotations

import numpy as np
import pytest

from locality.evaluation import evaluate
from locality.hashing import KafkaPartitioner
from locality.router import Router

from .conftest import read_topic, tweet_values
from .streams_apps import (
    expected_tasks,
    produce_by_location,
    read_processed,
    start_instances,
    stop_instances,
    wait_until_each_runs_its_tasks,
)

INPUT, OUTPUT = "tweets-by-location", "tweets-by-hashtag"


@pytest.fixture(scope="module")
def app_run(kafka_broker, kafka_store, kafka_tables, tmp_path_factory):
    """Run the app once on the second half; returns (records, processed-records logs, output topic)."""
    work = tmp_path_factory.mktemp("kafka-streams-app")
    with Router(kafka_store.root) as router:
        snapshot = router.snapshot()
    topology = snapshot.configuration.topology
    records = kafka_tables[2]
    for topic in (INPUT, OUTPUT):
        kafka_broker.create_topic(topic, 6)
    instances = start_instances(
        topology.servers,
        work,
        **{"bootstrap-servers": kafka_broker.bootstrap, "store": kafka_store.root, "input": INPUT, "output": OUTPUT},
        **{"application-id": "locality-tweets"},
    )
    try:
        settled = wait_until_each_runs_its_tasks(instances, work, expected_tasks(topology))
        produce_by_location(kafka_broker, INPUT, snapshot, records)
        output = read_topic(kafka_broker, OUTPUT, len(records), timeout=240)
    finally:
        stop_instances(instances)
    processed = read_processed(work, topology.servers)
    print(f"6 instances ran their tasks {settled:.0f} s after starting")
    return records, snapshot, processed, output


def test_each_instance_counted_every_record_once_in_the_tasks_of_its_server(app_run):
    records, snapshot, processed, _ = app_run
    topology = snapshot.configuration.topology
    for g, op in enumerate(topology.operators):
        stage = processed[processed["operator"] == op]
        assert sorted(stage["seq"]) == sorted(records["seq"])
        assert (stage["task"] == [f"{g}_{p}" for p in stage["partition"]]).all()
        placed = np.array(topology.placement[op])[stage["partition"].to_numpy()]
        assert (placed == stage["server"].to_numpy()).all()  # task g_i ran on the server of instance i
        # a key's count is kept by one task and grows by one per record: 1..n
        for key, counts in stage.groupby("key")["count"]:
            assert sorted(counts) == list(range(1, len(counts) + 1)), (op, key)


def test_every_record_is_in_the_partition_its_table_names(app_run):
    records, snapshot, processed, output = app_run
    for op in snapshot.operators:
        stage = processed[processed["operator"] == op].set_index("seq").loc[records["seq"]]
        keys = records[op].to_numpy(dtype=object)
        partitions = stage["partition"].to_numpy()
        entries = snapshot.table(op).entries
        in_table = records[op].isin(entries.index).to_numpy()
        assert (partitions[in_table] == entries[keys[in_table]].to_numpy()).all()
        # keys without an entry: Kafka's default partition (murmur2 of the UTF-8 key, as Kafka computes it)
        assert (partitions[~in_table] == KafkaPartitioner(6).instances_of(keys[~in_table])).all()
        assert in_table.any() and (~in_table).any()
    # the output topic, written through the same partitioner: every record where hashtag's table puts it
    by_value = dict(zip(output["value"], output["partition"]))
    assert len(output) == len(by_value) == len(records)
    wanted = snapshot.route_many("hashtag", records["hashtag"].to_numpy(dtype=object))
    assert [by_value[v] for v in tweet_values(records)] == wanted.tolist()


def test_measured_locality_is_what_evaluate_says(app_run):
    records, snapshot, processed, _ = app_run
    servers = processed.pivot(index="seq", columns="operator", values="server").loc[records["seq"]]
    measured = float((servers["location"] == servers["hashtag"]).mean())
    report = evaluate(records, snapshot.configuration)
    print(
        f"Kafka Streams, 6 instances, {len(records):,} second-half tweets: same-instance share {measured:.4f} "
        f"(evaluate {report.optimized.locality:.4f}, hash {report.hash.locality:.4f})"
    )
    assert abs(measured - report.optimized.locality) < 0.005
    assert measured > 1.5 * report.hash.locality
