"""Hash rounds the engines share: 32/64-bit masking, MurmurHash2, MurmurHash3 x86_32, MurmurHash64A.

Every round takes Python ints or numpy uint32/uint64 arrays (int64 arrays work
too) holding values in ``[0, 2**32)`` (the 64-bit ones: ``[0, 2**64)``), masks
every product and never updates in place, so an engine's scalar path
(``instance_of``) and its vectorized path (``instances_of``) run the very same
code. :class:`Words` cuts a batch of UTF-8 keys into little-endian words so
that a byte-string hash runs over all keys at once.

Seeds and the order of the rounds are each engine's own and live in its module
(``kafka``, ``flink``, ``spark``, ``ring``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = [
    "M32",
    "M64",
    "signed32",
    "bswap32",
    "sign_extend_byte",
    "murmur2_step",
    "murmur2_tail",
    "murmur2_final",
    "murmur3_step",
    "murmur3_final",
    "M64A",
    "murmur64_init",
    "murmur64_step",
    "murmur64_final",
    "utf8",
    "Words",
]

M32 = 0xFFFF_FFFF
M64 = 0xFFFF_FFFF_FFFF_FFFF
_FEW_ROWS = 16  # below this many keys still hashing, Python ints beat numpy calls


def signed32(x: Any) -> Any:
    """Java ``int`` value of the low 32 bits (Python int or int64 array)."""
    return ((x & M32) ^ 0x8000_0000) - 0x8000_0000


def bswap32(x: Any) -> Any:
    """Reverse the four bytes of a 32-bit value."""
    return ((x & 0xFF) << 24) | ((x & 0xFF00) << 8) | ((x >> 8) & 0xFF00) | ((x >> 24) & 0xFF)


def sign_extend_byte(b: Any) -> Any:
    """Java ``(int) byteValue``: a byte in [0, 256) sign-extended to 32 bits."""
    return b | ((b & 0x80) * 0x1FF_FFFE)


# MurmurHash2 (32-bit), as Kafka's clients/.../common/utils/Utils.java#murmur2 runs it.
_MURMUR2_M = 0x5BD1_E995


def murmur2_step(h: Any, k: Any) -> Any:
    """One 4-byte block."""
    k = (k * _MURMUR2_M) & M32
    k = k ^ (k >> 24)
    k = (k * _MURMUR2_M) & M32
    return ((h * _MURMUR2_M) & M32) ^ k


def murmur2_tail(h: Any, tail: Any) -> Any:
    """The last 1-3 bytes, zero-padded to a little-endian word."""
    return ((h ^ tail) * _MURMUR2_M) & M32


def murmur2_final(h: Any) -> Any:
    h = h ^ (h >> 13)
    h = (h * _MURMUR2_M) & M32
    return h ^ (h >> 15)


# MurmurHash3 x86_32 rounds, shared by Flink's MathUtils.murmurHash and Spark's Murmur3_x86_32.
_C1 = 0xCC9E_2D51
_C2 = 0x1B87_3593


def murmur3_step(h: Any, k: Any) -> Any:
    """``mixH1(h, mixK1(k))``: one 4-byte block."""
    k = (k * _C1) & M32
    k = ((k << 15) | (k >> 17)) & M32
    k = (k * _C2) & M32
    h = h ^ k
    h = ((h << 13) | (h >> 19)) & M32
    return (h * 5 + 0xE654_6B64) & M32


def murmur3_final(h: Any, length: Any) -> Any:
    """``fmix(h ^ length)``."""
    h = h ^ length
    h = h ^ (h >> 16)
    h = (h * 0x85EB_CA6B) & M32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2_AE35) & M32
    return h ^ (h >> 16)


# MurmurHash64A (Appleby, smhasher MurmurHash2.cpp), the ring's 64-bit hash.
M64A = 0xC6A4_A793_5BD1_E995


def murmur64_init(seed: int, length: Any) -> Any:
    return (seed ^ (length * M64A)) & M64


def murmur64_step(h: Any, k: Any) -> Any:
    """One 8-byte block."""
    k = (k * M64A) & M64
    k = k ^ (k >> 47)
    k = (k * M64A) & M64
    return ((h ^ k) * M64A) & M64


def murmur64_final(h: Any) -> Any:
    h = h ^ (h >> 47)
    h = (h * M64A) & M64
    return h ^ (h >> 47)


# --------------------------------------------------------------------------------------------
# Vectorized byte-string hashing over a pyarrow large_string array (no nulls).
# --------------------------------------------------------------------------------------------


def utf8(arr: pa.LargeStringArray) -> tuple[np.ndarray, np.ndarray]:
    """Key boundaries (int64, starting at 0) and the UTF-8 bytes they index."""
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return offsets - offsets[0], data[offsets[0] : offsets[-1]]


@dataclass(frozen=True)
class Words:
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
    def cut(cls, arr: pa.LargeStringArray, width: int) -> Words:
        offsets, data = utf8(arr)
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
