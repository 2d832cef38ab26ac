"""The Kafka page's complete program runs on the drop-in jar and counts every hashtag.

``io.locality.examples.kafka.HashtagCounts`` (``jvm/examples``, compiled against the Kafka Streams drop-in
jar and quoted whole by docs/engines/kafka.md) counts the hashtags of topic ``hashtags`` into
``hashtag-counts``. One instance runs it on the real broker of the Kafka tests, over the store of the tweet
tables (6 servers: the assignor gives the tasks of the five servers without an instance to it), on 3,000
records of the trace's second half produced by location's table.
"""

from __future__ import annotations

import collections
import subprocess
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from locality.engines.kafka import TablePartitioner
from locality.router import Router
from testbed.kafka import JVM_OPTIONS, stop_process
from tests.jvm.conftest import KAFKA_EXAMPLES, classpath, java

RECORDS = 3_000
TIMEOUT = 180.0
APP = "io.locality.examples.kafka.HashtagCounts"


def read_all(broker, topic: str, done) -> list:
    """Every message of ``topic`` from its start, read until ``done(messages)`` holds (bounded)."""
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"read-{topic}", "auto.offset.reset": "earliest"}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        messages: list = []
        deadline = time.monotonic() + TIMEOUT
        while not done(messages):
            assert time.monotonic() < deadline, f"{topic}: {len(messages):,} records within {TIMEOUT:.0f} s"
            for message in consumer.consume(num_messages=10_000, timeout=1.0):
                assert not message.error(), message.error()
                messages.append(message)
        return messages
    finally:
        consumer.close()


def test_the_kafka_page_program_counts_every_hashtag(kafka_broker, kafka_store, kafka_tables, tmp_path):
    records = kafka_tables[2].iloc[:RECORDS]
    with Router(kafka_store.root) as router:
        snapshot = router.snapshot()
    kafka_broker.create_topic("hashtags", 6)
    kafka_broker.create_topic("hashtag-counts", 6)
    # its state under the test's own folder: Kafka Streams keeps it in java.io.tmpdir/kafka-streams by default
    command = [java(), *JVM_OPTIONS, f"-Djava.io.tmpdir={tmp_path}", "-cp", classpath(KAFKA_EXAMPLES), APP]
    command += [str(kafka_store.root), "s0"]
    with open(tmp_path / "app.log", "wb") as log:
        app = subprocess.Popen([*command, kafka_broker.bootstrap], stdout=log, stderr=subprocess.STDOUT)
    try:
        by_location = TablePartitioner(snapshot, "location")
        producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 20})
        for location, hashtag in zip(records["location"], records["hashtag"]):
            producer.produce("hashtags", key=location, value=hashtag, partition=by_location.partition_for(location))
        assert producer.flush(60) == 0
        wanted = collections.Counter(records["hashtag"])

        def final_counts(messages) -> dict:
            counts: dict = {}
            for message in messages:  # each hashtag's updates come in order: its last is its count
                counts[message.key().decode()] = int.from_bytes(message.value(), "big", signed=True)
            return counts

        counts = final_counts(read_all(kafka_broker, "hashtag-counts", lambda got: final_counts(got) == wanted))
        assert app.poll() is None, (tmp_path / "app.log").read_text()[-3000:]
    finally:
        stop_process(app)
    assert counts == wanted  # (Kafka Streams purges its repartition topic: the partitions are test_streams_app's)
