"""Space-Saving heavy-hitter sketch for keys and key tuples, with a vectorized, mergeable batch path."""

from __future__ import annotations

import heapq
import logging
import math
import numbers
import struct
import zlib
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from locality._validation import check_integer, check_interval
from locality.errors import InvalidParameterError, SerializationError

__all__ = ["SpaceSaving"]

logger = logging.getLogger(__name__)

# Component kinds. The numbers are also the on-disk codes of the serialized format.
_INT = 1
_STR = 2
_KIND_NAMES = {_INT: "int", _STR: "str", None: "unset"}
_KIND_ARTICLES = {_INT: "an int", _STR: "a str"}
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_MAGIC = b"LCSS"
_FORMAT_VERSION = 1
# magic, format version, flags (reserved, 0), arity, capacity, counters, total weight, 4 pad bytes.
_HEADER = struct.Struct("<4sHHIQQd4x")
_CRC = struct.Struct("<I")


class _Column(NamedTuple):
    """One key component of a batch, normalized.

    ``kind`` is ``_INT`` (``values`` is an int64 ndarray of rows) or ``_STR``
    (``values`` is a ``pa.StringArray``). For strings, ``codes`` is either
    ``None`` (``values`` holds one entry per row) or an int64 array of row codes
    into ``values`` (a dictionary of distinct strings): the object-array path
    factorizes in pandas first because building Arrow strings from Python objects
    costs ~180 ns each, so it pays that only once per distinct value.
    """

    kind: int
    values: Any
    codes: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.values) if self.codes is None else len(self.codes)


