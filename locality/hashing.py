"""Fallback hashes that send a key to the same instance as the stream engine would.

A routing table only lists the keys whose placement was optimised; every other
key goes to its operator's *fallback hash*. The fallbacks here reproduce, bit
for bit, the default key-to-instance function of Apache Kafka (default
partitioner), Apache Storm (fields grouping), Apache Flink (key groups) and
Spark SQL (hash partitioning), plus a consistent-hash ring for engines with a
custom router. None of them uses Python's salted ``hash()``, so every process
and every machine computes the same instance.

Keys are ``str`` or ``int``. A ``str`` is a Java ``String`` (UTF-8 bytes where
the engine hashes bytes, UTF-16 code units where it calls ``String.hashCode``).
An ``int`` is a Java ``Long`` by default; the Java engines take
``int_type="int"`` to hash it as a Java ``Integer`` instead (Kafka's
``IntegerSerializer``, a Flink or Storm ``Integer`` field, a Spark ``IntegerType``
column). ``instance_of`` hashes one key; ``instances_of`` hashes a list, numpy
array, pandas Series or pyarrow Array with numpy and returns the same numbers.
"""

from __future__ import annotations

import abc
import bisect
import json
import logging
import struct
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa

from locality._validation import check_integer, check_option
from locality.errors import InvalidParameterError, SerializationError

__all__ = [
    "ENGINES",
    "FallbackHash",
    "KafkaPartitioner",
    "StormFieldsGrouping",
    "FlinkKeyGroups",
    "SparkHashPartitioning",
    "ConsistentHashRing",
    "make_fallback",
    "fallback_from_dict",
    "java_hash_code",
    "kafka_murmur2",
]

logger = logging.getLogger(__name__)

#: Names accepted by :func:`make_fallback`, one per engine.
ENGINES = ("kafka", "storm", "flink", "spark", "ring")

_M32 = 0xFFFF_FFFF
_M64 = 0xFFFF_FFFF_FFFF_FFFF
_LONG_RANGE = (-(2**63), 2**63 - 1)
_INT_RANGE = (-(2**31), 2**31 - 1)
_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"
_FEW_ROWS = 16  # below this many keys still hashing, Python ints beat numpy calls

# --------------------------------------------------------------------------------------------
# Integer primitives. Every function below takes Python ints or numpy uint32/uint64 arrays
# (int64 arrays work too) holding values in [0, 2**32) (``_M64`` ones: [0, 2**64)), masks
# every product, and never updates in place, so the scalar and the vectorized paths share them.
# --------------------------------------------------------------------------------------------


def _signed32(x: Any) -> Any:
    """Java ``int`` value of the low 32 bits (Python int or int64 array)."""
    return ((x & _M32) ^ 0x8000_0000) - 0x8000_0000


def _bswap32(x: Any) -> Any:
    """Reverse the four bytes of a 32-bit value."""
    return ((x & 0xFF) << 24) | ((x & 0xFF00) << 8) | ((x >> 8) & 0xFF00) | ((x >> 24) & 0xFF)


def _sign_extend_byte(b: Any) -> Any:
    """Java ``(int) byteValue``: a byte in [0, 256) sign-extended to 32 bits."""
    return b | ((b & 0x80) * 0x1FF_FFFE)


def _java_long_hash(u: Any, int_type: str) -> Any:
    """``Long.hashCode`` = ``(int)(v ^ (v >>> 32))``, or ``Integer.hashCode`` = ``v``, of a 64-bit pattern."""
    return u & _M32 if int_type == "int" else (u ^ (u >> 32)) & _M32


# Kafka's MurmurHash2 (32-bit), clients/.../common/utils/Utils.java#murmur2.
_MURMUR2_M = 0x5BD1_E995
_KAFKA_SEED = 0x9747_B28C


def _murmur2_step(h: Any, k: Any) -> Any:
    k = (k * _MURMUR2_M) & _M32
    k = k ^ (k >> 24)
    k = (k * _MURMUR2_M) & _M32
    return ((h * _MURMUR2_M) & _M32) ^ k


def _murmur2_tail(h: Any, tail: Any) -> Any:
    return ((h ^ tail) * _MURMUR2_M) & _M32


def _murmur2_final(h: Any) -> Any:
    h = h ^ (h >> 13)
    h = (h * _MURMUR2_M) & _M32
    return h ^ (h >> 15)


# MurmurHash3 x86_32 rounds, shared by Flink's MathUtils.murmurHash and Spark's Murmur3_x86_32.
_C1 = 0xCC9E_2D51
_C2 = 0x1B87_3593
_SPARK_SEED = 42


