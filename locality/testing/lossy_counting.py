"""Lossy counting (Manku and Motwani) and Gedik's sliding-window emulation with tumbling counters.

The hybrid partitioning function of Gedik [1]_ keeps an explicit map only for
the keys whose frequency is at least ``delta``; it finds them with lossy
counting [2]_ run over a sliding window that three staggered tumbling
counters emulate (Fig. 2 of [1]_).

References
----------
.. [1] B. Gedik. "Partitioning functions for stateful data parallelism in
   stream processing." The VLDB Journal 23(4): 517-539, 2014.
   https://doi.org/10.1007/s00778-013-0335-9
.. [2] G. S. Manku, R. Motwani. "Approximate frequency counts over data
   streams." VLDB 2002.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Hashable, Iterable

import numpy as np

from locality._validation import check_integer, check_interval

__all__ = ["LossyCounter", "SlidingLossyCounter"]

logger = logging.getLogger(__name__)


class LossyCounter:
    """Frequent items of a stream with a deterministic error bound (lossy counting).

    The stream is cut into buckets of width ``w = ceil(1 / epsilon)``. Each
    monitored key keeps its count since it was (re)inserted and ``delta``, the
    most it can have missed before; at the end of every bucket ``b`` the keys
    with ``count + delta <= b`` are dropped.

    Parameters
    ----------
    epsilon : float
        Error bound, in ``(0, 1)``. Gedik [1]_ uses one tenth of the support
        he queries (``epsilon = 0.1 * delta``).

    Notes
    -----
    Accuracy, after ``N`` units of weight (every guarantee is deterministic):

    * ``lower_bound(key) <= true count <= upper_bound(key)`` and
      ``upper_bound - lower_bound <= epsilon * N`` for every key;
    * :meth:`frequent_items` with support ``s`` returns every key whose true
      count is at least ``s * N`` (no false negatives) and no key whose true
      count is below ``(s - epsilon) * N``;
    * at most ``(1 / epsilon) * log(epsilon * N)`` keys are monitored.

    Exact while no bucket has closed (``N < w``). ``update_batch`` leaves the
    counter in exactly the state repeated ``update`` calls would.

    Reading of the paper (seeds-algorithms.md §2.4): Gedik prints the pruning
    test as ``cf + ce <= b``, a typo for ``count + delta <= b``; his "typical
    epsilon of 0.1" is relative to the support (``epsilon = 0.1 * delta``),
    which matches the counter sizes he reports.

    Examples
    --------
    >>> lc = LossyCounter(0.01)
    >>> lc.update_batch([1, 1, 2, 1, 3])
    >>> lc.frequent_items(0.5)
    [(1, 3, 3, 3)]
    """

    def __init__(self, epsilon: float) -> None:
        self.epsilon = check_interval(epsilon, "epsilon", "LossyCounter", lower=0.0, upper=1.0, closed="neither")
        self.bucket_width = math.ceil(1.0 / self.epsilon)
        self._n = 0
        # key -> [count since insertion, delta = buckets completed before insertion]
        self._table: dict[Hashable, list[int]] = {}

    # -- updates -------------------------------------------------------------------------

    def update(self, key: Hashable, weight: int = 1) -> None:
        """Count ``weight`` occurrences of ``key`` (an int ``>= 1``; split across buckets exactly)."""
        remaining = check_integer(weight, "weight", "LossyCounter.update", lower=1)
        while remaining:
            take = min(remaining, self._room())
            self._add(key, take)
            self._advance(take)
            remaining -= take

    def update_batch(self, keys: Iterable[Hashable] | np.ndarray, weights: Iterable[int] | None = None) -> None:
        """Count a batch of keys (each once, or ``weights[i]`` times).

        Unit weights take a vectorised path: the batch is cut at bucket ends
        and each piece is counted with ``numpy.unique``, which gives the same
        state as one ``update`` per key because lossy counting only looks at
        the order of keys at bucket ends.
        """
        if weights is not None:
            for key, weight in zip(list(keys), list(weights), strict=True):
                self.update(key, weight)
            return
        arr = np.asarray(keys if isinstance(keys, np.ndarray) else list(keys))
        pos = 0
        while pos < arr.shape[0]:
            chunk = arr[pos : pos + self._room()]
            uniq, counts = np.unique(chunk, return_counts=True)
            for key, count in zip(uniq.tolist(), counts.tolist(), strict=True):
                self._add(key, count)
            self._advance(chunk.shape[0])
            pos += chunk.shape[0]

    def _room(self) -> int:
        """Weight left before the current bucket closes (1..bucket_width)."""
        return self.bucket_width - self._n % self.bucket_width

    def _add(self, key: Hashable, count: int) -> None:
        # All of ``count`` falls in the current bucket b = n // w + 1, so a new
        # key may have been missed in at most the b - 1 completed buckets.
        entry = self._table.get(key)
        if entry is None:
            self._table[key] = [count, self._n // self.bucket_width]
        else:
            entry[0] += count

    def _advance(self, count: int) -> None:
        self._n += count
        if self._n % self.bucket_width == 0:
            bucket = self._n // self.bucket_width
            self._table = {k: e for k, e in self._table.items() if e[0] + e[1] > bucket}

    # -- queries -------------------------------------------------------------------------

    @property
    def total_weight(self) -> int:
        """Total weight counted so far (``N``)."""
        return self._n

    def is_empty(self) -> bool:
        """True when nothing was counted."""
        return self._n == 0

    def __len__(self) -> int:
        """Number of monitored keys (the counter's size)."""
        return len(self._table)

    def estimate(self, key: Hashable) -> int:
        """Count of ``key`` since it was last inserted (the lower bound; 0 if not monitored)."""
        return self.lower_bound(key)

    def lower_bound(self, key: Hashable) -> int:
        """A count the true count of ``key`` is at least."""
        entry = self._table.get(key)
        return entry[0] if entry is not None else 0

    def upper_bound(self, key: Hashable) -> int:
        """A count the true count of ``key`` is at most."""
        entry = self._table.get(key)
        # A key not monitored was dropped at a bucket end b <= completed buckets
        # with true count <= b, and has not been seen since.
        return entry[0] + entry[1] if entry is not None else self._n // self.bucket_width

    def frequent_items(self, support: float) -> list[tuple[Hashable, int, int, int]]:
        """Rows ``(key, estimate, lower, upper)`` of the keys that may reach ``support``, heaviest first.

        Returns every key with ``count >= (support - epsilon) * N``: all keys
        whose true count is at least ``support * N`` are among them. Divide by
        :attr:`total_weight` for frequencies.
        """
        support = check_interval(support, "support", "LossyCounter.frequent_items", lower=0.0, upper=1.0)
        threshold = (support - self.epsilon) * self._n
        rows = [(k, e[0], e[0], e[0] + e[1]) for k, e in self._table.items() if e[0] >= threshold]
        rows.sort(key=lambda r: -r[1])  # stable: ties keep insertion order
        return rows

    @staticmethod
    def apriori_error(epsilon: float, total_weight: int) -> float:
        """The largest ``upper - lower`` after ``total_weight`` units: ``epsilon * total_weight``."""
        return epsilon * total_weight

    def __str__(self) -> str:
        return (
            f"LossyCounter(epsilon={self.epsilon:g}, total_weight={self._n}, monitored={len(self._table)}, "
            f"error<={self.apriori_error(self.epsilon, self._n):g})"
        )


class SlidingLossyCounter:
    """Lossy counting over a sliding window, emulated with ``n_counters`` staggered tumbling counters.

    Counter ``i`` starts after ``i * s`` tuples, ``s = ceil(window / (n_counters - 1))``,
    lives ``n_counters * s`` tuples (about ``window + s``) and then restarts
    empty. Queries read the oldest running counter, which has seen between
    ``window`` and ``window + s`` of the latest tuples (``1.5 * window`` for
    three counters), all of them the most recent ones. Before ``window`` tuples
    have arrived it has seen fewer, and the lower end does not hold yet.

    Parameters
    ----------
    epsilon : float
        Error bound of every counter, in ``(0, 1)``.
    window : int
        Window size ``W`` in tuples (the paper gives no default).
    n_counters : int
        Number of tumbling counters ``x >= 2`` (paper: 3).

    Notes
    -----
    This follows Fig. 2 of Gedik [1]_; the schedule ("build" for ``W`` tuples,
    then "use" for ``W / (x - 1)``) is rebuilt from the figure's labels
    (seeds-algorithms.md §2.4). The guarantees of :class:`LossyCounter` hold
    with respect to the tuples :attr:`total_weight` counts.
    """

    def __init__(self, epsilon: float, window: int, n_counters: int = 3) -> None:
        owner = "SlidingLossyCounter"
        check_interval(epsilon, "epsilon", owner, lower=0.0, upper=1.0, closed="neither")
        self.window = check_integer(window, "window", owner, lower=1)
        self.n_counters = check_integer(n_counters, "n_counters", owner, lower=2)
        self.epsilon = float(epsilon)
        self.stagger = math.ceil(self.window / (self.n_counters - 1))
        self.period = self.n_counters * self.stagger
        self._t = 0
        self._counters = [LossyCounter(self.epsilon) for _ in range(self.n_counters)]
        # Counter i starts at tuple i * stagger; afterwards it restarts every ``period``.
        self._started = [i * self.stagger for i in range(self.n_counters)]

    def update(self, key: Hashable) -> None:
        """Count one tuple of ``key``."""
        self.update_batch(np.asarray([key]))

    def update_batch(self, keys: Iterable[Hashable] | np.ndarray) -> None:
        """Count a batch of tuples, in order (cut at counter starts and restarts)."""
        arr = np.asarray(keys if isinstance(keys, np.ndarray) else list(keys))
        pos = 0
        while pos < arr.shape[0]:
            # Every start or restart falls on a multiple of ``stagger``.
            take = min(arr.shape[0] - pos, self.stagger - self._t % self.stagger)
            chunk = arr[pos : pos + take]
            for i, counter in enumerate(self._counters):
                if self._t >= self._started[i]:
                    counter.update_batch(chunk)
            self._t += take
            pos += take
            for i in range(self.n_counters):
                if self._t - self._started[i] == self.period:
                    logger.debug("sliding lossy counter %d restarts at tuple %d", i, self._t)
                    self._counters[i] = LossyCounter(self.epsilon)
                    self._started[i] = self._t

    @property
    def active(self) -> LossyCounter:
        """The counter queries read: the oldest running one."""
        running = [i for i in range(self.n_counters) if self._t >= self._started[i]]
        return self._counters[min(running, key=lambda i: self._started[i])]

    @property
    def total_weight(self) -> int:
        """Number of (most recent) tuples the active counter has seen."""
        return self.active.total_weight

    def is_empty(self) -> bool:
        """True when no tuple was counted."""
        return self._t == 0

    def __len__(self) -> int:
        """Keys monitored by all counters together (the memory the emulation costs)."""
        return sum(len(c) for c in self._counters)

    def frequent_items(self, support: float) -> list[tuple[Hashable, int, int, int]]:
        """:meth:`LossyCounter.frequent_items` of the active counter."""
        return self.active.frequent_items(support)

    def frequencies(self, support: float) -> dict[Hashable, float]:
        """Estimated frequency ``count / total_weight`` of every key :meth:`frequent_items` returns."""
        n = self.total_weight
        return {k: est / n for k, est, _, _ in self.frequent_items(support)} if n else {}

    def __str__(self) -> str:
        return (
            f"SlidingLossyCounter(epsilon={self.epsilon:g}, window={self.window}, counters={self.n_counters}, "
            f"seen={self._t}, active_weight={self.total_weight}, monitored={len(self)})"
        )