class SpaceSaving:
    """Space-Saving sketch of the heaviest keys (or key tuples) of a weighted stream.

    Keeps at most ``capacity`` counters. Each monitored key has a count, an
    over-estimate of its true weight, and an error, the most that count can
    over-estimate. A key is one value (``arity=1``: per-operator key loads) or a
    tuple of ``arity`` values (``arity=2``: co-occurring key pairs of two
    consecutive operators). Every key component is a Python ``str`` or an
    ``int`` that fits in int64; each position has one type, fixed by the first
    update.

    :meth:`update` adds one key with the classic algorithm [1]_. :meth:`update_batch`
    is the fast path for Arrow/numpy/pandas columns: it counts the batch exactly
    (hash factorization, no per-key Python code) and merges those exact counts
    into the sketch as one mergeable summary [2]_. :meth:`merge` combines sketches
    built on parts of a stream, e.g. one per Spark partition.

    Parameters
    ----------
    capacity : int
        Number of counters ``m`` (>= 1). Memory and the error bound ``W/m`` both
        follow it.
    arity : int, default 1
        Number of components of a key (>= 1).

    Raises
    ------
    InvalidParameterError
        If ``capacity`` or ``arity`` is not an int >= 1.

    See Also
    --------
    datasketches.frequent_items_sketch : Misra-Gries sketch with the same verbs.

    Accuracy
    --------
    Let ``W`` be :attr:`total_weight` (everything absorbed, through any mix of
    :meth:`update`, :meth:`update_batch` and :meth:`merge`), ``m`` the capacity,
    ``f(x)`` the true weight of key ``x`` and ``mu`` = :attr:`min_count` (the
    smallest counter once all ``m`` counters are in use, else 0). Then, whatever
    the batch sizes and however the stream was split and merged:

    * **exact** while the distinct keys absorbed number at most ``m``: every key
      is monitored with its true weight and zero error;
    * every monitored key has ``lower <= f(x) <= estimate = upper`` and
      ``upper - lower = error <= mu <= W/m``;
    * every unmonitored key has ``f(x) <= mu <= W/m``: its estimate is 0, its
      upper bound ``mu``; so every key with ``f(x) > W/m`` is monitored;
    * the counters sum to at most ``W``.

    After ``a.merge(b)`` the same statements hold with ``W = W_a + W_b``: merging
    costs nothing in the bound. :meth:`update_batch` is exactly a merge with the
    batch's exact counts, so it keeps the bound too. The batch path and the
    one-at-a-time path give identical counters, errors and total whenever no
    counter is evicted, i.e. when ``len(sketch)`` plus the batch keys that are
    not monitored is at most ``m`` (in particular while the sketch is not full
    and stays so, or when every batch key is already monitored). Beyond that the
    two may keep different keys (the batch path pays the minimum once per new key
    and batch instead of once per occurrence, so it is usually tighter), and both
    obey the bounds above. Weights are summed in float64, so "identical" and the
    bounds hold exactly for integer-valued weights (sums below 2**53) and up to
    float64 rounding otherwise.

    Notes
    -----
    **The merge rule.** Let sketch S have counters ``c_S(x), e_S(x)`` and minimum
    ``mu_S``, and write ``C_S(x) = c_S(x)`` if ``x`` is monitored in S, else
    ``mu_S`` (an upper bound of ``f_S(x)``), and ``E_S(x) = e_S(x)`` or ``mu_S``
    likewise. Merging S and T forms, for every key of either, the candidate
    ``(C_S + C_T, E_S + E_T)`` and keeps the ``m`` largest counts (ties: smaller
    error, then older counter). A batch is a sketch T with its exact counts and
    ``mu_T = 0``; a single update is a batch of one key (on a full sketch it
    replaces a counter of count ``mu``, the one in the lowest slot among ties).

    **Invariants** (hold for an empty sketch, kept by every merge):
    (I1) ``c(x) - e(x) <= f(x) <= c(x)`` for monitored keys;
    (I2) ``f(x) <= mu`` for unmonitored keys; (I3) ``sum(c) <= W``;
    (I4) ``e(x) <= mu`` for monitored keys.

    *Proof.* (I1): each term of a candidate satisfies it: a monitored key gives
    ``c - e <= f_S <= c``, an unmonitored one ``mu - mu = 0 <= f_S <= mu`` by
    (I2); sum the two terms. (I2): a key dropped by the selection had a candidate
    count ``>= f`` by (I1) and no larger than every kept count, so ``<=`` the new
    ``mu``; a key in neither sketch has ``f <= mu_S + mu_T``, and every candidate
    is ``>= mu_S + mu_T`` (a monitored counter is ``>= mu``), so the new ``mu``
    is too. (I3): for the kept set K, ``|K| <= m``; if S is full (m counters),
    the keys of K not monitored in S are at most as many as the counters of S
    outside K, each ``>= mu_S``, so ``sum_K C_S <= sum(c_S) <= W_S``; if S is not
    full, ``mu_S = 0`` and the same holds. Likewise for T, hence
    ``sum_K c <= W_S + W_T``. (I4): ``E_S + E_T <= mu_S + mu_T <= new mu`` by
    (I4) on S and T and the remark in (I2). If the result is not full, nothing
    was dropped, so neither input was full and all errors are 0.

    From (I3), a full sketch has ``m * mu <= sum(c) <= W``, so ``mu <= W/m``;
    the Accuracy statements follow from (I1), (I2), (I4). This is the
    mergeability of Agarwal et al. [2]_ (Misra-Gries with ``k`` counters is
    Space-Saving with ``k + 1``, error ``W/(k+1)``) proved directly on
    Space-Saving counters, for weighted streams.

    **Cost.** :meth:`update_batch` reduces every key tuple to one int64 code
    (the key itself for a single int component, else a 64-bit hash computed
    with numpy over the Arrow string buffers), groups the sketch's stored codes
    and the batch's codes with one ``pandas.factorize``, counts with
    ``np.bincount`` and selects with ``np.partition``: O(m + batch) per batch,
    and the sketch's keys are never re-hashed. Hashes can collide, so every
    batch row is compared with the first row of its group; on any mismatch the
    batch is grouped exactly instead (Arrow ``dictionary_encode`` per component),
    so results never depend on the hash. Keep batches at least as large as the
    capacity. Arrow string columns are the fastest input; numpy object columns
    pay a ``pandas.factorize`` of Python strings first. :meth:`update` costs a
    dict lookup, plus a lazy-heap step when it evicts; interleaving single
    updates and batches converts between the two layouts (O(m) each time).

    References
    ----------
    .. [1] Metwally, Agrawal, El Abbadi. "Efficient computation of frequent and
       top-k elements in data streams." ICDT 2005, LNCS 3363, pp. 398-412.
       https://doi.org/10.1007/978-3-540-30570-5_27
    .. [2] Agarwal, Cormode, Huang, Phillips, Wei, Yi. "Mergeable summaries."
       PODS 2012, pp. 23-34, https://doi.org/10.1145/2213556.2213562; ACM TODS
       38(4), 2013, https://doi.org/10.1145/2500128

    Examples
    --------
    >>> import numpy as np
    >>> from locality.sketch import SpaceSaving
    >>> rng = np.random.default_rng(0)
    >>> keys = rng.zipf(1.5, size=10_000) % 1_000
    >>> sk = SpaceSaving(capacity=64)
    >>> sk.update_batch(keys)
    >>> top = sk.top_k(3)
    >>> list(top.columns)
    ['key', 'estimate', 'lower', 'upper']
    >>> heaviest = int(top.key[0])
    >>> heaviest, bool(top.estimate[0] == (keys == heaviest).sum())
    (1, True)
    >>> pairs = SpaceSaving(capacity=8, arity=2)
    >>> pairs.update(("paris", "#jazz"), weight=2.0)
    >>> pairs.update_batch([["paris", "rome"], ["#jazz", "#art"]])
    >>> pairs.estimate(("paris", "#jazz")), pairs.total_weight
    (3.0, 4.0)
    """

    def __init__(self, capacity: int, arity: int = 1) -> None:
        self._capacity = check_integer(capacity, "capacity", "SpaceSaving", lower=1)
        self._arity = check_integer(arity, "arity", "SpaceSaving", lower=1)
        self._kinds: list[int | None] = [None] * self._arity
        self._total = 0.0
        # Two layouts of the same counters, each valid or stale. The array layout
        # (one column per component, numpy counts) serves batches, merges, top_k and
        # bytes; the Python layout (dict key -> slot, lists, lazy min-heap) serves
        # single updates and point queries. Converting costs O(m), so a layout is
        # only rebuilt when the other one changed.
        self._cols: list[Any] = [None] * self._arity
        self._count = np.zeros(0, dtype=np.float64)
        self._error = np.zeros(0, dtype=np.float64)
        self._hash = np.zeros(0, dtype=np.int64)  # one int64 code per counter, see _hash_columns
        self._arr_ok = True
        self._keys: list[Any] = []
        self._slot: dict[Any, int] = {}
        self._pc: list[float] = []
        self._pe: list[float] = []
        self._heap: list[tuple[float, int]] | None = None
        self._py_ok = True

    # ------------------------------------------------------------------ properties

    @property
    def capacity(self) -> int:
        """Maximum number of counters ``m``."""
        return self._capacity

    @property
    def arity(self) -> int:
        """Number of components of a key."""
        return self._arity

    @property
    def total_weight(self) -> float:
        """Total weight absorbed: the ``W`` of the Accuracy bounds."""
        return self._total

    @property
    def min_count(self) -> float:
        """Smallest counter when all ``capacity`` counters are used, else 0.

        It bounds the true weight of every unmonitored key and the error of every
        monitored one, and is at most ``total_weight / capacity``.
        """
        if len(self) < self._capacity:
            return 0.0
        if self._arr_ok:
            return float(self._count.min())
        return float(min(self._pc))

    def __len__(self) -> int:
        """Number of monitored keys (counters in use)."""
        return len(self._count) if self._arr_ok else len(self._keys)

    def is_empty(self) -> bool:
        """Return True if nothing was ever added (weights are > 0)."""
        return self._total == 0.0

    # ------------------------------------------------------------------ updates

    def update(self, key: Any, weight: float = 1.0) -> None:
        """Add ``weight`` to ``key`` with the classic Space-Saving step.

        Parameters
        ----------
        key : str, int or tuple
            A str or int for ``arity == 1``; a tuple of ``arity`` str/int components
            otherwise.
        weight : float, default 1.0
            Finite and > 0.

        Raises
        ------
        InvalidParameterError
            If the weight is not a finite float > 0, or the key has the wrong shape
            or a component type different from the one fixed by the first update.

        Notes
        -----
        A monitored key adds ``weight``; a new key takes a free counter, or, when
        all are used, replaces a key with the smallest count ``mu`` and starts at
        ``mu + weight`` with error ``mu``. For streams, prefer :meth:`update_batch`.
        """
        if type(weight) is not float or not 0.0 < weight < math.inf:
            weight = check_interval(weight, "weight", "SpaceSaving.update", lower=0.0, upper=math.inf, closed="neither")
        if self._arity == 1 and type(key) is str and self._kinds[0] == _STR:
            k = key  # the common cases, without the general checks
        elif self._arity == 1 and type(key) is int and self._kinds[0] == _INT and _INT64_MIN <= key <= _INT64_MAX:
            k = key
        else:
            k = self._normalize_key(key, "key", "SpaceSaving.update", fix=True)
        if not self._py_ok:
            self._to_python()
        self._arr_ok = False
        self._total += weight
        slot = self._slot.get(k)
        if slot is not None:
            self._pc[slot] += weight
            return
        n = len(self._keys)
        if n < self._capacity:
            self._slot[k] = n
            self._keys.append(k)
            self._pc.append(weight)
            self._pe.append(0.0)
            return
        # Evict a key with the smallest count. Heap entries may be stale but never
        # above the slot's count (counts only grow), so an entry equal to its slot's
        # count is a true minimum; stale ones are refreshed on the way.
        heap = self._heap
        if heap is None:
            heap = self._heap = [(c, i) for i, c in enumerate(self._pc)]
            heapq.heapify(heap)
        pc = self._pc
        while True:
            low, slot = heap[0]
            now = pc[slot]
            if now == low:
                break
            heapq.heapreplace(heap, (now, slot))
        del self._slot[self._keys[slot]]
        self._keys[slot] = k
        self._slot[k] = slot
        pc[slot] = low + weight
        self._pe[slot] = low
        heapq.heapreplace(heap, (low + weight, slot))

    def update_batch(self, keys: Any, weights: Any = None) -> None:
        """Add a batch of keys (the fast path), counting the batch exactly first.

        Parameters
        ----------
        keys : column or sequence of columns
            For ``arity == 1`` one column; otherwise a sequence of ``arity``
            columns (or a pandas DataFrame / pyarrow Table or RecordBatch with
            exactly ``arity`` columns, taken in order). A column is a numpy array,
            pandas Series, pyarrow Array/ChunkedArray or list of str or int values.
            Columns, not rows: ``[["a", "b"], ["x", "y"]]`` holds the pairs
            ``("a", "x")`` and ``("b", "y")``.
        weights : array-like of float, optional
            One finite weight > 0 per row; default 1 per row.

        Raises
        ------
        InvalidParameterError
            On nulls in the keys (drop null keys before), columns of different
            lengths, a column that is not str or int, a component type different
            from the sketch's, or a weight that is not finite and > 0.

        Notes
        -----
        The batch is aggregated exactly (one int64 code per key tuple, grouped
        with ``pandas.factorize`` together with the sketch's codes and checked
        against hash collisions, then ``np.bincount``), then merged: monitored
        keys add their batch count; new keys enter with ``batch count +
        min_count`` and error ``min_count``; the ``capacity`` largest counters
        are kept. See the class Accuracy section for the bound and for when the
        result equals repeated :meth:`update` calls.
        """
        owner = "SpaceSaving.update_batch"
        raw = self._split_columns(keys, owner)
        cols = [_parse_column(c, i, self._arity, owner) for i, c in enumerate(raw)]
        lengths = {len(c) for c in cols}
        if len(lengths) > 1:
            raise InvalidParameterError(
                f"the 'keys' parameter of {owner} must have columns of one length; got lengths {[len(c) for c in cols]}"
            )
        nrows = lengths.pop()
        w = _parse_weights(weights, nrows, owner)
        if nrows == 0:
            return
        self._check_kinds([c.kind for c in cols], "keys", owner)
        added = float(nrows) if w is None else float(w.sum())
        self._to_arrays()
        self._absorb(cols, nrows, w, None, 0.0)
        self._total += added
        logger.debug("update_batch: %d rows, %d counters, min %.6g", nrows, len(self), self.min_count)

    def merge(self, other: SpaceSaving) -> SpaceSaving:
        """Merge ``other`` into this sketch and return this sketch.

        Parameters
        ----------
        other : SpaceSaving
            Same capacity, arity and component types (an empty sketch matches any
            types). It is not modified.

        Returns
        -------
        SpaceSaving
            ``self``, now summarizing both streams; ``total_weight`` is the sum.

        Raises
        ------
        InvalidParameterError
            If ``other`` is not a SpaceSaving or differs in capacity, arity or
            component types.

        Notes
        -----
        Every key of either sketch gets the candidate count ``C_self + C_other``
        (a sketch's count of a key it does not monitor is its ``min_count``) and
        error ``E_self + E_other``; the ``capacity`` largest are kept. The bound
        ``error <= min_count <= W/m`` then holds for the merged total ``W`` (proof
        in the class Notes), for any merge order.
        """
        owner = "SpaceSaving.merge"
        if not isinstance(other, SpaceSaving):
            raise InvalidParameterError(
                f"the 'other' parameter of {owner} must be a SpaceSaving; got {type(other).__name__}"
            )
        for name, mine, theirs in (
            ("capacity", self._capacity, other._capacity),
            ("arity", self._arity, other._arity),
        ):
            if mine != theirs:
                raise InvalidParameterError(
                    f"the 'other' parameter of {owner} must have the same {name} as this sketch ({mine}); got {theirs}"
                )
        self._check_kinds(other._kinds, "other", owner)
        if len(other) == 0:
            self._total += other._total
            return self
        other._to_arrays()
        # Read other's state before self changes: other may be self.
        cols = [_Column(kind, col) for kind, col in zip(other._kinds, other._cols, strict=True)]
        counts, errors, other_min = other._count, other._error, other.min_count
        added, hashes = other._total, other._hash
        self._to_arrays()
        self._absorb(cols, len(counts), counts, errors, other_min, hashes)
        self._total += added
        return self

    # ------------------------------------------------------------------ queries

    def estimate(self, key: Any) -> float:
        """Return the estimated weight of ``key`` (its upper bound; 0 if unmonitored)."""
        slot = self._find(key, "SpaceSaving.estimate")
        return 0.0 if slot is None else self._pc[slot]

    def lower_bound(self, key: Any) -> float:
        """Return a lower bound of the true weight of ``key`` (0 if unmonitored)."""
        slot = self._find(key, "SpaceSaving.lower_bound")
        return 0.0 if slot is None else self._pc[slot] - self._pe[slot]

    def upper_bound(self, key: Any) -> float:
        """Return an upper bound of the true weight of ``key`` (``min_count`` if unmonitored)."""
        slot = self._find(key, "SpaceSaving.upper_bound")
        return self.min_count if slot is None else self._pc[slot]

    def top_k(self, k: int | None = None) -> pd.DataFrame:
        """Return the ``k`` heaviest monitored keys (all if ``k`` is None), heaviest first.

        Parameters
        ----------
        k : int, optional
            Number of rows (>= 0).

        Returns
        -------
        pandas.DataFrame
            Columns ``key`` (arity 1) or ``key0, key1, ...``, then ``estimate``,
            ``lower``, ``upper`` (float64). Key columns are int64 for int
            components and object (str) otherwise. Ties in ``estimate`` are
            ordered by larger ``lower``, then by key.
        """
        if k is not None:
            k = check_integer(k, "k", "SpaceSaving.top_k", lower=0)
        self._to_arrays()
        count, error = self._count, self._error
        rows = np.arange(len(count))
        if k is not None and k < len(count):
            # Sort only what can reach the first k rows: everything at or above the
            # k-th largest estimate (ties included, so the order stays by key).
            cut = np.partition(count, len(count) - k)[len(count) - k] if k else math.inf
            rows = np.flatnonzero(count >= cut)
        data: dict[str, Any] = {}
        for name, kind, col in zip(self._key_names(), self._kinds, self._columns(), strict=True):
            if kind == _INT:
                data[name] = col[rows]
            elif kind == _STR:
                data[name] = col.take(rows).to_numpy(zero_copy_only=False)
            else:
                data[name] = np.empty(0, dtype=object)
        data["estimate"] = count[rows]
        data["lower"] = count[rows] - error[rows]
        data["upper"] = count[rows]
        frame = pd.DataFrame(data)
        frame = frame.sort_values(
            ["estimate", "lower", *self._key_names()],
            ascending=[False, False] + [True] * self._arity,
            kind="mergesort",
        )
        if k is not None:
            frame = frame.head(k)
        return frame.reset_index(drop=True)

    @staticmethod
    def apriori_error(capacity: int, total_weight: float) -> float:
        """Return the worst-case error ``total_weight / capacity`` before building a sketch.

        Parameters
        ----------
        capacity : int
            Number of counters (>= 1).
        total_weight : float
            Total weight of the stream (finite, >= 0).

        Returns
        -------
        float
            The bound on every error and on the weight of every unmonitored key.
        """
        owner = "SpaceSaving.apriori_error"
        capacity = check_integer(capacity, "capacity", owner, lower=1)
        total_weight = check_interval(total_weight, "total_weight", owner, lower=0.0, upper=math.inf, closed="left")
        return total_weight / capacity

    def __repr__(self) -> str:
        return (
            f"SpaceSaving(capacity={self._capacity}, arity={self._arity}) "
            f"# {len(self)} counters, total weight {self._total:.12g}"
        )

    def __str__(self) -> str:
        kinds = ", ".join(_KIND_NAMES[k] for k in self._kinds)
        error = float((self._error if self._arr_ok else np.asarray(self._pe)).max(initial=0.0))
        lines = [
            "### SpaceSaving summary:",
            f"    capacity        : {self._capacity}",
            f"    arity           : {self._arity} ({kinds})",
            f"    monitored keys  : {len(self)}",
            f"    total weight    : {self._total:.12g}",
            f"    min counter     : {self.min_count:.12g}",
            f"    max error       : {error:.12g}",
            f"    a priori error  : {self._total / self._capacity:.12g} (total weight / capacity)",
            "### End SpaceSaving summary",
        ]
        return "\n".join(lines)

    # ------------------------------------------------------------------ bytes

    def to_bytes(self) -> bytes:
        """Serialize the sketch (no pickle); see :meth:`from_bytes` for the layout.

        Returns
        -------
        bytes
            A little-endian image that :meth:`from_bytes` turns back into a sketch
            with the same counters, errors, key order, types and total weight.
        """
        self._to_arrays()
        n = len(self._count)
        parts = [
            _HEADER.pack(_MAGIC, _FORMAT_VERSION, 0, self._arity, self._capacity, n, self._total),
            _pad8(bytes(k or 0 for k in self._kinds)),
            self._count.astype("<f8").tobytes(),
            self._error.astype("<f8").tobytes(),
        ]
        for kind, col in zip(self._kinds, self._columns(), strict=True):
            if kind == _INT:
                parts.append(col.astype("<i8").tobytes())
            elif kind == _STR:
                large = col.cast(pa.large_string())
                offsets = np.frombuffer(large.buffers()[1], dtype="<i8")[large.offset : large.offset + n + 1]
                data = large.buffers()[2]
                chunk = b"" if data is None else data.to_pybytes()[int(offsets[0]) : int(offsets[-1])]
                parts.append((offsets - offsets[0]).astype("<i8").tobytes())
                parts.append(_pad8(chunk))
        body = b"".join(parts)
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> SpaceSaving:
        """Rebuild a sketch from :meth:`to_bytes` output.

        Layout (little-endian): a 40-byte header (magic ``b"LCSS"``, u16 format
        version, u16 flags, u32 arity, u64 capacity, u64 counter count ``n``,
        f64 total weight, 4 pad bytes); ``arity`` kind bytes (0 unset, 1 int64,
        2 UTF-8) padded to 8; ``n`` f64 counts; ``n`` f64 errors; per component
        either ``n`` int64 values, or ``n + 1`` int64 offsets then the UTF-8 bytes
        padded to 8; finally a u32 CRC-32 of everything before it.

        Parameters
        ----------
        data : bytes-like
            Output of :meth:`to_bytes`.

        Returns
        -------
        SpaceSaving

        Raises
        ------
        SerializationError
            If the bytes are truncated, corrupt, of another format or of an
            unsupported format version.
        InvalidParameterError
            If ``data`` is not bytes-like.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidParameterError(
                f"the 'data' parameter of SpaceSaving.from_bytes must be bytes; got {type(data).__name__}"
            )
        buf = bytes(data)
        size = _HEADER.size + _CRC.size
        if len(buf) < size:
            raise SerializationError(
                f"truncated SpaceSaving bytes: got {len(buf)} bytes, a sketch needs at least {size}"
            )
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
        if any(k not in (0, _INT, _STR) for k in kinds) or (n > 0 and 0 in kinds):
            raise SerializationError(f"corrupt SpaceSaving bytes: unknown key kinds {kinds}")
        counts = reader.array("<f8", n, "counts").astype(np.float64)
        errors = reader.array("<f8", n, "errors").astype(np.float64)
        if not (np.isfinite(counts).all() and (counts > 0).all() and (errors >= 0).all() and (errors <= counts).all()):
            raise SerializationError("corrupt SpaceSaving bytes: counts must be finite > 0 and errors in [0, count]")
        cols: list[Any] = []
        for kind in kinds:
            if kind == _INT:
                cols.append(reader.array("<i8", n, "int keys").astype(np.int64))
            elif kind == _STR:
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
                cols.append(arr.cast(pa.string()))
            else:
                cols.append(None)
        if reader.pos != len(reader.buf):
            raise SerializationError(
                f"corrupt SpaceSaving bytes: {len(reader.buf) - reader.pos} unexpected bytes after the counters"
            )
        sketch = cls(capacity, arity)
        sketch._kinds = [k or None for k in kinds]
        sketch._total = float(total)
        sketch._count, sketch._error = counts, errors
        sketch._cols = cols
        sketch._hash = sketch._stored_hashes()
        sketch._py_ok = False
        if n and sketch._distinct_keys() != n:
            raise SerializationError("corrupt SpaceSaving bytes: a key appears in two counters")
        return sketch

    # ------------------------------------------------------------------ internals

    def _key_names(self) -> list[str]:
        return ["key"] if self._arity == 1 else [f"key{i}" for i in range(self._arity)]

    def _normalize_key(self, key: Any, param: str, owner: str, *, fix: bool) -> Any:
        """Return ``key`` checked and normalized (scalar or tuple); fix unset kinds if ``fix``."""
        if self._arity == 1:
            value, kind = self._normalize_component(key, 0, param, owner)
            if fix and self._kinds[0] is None:
                self._kinds[0] = kind
            return value
        if not isinstance(key, (tuple, list)) or len(key) != self._arity:
            raise InvalidParameterError(
                f"the {param!r} parameter of {owner} must be a tuple of {self._arity} str or int components; "
                f"got {key!r}"
            )
        parts = [self._normalize_component(v, i, param, owner) for i, v in enumerate(key)]
        if fix:
            for i, (_, kind) in enumerate(parts):
                if self._kinds[i] is None:
                    self._kinds[i] = kind
        return tuple(v for v, _ in parts)

    def _normalize_component(self, value: Any, pos: int, param: str, owner: str) -> tuple[Any, int]:
        where = "" if self._arity == 1 else f" at key position {pos}"
        if isinstance(value, str):
            value, kind = str(value), _STR
        elif isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
            value, kind = int(value), _INT
            if not _INT64_MIN <= value <= _INT64_MAX:
                raise InvalidParameterError(
                    f"the {param!r} parameter of {owner} must hold ints that fit in int64{where}; got {value!r}"
                )
        else:
            raise InvalidParameterError(
                f"the {param!r} parameter of {owner} must be a str or an int{where}; got {value!r}"
            )
        expected = self._kinds[pos]
        if expected is not None and expected != kind:
            raise InvalidParameterError(
                f"the {param!r} parameter of {owner} must be {_KIND_ARTICLES[expected]}{where} "
                f"(key position {pos} of this sketch holds {_KIND_NAMES[expected]}, fixed by the first update); "
                f"got {_KIND_NAMES[kind]} {value!r}"
            )
        return value, kind

    def _check_kinds(self, kinds: Sequence[int | None], param: str, owner: str) -> None:
        """Raise if ``kinds`` conflicts with the sketch's component types; else fix unset ones."""
        for pos, (mine, theirs) in enumerate(zip(self._kinds, kinds, strict=True)):
            if mine is not None and theirs is not None and mine != theirs:
                raise InvalidParameterError(
                    f"the {param!r} parameter of {owner} must hold {_KIND_NAMES[mine]} at key position {pos} "
                    f"(fixed by the first update of this sketch); got {_KIND_NAMES[theirs]}"
                )
        for pos, theirs in enumerate(kinds):
            if self._kinds[pos] is None:
                self._kinds[pos] = theirs

    def _split_columns(self, keys: Any, owner: str) -> list[Any]:
        if isinstance(keys, (pd.DataFrame, pa.Table, pa.RecordBatch)):
            names = list(keys.columns) if isinstance(keys, pd.DataFrame) else keys.schema.names
            if len(names) != self._arity:
                raise InvalidParameterError(
                    f"the 'keys' parameter of {owner} must have {self._arity} columns; got {len(names)} ({names})"
                )
            if isinstance(keys, pd.DataFrame):
                return [keys.iloc[:, i] for i in range(self._arity)]
            return [keys.column(i) for i in range(self._arity)]
        if self._arity == 1:
            return [keys]
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence) or len(keys) != self._arity:
            got = f"length {len(keys)}" if isinstance(keys, Sequence) else type(keys).__name__
            raise InvalidParameterError(
                f"the 'keys' parameter of {owner} must be a sequence of {self._arity} columns; got {got}"
            )
        return list(keys)

    def _find(self, key: Any, owner: str) -> int | None:
        k = self._normalize_key(key, "key", owner, fix=False)
        self._to_python()
        return self._slot.get(k)

    def _to_python(self) -> None:
        """Make the Python layout valid (kept alongside a valid array layout)."""
        if self._py_ok:
            return
        comps = [
            col.tolist() if kind == _INT else col.to_pylist() if kind == _STR else []
            for kind, col in zip(self._kinds, self._columns(), strict=True)
        ]
        keys = comps[0] if self._arity == 1 else list(zip(*comps, strict=True))
        self._keys = keys
        self._slot = dict(zip(keys, range(len(keys)), strict=True))
        self._pc = self._count.tolist()
        self._pe = self._error.tolist()
        self._heap = None
        self._py_ok = True

    def _to_arrays(self) -> None:
        """Make the array layout valid; the Python layout stays valid until a batch changes counters."""
        if not self._arr_ok:
            comps = [self._keys] if self._arity == 1 else [list(c) for c in zip(*self._keys, strict=True)]
            if not self._keys:
                comps = [[] for _ in range(self._arity)]
            self._cols = [_build_column(kind, comp) for kind, comp in zip(self._kinds, comps, strict=True)]
            self._count = np.array(self._pc, dtype=np.float64)
            self._error = np.array(self._pe, dtype=np.float64)
            self._hash = self._stored_hashes()
            self._arr_ok = True

    def _stored_hashes(self) -> np.ndarray:
        if not len(self._count):
            return np.zeros(0, dtype=np.int64)
        return self._hash_columns([_Column(k, c) for k, c in zip(self._kinds, self._columns(), strict=True)])

    def _sketch_column(self, pos: int) -> Any:
        col = self._cols[pos]
        if col is None:  # no key yet: an empty column of the fixed type (None if unset)
            return _build_column(self._kinds[pos], [])
        return col

    def _columns(self) -> list[Any]:
        return [self._sketch_column(pos) for pos in range(self._arity)]

    def _hash_is_key(self) -> bool:
        # A single int64 component is its own exact code: no hashing, no verification.
        return self._arity == 1 and self._kinds[0] == _INT

    def _hash_columns(self, cols: list[_Column]) -> np.ndarray:
        """Return one int64 code per row: the key itself, or a 64-bit hash of the key tuple."""
        if self._hash_is_key():
            return cols[0].values
        combined = None
        for col in cols:
            if col.kind == _INT:
                part = _mix(col.values.view(np.uint64))
            else:
                part = _hash_utf8(col.values)
                if col.codes is not None:
                    part = part[col.codes]
            combined = part if combined is None else _mix(combined * _GOLDEN + part)
        return combined.view(np.int64)

    def _group(self, cols: list[_Column], hashes: np.ndarray) -> tuple[np.ndarray, int, list[Any]]:
        """Label the sketch's keys followed by the batch rows with one id per distinct key tuple.

        Returns the labels (``len(self) + len(batch)``), the number of labels, and
        per component the concatenated values to ``take`` kept keys from.

        Grouping is by the 64-bit codes (one ``pandas.factorize`` of int64, with
        the sketch's codes stored, so its keys are never re-hashed). A hash can
        collide, so every batch row is then compared with the first row of its
        label; if any differ, or two sketch keys share a code, the exact grouping
        (Arrow ``dictionary_encode`` per component) is used instead.
        """
        n = len(self._count)
        sources = []
        for pos, col in enumerate(cols):
            mine = self._sketch_column(pos)
            if col.kind == _INT:
                sources.append(np.concatenate([mine, col.values]))
            else:
                sources.append(pa.concat_arrays([mine, col.values]))
        labels, uniques = pd.factorize(np.concatenate([self._hash, hashes]))
        if self._hash_is_key():
            return labels, len(uniques), sources
        distinct = n == 0 or labels[n - 1] == n - 1  # labels come in order of first appearance
        if distinct:
            first = _first_positions(labels)[labels[n:]]
            distinct = all(_same_keys(src, col, n, first) for src, col in zip(sources, cols, strict=True))
        if distinct:
            return labels, len(uniques), sources
        logger.info("SpaceSaving: 64-bit key hash collision; grouping this batch exactly")
        labels, count = self._exact_labels(cols, sources)
        return labels, count, sources

    def _exact_labels(self, cols: list[_Column], sources: list[Any]) -> tuple[np.ndarray, int]:
        n = len(self._count)
        labels = card = None
        for col, cat in zip(cols, sources, strict=True):
            if col.kind == _INT:
                codes, uniques = pd.factorize(cat)
                size = len(uniques)
            else:
                encoded = cat.dictionary_encode()
                codes = encoded.indices.to_numpy().astype(np.int64)
                size = len(encoded.dictionary)
                if col.codes is not None:  # rows point into a dictionary: map them through it
                    codes = np.concatenate([codes[:n], codes[n:][col.codes]])
            if labels is None:
                labels, card = codes, size
                continue
            # Both factors are below the row count, so the mixed-radix code fits in int64;
            # re-factorizing after each component keeps it so for any arity.
            labels, uniques = pd.factorize(labels * size + codes)
            card = len(uniques)
        return labels, int(card)

    def _distinct_keys(self) -> int:
        empty = [_Column(k, _build_column(k, [])) for k in self._kinds]
        sources = [self._sketch_column(pos) for pos in range(self._arity)]
        return self._exact_labels(empty, sources)[1]

    def _absorb(
        self,
        cols: list[_Column],
        nrows: int,
        weights: np.ndarray | None,
        errors: np.ndarray | None,
        other_min: float,
        hashes: np.ndarray | None = None,
    ) -> None:
        """Merge rows into the array layout (the b2 merge; see the class Notes).

        Batch: rows may repeat, ``errors`` is None and ``other_min`` 0. Merge: rows
        are the other sketch's distinct keys with its counts, errors, minimum and
        key codes (``hashes``).
        """
        n = len(self._count)
        full_min = self.min_count
        if hashes is None:
            hashes = self._hash_columns(cols)
        labels, groups, sources = self._group(cols, hashes)
        mine, theirs = labels[:n], labels[n:]
        added = np.bincount(theirs, weights=weights, minlength=groups).astype(np.float64, copy=False)
        count = self._count + added[mine]
        error = self._error
        if errors is not None:
            added_error = np.zeros(groups)
            added_error[theirs] = errors
            missing = np.ones(groups, dtype=bool)
            missing[theirs] = False
            # Keys the other sketch does not monitor weigh at most its minimum there.
            count = count + np.where(missing[mine], other_min, 0.0)
            error = error + np.where(missing[mine], other_min, added_error[mine])
        is_new = np.ones(groups, dtype=bool)
        is_new[mine] = False
        new = np.flatnonzero(is_new)
        row_of = np.empty(groups, dtype=np.int64)
        row_of[theirs] = np.arange(nrows)  # any row of a label will do: they hold the same key
        new_rows = row_of[new]
        new_count = added[new] + full_min
        new_error = np.full(len(new), full_min) if errors is None else errors[new_rows] + full_min
        count = np.concatenate([count, new_count])
        error = np.concatenate([error, new_error])
        rows = np.concatenate([np.arange(n), n + new_rows])
        keep = _largest(count, error, self._capacity)
        if keep is not None:
            count, error, rows = count[keep], error[keep], rows[keep]
        self._count, self._error = count, error
        self._hash = np.concatenate([self._hash, hashes])[rows]
        self._cols = [_take(src, rows, col, n) for src, col in zip(sources, cols, strict=True)]
        self._py_ok = False
        self._keys, self._slot, self._pc, self._pe, self._heap = [], {}, [], [], None