def _murmur3_step(h: Any, k: Any) -> Any:
    """``mixH1(h, mixK1(k))``: one 4-byte block."""
    k = (k * _C1) & _M32
    k = ((k << 15) | (k >> 17)) & _M32
    k = (k * _C2) & _M32
    h = h ^ k
    h = ((h << 13) | (h >> 19)) & _M32
    return (h * 5 + 0xE654_6B64) & _M32


def _murmur3_final(h: Any, length: Any) -> Any:
    """``fmix(h ^ length)``."""
    h = h ^ length
    h = h ^ (h >> 16)
    h = (h * 0x85EB_CA6B) & _M32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2_AE35) & _M32
    return h ^ (h >> 16)


# MurmurHash64A (Appleby, smhasher MurmurHash2.cpp), the ring's 64-bit hash.
_M64A = 0xC6A4_A793_5BD1_E995
_RING_SEED_STR, _RING_SEED_INT, _RING_SEED_NODE = 0, 1, 2


def _murmur64_init(seed: int, length: Any) -> Any:
    return (seed ^ (length * _M64A)) & _M64


def _murmur64_step(h: Any, k: Any) -> Any:
    k = (k * _M64A) & _M64
    k = k ^ (k >> 47)
    k = (k * _M64A) & _M64
    return ((h ^ k) * _M64A) & _M64


def _murmur64_final(h: Any) -> Any:
    h = h ^ (h >> 47)
    h = (h * _M64A) & _M64
    return h ^ (h >> 47)


# --------------------------------------------------------------------------------------------
# Scalar byte-string hashes.
# --------------------------------------------------------------------------------------------


def _murmur2(data: bytes) -> int:
    n = len(data)
    h = _KAFKA_SEED ^ n
    for (k,) in struct.iter_unpack("<I", data[: n & ~3]):
        h = _murmur2_step(h, k)
    if n & 3:
        h = _murmur2_tail(h, int.from_bytes(data[n & ~3 :], "little"))
    return _murmur2_final(h)


def _spark_hash_bytes(data: bytes) -> int:
    """Spark's legacy ``Murmur3_x86_32.hashUnsafeBytes``: each tail byte is a whole block."""
    n = len(data)
    h = _SPARK_SEED
    for (k,) in struct.iter_unpack("<I", data[: n & ~3]):
        h = _murmur3_step(h, k)
    for byte in data[n & ~3 :]:
        h = _murmur3_step(h, _sign_extend_byte(byte))
    return _murmur3_final(h, n)


def _murmur64a(data: bytes, seed: int) -> int:
    n = len(data)
    h = _murmur64_init(seed, n)
    for (k,) in struct.iter_unpack("<Q", data[: n & ~7]):
        h = _murmur64_step(h, k)
    if n & 7:
        h = ((h ^ int.from_bytes(data[n & ~7 :], "little")) * _M64A) & _M64
    return _murmur64_final(h)


def _java_string_hash(s: str) -> int:
    """``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, mod 2**32."""
    h = 0
    for unit in memoryview(s.encode(_UTF16)).cast("H"):
        h = (31 * h + unit) & _M32
    return h


# --------------------------------------------------------------------------------------------
# Vectorized string hashes over a pyarrow large_string array (no nulls).
# --------------------------------------------------------------------------------------------


def _utf8(arr: pa.LargeStringArray) -> tuple[np.ndarray, np.ndarray]:
    """Key boundaries (int64, starting at 0) and the UTF-8 bytes they index."""
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return offsets - offsets[0], data[offsets[0] : offsets[-1]]


