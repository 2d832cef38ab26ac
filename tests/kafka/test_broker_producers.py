"""Producers put each record where the routing table says, through a real broker.

The tables are learned with ``--hash kafka`` from the first half of the tweet trace; the second
half is produced into 6-partition topics keyed by hashtag: with kafka-python's
``KafkaProducer(partitioner=TablePartitioner(...))`` and with confluent-kafka's
``produce(..., partition=partitioner.partition_for(key))`` (librdkafka, whose own default
partitioner is CRC32, not Kafka's murmur2). A consumer reads every record back: each must be in
the partition its table names, which for keys without an entry is Kafka's default partition.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from confluent_kafka import Producer

from locality.engines.kafka import TablePartitioner
from locality.hashing import KafkaPartitioner
from locality.router import Router

from .conftest import read_topic, tweet_values

with warnings.catch_warnings():  # kafka-python's import warns about importlib.resources
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer
    from kafka.serializer import DefaultSerializer


def check_partitions(records, read, snapshot, operator: str) -> None:
    """Every record read once, from the partition the table names (Kafka's default one off the table)."""
    by_value = dict(zip(read["value"], read["partition"]))
    assert len(read) == len(records) and len(by_value) == len(records)
    values, keys = tweet_values(records), records[operator].to_numpy(dtype=object)
    partitions = np.array([by_value[v] for v in values])
    table = snapshot.table(operator)
    in_table = records[operator].isin(table.entries.index).to_numpy()
    assert (partitions == snapshot.route_many(operator, keys)).all()
    assert (partitions[in_table] == table.entries[keys[in_table]].to_numpy()).all()
    kafka_default = KafkaPartitioner(6).instances_of(keys[~in_table])
    assert (partitions[~in_table] == kafka_default).all()
    assert 0.2 < in_table.mean() < 0.95  # both kinds of key are there to check


def test_kafka_python_producer_with_the_table_partitioner(kafka_broker, kafka_store, kafka_tables):
    records = kafka_tables[2]
    kafka_broker.create_topic("hashtags-kafka-python", 6)
    with Router(kafka_store.root) as router:
        producer = KafkaProducer(
            bootstrap_servers=kafka_broker.bootstrap,
            key_serializer=DefaultSerializer("utf-8"),  # UTF-8, as Kafka's StringSerializer
            value_serializer=DefaultSerializer("utf-8"),
            partitioner=TablePartitioner(router, "hashtag"),
            linger_ms=20,
        )
        try:
            for key, value in zip(records["hashtag"], tweet_values(records)):
                producer.send("hashtags-kafka-python", key=key, value=value)
            producer.flush(timeout=120)
        finally:
            producer.close(timeout=30)
        read = read_topic(kafka_broker, "hashtags-kafka-python", len(records))
        check_partitions(records, read, router.snapshot(), "hashtag")


@pytest.mark.parametrize("operator", ["hashtag", "location"])
def test_confluent_kafka_producer_with_partition_for(kafka_broker, kafka_store, kafka_tables, operator):
    records, topic = kafka_tables[2], f"{operator}s-confluent"
    kafka_broker.create_topic(topic, 6)
    with Router(kafka_store.root) as router:
        partitioner = TablePartitioner(router, operator)
        producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 20})
        partitioner.check_partitions(len(producer.list_topics(topic, timeout=30).topics[topic].partitions), topic)
        for key, value in zip(records[operator], tweet_values(records)):
            producer.produce(topic, key=key, value=value, partition=partitioner.partition_for(key))
            producer.poll(0)
        assert producer.flush(120) == 0
        read = read_topic(kafka_broker, topic, len(records))
        check_partitions(records, read, router.snapshot(), operator)