# 64-bit hashing of key tuples (see SpaceSaving._group). The constants are the
# golden-ratio increment and the splitmix64 finalizer multipliers.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
# _LOW_BYTES[k] keeps the k low bytes of a little-endian word (k = 0..8).
_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], dtype=np.uint64)


def _mix(h: np.ndarray) -> np.ndarray:
    """Return the splitmix64 finalizer of a uint64 array (a bijection that spreads every bit)."""
    h = h ^ (h >> np.uint64(30))
    h *= _MIX1
    h ^= h >> np.uint64(27)
    h *= _MIX2
    h ^= h >> np.uint64(31)
    return h


def _hash_utf8(arr: pa.StringArray) -> np.ndarray:
    """Return a 64-bit hash per string, vectorized over 8-byte words of the Arrow buffers.

    Word ``j`` of every string is read at once through an overlapping uint64 view
    of the data (one view element per byte offset), masked to the string's length,
    and folded in; only strings longer than ``8 * j`` take part in round ``j``, so
    the cost is about one numpy pass per 8 bytes of the typical key. Deterministic
    across processes (unlike Python's ``hash``), though the codes never leave one.
    """
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype="<i4", count=arr.offset + n + 1)[arr.offset :].astype(np.int64)
    starts, lengths = offsets[:-1], np.diff(offsets)
    h = lengths.astype(np.uint64) * _GOLDEN
    longest = int(lengths.max())
    if longest == 0:
        return _mix(h)
    begin, end = int(offsets[0]), int(offsets[-1])
    size = end - begin
    padded = np.empty(size + 8, dtype=np.uint8)
    padded[:size] = np.frombuffer(data_buf, dtype=np.uint8, count=end)[begin:]
    padded[size:] = 0
    words = np.ndarray((size + 1,), dtype="<u8", buffer=padded, strides=(1,))  # words[i] = bytes i..i+7
    starts = starts - begin
    rows = None
    for j in range(0, longest, 8):
        if j:
            rows = np.flatnonzero(lengths > j) if rows is None else rows[lengths[rows] > j]
        sel_starts = starts if rows is None else starts[rows]
        sel_lengths = lengths if rows is None else lengths[rows]
        word = words[sel_starts + j] & _LOW_BYTES[np.minimum(sel_lengths - j, 8)]
        part = (h if rows is None else h[rows]) ^ word
        part *= _GOLDEN
        part ^= part >> np.uint64(29)
        if rows is None:
            h = part
        else:
            h[rows] = part
    return _mix(h)