@dataclass(frozen=True)
class _Words:
    """UTF-8 keys cut into little-endian words; rows sorted by number of whole words, longest first."""

    order: np.ndarray  # original row of each sorted row
    lengths: np.ndarray  # byte length, in the word dtype
    words: np.ndarray  # every key zero-padded to whole words, one after the other
    start: np.ndarray  # index in ``words`` of the first word of each row
    full: np.ndarray  # number of whole words of each row (descending)
    rem: np.ndarray  # bytes in the partial last word
    tail: np.ndarray  # the zero-padded partial last word (0 if none)
    active: list[int]  # active[j] = number of rows with more than j whole words

    @classmethod
    def cut(cls, arr: pa.LargeStringArray, width: int) -> _Words:
        offsets, data = _utf8(arr)
        lengths = np.diff(offsets)
        n_words = (lengths + width - 1) // width
        start = np.cumsum(n_words) - n_words
        padded = np.zeros(int(n_words.sum()) * width + width, dtype=np.uint8)
        padded[np.arange(data.size) + np.repeat(start * width - offsets[:-1], lengths)] = data
        words = padded.view(f"<u{width}")
        full, rem = lengths // width, lengths % width
        order = np.argsort(-full, kind="stable")
        start, full, rem = start[order], full[order], rem[order]
        tail = np.where(rem > 0, words[start + full], 0).astype(words.dtype)
        ge = np.cumsum(np.bincount(full)[::-1])[::-1]  # ge[j] = number of rows with >= j whole words
        return cls(order, lengths[order].astype(words.dtype), words, start, full, rem, tail, ge[1:].tolist())

    def run(self, h: np.ndarray, step: Any) -> np.ndarray:
        """Fold ``step`` over every whole word of every row, rows in parallel (``h`` in sorted order)."""
        for j, m in enumerate(self.active):
            if m <= _FEW_ROWS:  # the few longest keys left: finish them one by one
                for r in range(m):
                    hr = int(h[r])
                    for k in self.words[self.start[r] + j : self.start[r] + self.full[r]].tolist():
                        hr = step(hr, k)
                    h[r] = hr
                break
            h[:m] = step(h[:m], self.words[self.start[:m] + j])
        return h

    def unsort(self, h: np.ndarray) -> np.ndarray:
        out = np.empty_like(h)
        out[self.order] = h
        return out


def _java_string_hashes(arr: pa.LargeStringArray) -> np.ndarray:
    """Vectorized ``String.hashCode`` (uint32): sum of ``unit * 31**(units after it)`` per key."""
    offsets, data = _utf8(arr)
    high = np.flatnonzero(data >= 0x80)
    if high.size:
        units = np.frombuffer(data.tobytes().decode("utf-8").encode("utf-16-le"), dtype="<u2")
        # UTF-16 units = UTF-8 bytes - continuation bytes + 4-byte leads (each becomes a surrogate pair)
        delta = (data[high] >= 0xF0).astype(np.int64) - (data[high] < 0xC0)
        bounds = offsets + np.concatenate(([0], np.cumsum(delta)))[np.searchsorted(high, offsets)]
    else:  # ASCII: one unit per byte
        units, bounds = data, offsets
    begin, end = bounds[:-1], bounds[1:]
    powers = np.ones(int((end - begin).max(initial=0)) + 1, dtype=np.uint32)
    np.cumprod(np.full(powers.size - 1, 31, dtype=np.uint32), out=powers[1:])  # 31**e mod 2**32
    exponent = np.repeat(end, end - begin) - 1 - np.arange(units.size)
    sums = np.zeros(units.size + 1, dtype=np.uint32)
    np.cumsum(units.astype(np.uint32) * powers[exponent], out=sums[1:], dtype=np.uint32)
    return sums[end] - sums[begin]


# --------------------------------------------------------------------------------------------
# Key validation and conversion.
# --------------------------------------------------------------------------------------------


def _is_int_key(key: object) -> bool:
    return isinstance(key, (int, np.integer)) and not isinstance(key, bool)


def _check_int_key(key: object, bounds: tuple[int, int], owner: str) -> int:
    """Return ``key`` as a Python int, or raise naming its type (str and int keys only)."""
    if not _is_int_key(key):
        raise InvalidParameterError(
            f"the 'key' parameter of {owner} must be a str or an int; got {type(key).__name__} ({key!r})"
        )
    return check_integer(key, "key", owner, lower=bounds[0], upper=bounds[1])


def _surrogate_error(text: object, name: str, owner: str) -> InvalidParameterError:
    return InvalidParameterError(
        f"the {name!r} parameter of {owner} must hold valid Unicode text; got a string with a lone surrogate: {text!r}"
    )


@dataclass
class _Columns:
    """A batch of keys split by kind; ``*_rows`` is where each kind goes in the output (None: all rows)."""

    n: int
    strings: pa.LargeStringArray | None = None
    string_rows: np.ndarray | None = None
    ints: np.ndarray | None = None
    int_rows: np.ndarray | None = None


