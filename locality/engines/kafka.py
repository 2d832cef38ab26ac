"""Apache Kafka: a partitioner that follows a routing table.

:class:`TablePartitioner` sends table keys to their table partition and
every other key where Kafka's default partitioner puts it
(:class:`~locality.hashing.kafka.KafkaPartitioner`), for kafka-python's
``KafkaProducer(partitioner=...)`` and for clients that take an explicit
partition (confluent-kafka). Partition *i* of a topic feeds instance *i* of the
stage that consumes it (``docs/engines/kafka.md``). A table's split keys go to
the partition their plan names for the producer's server (``server=``). The
Java twin, of the same name, partitions Kafka Streams topics (``jvm/locality-kafka-streams``).
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, NamedTuple

from locality._validation import check_integer
from locality.engines._source import server_position
from locality.errors import InvalidParameterError
from locality.hashing.kafka import KafkaPartitioner
from locality.router import Router, RoutingSnapshot
from locality.routing import RoutingTable

__all__ = ["TablePartitioner"]

logger = logging.getLogger(__name__)


class TablePartitioner:
    """Kafka partitions that follow a routing table: its entry, else exactly Kafka's default partition.

    Partition *i* of the topic feeds instance *i* of the stateful stage that
    consumes it, so a table entry ``key -> instance`` is the record's partition
    and every other key goes where Kafka's default partitioner sends it
    (``toPositive(murmur2(keyBytes)) % numPartitions``). Use it two ways:

    - kafka-python: ``KafkaProducer(partitioner=TablePartitioner(...))``.
      The producer calls :meth:`partition` with the *serialized* key, which is
      matched against the table on the bytes the usual serializers write:
      UTF-8 for string tables (Kafka's ``StringSerializer``), 8-byte big-endian
      for integer tables (``LongSerializer``) or 4-byte with ``int_type="int"``
      (``IntegerSerializer``), as :class:`KafkaPartitioner` hashes them.
    - any client that takes an explicit partition (confluent-kafka's
      ``produce(topic, key=..., value=..., partition=p.partition_for(key))``):
      :meth:`partition_for` takes the key itself or its serialized bytes.
      librdkafka's default partitioner hashes with CRC32, not murmur2, so these
      clients must pass the partition for keys without an entry too.

    A table may split hot keys (:class:`~locality.routing.RoutingTable`
    ``splits``): a split key's records go to the partition its plan names for
    the server the producer runs on (the server of the records' upstream
    key), so the producer must say which one that is (``server``). Without it
    split keys go whole to their home partition, and a warning says so once.

    Parameters
    ----------
    source : Router, RoutingSnapshot or RoutingTable
        Where the table comes from. A :class:`~locality.router.Router` is asked
        for its current table at every record, so a refresh takes effect on the
        next record; a table or a snapshot is fixed.
    operator : str, optional
        The operator whose instances the topic's partitions are. Required with
        a router or a snapshot; with a table, defaults to the table's operator.
    server : str or int, optional
        The server this producer runs on: a server name of the topology or its
        position in ``topology.servers``. With a router or a snapshot a name
        is looked up in the topology of the version in force at each record
        (a new version may list the servers in another order); a table has no
        topology, so it takes a position only.

    Raises
    ------
    InvalidParameterError
        If ``source`` is none of those, ``operator`` is missing or unknown, the
        table's fallback is not Kafka's partitioner (a table built with
        another ``--hash`` names other instances for the keys it left out), or
        ``server`` is not a server of the topology (or a position of the split
        plans).

    Notes
    -----
    kafka-python 3 calls a partitioner that is a ``kafka.partitioner.Partitioner``;
    this class is registered as one (a virtual subclass) when kafka-python is
    installed, so ``locality`` does not need kafka-python to import. Records
    without a key carry no state key: they go where kafka-python's own
    ``DefaultPartitioner`` sends them.

    Sources in apache/kafka: ``clients/.../producer/internals/BuiltInPartitioner.java``
    (``partitionForKey``), ``common/serialization/StringSerializer.java``,
    ``LongSerializer.java``, ``IntegerSerializer.java``; kafka-python:
    ``kafka/partitioner/abc.py``, ``kafka/partitioner/default.py``.

    Examples
    --------
    >>> from locality.hashing import make_fallback
    >>> from locality.routing import RoutingTable
    >>> table = RoutingTable("region", make_fallback("kafka", 12), {"hello": 0})
    >>> p = TablePartitioner(table)
    >>> p.partition_for("hello"), p.partition_for(b"hello"), p.partition_for("paris")
    (0, 0, 11)
    >>> split = RoutingTable("region", make_fallback("kafka", 12), {"hello": 0}, {"paris": [3, 7]})
    >>> TablePartitioner(split, server=1).partition_for("paris")
    7
    """

    def __init__(
        self,
        source: Router | RoutingSnapshot | RoutingTable,
        operator: str | None = None,
        *,
        server: str | int | None = None,
    ) -> None:
        owner = "TablePartitioner"
        if isinstance(source, (Router, RoutingSnapshot)):
            if operator is None:
                raise InvalidParameterError(
                    f"the 'operator' parameter of {owner} is required with a router", parameter="operator"
                )
            self._source, self._fixed, self.operator = source, None, operator
        elif isinstance(source, RoutingTable):
            if operator is not None and operator != source.operator:
                raise InvalidParameterError(
                    f"the 'operator' parameter of {owner} must be the table's ({source.operator!r}); got {operator!r}",
                    parameter="operator",
                )
            self._source, self._fixed, self.operator = None, source, source.operator
        else:
            raise InvalidParameterError(
                f"the 'source' parameter of {owner} must be a Router, a RoutingSnapshot or a RoutingTable; "
                f"got {type(source).__name__}",
                parameter="source",
            )
        if server is not None and not isinstance(server, str):
            server = check_integer(server, "server", owner, lower=0)
        self.server = server
        self._checked: _InForce | None = None  # replaced whole, so a reader on another thread sees one version
        self._warned_width = self._warned_whole = False
        self._in_force()  # fail now on an unknown operator or server, or a table that is not Kafka's
        _register_with_kafka_python(type(self))

    def table(self) -> RoutingTable:
        """The routing table in force (the router's current one)."""
        return self._in_force().table

    def _in_force(self) -> _InForce:
        """The table in force, checked, with this producer's server position in its version."""
        if self._source is None:
            table, servers = self._fixed, None
        else:
            snapshot = self._source.snapshot() if isinstance(self._source, Router) else self._source
            table, servers = snapshot.table(self.operator), snapshot.configuration.topology.servers
        checked = self._checked
        if checked is not None and checked.table is table:
            return checked
        if not isinstance(table.fallback, KafkaPartitioner):
            raise InvalidParameterError(
                f"the routing table of {self.operator!r} falls back to {table.fallback.engine!r}, not Kafka's "
                "partitioner: "
                "its keys without an entry would go elsewhere than the table assumes; "
                "publish tables built on the 'kafka' hash"
            )
        server = None
        if self.server is not None:
            server = server_position(self.server, servers, table.n_servers, "TablePartitioner")
        elif table.splits and not self._warned_whole:
            logger.warning(
                "the table of %r splits %d hot keys but the partitioner was given no 'server': "
                "their records go whole to their home partition",
                self.operator,
                len(table.splits),
            )
            self._warned_whole = True
        self._checked = checked = _InForce(table, server, table.key_kind)
        return checked

    def check_partitions(self, n_partitions: int, topic: str = "the topic") -> None:
        """Raise unless ``topic`` has as many partitions as the table has instances.

        Raises
        ------
        InvalidParameterError
            If the numbers differ: partition *i* must be instance *i*, so
            a topic with more or fewer partitions cannot follow the table.
        """
        n_instances = self.table().fallback.n_instances
        if n_partitions != n_instances:
            raise InvalidParameterError(
                f"{topic} has {n_partitions} partitions but the routing table of {self.operator!r} has "
                f"{n_instances} instances; partition i is instance i, so they must be equal "
                "(create the topic with that many partitions, or publish tables for this many instances)"
            )

    def partition_for(self, key: str | int | bytes) -> int:
        """Partition of one record's key.

        Parameters
        ----------
        key : str, int or bytes
            The key before serialization (as the table holds it), or the bytes
            the key serializer wrote.

        Returns
        -------
        int
            The table's instance for a key with an entry; Kafka's default
            partition for every other key.

        Raises
        ------
        InvalidParameterError
            If ``key`` is of another type (see :meth:`RoutingTable.route`).
        """
        now = self._in_force()
        if isinstance(key, (bytes, bytearray, memoryview)):
            return self._partition_of_bytes(now, bytes(key))
        return now.table.route(key, now.server)

    def partition(
        self,
        topic: str,
        key: Any,
        serialized_key: bytes | None,
        value: Any,
        serialized_value: bytes | None,
        cluster: Any,
    ) -> int:
        """kafka-python's ``Partitioner.partition``: the partition of one record.

        Parameters
        ----------
        topic : str
        key, value : any
            The record before serialization (unused but for records without a key).
        serialized_key : bytes or None
            The key as the producer's key serializer wrote it.
        serialized_value : bytes or None
        cluster : kafka.cluster.ClusterMetadata
            The producer's view of the cluster.

        Returns
        -------
        int

        Raises
        ------
        ValueError
            If the topic is not in the cluster metadata (as kafka-python's own partitioners).
        InvalidParameterError
            If the topic's partition count is not the table's instance count.
        """
        partitions = cluster.partitions_for_topic(topic)
        if partitions is None:
            raise ValueError(f"Topic {topic} not found in ClusterMetadata")
        self.check_partitions(len(partitions), f"topic {topic!r}")
        if serialized_key is None:
            from kafka.partitioner import DefaultPartitioner

            return DefaultPartitioner().partition(topic, key, None, value, serialized_value, cluster)
        return self._partition_of_bytes(self._in_force(), bytes(serialized_key))

    def _partition_of_bytes(self, now: _InForce, data: bytes) -> int:
        key = self._table_key(now, data)
        return now.table.fallback.partition_of(data) if key is None else now.table.route(key, now.server)

    def _table_key(self, now: _InForce, data: bytes) -> str | int | None:
        """The table key these serialized bytes are, or None if they cannot be one.

        Decoding is exact both ways (strict UTF-8; fixed-width two's complement),
        so a decoded key not in the table gets the very partition of ``data``.
        """
        table = now.table
        if now.key_kind == "string":
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                return None
        if now.key_kind == "integer":
            width = 4 if table.fallback.int_type == "int" else 8
            if len(data) == width:
                return int.from_bytes(data, "big", signed=True)
            if not self._warned_width:
                logger.warning(
                    "the table of %r holds integer keys serialized in %d bytes (int_type=%r) but a key of %d bytes "
                    "came in: such keys get Kafka's default partition, never their table entry",
                    self.operator,
                    width,
                    table.fallback.int_type,
                    len(data),
                )
                self._warned_width = True
        return None

    def __repr__(self) -> str:
        server = "" if self.server is None else f", server={self.server!r}"
        source = "table" if self._source is None else "router"
        return f"TablePartitioner(operator={self.operator!r}, source={source}{server})"


class _InForce(NamedTuple):
    """A partitioner's table as last checked, its server's position there, and the kind of its keys."""

    table: RoutingTable
    server: int | None
    key_kind: str | None


def _register_with_kafka_python(cls: type) -> None:
    """Make ``cls`` a ``kafka.partitioner.Partitioner`` so that kafka-python 3 calls its ``partition``."""
    try:
        with warnings.catch_warnings():  # kafka-python's own import warns about importlib.resources
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka.partitioner import Partitioner
    except ImportError:  # no kafka-python: partition_for still serves other clients
        return
    Partitioner.register(cls)
