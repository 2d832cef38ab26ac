"""The Space-Saving sketch: update, update_batch, merge, estimates with bounds, top-k.

Input conversion lives in :mod:`locality.sketch.columns`, the exact grouping
of batches with the sketch's keys in :mod:`locality.sketch.grouping`, and the
byte layout in :mod:`locality.sketch.serde`. This module is the sketch: its two
layouts of the same counters, the buffer of pending batches and the merge rule
(the class Notes prove the bounds); it is long because the class docstring
carries that proof.
"""

from __future__ import annotations

import heapq
import logging
import math
import numbers
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from locality._validation import check_integer, check_interval
from locality.errors import InvalidParameterError, SerializationError
from locality.sketch import grouping, serde
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

# update_batch buffers up to this many rows per counter, then merges them at once.
_BUFFER_ROWS_PER_COUNTER = 16


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
    is the fast path for Arrow/numpy/pandas columns: it buffers batches, counts
    them exactly (Arrow's hash aggregation, no per-key Python code) and merges
    those exact counts into the sketch as one mergeable summary [2]_. Every query
    sees the buffered batches. :meth:`merge` combines sketches built on parts of a
    stream, e.g. one per Spark partition.

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
    costs nothing in the bound. :meth:`update_batch` merges the exact counts of
    the batches it buffered, all at once, so it keeps the bound too, and so does
    the view a query takes of the buffer (see Cost). The batch path and the
    one-at-a-time path give identical counters, errors and total whenever no
    counter is evicted, i.e. when ``len(sketch)`` plus the buffered keys that are
    not monitored is at most ``m`` (in particular while the distinct keys fit,
    or when every batch key is already monitored). Beyond that the two may keep
    different keys (the batch path pays the minimum once per new key and merge
    instead of once per occurrence, so it is usually tighter), and both obey the
    bounds above. Weights are summed in float64, so "identical" and the
    bounds hold exactly for integer-valued weights (sums below 2**53) and up to
    float64 rounding otherwise.

    Notes
    -----
    **The merge rule.** Let sketch S have counters ``c_S(x), e_S(x)`` and minimum
    ``mu_S``, and write ``C_S(x) = c_S(x)`` if ``x`` is monitored in S, else
    ``mu_S`` (an upper bound of ``f_S(x)``), and ``E_S(x) = e_S(x)`` or ``mu_S``
    likewise. Merging S and T forms, for every key of either, the candidate
    ``(C_S + C_T, E_S + E_T)`` and keeps the ``m`` largest counts (ties: smaller
    error, then older counter: S's in slot order, then T's new keys in T's slot
    order, which the Java twin ``io.locality.sketch.SpaceSaving`` keeps too).
    Buffered batches are a sketch T with their exact counts and ``mu_T = 0``; a
    single update is a batch of one key (on a full sketch it replaces a counter
    of count ``mu``, the one in the lowest slot among ties).

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

    **Cost and memory.** :meth:`update_batch` keeps each batch in a buffer
    (Arrow string columns by reference, as they are immutable; numpy and
    everything else as a copy, so a caller may reuse its arrays) until the
    buffer holds ``16 * m`` rows, then merges it: one exact grouping of the
    sketch's ``m`` keys with the buffered rows (Arrow's
    ``Table.group_by(..., use_threads=False)``, which compares whole keys, so
    nothing depends on a hash; strings of at most 32 bytes with no NUL byte are
    grouped as NUL-padded fixed-width bytes, which Arrow groups faster, and from
    65,536 rows of such string keys the rows whose key no other row holds are
    found by counting 64-bit fingerprints per bucket and kept out of Arrow's
    hash table, which they would mostly fill; ``pandas.factorize``, its table
    sized near the number of groups, for a single int component), a selection of the ``m`` largest
    candidates and one ``take`` of the kept keys: O(m + buffered rows) per
    merge, O(1) per row, and the sketch's own keys add at most 1/16 to the rows
    grouped, whatever the batch sizes. Memory: the ``m`` counters, at most
    ``16 * m`` buffered rows plus the last batch (a buffered Arrow slice keeps
    its parent's buffers), while batches are buffered the counters as they were
    before them, and during a merge a padded copy of the buffered string keys
    (at most 32 bytes a key), with string keys a second copy of the rows that
    are grouped, and 17 bytes a row and 9 bytes a bucket (one or two buckets a
    row) for finding the keys seen once. A query
    (:attr:`min_count`, ``len``, :meth:`estimate`, :meth:`top_k`,
    :meth:`to_bytes`, ``str``, or being merged into another sketch) merges the
    buffer into a view of the counters the first time it looks after a batch
    (O(m + buffered rows)) but keeps the buffer, so it never changes what later
    updates produce; :meth:`update` and :meth:`merge` into this sketch merge the
    buffer for good first. Arrow string columns are the fastest input; numpy
    object columns pay a ``pandas.factorize`` of Python strings first.
    :meth:`update` costs a dict lookup, plus a lazy-heap step when it evicts;
    interleaving single updates and batches converts between the two layouts
    (O(m) each time).

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
        self._arr_ok = True
        self._keys: list[Any] = []
        self._slot: dict[Any, int] = {}
        self._pc: list[float] = []
        self._pe: list[float] = []
        self._heap: list[tuple[float, int]] | None = None
        self._py_ok = True
        # Batches not yet merged for good: the array layout before them (``_base``) and the
        # batches themselves. Reads see base + pending (``_settle``), without ending the buffer.
        self._base: tuple[list[Any], np.ndarray, np.ndarray] | None = None
        self._pending: list[_Block] = []
        self._pending_rows = 0
        self._settled = True

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
        if len(self) < self._capacity:  # len settles pending batches
            return 0.0
        if self._arr_ok:
            return float(self._count.min())
        return float(min(self._pc))

    def __len__(self) -> int:
        """Number of monitored keys (counters in use)."""
        self._settle()
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
        if self._pending:
            self._commit()
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
        """Add a batch of keys (the fast path): buffered, then counted exactly and merged.

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
        The batch joins a buffer; once the buffer holds ``16 * capacity`` rows, the
        buffered rows are counted exactly together with the sketch's keys (one
        Arrow hash aggregation) and merged: monitored keys add their buffered
        count; new keys enter with ``buffered count + min_count`` and error
        ``min_count``; the ``capacity`` largest counters are kept. Queries see
        the buffered batches as if merged just then. See the class Accuracy
        section for the bound and for when the result equals repeated
        :meth:`update` calls, and its Cost section for memory.
        """
        owner = "SpaceSaving.update_batch"
        raw = self._split_columns(keys, owner)
        cols = [parse_column(c, i, self._arity, owner) for i, c in enumerate(raw)]
        lengths = {len(c) for c in cols}
        if len(lengths) > 1:
            raise InvalidParameterError(
                f"the 'keys' parameter of {owner} must have columns of one length; "
                f"got lengths {[len(c) for c in cols]}",
                parameter="keys",
            )
        nrows = lengths.pop()
        w = parse_weights(weights, nrows, owner)
        if nrows == 0:
            return
        self._check_kinds([c.kind for c in cols], "keys", owner)
        added = float(nrows) if w is None else float(w.sum())
        if not self._pending:
            self._to_arrays()
            self._base = (self._columns(), self._count, self._error)
        self._pending.append(_Block([_buffered(c) for c in cols], None if w is None else w.copy(), nrows))
        self._pending_rows += nrows
        self._settled = False
        self._total += added
        if self._pending_rows >= _BUFFER_ROWS_PER_COUNTER * self._capacity:
            logger.debug("update_batch: merging %d buffered rows", self._pending_rows)
            self._commit()

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
                f"the 'other' parameter of {owner} must be a SpaceSaving; got {type(other).__name__}",
                parameter="other",
            )
        for name, mine, theirs in (
            ("capacity", self._capacity, other._capacity),
            ("arity", self._arity, other._arity),
        ):
            if mine != theirs:
                raise InvalidParameterError(
                    f"the 'other' parameter of {owner} must have the same {name} as this sketch ({mine}); got {theirs}",
                    parameter="other",
                )
        self._check_kinds(other._kinds, "other", owner)
        if len(other) == 0:
            self._total += other._total
            return self
        other._to_arrays()  # settles other's pending batches into a view; its buffer stays as it was
        # Read other's state before self changes: other may be self.
        cols, counts, errors = other._columns(), other._count, other._error
        other_min, added = other.min_count, other._total
        self._commit()
        self._to_arrays()
        groups = grouping.group(self._kinds, [self._columns(), cols], located=2)
        mine, theirs = groups.at
        # Per group C_self + C_other and E_self + E_other, where a sketch that does not monitor
        # a key counts it at its minimum (the merge rule of the class Notes).
        count, error = (np.full(len(groups.rows), self.min_count) for _ in range(2))
        count[mine], error[mine] = self._count, self._error
        other_count, other_error = (np.full(len(groups.rows), other_min) for _ in range(2))
        other_count[theirs], other_error[theirs] = counts, errors
        # Self's counters first, in their order, then other's new keys in other's order: the order is the
        # sketches' own, not the grouping's, so the Java twin (io.locality.sketch.SpaceSaving) keeps the same.
        rows = np.concatenate([mine, _new_groups(groups, theirs)])
        self._keep(groups.keys, rows, (count + other_count)[rows], (error + other_error)[rows])
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
        self._settle()
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
                f"the 'data' parameter of SpaceSaving.from_bytes must be bytes; got {type(data).__name__}",
                parameter="data",
            )
        return cls.from_image(serde.decode(bytes(data)))

    @classmethod
    def from_image(cls, image: serde.SketchImage) -> SpaceSaving:
        """The sketch of a decoded image (:func:`locality.sketch.serde.decode`), for a caller that reads the
        image's columns too and parses the bytes once.

        Raises
        ------
        SerializationError
            If a key appears in two counters.
        """
        sketch = cls(image.capacity, image.arity)
        sketch._kinds = list(image.kinds)
        sketch._total = image.total
        sketch._count, sketch._error = image.counts, image.errors
        sketch._cols = list(image.columns)
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
                    f"the 'keys' parameter of {owner} must have {self._arity} columns; got {len(names)} ({names})",
                    parameter="keys",
                )
            if isinstance(keys, pd.DataFrame):
                return [keys.iloc[:, i] for i in range(self._arity)]
            return [keys.column(i) for i in range(self._arity)]
        if self._arity == 1:
            return [keys]
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence) or len(keys) != self._arity:
            got = f"length {len(keys)}" if isinstance(keys, Sequence) else type(keys).__name__
            raise InvalidParameterError(
                f"the 'keys' parameter of {owner} must be a sequence of {self._arity} columns; got {got}",
                parameter="keys",
            )
        return list(keys)

    def _find(self, key: Any, owner: str) -> int | None:
        k = self._normalize_key(key, "key", owner, fix=False)
        self._to_python()
        return self._slot.get(k)

    def _to_python(self) -> None:
        """Make the Python layout valid (kept alongside a valid array layout)."""
        self._settle()
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
        self._settle()
        if not self._arr_ok:
            comps = [self._keys] if self._arity == 1 else [list(c) for c in zip(*self._keys, strict=True)]
            if not self._keys:
                comps = [[] for _ in range(self._arity)]
            self._cols = [build_column(kind, comp) for kind, comp in zip(self._kinds, comps, strict=True)]
            self._count = np.array(self._pc, dtype=np.float64)
            self._error = np.array(self._pe, dtype=np.float64)
            self._arr_ok = True

    def _sketch_column(self, pos: int) -> Any:
        col = self._cols[pos]
        if col is None:  # no key yet: an empty column of the fixed type (None if unset)
            return build_column(self._kinds[pos], [])
        return col

    def _columns(self) -> list[Any]:
        return [self._sketch_column(pos) for pos in range(self._arity)]

    def _distinct_keys(self) -> int:
        return len(grouping.group(self._kinds, [self._columns()]).rows)

    def _settle(self) -> None:
        """Make the layouts show the pending batches too, merged at once into ``_base`` (the class Notes' rule).

        The buffer stays: the next batch joins it and the next settle starts from
        ``_base`` again, so reads never change what later updates do.
        """
        if self._settled:
            return
        base_cols, base_count, base_error = self._base
        n = len(base_count)
        full_min = float(base_count.min()) if n >= self._capacity else 0.0
        blocks = [base_cols] + [block.columns for block in self._pending]
        weighted = any(block.weights is not None for block in self._pending)
        values = []
        if weighted:  # the sketch's rows carry their counts, so each sum adds in stream order
            weights = [np.ones(b.rows) if b.weights is None else b.weights for b in self._pending]
            values.append([base_count, *weights])
        groups = grouping.group(self._kinds, blocks, values, located=1)
        at, new = groups.at[0], _new_groups(groups)
        if weighted:
            old, added = groups.sums[0][at], groups.sums[0][new]
        else:
            old, added = base_count + (groups.rows[at] - 1), groups.rows[new]  # the sketch's own row counts one
        count = np.concatenate([old, added + full_min])
        error = np.concatenate([base_error, np.full(len(new), full_min)])
        self._keep(groups.keys, np.concatenate([at, new]), count, error)
        self._settled = True

    def _commit(self) -> None:
        """Merge the pending batches for good and empty the buffer."""
        if self._pending:
            self._settle()
            self._base, self._pending, self._pending_rows = None, [], 0

    def _keep(self, keys: list[Any], rows: np.ndarray, count: np.ndarray, error: np.ndarray) -> None:
        """Make the array layout the ``capacity`` largest candidates (key ``rows`` of the grouped ``keys``)."""
        keep = _largest(count, error, self._capacity)
        if keep is not None:
            rows, count, error = rows[keep], count[keep], error[keep]
        self._cols = [_kept(col, kind, rows) for col, kind in zip(keys, self._kinds, strict=True)]
        self._count, self._error = count, error
        self._arr_ok, self._py_ok = True, False
        self._keys, self._slot, self._pc, self._pe, self._heap = [], {}, [], [], None