def _key_columns(keys: object, owner: str) -> _Columns:
    def reject(what: str) -> InvalidParameterError:
        return InvalidParameterError(f"the 'keys' parameter of {owner} must hold only str or int keys; got {what}")

    if isinstance(keys, pd.Series):
        keys = keys.to_numpy(dtype=object) if keys.dtype == object else pa.Array.from_pandas(keys)
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if isinstance(keys, pa.Array):
        if pa.types.is_dictionary(keys.type):
            keys = keys.dictionary_decode()
        if keys.null_count:
            position = int(np.flatnonzero(keys.is_null().to_numpy(zero_copy_only=False))[0])
            raise reject(f"a null key at position {position}")
        kind = keys.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
            return _Columns(len(keys), strings=keys.cast(pa.large_string()))
        if not pa.types.is_integer(kind):
            raise reject(f"a pyarrow array of type {kind}")
        keys = keys.to_numpy()
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
        raise InvalidParameterError(
            f"the 'keys' parameter of {owner} must be a list, numpy array, pandas Series or pyarrow Array "
            f"of keys; got {type(keys).__name__}"
        )
    if isinstance(keys, np.ndarray):
        if keys.ndim != 1:
            raise InvalidParameterError(f"the 'keys' parameter of {owner} must be one-dimensional; got {keys.ndim}-d")
        if keys.dtype.kind == "U":
            return _Columns(keys.size, strings=_arrow_strings(keys, owner))
        if keys.dtype.kind in "iu":
            if keys.dtype == np.uint64 and keys.size and keys.max() > _LONG_RANGE[1]:
                position = int(np.argmax(keys > _LONG_RANGE[1]))
                raise reject(f"{keys[position]} at position {position}, outside the int64 range")
            return _Columns(keys.size, ints=keys.astype(np.int64, copy=False))
        if keys.dtype.kind != "O":
            raise reject(f"a numpy array of dtype {keys.dtype}")
    else:
        keys = list(keys)
    types = set(map(type, keys))
    if all(issubclass(t, str) for t in types):
        return _Columns(len(keys), strings=_arrow_strings(keys, owner))
    if types <= {int}:
        return _Columns(len(keys), ints=_int64s(keys, None, reject))
    is_str = np.fromiter((isinstance(k, str) for k in keys), dtype=bool, count=len(keys))
    is_int = np.fromiter(map(_is_int_key, keys), dtype=bool, count=len(keys))
    if not (is_str | is_int).all():
        position = int(np.argmin(is_str | is_int))
        raise reject(f"{type(keys[position]).__name__} ({keys[position]!r}) at position {position}")
    int_rows = np.flatnonzero(is_int)
    ints = _int64s([keys[i] for i in int_rows], int_rows, reject)
    if not is_str.any():
        return _Columns(len(keys), ints=ints)
    string_rows = np.flatnonzero(is_str)
    strings = _arrow_strings([keys[i] for i in string_rows], owner)
    return _Columns(len(keys), strings, string_rows, ints, int_rows)


def _int64s(values: list[Any], rows: np.ndarray | None, reject: Any) -> np.ndarray:
    """``values`` (Python or numpy ints) as int64; ``rows`` maps them to key positions for errors."""
    try:
        return np.fromiter(map(int, values), dtype=np.int64, count=len(values))
    except OverflowError:
        i = next(i for i, v in enumerate(values) if not _LONG_RANGE[0] <= int(v) <= _LONG_RANGE[1])
        position = i if rows is None else int(rows[i])
        raise reject(f"{values[i]} at position {position}, outside the int64 range") from None


def _arrow_strings(values: Any, owner: str) -> pa.LargeStringArray:
    try:
        return pa.array(values, type=pa.large_string())
    except UnicodeEncodeError as error:
        bad = next(v for v in values if not v.isascii() and not _encodable(v))
        raise _surrogate_error(bad, "keys", owner) from error


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# The fallbacks.
# --------------------------------------------------------------------------------------------


