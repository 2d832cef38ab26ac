"""The byte layout of a Space-Saving sketch (no pickle): little-endian, versioned, checksummed.

Layout: a 40-byte header (magic ``b"LCSS"``, u16 format version, u16 flags,
u32 arity, u64 capacity, u64 counter count ``n``, f64 total weight, 4 pad
bytes); ``arity`` kind bytes (0 unset, 1 int64, 2 UTF-8) padded to 8; ``n`` f64
counts; ``n`` f64 errors; per component either ``n`` int64 values, or ``n + 1``
int64 offsets then the UTF-8 bytes padded to 8; finally a u32 CRC-32 of
everything before it. :func:`decode` checks every part and raises a
:class:`~locality.errors.SerializationError` saying what is wrong.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from locality.errors import SerializationError
from locality.sketch.columns import INT, STR

__all__ = ["SketchImage", "encode", "decode"]

_MAGIC = b"LCSS"
_FORMAT_VERSION = 1
# magic, format version, flags (reserved, 0), arity, capacity, counters, total weight, 4 pad bytes.
_HEADER = struct.Struct("<4sHHIQQd4x")
_CRC = struct.Struct("<I")


@dataclass(frozen=True)
class SketchImage:
    """Everything a sketch's bytes hold: its parameters, counters and key columns."""

    arity: int
    capacity: int
    total: float
    kinds: list[int | None]  # per component: INT, STR, or None (no key yet)
    counts: np.ndarray
    errors: np.ndarray
    columns: list[Any]  # per component: int64 array, Arrow string array, or None


def encode(image: SketchImage) -> bytes:
    """The bytes of ``image`` (see the module docstring for the layout)."""
    n = len(image.counts)
    parts = [
        _HEADER.pack(_MAGIC, _FORMAT_VERSION, 0, image.arity, image.capacity, n, image.total),
        _pad8(bytes(k or 0 for k in image.kinds)),
        image.counts.astype("<f8").tobytes(),
        image.errors.astype("<f8").tobytes(),
    ]
    for kind, col in zip(image.kinds, image.columns, strict=True):
        if kind == INT:
            parts.append(col.astype("<i8").tobytes())
        elif kind == STR:
            large = col.cast(pa.large_string())
            offsets = np.frombuffer(large.buffers()[1], dtype="<i8")[large.offset : large.offset + n + 1]
            data = large.buffers()[2]
            chunk = b"" if data is None else data.to_pybytes()[int(offsets[0]) : int(offsets[-1])]
            parts.append((offsets - offsets[0]).astype("<i8").tobytes())
            parts.append(_pad8(chunk))
    body = b"".join(parts)
    return body + _CRC.pack(zlib.crc32(body))


def decode(buf: bytes) -> SketchImage:
    """Parse and check the bytes :func:`encode` wrote.

    Raises
    ------
    SerializationError
        If the bytes are truncated, corrupt, of another format or of an
        unsupported format version.
    """
    size = _HEADER.size + _CRC.size
    if len(buf) < size:
        raise SerializationError(f"truncated SpaceSaving bytes: got {len(buf)} bytes, a sketch needs at least {size}")
    magic, version, _flags, arity, capacity, n, total = _HEADER.unpack_from(buf, 0)
    if magic != _MAGIC:
        raise SerializationError(
            f"these bytes are not a locality SpaceSaving sketch: magic {magic!r}, expected {_MAGIC!r}"
        )
    if version != _FORMAT_VERSION:
        raise SerializationError(
            f"SpaceSaving format version {version} is not supported (this locality reads version {_FORMAT_VERSION})"
        )
    (crc,) = _CRC.unpack_from(buf, len(buf) - _CRC.size)
    if zlib.crc32(buf[: -_CRC.size]) != crc:
        raise SerializationError(f"corrupt or truncated SpaceSaving bytes: checksum mismatch over {len(buf)} bytes")
    reader = _Reader(buf[: -_CRC.size], _HEADER.size)
    if arity < 1 or capacity < 1 or n > capacity or not math.isfinite(total) or total < 0:
        raise SerializationError(
            f"corrupt SpaceSaving header: arity {arity}, capacity {capacity}, {n} counters, total {total}"
        )
    kinds = list(reader.read(_pad_len(arity), "kinds")[:arity])
    if any(k not in (0, INT, STR) for k in kinds) or (n > 0 and 0 in kinds):
        raise SerializationError(f"corrupt SpaceSaving bytes: unknown key kinds {kinds}")
    counts = reader.array("<f8", n, "counts").astype(np.float64)
    errors = reader.array("<f8", n, "errors").astype(np.float64)
    if not (np.isfinite(counts).all() and (counts > 0).all() and (errors >= 0).all() and (errors <= counts).all()):
        raise SerializationError("corrupt SpaceSaving bytes: counts must be finite > 0 and errors in [0, count]")
    cols: list[Any] = []
    for kind in kinds:
        if kind == INT:
            cols.append(reader.array("<i8", n, "int keys").astype(np.int64))
        elif kind == STR:
            cols.append(_read_strings(reader, n))
        else:
            cols.append(None)
    if reader.pos != len(reader.buf):
        raise SerializationError(
            f"corrupt SpaceSaving bytes: {len(reader.buf) - reader.pos} unexpected bytes after the counters"
        )
    return SketchImage(arity, capacity, float(total), [k or None for k in kinds], counts, errors, cols)


def _read_strings(reader: _Reader, n: int) -> pa.StringArray:
    offsets = reader.array("<i8", n + 1, "string offsets").astype(np.int64)
    if offsets[0] != 0 or (np.diff(offsets) < 0).any():
        raise SerializationError("corrupt SpaceSaving bytes: string offsets are not increasing")
    chunk = reader.read(_pad_len(int(offsets[-1])), "string data")[: int(offsets[-1])]
    arr = pa.Array.from_buffers(
        pa.large_string(), n, [None, pa.py_buffer(offsets.astype("<i8").tobytes()), pa.py_buffer(chunk)]
    )
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise SerializationError(f"corrupt SpaceSaving bytes: invalid UTF-8 keys ({exc})") from exc
    return arr.cast(pa.string())


def _pad_len(size: int) -> int:
    return (size + 7) // 8 * 8


def _pad8(chunk: bytes) -> bytes:
    return chunk + b"\0" * (_pad_len(len(chunk)) - len(chunk))


class _Reader:
    """Bounds-checked reads over serialized bytes."""

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def read(self, size: int, what: str) -> bytes:
        if size < 0 or self.pos + size > len(self.buf):
            raise SerializationError(
                f"truncated SpaceSaving bytes: {what} needs {size} bytes at offset {self.pos}, "
                f"only {len(self.buf) - self.pos} left"
            )
        chunk = self.buf[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def array(self, dtype: str, count: int, what: str) -> np.ndarray:
        chunk = self.read(count * 8, what)
        return np.frombuffer(chunk, dtype=dtype)