def _first_positions(labels: np.ndarray) -> np.ndarray:
    """Return, per label, the position of its first row (labels numbered in order of appearance)."""
    running = np.maximum.accumulate(labels)
    return np.flatnonzero(np.concatenate([[True], running[1:] > running[:-1]]))


def _same_keys(source: Any, col: _Column, n: int, first: np.ndarray) -> bool:
    """Return True if every batch row holds the same component value as the first row of its label."""
    if col.kind == _INT:
        return bool(np.array_equal(source[n:], source[first]))
    rows = source.slice(n) if col.codes is None else source.take(n + col.codes)
    if col.codes is not None:
        first = np.where(first >= n, n + col.codes[np.maximum(first - n, 0)], first)
    return bool(pc.all(pc.equal(rows, source.take(first))).as_py())


def _largest(count: np.ndarray, error: np.ndarray, m: int) -> np.ndarray | None:
    """Return the sorted positions of the ``m`` largest counts (None: keep all).

    Ties at the threshold keep the smaller error first (tighter bounds), then the
    earlier position (older counters, then keys in order of first appearance), so
    the choice is deterministic.
    """
    size = len(count)
    if size <= m:
        return None
    threshold = np.partition(count, size - m)[size - m]
    above = count > threshold
    need = m - int(np.count_nonzero(above))
    ties = np.flatnonzero(count == threshold)
    if need < len(ties):
        order = np.lexsort((ties, error[ties]))
        ties = ties[order[:need]]
    above[ties] = True
    return np.flatnonzero(above)