class FallbackHash(abc.ABC):
    """Deterministic key -> instance function of one operator (abstract base).

    Subclasses reproduce one engine's placement. A fallback splits into a key
    hash (``str`` and ``int`` keys, scalar and vectorized) and a placement that
    turns that hash into an instance index in ``0 .. n_instances - 1``.

    Parameters
    ----------
    n_instances : int
        Number of instances (partitions, tasks, subtasks) of the operator, >= 1.

    Attributes
    ----------
    engine : str
        Engine name, one of :data:`ENGINES`.
    n_instances : int
        Number of instances.

    Raises
    ------
    InvalidParameterError
        If ``n_instances`` is not an int >= 1 (some engines also cap it).
    """

    engine: ClassVar[str]
    _PARAMETERS: ClassVar[tuple[str, ...]] = ()
    _MAX_INSTANCES: ClassVar[int | None] = None

    def __init__(self, n_instances: int) -> None:
        self.n_instances = check_integer(
            n_instances, "n_instances", type(self).__name__, lower=1, upper=self._MAX_INSTANCES
        )

    # -- engine hooks ---------------------------------------------------------------------
    @abc.abstractmethod
    def _hash_str(self, key: str) -> int:
        """Key hash of one string (may raise UnicodeEncodeError on lone surrogates)."""

    @abc.abstractmethod
    def _hash_strs(self, keys: pa.LargeStringArray) -> np.ndarray:
        """Key hashes of many strings, as an unsigned numpy array."""

    @abc.abstractmethod
    def _hash_int(self, u: Any) -> Any:
        """Key hash of the 64-bit two's-complement pattern ``u`` (Python int or uint64 array)."""

    @abc.abstractmethod
    def _place(self, h: Any) -> Any:
        """Instance of a key hash (Python int, or int64 array)."""

    def _place_batch(self, h: np.ndarray) -> np.ndarray:
        return self._place(h.astype(np.int64))

    def _int_bounds(self) -> tuple[int, int]:
        return _LONG_RANGE

    def _parameters(self) -> dict[str, Any]:
        return {}

    # -- public API -----------------------------------------------------------------------
    def instance_of(self, key: str | int) -> int:
        """Instance index of one key.

        Parameters
        ----------
        key : str or int
            The key. ``int`` (Python or numpy) must fit the engine's Java type
            (``long`` by default).

        Returns
        -------
        int
            Instance index in ``0 .. n_instances - 1``.

        Raises
        ------
        InvalidParameterError
            If ``key`` is of another type (None, float, bytes, bool...), an int out
            of range, or a string with a lone surrogate.
        """
        return int(self._place(self._key_hash(key, f"{type(self).__name__}.instance_of")))

    def _key_hash(self, key: object, owner: str) -> int:
        """Validate one key and return its key hash."""
        if isinstance(key, str):
            try:
                return self._hash_str(key)
            except UnicodeEncodeError:
                raise _surrogate_error(key, "key", owner) from None
        return self._hash_int(_check_int_key(key, self._int_bounds(), owner) & _M64)

    def instances_of(self, keys: Iterable[str | int] | np.ndarray | pd.Series | pa.Array) -> np.ndarray:
        """Instance index of every key, computed with numpy.

        Gives exactly ``[self.instance_of(k) for k in keys]``.

        Parameters
        ----------
        keys : sequence of str and int, numpy array, pandas Series or pyarrow Array
            The keys: str, int or object numpy arrays; string, integer or
            dictionary Arrow arrays (chunked or not); any Series. No nulls.

        Returns
        -------
        numpy.ndarray of int64, shape (len(keys),)
            Instance index of each key.

        Raises
        ------
        InvalidParameterError
            If a key has another type or is null (the message gives its position),
            or an int is out of range.
        """
        owner = f"{type(self).__name__}.instances_of"
        cols = _key_columns(keys, owner)
        out = np.empty(cols.n, dtype=np.int64)
        if cols.strings is not None and len(cols.strings):
            rows = slice(None) if cols.string_rows is None else cols.string_rows
            out[rows] = self._place_batch(self._hash_strs(cols.strings))
        if cols.ints is not None and cols.ints.size:
            low, high = self._int_bounds()
            outside = (cols.ints < low) | (cols.ints > high)
            if outside.any():
                i = int(np.argmax(outside))
                position = i if cols.int_rows is None else int(cols.int_rows[i])
                raise InvalidParameterError(
                    f"the 'keys' parameter of {owner} must hold ints >= {low} and <= {high}; "
                    f"got {cols.ints[i]} at position {position}"
                )
            rows = slice(None) if cols.int_rows is None else cols.int_rows
            out[rows] = self._place_batch(self._hash_int(np.ascontiguousarray(cols.ints).view(np.uint64)))
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description: ``{"engine", "n_instances", "parameters"}``.

        :func:`fallback_from_dict` rebuilds an equal fallback from it.
        """
        return {"engine": self.engine, "n_instances": self.n_instances, "parameters": self._parameters()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FallbackHash):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def __reduce__(self) -> tuple[Any, ...]:
        # what pickle (and Spark shipping a fallback to executors) stores: the description, not the ring
        return (fallback_from_dict, (self.to_dict(),))

    def __repr__(self) -> str:
        args = [f"n_instances={self.n_instances}"] + [f"{k}={v!r}" for k, v in self._parameters().items()]
        return f"{type(self).__name__}({', '.join(args)})"


class _JavaEngine(FallbackHash):
    """A JVM engine: Python ints hash as Java ``Long`` (default) or ``Integer``."""

    _PARAMETERS = ("int_type",)

    def __init__(self, n_instances: int, *, int_type: str = "long") -> None:
        super().__init__(n_instances)
        self.int_type = check_option(int_type, "int_type", type(self).__name__, ("long", "int"))

    def _int_bounds(self) -> tuple[int, int]:
        return _INT_RANGE if self.int_type == "int" else _LONG_RANGE

    def _parameters(self) -> dict[str, Any]:
        return {"int_type": self.int_type}


class _HashCodeEngine(_JavaEngine):
    """An engine that starts from the key's Java ``hashCode()``."""

    def _hash_str(self, key: str) -> int:
        return _java_string_hash(key)

    def _hash_strs(self, keys: pa.LargeStringArray) -> np.ndarray:
        return _java_string_hashes(keys)

    def _hash_int(self, u: Any) -> Any:
        return _java_long_hash(u, self.int_type)


