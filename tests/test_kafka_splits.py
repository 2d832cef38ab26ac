"""Split keys through the Kafka partitioner, checked against kafka-python's own partitioner and producer.

A split key's records go to the partition its plan names for the producer's
server; every other key as in ``tests/test_kafka.py``: its entry, else
kafka-python's ``DefaultPartitioner`` (Kafka's murmur2 formula).
"""

from __future__ import annotations

import doctest
import logging
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():  # kafka-python's import warns about importlib.resources
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer
    from kafka.partitioner import DefaultPartitioner
    from kafka.serializer import DefaultSerializer

import locality.engines.kafka as kafka_module
from locality.engines.kafka import TablePartitioner
from locality.errors import InvalidParameterError
from locality.hashing import make_fallback
from locality.router import Router, RoutingSnapshot
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore
from locality.topology import Topology
from tests.test_kafka import CASES, SERIALIZERS, TOPIC, P, cluster, int_keys, metadata, string_keys

OPERATORS = ["location", "hashtag"]
TOPOLOGY = Topology.uniform(OPERATORS, 6, P // 6)  # instance i on server s{i mod 6}


def split_table(keys: list, int_type: str, rng: np.random.Generator, topology: Topology = TOPOLOGY):
    """Entries for every fifth key, away from Kafka's partition, and 50 split keys (10 of them with an entry):
    a split key's part for server s is a random instance of s, so each server's part is another partition."""
    fallback = make_fallback("kafka", P, int_type=int_type)
    with_entry = keys[::5]
    default = fallback.instances_of(with_entry)
    entries = dict(zip(with_entry, ((default + rng.integers(1, P, size=len(with_entry))) % P).tolist()))
    hosts = topology.instance_servers("hashtag")
    on_server = [np.flatnonzero(hosts == s) for s in range(len(topology.servers))]
    splits = {k: [int(rng.choice(instances)) for instances in on_server] for k in keys[:50:5] + keys[1:201:5]}
    return RoutingTable("hashtag", fallback, entries, splits), entries, splits


def expected(keys: list, data: list[bytes], entries: dict, splits: dict, server: int | None) -> list[int]:
    """Where each record must go: the split plan's part for ``server``, else the entry, else kafka-python's."""
    kafka, meta = DefaultPartitioner(), cluster({TOPIC: P})
    return [
        splits[k][server]
        if server is not None and k in splits
        else entries[k]
        if k in entries
        else kafka.partition(TOPIC, k, d, None, None, meta)
        for k, d in zip(keys, data)
    ]


def configuration(table: RoutingTable, topology: Topology = TOPOLOGY) -> RoutingConfiguration:
    located = RoutingTable("location", make_fallback("kafka", P))
    return RoutingConfiguration(topology, {"location": located, "hashtag": table})


@pytest.mark.parametrize(("serializer", "n", "int_type"), CASES, ids=[c[0] for c in CASES])
def test_split_keys_go_to_the_part_on_the_producers_server(serializer, n, int_type):
    rng = np.random.default_rng({"string": 11, "long": 12, "int": 13}[serializer])
    n = n // 10
    keys = string_keys(rng, n) if serializer == "string" else int_keys(rng, n, 32 if int_type == "int" else 64)
    table, entries, splits = split_table(keys, int_type, rng)
    data = [SERIALIZERS[serializer](k) for k in keys]
    meta = cluster({TOPIC: P})
    snapshot = RoutingSnapshot(1, configuration(table), None, {})
    is_split = np.array([k in splits for k in keys])
    seen = set()
    for server, name in enumerate(TOPOLOGY.servers):
        want = expected(keys, data, entries, splits, server)
        by_position, by_name = (
            TablePartitioner(table, server=server),
            TablePartitioner(snapshot, "hashtag", server=name),
        )
        assert [by_position.partition(TOPIC, k, d, b"v", b"v", meta) for k, d in zip(keys, data)] == want
        assert [by_name.partition(TOPIC, k, d, b"v", b"v", meta) for k, d in zip(keys, data)] == want
        assert [by_name.partition_for(k) for k in keys] == [by_position.partition_for(d) for d in data] == want
        assert table.route_many(keys, np.full(len(keys), server)).tolist() == want
        parts = np.array(want)[is_split]
        assert (TOPOLOGY.instance_servers("hashtag")[parts] == server).all()  # every part is on the producer's server
        seen.update(zip(np.array(keys, dtype=object)[is_split].tolist(), parts.tolist()))
    assert is_split.sum() == 50 and len(seen) == 50 * 6  # each split key reached six partitions, one per server


def test_without_a_server_split_keys_go_home_and_a_warning_says_so_once(caplog):
    rng = np.random.default_rng(14)
    keys = string_keys(rng, 2000)
    table, entries, splits = split_table(keys, "long", rng)
    data = [k.encode() for k in keys]
    meta = cluster({TOPIC: P})
    with caplog.at_level(logging.WARNING, logger="locality.engines.kafka"):
        ours = TablePartitioner(table)
        got = [ours.partition(TOPIC, k, d, None, None, meta) for k, d in zip(keys, data)]
        got_for = [ours.partition_for(k) for k in keys]
    assert got == got_for == expected(keys, data, entries, splits, None) == table.route_many(keys).tolist()
    warned = [r.getMessage() for r in caplog.records]
    assert warned == [
        "the table of 'hashtag' splits 50 hot keys but the partitioner was given no 'server': "
        "their records go whole to their home partition"
    ]


def test_only_split_keys_still_decode_their_serialized_bytes():
    """A table whose only keys are split keys: the bytes must still be read as its (integer) keys."""
    fallback = make_fallback("kafka", P, int_type="int")
    table = RoutingTable("hashtag", fallback, None, {7: [3, 4, 5, 6, 7, 8], -2: [9, 10, 11, 12, 13, 14]})
    meta = cluster({TOPIC: P})
    ours = TablePartitioner(table, server=2)
    assert [ours.partition(TOPIC, k, SERIALIZERS["int"](k), None, None, meta) for k in (7, -2)] == [5, 11]
    assert ours.partition(TOPIC, 8, SERIALIZERS["int"](8), None, None, meta) == DefaultPartitioner().partition(
        TOPIC, 8, SERIALIZERS["int"](8), None, None, meta
    )


def test_a_real_kafka_producer_sends_split_keys_to_its_servers_part():
    rng = np.random.default_rng(15)
    keys = string_keys(rng, 1500)
    table, entries, splits = split_table(keys, "long", rng)
    records = keys + list(splits) * 3  # the split keys are the hot ones
    sent = {}
    for server in ("s1", "s4"):
        producer = KafkaProducer(
            bootstrap_servers="127.0.0.1:1",  # never reached: the metadata below is what a broker would answer
            api_version=(3, 0),
            key_serializer=DefaultSerializer("utf-8"),
            enable_idempotence=False,
            partitioner=TablePartitioner(RoutingSnapshot(1, configuration(table), None, {}), "hashtag", server=server),
        )
        try:
            producer._metadata.update_metadata(metadata({TOPIC: P}))
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no "partitioner does not implement Partitioner" fallback
                futures = [producer.send(TOPIC, key=k, value=b"x") for k in records]
            sent[server] = [f._produce_future.topic_partition.partition for f in futures]
        finally:
            producer._accumulator.abort_incomplete_batches()
            producer.close(timeout=10)  # its batches aborted: the sender ends at once and closes its sockets
    data = [k.encode() for k in records]
    assert sent["s1"] == expected(records, data, entries, splits, 1)
    assert sent["s4"] == expected(records, data, entries, splits, 4)
    differ = [a != b for a, b, k in zip(sent["s1"], sent["s4"], records) if k in splits]
    assert len(differ) == 200 and all(differ)  # the split keys' records, and only them, depend on the server
    assert [a for a, k in zip(sent["s1"], records) if k not in splits] == [
        b for b, k in zip(sent["s4"], records) if k not in splits
    ]


def test_follows_the_router_and_finds_the_server_in_each_versions_topology(tmp_path):
    keys = [f"#tag{i}" for i in range(40)]
    fallback = make_fallback("kafka", P)
    default = fallback.instances_of(keys).tolist()
    hot = keys[:4]
    plan = {k: [(i + 6 * (j % 4)) for i in range(6)] for j, k in enumerate(hot)}  # part s on server s{s}
    reordered = Topology(list(reversed(TOPOLOGY.servers)), OPERATORS, TOPOLOGY.placement)
    # in the reordered version, position p names server s{5 - p}: its part for p must be an instance of s{5 - p}
    plan_reordered = {k: [r[5 - p] for p in range(6)] for k, r in plan.items()}
    store = ConfigStore(tmp_path / "store")
    store.publish(configuration(RoutingTable("hashtag", fallback)), fingerprint="v1")
    router = Router(store.root)
    ours, meta = TablePartitioner(router, "hashtag", server="s4"), cluster({TOPIC: P})

    def sent() -> list[int]:
        return [ours.partition(TOPIC, k, k.encode(), None, None, meta) for k in keys]

    assert sent() == default
    store.publish(configuration(RoutingTable("hashtag", fallback, None, plan)), fingerprint="v2")
    assert sent() == default  # not refreshed yet
    assert router.refresh() is True
    assert sent() == [plan[k][4] if k in plan else d for k, d in zip(keys, default)]
    store.publish(configuration(RoutingTable("hashtag", fallback, None, plan_reordered), reordered), fingerprint="v3")
    assert router.refresh() is True
    # 's4' is now at position 1: its part is the same instance as before, found through the new topology
    assert sent() == [plan_reordered[k][1] if k in plan else d for k, d in zip(keys, default)]
    assert [plan_reordered[k][1] for k in hot] == [plan[k][4] for k in hot]
    four = Topology.uniform(OPERATORS, 4, P // 4)
    store.publish(
        configuration(RoutingTable("hashtag", fallback, None, {"#tag0": [0, 1, 2, 3]}), four), fingerprint="v4"
    )
    assert router.refresh() is True
    with pytest.raises(
        InvalidParameterError,
        match=r"'server' parameter of TablePartitioner must be one of \['s0', 's1', 's2', 's3'\]; got 's4'",
    ):
        ours.partition_for("#tag0")


def test_refuses_a_server_it_cannot_place():
    table = RoutingTable("hashtag", make_fallback("kafka", P), {"a": 1}, {"hot": [0, 1, 2, 3, 4, 5]})
    snapshot = RoutingSnapshot(1, configuration(table), None, {})
    with pytest.raises(InvalidParameterError, match=r"'server' parameter of TablePartitioner must be one of"):
        TablePartitioner(snapshot, "hashtag", server="s9")
    with pytest.raises(InvalidParameterError, match=r"must be a server position with a routing table alone.*got 's1'"):
        TablePartitioner(table, server="s1")
    with pytest.raises(InvalidParameterError, match=r"'server' parameter of TablePartitioner must be an int >= 0 "):
        TablePartitioner(table, server=6)
    for bad in (-1, True, 1.5, b"s1"):
        with pytest.raises(InvalidParameterError, match=r"'server' parameter of TablePartitioner must be an int"):
            TablePartitioner(table, server=bad)
    # a table without split keys takes any position (it has no plan to bound it) and routes as without one
    plain = RoutingTable("hashtag", make_fallback("kafka", P), {"a": 1})
    assert TablePartitioner(plain, server=40).partition_for("a") == 1
    assert repr(TablePartitioner(snapshot, "hashtag", server="s2")) == (
        "TablePartitioner(operator='hashtag', source=router, server='s2')"
    )


def test_docstring_examples():
    assert doctest.testmod(kafka_module).failed == 0
