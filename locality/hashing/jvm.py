"""What the JVM engines share: Java ``hashCode()`` of a key, and keys typed as Java ``Long`` or ``Integer``.

``String.hashCode`` runs over UTF-16 code units (a non-BMP character counts as
two), ``Long.hashCode`` is ``(int)(v ^ (v >>> 32))`` and ``Integer.hashCode`` is
the value itself. Storm and Flink start from these; Kafka and Spark hash the
serialized bytes instead but still type Python ints as ``Long`` or ``Integer``.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pyarrow as pa

from locality._validation import check_option
from locality.hashing.base import FallbackHash
from locality.hashing.keys import INT_RANGE, LONG_RANGE, check_int_key, lone_surrogate_error
from locality.hashing.primitives import M32, M64, signed32, utf8

__all__ = ["JavaEngine", "HashCodeEngine", "java_hash_code", "java_string_hash", "java_string_hashes", "java_long_hash"]

_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def java_long_hash(u: Any, int_type: str) -> Any:
    """``Long.hashCode`` = ``(int)(v ^ (v >>> 32))``, or ``Integer.hashCode`` = ``v``, of a 64-bit pattern."""
    return u & M32 if int_type == "int" else (u ^ (u >> 32)) & M32


def java_string_hash(s: str) -> int:
    """``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, mod 2**32."""
    h = 0
    for unit in memoryview(s.encode(_UTF16)).cast("H"):
        h = (31 * h + unit) & M32
    return h


def java_string_hashes(arr: pa.LargeStringArray) -> np.ndarray:
    """Vectorized ``String.hashCode`` (uint32): sum of ``unit * 31**(units after it)`` per key."""
    offsets, data = utf8(arr)
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
            return signed32(java_string_hash(key))
        except UnicodeEncodeError:
            raise lone_surrogate_error(key, "key", "java_hash_code") from None
    bounds = INT_RANGE if int_type == "int" else LONG_RANGE
    return signed32(java_long_hash(check_int_key(key, bounds, "java_hash_code") & M64, int_type))


class JavaEngine(FallbackHash):
    """A JVM engine: Python ints hash as Java ``Long`` (default) or ``Integer``."""

    _PARAMETERS = ("int_type",)

    def __init__(self, n_instances: int, *, int_type: str = "long") -> None:
        super().__init__(n_instances)
        self.int_type = check_option(int_type, "int_type", type(self).__name__, ("long", "int"))

    def _int_bounds(self) -> tuple[int, int]:
        return INT_RANGE if self.int_type == "int" else LONG_RANGE

    def _parameters(self) -> dict[str, Any]:
        return {"int_type": self.int_type}


class HashCodeEngine(JavaEngine):
    """An engine that starts from the key's Java ``hashCode()``."""

    def _hash_str(self, key: str) -> int:
        return java_string_hash(key)

    def _hash_strs(self, keys: pa.LargeStringArray) -> np.ndarray:
        return java_string_hashes(keys)

    def _hash_int(self, u: Any) -> Any:
        return java_long_hash(u, self.int_type)