class KafkaPartitioner(_JavaEngine):
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
        w = _Words.cut(keys, 4)
        h = w.run(_KAFKA_SEED ^ w.lengths, _murmur2_step)
        some = w.rem > 0
        h[some] = _murmur2_tail(h[some], w.tail[some])
        return w.unsort(_murmur2_final(h))

    def _hash_int(self, u: Any) -> Any:
        # big-endian serialized bytes, read back as little-endian blocks
        if self.int_type == "int":
            return _murmur2_final(_murmur2_step(_KAFKA_SEED ^ 4, _bswap32(u & _M32)))
        return _murmur2_final(_murmur2_step(_murmur2_step(_KAFKA_SEED ^ 8, _bswap32(u >> 32)), _bswap32(u & _M32)))

    def _place(self, h: Any) -> Any:
        return (h & 0x7FFF_FFFF) % self.n_instances


class StormFieldsGrouping(_HashCodeEngine):
    """Storm's fields grouping on a single field.

    Parameters
    ----------
    n_instances : int
        Number of target tasks, >= 1. The result indexes the target tasks
        sorted ascending by task id.
    int_type : {"long", "int"}, default "long"
        Java type of int keys: ``Long`` or ``Integer``.

    Raises
    ------
    InvalidParameterError
        If ``n_instances`` is not an int >= 1 or ``int_type`` is unknown.

    Notes
    -----
    ``index = Math.floorMod(Arrays.deepHashCode(new Object[]{key}), numTasks)``,
    that is ``floorMod(31 + key.hashCode(), n)`` in 32-bit int arithmetic, with
    ``String.hashCode`` over UTF-16 code units (a non-BMP character counts as two)
    and ``Long.hashCode = (int)(v ^ (v >>> 32))`` (``Integer.hashCode = v``).
    There is no bit mixing: sequential int keys go round robin.

    Sources in apache/storm (2.x), and the JDK's ``Arrays.deepHashCode`` and ``String.hashCode``:

    - ``storm-client/src/jvm/org/apache/storm/daemon/GrouperFactory.java`` (``FieldsGrouper``)
    - ``storm-client/src/jvm/org/apache/storm/utils/TupleUtils.java`` (``chooseTaskIndex``)

    References
    ----------
    .. [1] Apache Storm, "Concepts: stream groupings",
       https://storm.apache.org/releases/current/Concepts.html

    Examples
    --------
    >>> StormFieldsGrouping(4).instances_of(["hello", "#bigdata", "a"]).tolist()
    [1, 2, 0]
    """

    engine = "storm"

    def _place(self, h: Any) -> Any:
        return _signed32(h + 31) % self.n_instances


class FlinkKeyGroups(_HashCodeEngine):
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

    def _key_group(self, h: Any) -> Any:
        mixed = _signed32(_murmur3_final(_murmur3_step(0, h & _M32), 4))
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
        return int(self._key_group(self._key_hash(key, "FlinkKeyGroups.key_group")))

    def _parameters(self) -> dict[str, Any]:
        return {"max_parallelism": self.max_parallelism, **super()._parameters()}


