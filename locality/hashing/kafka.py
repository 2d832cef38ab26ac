"""Apache Kafka: the default partitioner of keyed records, reproduced bit for bit.

Keys without a table entry must land where Kafka itself puts them:
``toPositive(murmur2(serializedKey)) % numPartitions`` (:class:`KafkaPartitioner`).
The partitioner that follows a routing table is
:class:`locality.engines.kafka.TablePartitioner`.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from locality.errors import InvalidParameterError
from locality.hashing.jvm import JavaEngine
from locality.hashing.primitives import M32, Words, bswap32, murmur2_final, murmur2_step, murmur2_tail, signed32

__all__ = ["KafkaPartitioner", "kafka_murmur2"]

_KAFKA_SEED = 0x9747_B28C


def _murmur2(data: bytes) -> int:
    n = len(data)
    h = _KAFKA_SEED ^ n
    for (k,) in struct.iter_unpack("<I", data[: n & ~3]):
        h = murmur2_step(h, k)
    if n & 3:
        h = murmur2_tail(h, int.from_bytes(data[n & ~3 :], "little"))
    return murmur2_final(h)


class KafkaPartitioner(JavaEngine):
    """Kafka's default partitioner for keyed records (Java producer and Kafka Streams).

    Parameters
    ----------
    n_instances : int
        Number of partitions of the topic, >= 1.
    int_type : {"long", "int"}, default "long"
        Serializer of int keys: ``LongSerializer`` (8 bytes) or ``IntegerSerializer`` (4 bytes).

    Raises
    ------
    InvalidParameterError
        If ``n_instances`` is not an int >= 1 or ``int_type`` is unknown.

    See Also
    --------
    kafka_murmur2 : the signed 32-bit hash of a byte string.

    Notes
    -----
    ``partition = toPositive(murmur2(keyBytes)) % numPartitions`` with
    ``toPositive(x) = x & 0x7fffffff`` (not ``abs``). ``murmur2`` is MurmurHash2
    with seed ``0x9747b28c``, ``m = 0x5bd1e995``, ``r = 24``, little-endian 4-byte
    blocks, tail bytes xor-ed in, final ``h ^= h >>> 13; h *= m; h ^= h >>> 15``.
    Key bytes: ``str`` -> UTF-8 (``StringSerializer``); ``int`` -> 8-byte (or
    4-byte) big-endian two's complement (``LongSerializer``, ``IntegerSerializer``).

    Sources in apache/kafka:

    - ``clients/src/main/java/org/apache/kafka/common/utils/Utils.java`` (``murmur2``, ``toPositive``)
    - ``clients/src/main/java/org/apache/kafka/clients/producer/internals/BuiltInPartitioner.java``
      (``partitionForKey``)
    - ``streams/src/main/java/org/apache/kafka/streams/processor/internals/DefaultStreamPartitioner.java``
      (Kafka Streams: the same formula)

    librdkafka clients (confluent-kafka-python) default to a CRC32 partitioner
    (``consistent_random``) and only match with ``partitioner=murmur2_random``.

    References
    ----------
    .. [1] Apache Kafka, ``UtilsTest.testMurmur2`` (published test vectors).
    .. [2] A. Appleby, "MurmurHash2", SMHasher, 2008.

    Examples
    --------
    >>> KafkaPartitioner(12).instance_of("hello")
    9
    >>> KafkaPartitioner(12).instances_of(["hello", "paris", 42]).tolist()
    [9, 11, 4]
    """

    engine = "kafka"

    def _hash_str(self, key: str) -> int:
        return _murmur2(key.encode("utf-8"))

    def _hash_strs(self, keys: pa.LargeStringArray) -> np.ndarray:
        w = Words.cut(keys, 4)
        h = w.run(_KAFKA_SEED ^ w.lengths, murmur2_step)
        some = w.rem > 0
        h[some] = murmur2_tail(h[some], w.tail[some])
        return w.unsort(murmur2_final(h))

    def _hash_int(self, u: Any) -> Any:
        # big-endian serialized bytes, read back as little-endian blocks
        if self.int_type == "int":
            return murmur2_final(murmur2_step(_KAFKA_SEED ^ 4, bswap32(u & M32)))
        return murmur2_final(murmur2_step(murmur2_step(_KAFKA_SEED ^ 8, bswap32(u >> 32)), bswap32(u & M32)))

    def _place(self, h: Any) -> Any:
        return (h & 0x7FFF_FFFF) % self.n_instances

    def partition_of(self, data: bytes) -> int:
        """Partition of a serialized key, as Kafka's default partitioner computes it.

        Parameters
        ----------
        data : bytes
            The key as the producer's key serializer wrote it.

        Returns
        -------
        int
            ``toPositive(murmur2(data)) % n_instances``.

        Raises
        ------
        InvalidParameterError
            If ``data`` is not bytes-like.

        Examples
        --------
        >>> KafkaPartitioner(12).partition_of("hello".encode())
        9
        """
        return self._place(_murmur2(_as_bytes(data, "KafkaPartitioner.partition_of")))


def _as_bytes(data: object, owner: str) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidParameterError(
            f"the 'data' parameter of {owner} must be bytes; got {type(data).__name__}", parameter="data"
        )
    return bytes(data)


def kafka_murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` of a byte string, as a signed 32-bit int.

    Parameters
    ----------
    data : bytes
        Serialized key.

    Returns
    -------
    int
        The hash, as Java returns it (``KafkaPartitioner`` uses ``h & 0x7fffffff``).

    Raises
    ------
    InvalidParameterError
        If ``data`` is not bytes-like.

    Examples
    --------
    >>> kafka_murmur2(b"21")
    -973932308
    """
    return signed32(_murmur2(_as_bytes(data, "kafka_murmur2")))
