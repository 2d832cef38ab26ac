"""The Space-Saving sketch: update, update_batch, merge, estimates with bounds, top-k.

Input conversion lives in :mod:`locality.sketch.columns`, the grouping of a
batch with the sketch's keys in :mod:`locality.sketch.codes`, and the byte
layout in :mod:`locality.sketch.serde`. This module is the sketch: its two
layouts of the same counters and the merge rule (the class Notes prove the
bounds). It runs past 500 lines because the class docstring carries that proof.
"""

from __future__ import annotations

import heapq
import logging
import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from locality._validation import check_integer, check_interval
from locality.errors import InvalidParameterError, SerializationError
from locality.sketch import codes, serde
from locality.sketch.columns import (
    INT,
    INT64_MAX,
    INT64_MIN,
    KIND_ARTICLES,
    KIND_NAMES,
    STR,
    Column,
    build_column,
    parse_column,
    parse_weights,
)

__all__ = ["SpaceSaving"]

logger = logging.getLogger(__name__)


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
        self._hash = np.zeros(0, dtype=np.int64)  # one int64 code per counter (locality.sketch.codes)
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
        if self._arity == 1 and type(key) is str and self._kinds[0] == STR:
            k = key  # the common cases, without the general checks
        elif self._arity == 1 and type(key) is int and self._kinds[0] == INT and INT64_MIN <= key <= INT64_MAX:
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
        cols = [parse_column(c, i, self._arity, owner) for i, c in enumerate(raw)]
        lengths = {len(c) for c in cols}
        if len(lengths) > 1:
            raise InvalidParameterError(
                f"the 'keys' parameter of {owner} must have columns of one length; got lengths {[len(c) for c in cols]}"
            )
        nrows = lengths.pop()
        w = parse_weights(weights, nrows, owner)
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
        cols = [Column(kind, col) for kind, col in zip(other._kinds, other._cols, strict=True)]
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
            if kind == INT:
                data[name] = col[rows]
            elif kind == STR:
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
        kinds = ", ".join(KIND_NAMES[k] for k in self._kinds)
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
        """Serialize the sketch (no pickle); the layout is in :mod:`locality.sketch.serde`.

        Returns
        -------
        bytes
            A little-endian image that :meth:`from_bytes` turns back into a sketch
            with the same counters, errors, key order, types and total weight.
        """
        self._to_arrays()
        image = serde.SketchImage(
            self._arity, self._capacity, self._total, self._kinds, self._count, self._error, self._columns()
        )
        return serde.encode(image)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> SpaceSaving:
        """Rebuild a sketch from :meth:`to_bytes` output.

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
        image = serde.decode(bytes(data))
        sketch = cls(image.capacity, image.arity)
        sketch._kinds = list(image.kinds)
        sketch._total = image.total
        sketch._count, sketch._error = image.counts, image.errors
        sketch._cols = list(image.columns)
        sketch._hash = sketch._stored_hashes()
        sketch._py_ok = False
        if len(image.counts) and sketch._distinct_keys() != len(image.counts):
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
            value, kind = str(value), STR
        elif isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
            value, kind = int(value), INT
            if not INT64_MIN <= value <= INT64_MAX:
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
                f"the {param!r} parameter of {owner} must be {KIND_ARTICLES[expected]}{where} "
                f"(key position {pos} of this sketch holds {KIND_NAMES[expected]}, fixed by the first update); "
                f"got {KIND_NAMES[kind]} {value!r}"
            )
        return value, kind

    def _check_kinds(self, kinds: Sequence[int | None], param: str, owner: str) -> None:
        """Raise if ``kinds`` conflicts with the sketch's component types; else fix unset ones."""
        for pos, (mine, theirs) in enumerate(zip(self._kinds, kinds, strict=True)):
            if mine is not None and theirs is not None and mine != theirs:
                raise InvalidParameterError(
                    f"the {param!r} parameter of {owner} must hold {KIND_NAMES[mine]} at key position {pos} "
                    f"(fixed by the first update of this sketch); got {KIND_NAMES[theirs]}"
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
            col.tolist() if kind == INT else col.to_pylist() if kind == STR else []
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
            self._cols = [build_column(kind, comp) for kind, comp in zip(self._kinds, comps, strict=True)]
            self._count = np.array(self._pc, dtype=np.float64)
            self._error = np.array(self._pe, dtype=np.float64)
            self._hash = self._stored_hashes()
            self._arr_ok = True

    def _sketch_column(self, pos: int) -> Any:
        col = self._cols[pos]
        if col is None:  # no key yet: an empty column of the fixed type (None if unset)
            return build_column(self._kinds[pos], [])
        return col

    def _columns(self) -> list[Any]:
        return [self._sketch_column(pos) for pos in range(self._arity)]

    def _code_is_key(self) -> bool:
        # A single int64 component is its own exact code: no hashing, no verification.
        return self._arity == 1 and self._kinds[0] == INT

    def _stored_hashes(self) -> np.ndarray:
        if not len(self._count):
            return np.zeros(0, dtype=np.int64)
        return codes.key_codes(
            [Column(k, c) for k, c in zip(self._kinds, self._columns(), strict=True)], self._code_is_key()
        )

    def _distinct_keys(self) -> int:
        empty = [Column(k, build_column(k, [])) for k in self._kinds]
        return codes.exact_labels(empty, self._columns(), len(self._count))[1]

    def _absorb(
        self,
        cols: list[Column],
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
            hashes = codes.key_codes(cols, self._code_is_key())
        labels, groups, sources = codes.group(self._columns(), self._hash, cols, hashes, self._code_is_key())
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


def _take(source: Any, rows: np.ndarray, col: Column, n: int) -> Any:
    """Take kept keys from a concatenated component (sketch rows first, then batch rows)."""
    if col.codes is not None:
        batch = rows >= n
        rows = rows.copy()
        rows[batch] = n + col.codes[rows[batch] - n]
    if col.kind == INT:
        return source[rows]
    return source.take(rows)