class SparkHashPartitioning(_JavaEngine):
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
        w = _Words.cut(keys, 4)
        h = w.run(np.full(w.order.size, _SPARK_SEED, dtype=np.uint32), _murmur3_step)
        for i in range(3):
            some = w.rem > i
            h[some] = _murmur3_step(h[some], _sign_extend_byte((w.tail[some] >> (8 * i)) & 0xFF))
        return w.unsort(_murmur3_final(h, w.lengths))

    def _hash_int(self, u: Any) -> Any:
        h = _murmur3_step(_SPARK_SEED, u & _M32)
        if self.int_type == "int":
            return _murmur3_final(h, 4)
        return _murmur3_final(_murmur3_step(h, u >> 32), 8)

    def _place(self, h: Any) -> Any:
        return _signed32(h) % self.n_instances


class ConsistentHashRing(FallbackHash):
    """Consistent-hash ring with virtual nodes, for engines with a custom router.

    Growing from ``n`` to ``n + 1`` instances moves only the keys that the new
    instance takes over (about ``1 / (n + 1)`` of them); every other key stays.

    Parameters
    ----------
    n_instances : int
        Number of instances, >= 1.
    virtual_nodes : int, default 128
        Ring positions per instance, >= 1. More positions even out the shares:
        their relative spread is about ``1 / sqrt(virtual_nodes)``.

    Raises
    ------
    InvalidParameterError
        If ``n_instances`` or ``virtual_nodes`` is not an int >= 1.

    Notes
    -----
    All hashes are MurmurHash64A (64-bit, ``m = 0xc6a4a7935bd1e995``, ``r = 47``)
    of a fixed byte encoding. A ``str`` key hashes its UTF-8 bytes with seed 0; an
    ``int`` key hashes its 8-byte little-endian two's complement with seed 1.
    Replica ``r`` of instance ``i`` sits at the hash of
    ``i.to_bytes(4, "little") + r.to_bytes(4, "little")`` with seed 2. A key goes
    to the first position at or after its hash, wrapping past 2**64 - 1 to the
    smallest; equal positions go to the smaller instance. Positions depend only
    on ``(i, r)``, which is what makes growth minimal.

    References
    ----------
    .. [1] D. Karger, E. Lehman, T. Leighton, R. Panigrahy, M. Levine, D. Lewin.
       "Consistent hashing and random trees." STOC 1997. doi:10.1145/258533.258660
    .. [2] G. DeCandia et al. "Dynamo: Amazon's highly available key-value store."
       SOSP 2007. doi:10.1145/1294261.1294281
    .. [3] A. Appleby, "MurmurHash2 (MurmurHash64A)", SMHasher, 2008.

    Examples
    --------
    >>> ring = ConsistentHashRing(4)
    >>> ring.instance_of("hello") == ConsistentHashRing(4, virtual_nodes=128).instance_of("hello")
    True
    """

    engine = "ring"
    _PARAMETERS = ("virtual_nodes",)

    def __init__(self, n_instances: int, virtual_nodes: int = 128) -> None:
        super().__init__(n_instances)
        self.virtual_nodes = check_integer(virtual_nodes, "virtual_nodes", "ConsistentHashRing", lower=1)
        instance = np.repeat(np.arange(self.n_instances, dtype=np.uint64), self.virtual_nodes)
        replica = np.tile(np.arange(self.virtual_nodes, dtype=np.uint64), self.n_instances)
        h = _murmur64_step(
            np.full(instance.size, _murmur64_init(_RING_SEED_NODE, 8), np.uint64), instance | replica << 32
        )
        positions = _murmur64_final(h)
        order = np.lexsort((instance, positions))
        self._positions, self._owners = positions[order], instance[order].astype(np.int64)
        self._position_list, self._owner_list = self._positions.tolist(), self._owners.tolist()
        logger.debug("built a ring of %d positions for %d instances", positions.size, self.n_instances)

    def _hash_str(self, key: str) -> int:
        return _murmur64a(key.encode("utf-8"), _RING_SEED_STR)

    def _hash_strs(self, keys: pa.LargeStringArray) -> np.ndarray:
        w = _Words.cut(keys, 8)
        h = w.run(_murmur64_init(_RING_SEED_STR, w.lengths), _murmur64_step)
        some = w.rem > 0
        h[some] = ((h[some] ^ w.tail[some]) * _M64A) & _M64
        return w.unsort(_murmur64_final(h))

    def _hash_int(self, u: Any) -> Any:
        return _murmur64_final(_murmur64_step(_murmur64_init(_RING_SEED_INT, 8), u))

    def _place(self, h: Any) -> Any:
        return self._owner_list[bisect.bisect_left(self._position_list, h) % len(self._owner_list)]

    def _place_batch(self, h: np.ndarray) -> np.ndarray:
        return self._owners[np.searchsorted(self._positions, h) % self._owners.size]

    def _parameters(self) -> dict[str, Any]:
        return {"virtual_nodes": self.virtual_nodes}