def _take(source: Any, rows: np.ndarray, col: _Column, n: int) -> Any:
    """Take kept keys from a concatenated component (sketch rows first, then batch rows)."""
    if col.codes is not None:
        batch = rows >= n
        rows = rows.copy()
        rows[batch] = n + col.codes[rows[batch] - n]
    if col.kind == _INT:
        return source[rows]
    return source.take(rows)


def _build_column(kind: int | None, values: list[Any]) -> Any:
    if kind == _INT:
        return np.array(values, dtype=np.int64)
    if kind == _STR:
        return pa.array(values, type=pa.string())
    return None


def _describe_types(values: Any) -> str:
    names = sorted({type(v).__name__ for v in values})
    return ", ".join(names)


def _parse_column(col: Any, pos: int, arity: int, owner: str) -> _Column:
    """Normalize one key column to int64 rows or Arrow strings, rejecting nulls and other types."""
    where = "" if arity == 1 else f" (key position {pos})"
    param = f"the 'keys' parameter of {owner}"
    if isinstance(col, (str, bytes)) or not isinstance(
        col, (Sequence, np.ndarray, pd.Series, pd.Index, pa.Array, pa.ChunkedArray)
    ):
        raise InvalidParameterError(
            f"{param} must hold columns (array, Series, Arrow array or list){where}; got {type(col).__name__}"
        )
    if len(col) == 0:  # an empty batch (e.g. an empty partition) adds nothing, whatever its type
        return _Column(_STR, pa.array([], type=pa.string()))
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if isinstance(col, (pd.Series, pd.Index)):
        if isinstance(col.dtype, np.dtype):
            return _parse_column(col.to_numpy(), pos, arity, owner)
        col = pa.array(col, from_pandas=True)  # string, category and nullable dtypes convert without copies
    elif isinstance(col, np.ndarray):
        if col.ndim != 1:
            raise InvalidParameterError(f"{param} must hold 1-D columns{where}; got shape {col.shape}")
        if col.dtype.kind in "iu":
            return _int_column(col, param, where)
        if col.dtype.kind == "O":
            return _object_column(col, param, where)
        if col.dtype.kind != "U":
            raise InvalidParameterError(f"{param} must hold str or int values{where}; got dtype {col.dtype}")
        col = pa.array(col)
    elif not isinstance(col, pa.Array):
        # fromiter keeps each element whole (np.array would turn a list of tuples into 2-D)
        return _object_column(np.fromiter(col, dtype=object, count=len(col)), param, where)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if col.null_count:
        raise InvalidParameterError(
            f"{param} must not contain nulls{where} (drop rows with null keys first); got {col.null_count} nulls"
        )
    if pa.types.is_integer(col.type):
        if pa.types.is_uint64(col.type) and len(col) and col.to_numpy().max() > _INT64_MAX:
            raise InvalidParameterError(f"{param} must hold ints that fit in int64{where}; got uint64 values above")
        return _Column(_INT, col.to_numpy().astype(np.int64, copy=False))
    if pa.types.is_string(col.type):
        return _Column(_STR, col)
    if pa.types.is_large_string(col.type) or pa.types.is_string_view(col.type):
        return _Column(_STR, col.cast(pa.string()))
    raise InvalidParameterError(f"{param} must hold str or int values{where}; got Arrow type {col.type}")