class _Block(NamedTuple):
    """A buffered batch: its key components (int64 arrays or Arrow strings) and weights (None: each row 1)."""

    columns: list[Any]
    weights: np.ndarray | None
    rows: int


def _new_groups(groups: grouping.Groups, at: np.ndarray | None = None) -> np.ndarray:
    """The groups that hold no counter of the sketch (its keys were the first block), in group order; or, given
    ``at`` (the groups of another sketch's counters, in its slot order), those of ``at``, in that order."""
    new = np.ones(len(groups.rows), dtype=bool)
    new[groups.at[0]] = False
    return np.flatnonzero(new) if at is None else at[new[at]]


def _buffered(col: Column) -> Any:
    """The component as the buffer keeps it: numpy copied (the caller may reuse it), Arrow as is (immutable)."""
    if col.kind == INT:
        return col.values.copy()
    return col.values if col.codes is None else col.values.take(col.codes)


def _largest(count: np.ndarray, error: np.ndarray, m: int) -> np.ndarray | None:
    """Return the sorted positions of the ``m`` largest counts (None: keep all).

    Ties at the threshold keep the smaller error first (tighter bounds), then the
    earlier position (older counters, then new keys in the order they came), so the
    choice is deterministic.
    """
    size = len(count)
    if size <= m:
        return None
    threshold = _kth_largest(count, m)
    above = count > threshold
    need = m - int(np.count_nonzero(above))
    ties = np.flatnonzero(count == threshold)
    if need < len(ties):
        tie_error = error[ties]
        cut = -_kth_largest(-tie_error, need)  # the need-th smallest error
        below = ties[tie_error < cut]
        ties = np.concatenate([below, ties[tie_error == cut][: need - len(below)]])
    above[ties] = True
    return np.flatnonzero(above)


def _kth_largest(values: np.ndarray, k: int) -> float:
    """Return the ``k``-th largest of ``values`` (1 <= k <= len).

    Candidate counts repeat a lot at the bottom (every new key seen once in a
    batch ties), which makes ``np.partition`` and ``np.argpartition`` many times
    slower than a sort. So the smallest value is peeled off while more than ``k``
    values stay above it, then what is left is sorted.
    """
    for _ in range(3):
        low = values.min()
        rest = values[values > low]
        if len(rest) < k:
            return float(low)
        values = rest
    return float(np.sort(values)[len(values) - k])


def _kept(col: Any, kind: int | None, rows: np.ndarray) -> Any:
    """The kept rows of a grouped component, as the sketch stores it (int64 array or one Arrow string array)."""
    if kind == INT:
        return col[rows]
    col = col.take(rows)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