_ENGINE_CLASSES: dict[str, type[FallbackHash]] = {
    cls.engine: cls
    for cls in (KafkaPartitioner, StormFieldsGrouping, FlinkKeyGroups, SparkHashPartitioning, ConsistentHashRing)
}


def make_fallback(engine: str, n_instances: int, **params: Any) -> FallbackHash:
    """Build the fallback hash of an engine by name.

    Parameters
    ----------
    engine : {"kafka", "storm", "flink", "spark", "ring"}
        Engine whose placement to reproduce (see :data:`ENGINES`).
    n_instances : int
        Number of instances of the operator.
    **params
        Engine parameters: ``int_type`` (kafka, storm, flink, spark),
        ``max_parallelism`` (flink), ``virtual_nodes`` (ring).

    Returns
    -------
    FallbackHash
        The fallback.

    Raises
    ------
    InvalidParameterError
        If ``engine`` is unknown, a parameter is not one of that engine's, or a
        value is out of range.

    Examples
    --------
    >>> make_fallback("flink", 6, max_parallelism=128)
    FlinkKeyGroups(n_instances=6, max_parallelism=128, int_type='long')
    """
    cls = _ENGINE_CLASSES[check_option(engine, "engine", "make_fallback", ENGINES)]
    unknown = sorted(set(params) - set(cls._PARAMETERS))
    if unknown:
        raise InvalidParameterError(
            f"the {unknown[0]!r} parameter of make_fallback is not accepted for engine {engine!r}; "
            f"accepted parameters are {list(cls._PARAMETERS)}"
        )
    return cls(n_instances, **params)


def fallback_from_dict(d: Mapping[str, Any]) -> FallbackHash:
    """Rebuild a fallback from :meth:`FallbackHash.to_dict` output.

    Parameters
    ----------
    d : mapping
        ``{"engine": str, "n_instances": int, "parameters": {...}}``
        (``parameters`` may be left out).

    Returns
    -------
    FallbackHash
        A fallback equal to the one that wrote ``d``.

    Raises
    ------
    SerializationError
        If ``d`` is not a mapping with exactly those fields.
    InvalidParameterError
        If a field has a wrong value (see :func:`make_fallback`).
    """
    fields = {"engine", "n_instances", "parameters"}
    if not isinstance(d, Mapping) or not {"engine", "n_instances"} <= set(d) or not set(d) <= fields:
        got = sorted(d) if isinstance(d, Mapping) else type(d).__name__
        raise SerializationError(
            f"a fallback dict has the fields 'engine', 'n_instances' and optionally 'parameters'; got {got}"
        )
    parameters = d.get("parameters", {})
    if not isinstance(parameters, Mapping):
        raise SerializationError(f"the 'parameters' of a fallback dict must be a mapping; got {parameters!r}")
    return make_fallback(d["engine"], d["n_instances"], **parameters)


def java_hash_code(key: str | int, *, int_type: str = "long") -> int:
    """Java ``hashCode()`` of a key: ``String``, ``Long`` or ``Integer``.

    Parameters
    ----------
    key : str or int
        A ``str`` is a Java ``String`` (hashed over UTF-16 code units); an int is
        a ``Long`` or, with ``int_type="int"``, an ``Integer``.
    int_type : {"long", "int"}, default "long"
        Java type of an int key.

    Returns
    -------
    int
        The signed 32-bit hash code.

    Raises
    ------
    InvalidParameterError
        If ``key`` is not a str or an int in range, or ``int_type`` is unknown.

    Examples
    --------
    >>> java_hash_code("hello"), java_hash_code(-7), java_hash_code(-7, int_type="int")
    (99162322, 6, -7)
    """
    int_type = check_option(int_type, "int_type", "java_hash_code", ("long", "int"))
    if isinstance(key, str):
        try:
            return _signed32(_java_string_hash(key))
        except UnicodeEncodeError:
            raise _surrogate_error(key, "key", "java_hash_code") from None
    bounds = _INT_RANGE if int_type == "int" else _LONG_RANGE
    return _signed32(_java_long_hash(_check_int_key(key, bounds, "java_hash_code") & _M64, int_type))


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
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidParameterError(f"the 'data' parameter of kafka_murmur2 must be bytes; got {type(data).__name__}")
    return _signed32(_murmur2(bytes(data)))
