"""A real Kafka broker for the tests: KRaft, one node, on loopback, from Maven Central's jars.

``make test`` builds ``jvm/examples/locality-kafka-streams-examples``, whose test-scope dependency ``kafka_2.13``
brings the broker; Maven writes its classpath to ``target/broker-classpath.txt``. The
session fixture :func:`kafka_broker` formats a fresh log directory of its own, starts the
broker (combined broker and controller) on two free ports of 127.0.0.1, waits with a bound
until it answers a metadata request, and at the end stops it and removes its directory, also
when a test failed. A broker that exits or does not answer in time fails the tests with the
tail of its log. The benchmarks start one the same way (:func:`running_broker`).

The fixtures below also hold what the Kafka tests share: tables learned with ``--hash kafka``
on the first half of the tweet trace, published in a store, and helpers to create topics and
read every record of a topic back.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from locality.store import ConfigStore
from testbed.kafka import BROKER_CLASSPATH, CLUSTER_ID, JVM_OPTIONS, broker_properties, stop_process
from tests.conftest import tables_from_first_half
from tests.jvm.conftest import JVM, java

STARTUP_TIMEOUT = 120.0  # seconds; a first start on a busy 2-core machine takes about 10


@dataclass(frozen=True)
class KafkaBroker:
    """A running broker: where to reach it and its directory (config, data, log)."""

    bootstrap: str
    root: Path

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})  # errors only on stderr

    def create_topic(self, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
        """Create ``name`` with ``partitions`` partitions (one replica), waiting until the broker confirms."""
        admin = self.admin()  # held until the result is in: a collected client cancels its requests
        topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})
        futures = admin.create_topics([topic])
        futures[name].result(timeout=60)


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _log_tail(path: Path, lines: int = 40) -> str:
    text = path.read_text(errors="replace") if path.is_file() else ""
    return "\n".join(text.splitlines()[-lines:])


def _wait_until_answers(process: subprocess.Popen, port: int, log: Path) -> None:
    """Return once the broker on ``port`` lists itself in a metadata response; fail past STARTUP_TIMEOUT."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0})
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the Kafka broker exited with {process.returncode}:\n{_log_tail(log)}", pytrace=False)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            if admin.list_topics(timeout=5).brokers:
                return
        except Exception:  # not listening yet, or not answering metadata yet
            pass
        time.sleep(0.5)
    pytest.fail(f"the Kafka broker did not answer within {STARTUP_TIMEOUT:.0f} s:\n{_log_tail(log)}", pytrace=False)


@contextmanager
def running_broker() -> Iterator[KafkaBroker]:
    """A fresh one-node KRaft broker on 127.0.0.1, stopped and its directory removed on leaving."""
    if not BROKER_CLASSPATH.is_file():
        pytest.fail(
            f"the Kafka broker's classpath {BROKER_CLASSPATH} is missing: run `make test` "
            f"or `mvn -f {JVM}/pom.xml install`",
            pytrace=False,
        )
    root = Path(tempfile.mkdtemp(prefix="locality-kafka-"))
    process = None
    try:
        port, controller_port = free_port(), free_port()
        config = root / "server.properties"
        config.write_text(broker_properties(root / "data", port, controller_port))
        command = [java(), *JVM_OPTIONS, "-cp", BROKER_CLASSPATH.read_text().strip()]
        log = root / "broker.log"
        formatted = subprocess.run(
            [*command, "kafka.tools.StorageTool", "format", "-t", CLUSTER_ID, "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=STARTUP_TIMEOUT,
        )
        if formatted.returncode != 0:
            pytest.fail(f"formatting the broker's storage failed:\n{formatted.stdout}{formatted.stderr}", pytrace=False)
        with open(log, "wb") as out:
            process = subprocess.Popen([*command, "kafka.Kafka", str(config)], stdout=out, stderr=subprocess.STDOUT)
        _wait_until_answers(process, port, log)
        yield KafkaBroker(f"127.0.0.1:{port}", root)
    finally:
        if process is not None:
            stop_process(process)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def kafka_broker():
    """A fresh one-node KRaft broker on 127.0.0.1, stopped and removed after the session."""
    with running_broker() as broker:
        yield broker


def read_topic(broker: KafkaBroker, topic: str, expected: int, timeout: float = 120.0) -> pd.DataFrame:
    """Every record of ``topic`` from the start of each partition: columns partition, key, value (text).

    Reads until ``expected`` records came, then a second more to catch any extra; fails when fewer came
    within ``timeout`` seconds.
    """
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        rows: list[tuple[int, str, str]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            batch = consumer.consume(num_messages=10_000, timeout=1.0 if len(rows) >= expected else 0.5)
            for message in batch:
                if message.error():
                    pytest.fail(f"reading {topic}: {message.error()}", pytrace=False)
                rows.append((message.partition(), message.key().decode(), message.value().decode()))
            if len(rows) >= expected and not batch:
                break
    finally:
        consumer.close()
    if len(rows) < expected:
        pytest.fail(f"{topic}: {len(rows):,} of {expected:,} records within {timeout:.0f} s", pytrace=False)
    return pd.DataFrame(rows, columns=["partition", "key", "value"])


def tweet_values(records: pd.DataFrame) -> list[str]:
    """The value of each tweet record as the Kafka tests produce it: JSON with its seq and both keys."""
    return [
        json.dumps({"seq": s, "location": loc, "hashtag": tag})
        for s, loc, tag in records[["seq", "location", "hashtag"]].itertuples(index=False)
    ]


@pytest.fixture(scope="session")
def kafka_tables(geotweets):
    """Tables for location -> hashtag on 6 servers learned with ``--hash kafka`` from the first half of the tweet
    trace (by ``seq``); returns (configuration, first half, second half: the records the tests produce)."""
    return tables_from_first_half(geotweets, ["location", "hashtag"], "kafka")


@pytest.fixture(scope="session")
def kafka_store(kafka_tables):
    """A store whose current version holds :func:`kafka_tables` (what ``locality optimize`` publishes)."""
    root = Path(tempfile.mkdtemp(prefix="locality-kafka-store-"))
    try:
        store = ConfigStore(root)
        store.publish(kafka_tables[0], fingerprint="tweets-first-half-kafka")
        yield store
    finally:
        shutil.rmtree(root, ignore_errors=True)
