"""Apache Flink: ``keyBy`` places a key in a key group, key groups on subtasks; surrogates steer it.

:class:`FlinkKeyGroups` reproduces where Flink's ``keyBy`` puts a key (the
Java ``keyBy(r -> r.key)`` form); :class:`PyFlinkKeyGroups` where PyFlink's
``key_by`` puts it (the key wrapped in a one-field ``Row``). Keyed state lives
in key groups, so a routing table cannot move a key: it is realized by keying
on a *surrogate*, a reserved value whose key group Flink's own assignment puts
on the subtask the table names (:func:`flink_surrogates`,
:meth:`FlinkKeyGroups.surrogates`). The key selector and the routing file
that do so are :mod:`locality.engines.flink`'s (``docs/engines/flink.md``).
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from locality._validation import check_integer, check_option
from locality.errors import InvalidParameterError
from locality.hashing.base import make_fallback
from locality.hashing.jvm import HashCodeEngine
from locality.hashing.keys import first_candidates
from locality.hashing.primitives import M32, murmur3_final, murmur3_step, signed32

__all__ = [
    "FlinkKeyGroups",
    "PyFlinkKeyGroups",
    "SURROGATE_PREFIX",
    "RESERVED_LONGS",
    "RESERVED_INTS",
    "KEY_TYPES",
    "flink_surrogates",
    "is_surrogate",
    "check_key_type",
]

logger = logging.getLogger(__name__)


class FlinkKeyGroups(HashCodeEngine):
    """Flink's ``keyBy`` placement: key -> key group -> operator subtask.

    Parameters
    ----------
    n_instances : int
        Operator parallelism ``p``, 1 <= p <= 32768.
    max_parallelism : int, optional
        Number of key groups ``M``, p <= M <= 32768. Default as Flink:
        ``min(max(roundUpToPowerOfTwo(p + p // 2), 128), 32768)``.
    int_type : {"long", "int"}, default "long"
        Java type of int keys: ``Long`` or ``Integer`` (their ``hashCode`` agree
        on 0 .. 2**31 - 1 and differ on negative numbers).

    Attributes
    ----------
    max_parallelism : int
        Number of key groups in use.

    Raises
    ------
    InvalidParameterError
        If ``n_instances`` is outside 1..32768, ``max_parallelism`` outside
        ``n_instances``..32768, or ``int_type`` unknown.

    Notes
    -----
    ``keyGroup = murmurHash(key.hashCode()) % M`` and
    ``subtask = keyGroup * p / M`` (integer division), where ``murmurHash(c)`` is
    one MurmurHash3 x86_32 block round on ``c`` with seed 0 (``c1 = 0xcc9e2d51``,
    rotl 15, ``c2 = 0x1b873593``, rotl 13, ``h * 5 + 0xe6546b64``), then ``h ^= 4``,
    ``fmix32``, and the absolute value (``Integer.MIN_VALUE`` -> 0). Subtask ``i``
    owns key groups ``ceil(i*M/p) .. ((i+1)*M - 1) // p``.

    Sources in apache/flink:

    - ``flink-runtime/src/main/java/org/apache/flink/runtime/state/KeyGroupRangeAssignment.java``
      (``assignToKeyGroup``, ``computeOperatorIndexForKeyGroup``, ``computeDefaultMaxParallelism``)
    - ``flink-core/src/main/java/org/apache/flink/util/MathUtils.java`` (``murmurHash``, ``roundUpToPowerOfTwo``)

    References
    ----------
    .. [1] Apache Flink, "Working with State: key groups / max parallelism",
       https://nightlies.apache.org/flink/flink-docs-stable/docs/dev/datastream/fault-tolerance/state/

    Examples
    --------
    >>> flink = FlinkKeyGroups(4)
    >>> flink.max_parallelism, flink.key_group("hello"), flink.instance_of("hello")
    (128, 35, 1)
    """

    engine = "flink"
    _PARAMETERS = ("max_parallelism", "int_type")
    _MAX_INSTANCES = 32768

    def __init__(self, n_instances: int, max_parallelism: int | None = None, *, int_type: str = "long") -> None:
        super().__init__(n_instances, int_type=int_type)
        p = self.n_instances
        if max_parallelism is None:
            max_parallelism = min(max(1 << (p + p // 2 - 1).bit_length(), 128), 32768)
        self.max_parallelism = check_integer(max_parallelism, "max_parallelism", "FlinkKeyGroups", lower=p, upper=32768)

    #: Added to the key's ``hashCode`` to get the ``hashCode`` of what Flink keys on (0: the key itself).
    _HASH_OFFSET: ClassVar[int] = 0

    def _key_group(self, h: Any) -> Any:
        mixed = signed32(murmur3_final(murmur3_step(0, (h + self._HASH_OFFSET) & M32), 4))
        return (abs(mixed) & 0x7FFF_FFFF) % self.max_parallelism

    def _place(self, h: Any) -> Any:
        return self._key_group(h) * self.n_instances // self.max_parallelism

    def key_group(self, key: str | int) -> int:
        """Key group of one key (``murmurHash(key.hashCode()) % max_parallelism``).

        Parameters
        ----------
        key : str or int
            The key, as for :meth:`instance_of`.

        Returns
        -------
        int
            Key group in ``0 .. max_parallelism - 1``; the subtask is
            ``key_group * n_instances // max_parallelism``.

        Raises
        ------
        InvalidParameterError
            For the same keys as :meth:`instance_of`.
        """
        return int(self._key_group(self._key_hash(key, f"{type(self).__name__}.key_group")))

    def key_groups(self, keys: Any) -> np.ndarray:
        """Key group of every key, computed with numpy (keys as for :meth:`instances_of`).

        Returns
        -------
        numpy.ndarray of int64
            ``[self.key_group(k) for k in keys]``.
        """
        # With parallelism M, subtask keyGroup * M / M is the key group itself.
        return type(self)(self.max_parallelism, self.max_parallelism, int_type=self.int_type).instances_of(keys)

    def subtask_key_groups(self, subtasks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``[start, stop)`` of the key groups each subtask owns (Flink's ``computeKeyGroupRangeForOperatorIndex``).

        Subtask ``i`` owns ``ceil(i * M / p) .. ((i + 1) * M - 1) // p``, never
        an empty range (p <= M).
        """
        m, p = self.max_parallelism, self.n_instances
        return (subtasks * m + p - 1) // p, ((subtasks + 1) * m - 1) // p + 1

    def surrogates(self, key_type: str = "string") -> tuple:
        """The surrogate of every key group, in key-group order (see :func:`flink_surrogates`).

        Raises
        ------
        InvalidParameterError
            If ``key_type`` is unknown or an int key type differs from ``int_type``.
        """
        key_type = check_key_type(key_type, self, f"{type(self).__name__}.surrogates")
        return _surrogates_by_key_group(self.engine, self.max_parallelism, key_type)

    def _parameters(self) -> dict[str, Any]:
        return {"max_parallelism": self.max_parallelism, **super()._parameters()}


class PyFlinkKeyGroups(FlinkKeyGroups):
    """Where Flink puts a key that PyFlink's ``key_by`` produced: the key inside a one-field ``Row``.

    Parameters and attributes as :class:`FlinkKeyGroups`.

    Notes
    -----
    PyFlink's ``DataStream.key_by(selector, key_type)`` runs the selector in
    Python, emits ``Row(key, value)``, and keys the Java stream with
    flink-python's ``KeyByKeySelector``, which returns a new one-field
    ``Row`` holding the key. Flink then hashes ``Row.hashCode()``, which is
    ``RowUtils.deepHashCodeRow``: ``31 * kind.toByteValue()`` (0 for
    ``INSERT``) plus ``deepHashCodeArray(fields)`` = ``31 * 1 +
    deepHashCodeInternal(key)``, and ``deepHashCodeInternal`` of a String,
    Long or Integer is ``Arrays.deepHashCode(new Object[]{key})`` =
    ``31 + key.hashCode()``. So the hash Flink mixes is
    ``key.hashCode() + 62`` (mod 2**32); everything after it is
    :class:`FlinkKeyGroups`. Checked by running the 2.3.0 jars (``Row.of("abc")``
    through ``KeyByKeySelector``: ``hashCode`` 96416 = 96354 + 62), and by
    ``tests/flink/`` for every surrogate and in a real PyFlink job. Older
    Flink versions hashed a ``Row`` differently (without the array level).

    Sources in apache/flink:

    - ``flink-python/src/main/java/org/apache/flink/streaming/api/functions/python/KeyByKeySelector.java``
    - ``flink-python/pyflink/datastream/data_stream.py`` (``DataStream.key_by``)
    - ``flink-core/src/main/java/org/apache/flink/types/RowUtils.java`` (``deepHashCodeRow``)

    Examples
    --------
    >>> PyFlinkKeyGroups(6, 128).instance_of("abc"), FlinkKeyGroups(6, 128).instance_of("abc")
    (3, 5)
    """

    engine = "pyflink"
    _HASH_OFFSET = 62


# --------------------------------------------------------------------------------------------
# Surrogates: reserved keys, one per key group.
# --------------------------------------------------------------------------------------------

#: A String surrogate is this prefix (U+0000 then ``locality:``) and a decimal number.
SURROGATE_PREFIX = "\x00locality:"
#: Java ``Long`` surrogates, ``[low, high)``: ``Long.MIN_VALUE + n`` for ``n < 2**32``.
RESERVED_LONGS = (-(2**63), -(2**63) + 2**32)
#: Java ``Integer`` surrogates, ``[low, high)``: ``Integer.MIN_VALUE + n`` for ``n < 2**20``.
RESERVED_INTS = (-(2**31), -(2**31) + 2**20)
#: Key types a routing key can have: Java ``String``, ``Long``, ``Integer``.
KEY_TYPES = ("string", "long", "int")

_RESERVED = {"long": RESERVED_LONGS, "int": RESERVED_INTS}


def _candidate(key_type: str, n: int) -> str | int:
    """Candidate ``n`` of the family of ``key_type``."""
    return f"{SURROGATE_PREFIX}{n}" if key_type == "string" else _RESERVED[key_type][0] + n


def _candidates(key_type: str, start: int, stop: int) -> Any:
    """Candidates ``start .. stop - 1``, in order (an int64 array for int key types)."""
    if key_type == "string":
        return [_candidate(key_type, n) for n in range(start, stop)]
    return np.arange(start, stop, dtype=np.int64) + _RESERVED[key_type][0]


def is_surrogate(key: Any, key_type: str) -> bool:
    """Whether ``key`` has the reserved form of a surrogate of ``key_type`` (so it cannot be a real key)."""
    if key_type == "string":
        return isinstance(key, str) and key.startswith(SURROGATE_PREFIX)
    low, high = _RESERVED[key_type]
    return isinstance(key, (int, np.integer)) and low <= key < high


@functools.lru_cache(maxsize=32)
def _surrogates_by_key_group(engine: str, max_parallelism: int, key_type: str) -> tuple:
    """The first candidate of every key group (cached: it depends on M, key form and key type only)."""
    int_type = "int" if key_type == "int" else "long"
    # with parallelism M, subtask == key group
    groups_of = make_fallback(engine, max_parallelism, max_parallelism=max_parallelism, int_type=int_type)
    limit = sys.maxsize if key_type == "string" else _RESERVED[key_type][1] - _RESERVED[key_type][0]
    first = first_candidates(  # covering M groups takes about M ln M candidates
        lambda start, stop: groups_of.instances_of(_candidates(key_type, start, stop)),
        max_parallelism,
        limit,
        4 * max_parallelism,
    )
    if (first < 0).any():
        raise InvalidParameterError(  # never seen: 2**20 candidates cover the 32768 key groups
            f"the {limit} reserved {key_type} values do not reach all {max_parallelism} key groups"
        )
    logger.debug("%s surrogates for %d key groups: the last at candidate %d", key_type, max_parallelism, first.max())
    return tuple(_candidate(key_type, int(n)) for n in first)


def flink_surrogates(fallback: FlinkKeyGroups, key_type: str = "string") -> pd.DataFrame:
    """The surrogate routing key of every key group, and the subtask that owns it.

    A surrogate is a reserved value of the key's Java type whose key group,
    in Flink's own assignment, is a given one; keying a record on the
    surrogate of one of subtask ``i``'s key groups sends it to subtask ``i``.
    There is one surrogate per key group, so subtask ``i`` has as many as it
    owns key groups (``M / p``, rounded down or up).

    Parameters
    ----------
    fallback : FlinkKeyGroups or PyFlinkKeyGroups
        Max parallelism ``M``, parallelism ``p`` and key form: :class:`FlinkKeyGroups`
        for a Java job keyed on the value itself, :class:`PyFlinkKeyGroups`
        for PyFlink's ``key_by``.
    key_type : {"string", "long", "int"}, default "string"
        Java type of the keys (``String``, ``Long``, ``Integer``). ``long``
        and ``int`` must match the fallback's ``int_type``.

    Returns
    -------
    pandas.DataFrame
        ``M`` rows indexed by key group ``0 .. M - 1``, with columns
        ``subtask`` (int64) and ``surrogate`` (str or int).

    Raises
    ------
    InvalidParameterError
        If ``fallback`` is not a Flink placement, ``key_type`` is unknown, or
        an int key type differs from ``fallback.int_type``.

    Notes
    -----
    The candidates are, for ``n = 0, 1, 2, ...``: the String
    ``SURROGATE_PREFIX + str(n)`` (``"\\u0000locality:0"``, ...), the Long
    ``Long.MIN_VALUE + n`` (``n < 2**32``) or the Integer
    ``Integer.MIN_VALUE + n`` (``n < 2**20``). The surrogate of key group
    ``g`` is the candidate with the smallest ``n`` whose key group is ``g``:
    deterministic, the same on every machine and for every parallelism with
    the same ``M``, and found in about ``M ln M`` hashes. Keys of these
    reserved forms cannot be real keys (:class:`~locality.engines.flink.RoutingKeySelector`
    refuses them), so a surrogate never shares state with a real key.

    Examples
    --------
    >>> table = flink_surrogates(PyFlinkKeyGroups(6, 128))
    >>> len(table), table["subtask"].nunique()
    (128, 6)
    """
    owner = "flink_surrogates"
    if not isinstance(fallback, FlinkKeyGroups):
        raise InvalidParameterError(
            f"the 'fallback' parameter of {owner} must be a FlinkKeyGroups or PyFlinkKeyGroups; "
            f"got {type(fallback).__name__}",
            parameter="fallback",
        )
    key_type = check_key_type(key_type, fallback, owner)
    m, p = fallback.max_parallelism, fallback.n_instances
    groups = np.arange(m, dtype=np.int64)
    surrogates = _surrogates_by_key_group(fallback.engine, m, key_type)
    return pd.DataFrame(
        {"subtask": groups * p // m, "surrogate": pd.Series(list(surrogates), dtype=object)},
        index=pd.Index(groups, name="key_group"),
    )


def check_key_type(key_type: object, fallback: FlinkKeyGroups, owner: str) -> str:
    """``key_type`` checked: one of :data:`KEY_TYPES`, and an int type the fallback hashes ints as."""
    key_type = check_option(key_type, "key_type", owner, KEY_TYPES)
    if key_type != "string" and key_type != fallback.int_type:
        raise InvalidParameterError(
            f"the 'key_type' parameter of {owner} is {key_type!r} but the fallback hashes int keys as "
            f"{fallback.int_type!r} (int_type); the table was learned for Java {fallback.int_type} keys",
            parameter="key_type",
        )
    return key_type