def _int_column(values: np.ndarray, param: str, where: str) -> _Column:
    if values.dtype == np.uint64 and len(values) and values.max() > _INT64_MAX:
        raise InvalidParameterError(f"{param} must hold ints that fit in int64{where}; got {values.max()}")
    return _Column(_INT, values.astype(np.int64, copy=False))


def _object_column(values: np.ndarray, param: str, where: str) -> _Column:
    """Factorize a Python-object column in pandas, then check types on its distinct values only."""
    codes, uniques = pd.factorize(values)
    if len(codes) and codes.min() < 0:
        nulls = int(np.count_nonzero(codes < 0))
        raise InvalidParameterError(
            f"{param} must not contain nulls{where} (drop rows with null keys first); got {nulls} nulls"
        )
    inferred = pd.api.types.infer_dtype(uniques, skipna=False)
    if inferred == "string":
        return _Column(_STR, pa.array(uniques, type=pa.string()), codes.astype(np.int64, copy=False))
    if inferred == "integer":
        big = [v for v in uniques if not _INT64_MIN <= v <= _INT64_MAX]
        if big:
            raise InvalidParameterError(f"{param} must hold ints that fit in int64{where}; got {big[0]!r}")
        return _Column(_INT, np.asarray(uniques.tolist(), dtype=np.int64)[codes])
    if len(values) == 0:
        return _Column(_STR, pa.array([], type=pa.string()))
    raise InvalidParameterError(f"{param} must hold only str or only int values{where}; got {_describe_types(uniques)}")


def _parse_weights(weights: Any, nrows: int, owner: str) -> np.ndarray | None:
    if weights is None:
        return None
    if isinstance(weights, (pa.Array, pa.ChunkedArray)):
        if weights.null_count:
            raise InvalidParameterError(f"the 'weights' parameter of {owner} must not contain nulls")
        weights = weights.to_numpy()
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"the 'weights' parameter of {owner} must hold finite floats > 0; got {type(weights).__name__}"
        ) from exc
    if w.ndim != 1 or len(w) != nrows:
        raise InvalidParameterError(
            f"the 'weights' parameter of {owner} must hold one weight per key row ({nrows}); got shape {w.shape}"
        )
    bad = ~(np.isfinite(w) & (w > 0))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise InvalidParameterError(
            f"the 'weights' parameter of {owner} must hold finite floats > 0; got {float(w[first])!r} at row {first}"
        )
    return w


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
