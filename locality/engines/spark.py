"""Apache Spark: SQL hash partitioning, which shuffles and stateful streaming operators use."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from locality.engines.jvm import JavaEngine
from locality.engines.primitives import M32, Words, murmur3_final, murmur3_step, sign_extend_byte, signed32

__all__ = ["SparkHashPartitioning"]

_SPARK_SEED = 42


def _spark_hash_bytes(data: bytes) -> int:
    """Spark's legacy ``Murmur3_x86_32.hashUnsafeBytes``: each tail byte is a whole block."""
    n = len(data)
    h = _SPARK_SEED
    for (k,) in struct.iter_unpack("<I", data[: n & ~3]):
        h = murmur3_step(h, k)
    for byte in data[n & ~3 :]:
        h = murmur3_step(h, sign_extend_byte(byte))
    return murmur3_final(h, n)


class SparkHashPartitioning(JavaEngine):
    """Spark SQL hash partitioning of one key column (shuffles and stateful streaming).

    Parameters
    ----------
    n_instances : int
        Number of shuffle partitions (``spark.sql.shuffle.partitions``, frozen in
        a streaming checkpoint), >= 1.
    int_type : {"long", "int"}, default "long"
        Spark type of int keys: ``LongType`` (``hashLong``) or ``IntegerType`` (``hashInt``).

    Raises
    ------
    InvalidParameterError
        If ``n_instances`` is not an int >= 1 or ``int_type`` is unknown.

    Notes
    -----
    ``partition = pmod(Murmur3Hash(key, seed = 42), numPartitions)``. Strings hash
    their UTF-8 bytes with the *legacy* ``Murmur3_x86_32.hashUnsafeBytes``: whole
    4-byte little-endian blocks as in MurmurHash3, then each remaining byte,
    sign-extended, mixed as a block of its own (standard MurmurHash3 differs for
    lengths not divisible by 4), then ``fmix(h ^ numBytes)``. Longs use
    ``hashLong`` (low word, then high word, length 8); ints use ``hashInt``.
    Only single-column keys with the default ``UTF8_BINARY`` collation.

    Sources in apache/spark:

    - ``sql/catalyst/src/main/scala/org/apache/spark/sql/catalyst/plans/physical/partitioning.scala``
      (``HashPartitioning.partitionIdExpression``)
    - ``sql/catalyst/src/main/scala/org/apache/spark/sql/catalyst/expressions/hash.scala``
      (``Murmur3Hash``, seed 42)
    - ``common/unsafe/src/main/java/org/apache/spark/unsafe/hash/Murmur3_x86_32.java``
      (``hashUnsafeBytes``, ``hashLong``, ``hashInt``)

    References
    ----------
    .. [1] Apache Spark, ``pyspark.sql.functions.hash``,
       https://spark.apache.org/docs/latest/api/python/reference/pyspark.sql/api/pyspark.sql.functions.hash.html

    Examples
    --------
    >>> SparkHashPartitioning(200).instances_of(["hello", 42]).tolist()
    [48, 168]
    """

    engine = "spark"

    def _hash_str(self, key: str) -> int:
        return _spark_hash_bytes(key.encode("utf-8"))

    def _hash_strs(self, keys: pa.LargeStringArray) -> np.ndarray:
        w = Words.cut(keys, 4)
        h = w.run(np.full(w.order.size, _SPARK_SEED, dtype=np.uint32), murmur3_step)
        for i in range(3):
            some = w.rem > i
            h[some] = murmur3_step(h[some], sign_extend_byte((w.tail[some] >> (8 * i)) & 0xFF))
        return w.unsort(murmur3_final(h, w.lengths))

    def _hash_int(self, u: Any) -> Any:
        h = murmur3_step(_SPARK_SEED, u & M32)
        if self.int_type == "int":
            return murmur3_final(h, 4)
        return murmur3_final(murmur3_step(h, u >> 32), 8)

    def _place(self, h: Any) -> Any:
        return signed32(h) % self.n_instances
