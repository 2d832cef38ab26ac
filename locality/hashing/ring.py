"""A consistent-hash ring with virtual nodes, for engines whose router is the user's own."""

from __future__ import annotations

import bisect
import logging
import struct
from typing import Any

import numpy as np
import pyarrow as pa

from locality._validation import check_integer
from locality.hashing.base import FallbackHash
from locality.hashing.primitives import M64, M64A, Words, murmur64_final, murmur64_init, murmur64_step

__all__ = ["ConsistentHashRing"]

logger = logging.getLogger(__name__)

_RING_SEED_STR, _RING_SEED_INT, _RING_SEED_NODE = 0, 1, 2


def _murmur64a(data: bytes, seed: int) -> int:
    n = len(data)
    h = murmur64_init(seed, n)
    for (k,) in struct.iter_unpack("<Q", data[: n & ~7]):
        h = murmur64_step(h, k)
    if n & 7:
        h = ((h ^ int.from_bytes(data[n & ~7 :], "little")) * M64A) & M64
    return murmur64_final(h)


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
        h = murmur64_step(
            np.full(instance.size, murmur64_init(_RING_SEED_NODE, 8), np.uint64), instance | replica << 32
        )
        positions = murmur64_final(h)
        order = np.lexsort((instance, positions))
        self._positions, self._owners = positions[order], instance[order].astype(np.int64)
        self._position_list, self._owner_list = self._positions.tolist(), self._owners.tolist()
        logger.debug("built a ring of %d positions for %d instances", positions.size, self.n_instances)

    def _hash_str(self, key: str) -> int:
        return _murmur64a(key.encode("utf-8"), _RING_SEED_STR)

    def _hash_strs(self, keys: pa.LargeStringArray) -> np.ndarray:
        w = Words.cut(keys, 8)
        h = w.run(murmur64_init(_RING_SEED_STR, w.lengths), murmur64_step)
        some = w.rem > 0
        h[some] = ((h[some] ^ w.tail[some]) * M64A) & M64
        return w.unsort(murmur64_final(h))

    def _hash_int(self, u: Any) -> Any:
        return murmur64_final(murmur64_step(murmur64_init(_RING_SEED_INT, 8), u))

    def _place(self, h: Any) -> Any:
        return self._owner_list[bisect.bisect_left(self._position_list, h) % len(self._owner_list)]

    def _place_batch(self, h: np.ndarray) -> np.ndarray:
        return self._owners[np.searchsorted(self._positions, h) % self._owners.size]

    def _parameters(self) -> dict[str, Any]:
        return {"virtual_nodes": self.virtual_nodes}
