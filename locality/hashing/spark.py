"""Apache Spark: SQL hash partitioning, reproduced bit for bit, and the surrogates that steer it.

Shuffles and every stateful streaming operator (streaming aggregation,
``dropDuplicates``, stream-stream joins, ``applyInPandasWithState``,
``transformWithStateInPandas``) place a row in partition
``pmod(murmur3(grouping columns, seed 42), spark.sql.shuffle.partitions)``:
:class:`SparkHashPartitioning` reproduces it. A routing table cannot replace
that placement; it takes effect through the grouping column instead, on
*surrogates* (:meth:`SparkHashPartitioning.surrogates`): reserved values that
Spark's own hash puts in a given partition. The route column, per-key state
and the hand-over of moved keys are :mod:`locality.engines.spark`'s.
"""

from __future__ import annotations

import functools
import struct
from typing import Any

import numpy as np
import pyarrow as pa

from locality._validation import check_option
from locality.errors import InvalidParameterError
from locality.hashing.jvm import JavaEngine
from locality.hashing.keys import INT_RANGE, LONG_RANGE, first_candidates
from locality.hashing.primitives import M32, Words, murmur3_final, murmur3_step, sign_extend_byte, signed32

__all__ = ["SparkHashPartitioning", "SURROGATE_PREFIX", "SURROGATE_CANDIDATES"]

_SPARK_SEED = 42

#: Reserved form of string surrogates: ``SURROGATE_PREFIX + str(j)``, j = 0, 1, 2, ...
#: (U+0000 first: no text key a user types starts with it).
SURROGATE_PREFIX = "\x00route:"
#: Size of each surrogate family: candidates ``j`` run over ``0 .. SURROGATE_CANDIDATES - 1``.
#: Integer surrogates are ``MIN + j`` with ``MIN`` the smallest Java ``long`` (or ``int``).
SURROGATE_CANDIDATES = 2**24


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

    def surrogates(self, kind: str = "string") -> tuple[str, ...] | tuple[int, ...]:
        """The route value of each partition: a reserved key that Spark's hash puts there.

        Surrogate ``i`` is the first candidate of a fixed family whose partition
        is ``i``. The families are reserved forms a real key does not take:

        - ``"string"``: ``SURROGATE_PREFIX + str(j)`` = ``"\\x00route:0"``,
          ``"\\x00route:1"``, ... (strings starting with U+0000);
        - ``"integer"``: ``MIN + j``, where ``MIN`` is ``-2**63`` (``int_type="long"``)
          or ``-2**31`` (``"int"``): the most negative values of the type,

        for ``j = 0, 1, ... < SURROGATE_CANDIDATES``. The search is deterministic,
        so every process computes the same surrogates, and needs about
        ``n ln n`` candidates (the coupon collector's bound).

        Parameters
        ----------
        kind : {"string", "integer"}, default "string"
            Type of the key column: a string, or an integer of this fallback's
            ``int_type``.

        Returns
        -------
        tuple of str or tuple of int, length ``n_instances``
            ``surrogates[i]`` is the route value of partition ``i``.

        Raises
        ------
        InvalidParameterError
            If ``kind`` is unknown, or the family has no candidate for some
            partition (more than about a million partitions).

        Examples
        --------
        >>> spark = SparkHashPartitioning(4)
        >>> spark.surrogates()
        ('\\x00route:2', '\\x00route:3', '\\x00route:0', '\\x00route:9')
        >>> spark.instances_of(spark.surrogates()).tolist()
        [0, 1, 2, 3]
        """
        kind = check_option(kind, "kind", "SparkHashPartitioning.surrogates", ("string", "integer"))
        return _surrogates(self.n_instances, kind, self.int_type)


@functools.lru_cache(maxsize=32)
def _surrogates(n: int, kind: str, int_type: str) -> tuple:
    spark = SparkHashPartitioning(n, int_type=int_type)
    low = (INT_RANGE if int_type == "int" else LONG_RANGE)[0]

    def partitions_of(start: int, stop: int) -> np.ndarray:
        j = np.arange(start, stop, dtype=np.int64)
        return spark.instances_of([f"{SURROGATE_PREFIX}{x}" for x in j.tolist()] if kind == "string" else j + low)

    first = first_candidates(partitions_of, n, SURROGATE_CANDIDATES, max(4096, 4 * n))
    if (first < 0).any():
        raise InvalidParameterError(
            f"the {SURROGATE_CANDIDATES} {kind} surrogate candidates miss partition {int(np.argmin(first))} "
            f"of {n}; Spark's hash cannot be steered to that many partitions"
        )
    if kind == "string":
        return tuple(f"{SURROGATE_PREFIX}{x}" for x in first.tolist())
    return tuple((first + low).tolist())
