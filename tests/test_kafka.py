"""Kafka partitions from routing tables, checked against kafka-python's own partitioner and producer.

The oracle is kafka-python's ``DefaultPartitioner`` (Kafka's murmur2 formula) run
on a real ``ClusterMetadata``, on 110k keys far from any trace, and a real
``KafkaProducer`` whose cluster metadata is set as a broker's metadata response would
set it. Records produced through a real broker (kafka-python, confluent-kafka, a
Kafka Streams app) are checked in ``tests/kafka/``.
"""

from __future__ import annotations

import logging
import struct
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():  # kafka-python's import warns about importlib.resources
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer
    from kafka.cluster import ClusterMetadata
    from kafka.partitioner import DefaultPartitioner, Partitioner
    from kafka.protocol.metadata import MetadataResponse
    from kafka.serializer import DefaultSerializer

from locality.engines.kafka import TablePartitioner
from locality.errors import InvalidParameterError
from locality.hashing import make_fallback
from locality.router import Router
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore
from locality.topology import Topology

TOPIC = "hashtags"
P = 24  # partitions = instances

# Kafka's serializers (org.apache.kafka.common.serialization): StringSerializer writes UTF-8,
# LongSerializer 8 bytes big-endian, IntegerSerializer 4 bytes big-endian.
SERIALIZERS = {
    "string": lambda k: k.encode("utf-8"),
    "long": lambda k: struct.pack(">q", k),
    "int": lambda k: struct.pack(">i", k),
}
ALPHABET = list("abcxyz019_#-") + ["é", "ß", "ñ", "中", "日", "ж", "🙂", "𝄞", "😀", "\u0301"]


def metadata(partitions: dict[str, int]) -> MetadataResponse:
    """The metadata response a one-broker cluster sends for these topics (every partition led by broker 0)."""
    r, t = MetadataResponse, MetadataResponse.MetadataResponseTopic
    part = t.MetadataResponsePartition
    topics = [
        t(
            version=1,
            error_code=0,
            name=name,
            is_internal=False,
            partitions=[
                part(
                    version=1,
                    error_code=0,
                    partition_index=i,
                    leader_id=0,
                    leader_epoch=0,
                    replica_nodes=[0],
                    isr_nodes=[0],
                    offline_replicas=[],
                )
                for i in range(n)
            ],
        )
        for name, n in partitions.items()
    ]
    broker = r.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=1, rack=None, version=1)
    return r(version=1, throttle_time_ms=0, brokers=[broker], controller_id=0, topics=topics)


def cluster(partitions: dict[str, int]) -> ClusterMetadata:
    c = ClusterMetadata()
    c.update_metadata(metadata(partitions))
    return c


def string_keys(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` distinct strings of 0 to 20 characters, with non-ASCII and non-BMP characters."""
    seen: dict[str, None] = {"": None}
    while len(seen) < n:
        lengths = rng.integers(1, 20, size=n - len(seen), endpoint=True)
        chars = np.array(ALPHABET)[rng.integers(0, len(ALPHABET), size=int(lengths.sum()))].tolist()
        ends = np.cumsum(lengths).tolist()
        seen.update(dict.fromkeys("".join(chars[end - length : end]) for end, length in zip(ends, lengths.tolist())))
    return list(seen)[:n]


def int_keys(rng: np.random.Generator, n: int, bits: int) -> list[int]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    edges = [low, low + 1, -1, 0, 1, high - 1, high]
    values = rng.integers(low, high, size=n, endpoint=True, dtype=np.int64).tolist()
    return list(dict.fromkeys(edges + values))[:n]


def keyed_table(operator: str, keys: list, int_type: str, rng: np.random.Generator) -> tuple[RoutingTable, dict]:
    """A table for every fifth key, each sent to a partition other than Kafka's default one."""
    fallback = make_fallback("kafka", P, int_type=int_type)
    chosen = keys[::5]
    default = fallback.instances_of(chosen)
    entries = dict(zip(chosen, ((default + rng.integers(1, P, size=len(chosen))) % P).tolist()))
    table = RoutingTable(operator, fallback, entries)
    assert len(table) == len(entries)  # none equals the default: every one moves a key
    return table, entries


CASES = [("string", 60_000, "long"), ("long", 25_000, "long"), ("int", 25_000, "int")]


@pytest.mark.parametrize(("serializer", "n", "int_type"), CASES, ids=[c[0] for c in CASES])
def test_agrees_with_kafka_python_default_partitioner(serializer, n, int_type):
    """110k keys in all: 100% of the keys without an entry where kafka-python puts them, 100% of table keys on
    their entry."""
    rng = np.random.default_rng({"string": 1, "long": 2, "int": 3}[serializer])
    keys = string_keys(rng, n) if serializer == "string" else int_keys(rng, n, 32 if int_type == "int" else 64)
    assert len(keys) == n
    table, entries = keyed_table("op", keys, int_type, rng)
    serialize = SERIALIZERS[serializer]
    meta = cluster({TOPIC: P})
    ours, kafka = TablePartitioner(table), DefaultPartitioner()
    data = [serialize(k) for k in keys]
    got = [ours.partition(TOPIC, k, d, b"v", b"v", meta) for k, d in zip(keys, data)]
    default = [kafka.partition(TOPIC, k, d, b"v", b"v", meta) for k, d in zip(keys, data)]
    in_table = np.array([k in entries for k in keys])
    agree = np.array(got) == np.array(default)
    on_entry = np.array([g == entries.get(k) for k, g in zip(keys, got)])
    assert in_table.sum() == len(entries) == len(keys[::5])
    assert agree[~in_table].sum() == (~in_table).sum()  # 100% of the keys without an entry
    assert on_entry[in_table].sum() == in_table.sum() and not agree[in_table].any()  # 100% of table keys
    # the same through partition_for, given the key or its bytes
    assert [ours.partition_for(k) for k in keys] == got
    assert [ours.partition_for(d) for d in data] == got
    assert table.route_many(keys).tolist() == got


def test_bytes_no_serializer_wrote_go_where_kafka_puts_them(caplog):
    rng = np.random.default_rng(4)
    strings, longs = string_keys(rng, 500), int_keys(rng, 500, 64)
    raw = [rng.bytes(int(n)) for n in rng.integers(1, 40, size=5000)]  # mostly invalid UTF-8, any length
    raw += [b"\xed\xa0\x80", b"\xc0\xaf", b"\xff"]  # a UTF-8 surrogate, an overlong '/', a lone byte
    raw += [struct.pack(">i", k) for k in range(-50, 50)]  # an Integer where a Long is expected
    meta, kafka = cluster({TOPIC: P}), DefaultPartitioner()
    with caplog.at_level(logging.WARNING, logger="locality.engines.kafka"):
        for keys, serializer in ((strings, "string"), (longs, "long")):
            table, entries = keyed_table("op", keys, "long", rng)
            assert not {SERIALIZERS[serializer](k) for k in entries} & set(raw)  # none is a table key's bytes
            ours = TablePartitioner(table)
            assert [ours.partition(TOPIC, None, d, None, None, meta) for d in raw] == [
                kafka.partition(TOPIC, None, d, None, None, meta) for d in raw
            ]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "serialized in 8 bytes" in warned[0]  # once, for the integer table


def test_a_real_kafka_producer_calls_it_with_serialized_keys():
    rng = np.random.default_rng(5)
    keys = string_keys(rng, 3000)
    table, entries = keyed_table("hashtag", keys, "long", rng)
    ours = TablePartitioner(table)
    assert isinstance(ours, Partitioner)  # kafka-python 3 calls partition() only on a Partitioner
    producer = KafkaProducer(
        bootstrap_servers="127.0.0.1:1",  # never reached: the metadata below is what a broker would answer
        api_version=(3, 0),
        key_serializer=DefaultSerializer("utf-8"),  # kafka-python's StringSerializer
        enable_idempotence=False,
        partitioner=ours,
    )
    try:
        producer._metadata.update_metadata(metadata({TOPIC: P}))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "partitioner does not implement Partitioner" fallback
            futures = [producer.send(TOPIC, key=k, value=b"x") for k in keys]
        sent = [f._produce_future.topic_partition.partition for f in futures]
    finally:
        producer._accumulator.abort_incomplete_batches()
        producer.close(timeout=0)
    kafka = DefaultPartitioner()
    meta = cluster({TOPIC: P})
    expected = [entries[k] if k in entries else kafka.partition(TOPIC, k, k.encode(), None, None, meta) for k in keys]
    assert sent == expected


def test_follows_the_router_from_the_next_record(tmp_path):
    keys = [f"#tag{i}" for i in range(40)]
    fallback = make_fallback("kafka", P)
    default = fallback.instances_of(keys)

    def config(shift: int) -> RoutingConfiguration:
        tables = {
            "location": RoutingTable("location", fallback),
            "hashtag": RoutingTable("hashtag", fallback, dict(zip(keys, ((default + shift) % P).tolist()))),
        }
        return RoutingConfiguration(Topology.uniform(["location", "hashtag"], 6, P // 6), tables)

    store = ConfigStore(tmp_path / "store")
    store.publish(config(1), fingerprint="v1")
    router = Router(store.root)
    ours, meta = TablePartitioner(router, "hashtag"), cluster({TOPIC: P})
    assert [ours.partition(TOPIC, k, k.encode(), None, None, meta) for k in keys] == ((default + 1) % P).tolist()
    store.publish(config(2), fingerprint="v2")
    assert ours.partition_for(keys[0]) == (default[0] + 1) % P  # not refreshed yet
    assert router.refresh() is True
    assert [ours.partition(TOPIC, k, k.encode(), None, None, meta) for k in keys] == ((default + 2) % P).tolist()
    assert [ours.partition_for(k) for k in keys] == ((default + 2) % P).tolist()


def test_refuses_what_cannot_follow_the_table(tmp_path):
    table = RoutingTable("hashtag", make_fallback("kafka", P), {"a": 1})
    ours = TablePartitioner(table)
    with pytest.raises(
        InvalidParameterError, match=r"topic 'hashtags' has 12 partitions but the routing table of 'hashtag' has 24"
    ):
        ours.partition(TOPIC, "a", b"a", None, None, cluster({TOPIC: 12}))
    with pytest.raises(ValueError, match="Topic other not found"):
        ours.partition("other", "a", b"a", None, None, cluster({TOPIC: P}))
    ours.check_partitions(P)
    with pytest.raises(InvalidParameterError, match="has 25 partitions"):
        ours.check_partitions(25)
    with pytest.raises(InvalidParameterError, match="falls back to 'storm'"):
        TablePartitioner(RoutingTable("hashtag", make_fallback("storm", P), {"a": 1}))
    with pytest.raises(InvalidParameterError, match="must be the table's"):
        TablePartitioner(table, "location")
    with pytest.raises(InvalidParameterError, match="'source' parameter of TablePartitioner"):
        TablePartitioner({"a": 1})
    store = ConfigStore(tmp_path / "store")
    topo = Topology.uniform(["location", "hashtag"], 6, P // 6)
    store.publish(
        RoutingConfiguration(topo, {"location": RoutingTable("location", table.fallback), "hashtag": table}),
        fingerprint="x",
    )
    with pytest.raises(InvalidParameterError, match="'operator' parameter of TablePartitioner is required"):
        TablePartitioner(Router(store.root))
    with pytest.raises(InvalidParameterError, match=r"must be one of \['location', 'hashtag'\]"):
        TablePartitioner(Router(store.root), "user")
    with pytest.raises(InvalidParameterError, match="must be a str or an int"):
        ours.partition_for(1.5)
    # records without a key carry no state: kafka-python's default spreads them over the available partitions
    assert {ours.partition(TOPIC, None, None, b"v", b"v", cluster({TOPIC: P})) for _ in range(200)} <= set(range(P))
