"""Synthetic skewed, fluctuating key workloads, as in Fang et al.'s evaluation (HPDC 2017, Table II)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from locality._validation import check_integer, check_interval, check_random_state
from locality.defaults import DEFAULT_SEED, DEFAULT_THETA_MAX
from locality.errors import InvalidParameterError
from locality.rebalance._base import RebalanceProblem

__all__ = ["SkewWorkload", "skew_workload", "fibonacci_fallback", "FIBONACCI_MULTIPLIER"]

logger = logging.getLogger(__name__)

FIBONACCI_MULTIPLIER = 0x9E3779B97F4A7C15
"""``2**64`` divided by the golden ratio, odd: Knuth's multiplicative ("Fibonacci") hashing constant."""

_BATCH = 1024  # frequency swaps drawn at once; the first one that reaches the target ends the interval
_MAX_BATCHES = 256  # give up (and log) when the bursting instance cannot take more popular keys


def fibonacci_fallback(n_keys: int, n_instances: int) -> np.ndarray:
    """Deterministic fallback instance of keys ``0..n_keys-1``: Fibonacci hashing.

    ``h(k) = (((k * 0x9E3779B97F4A7C15) mod 2**64 >> 32) * n_instances) >> 32``:
    the key index times Knuth's golden-ratio multiplier, wrapping at 64 bits,
    keeps its high 32 bits (the well-mixed ones), which are then mapped onto
    ``[0, n_instances)`` by a multiply-shift (Lemire's range reduction) rather
    than ``mod``, which would read their low bits and, for an even
    ``n_instances``, alternate full and light instances. Pure integer
    arithmetic, so every process and machine agrees; it is a stand-in, not any
    engine's hash (pass ``fallback=`` to :func:`skew_workload` for one).

    Parameters
    ----------
    n_keys : int
        Size of the key domain, ``>= 0``.
    n_instances : int
        Number of instances, ``>= 1``.

    Returns
    -------
    ndarray of int64, shape (n_keys,)

    Examples
    --------
    >>> import numpy as np
    >>> fibonacci_fallback(10, 4).tolist()
    [0, 2, 0, 3, 1, 0, 2, 1, 3, 2]
    >>> np.bincount(fibonacci_fallback(3000, 3)).tolist()
    [1001, 1000, 999]
    """
    n_keys = check_integer(n_keys, "n_keys", "fibonacci_fallback", lower=0)
    n_instances = check_integer(n_instances, "n_instances", "fibonacci_fallback", lower=1, upper=2**31)
    keys = np.arange(n_keys, dtype=np.uint64)
    high = (keys * np.uint64(FIBONACCI_MULTIPLIER)) >> np.uint64(32)  # uint64 multiply wraps mod 2**64
    return ((high * np.uint64(n_instances)) >> np.uint64(32)).astype(np.int64)  # < 2**32 * 2**31: no overflow


@dataclass(frozen=True)
class SkewWorkload:
    """Per-interval key costs and state sizes of one operator, with its fallback hash.

    Attributes
    ----------
    costs : ndarray of float, shape (n_intervals, K)
        ``costs[i, k]``: computation cost ``c_i(k)`` of key ``k`` in interval ``i``
        (the expected number of its tuples).
    state_sizes : ndarray of float, shape (n_intervals, K)
        ``S_i(k, w)``: the cost of key ``k`` summed over intervals ``i - w + 1 .. i``
        (every interval has a full window: ``w - 1`` earlier intervals are generated and dropped).
    fallback : ndarray of int, shape (K,)
        Fallback (hash) instance of each key.
    n_instances : int
        ``N_D``.
    zipf, fluctuation : float
        ``z`` and ``f`` used to generate.
    window : int
        ``w``.
    """

    costs: np.ndarray
    state_sizes: np.ndarray
    fallback: np.ndarray
    n_instances: int
    zipf: float
    fluctuation: float
    window: int

    @property
    def n_intervals(self) -> int:
        return int(self.costs.shape[0])

    @property
    def n_keys(self) -> int:
        return int(self.costs.shape[1])

    def hash_loads(self, interval: int) -> np.ndarray:
        """Load of each instance in ``interval`` when every key follows the fallback."""
        return np.bincount(self.fallback, weights=self.costs[interval], minlength=self.n_instances)

    def problem(
        self,
        interval: int,
        current: np.ndarray | None = None,
        *,
        theta_max: float = DEFAULT_THETA_MAX,
        table_cap: int | None = None,
    ) -> RebalanceProblem:
        """The rebalancing problem posed by the statistics of ``interval``.

        ``current`` is the assignment in force (default: the fallback, i.e. an
        empty routing table). The plan it yields is meant for interval ``interval + 1``.
        """
        interval = check_integer(interval, "interval", "SkewWorkload.problem", lower=0, upper=self.n_intervals - 1)
        return RebalanceProblem(
            loads=self.costs[interval],
            state_sizes=self.state_sizes[interval],
            current=self.fallback if current is None else current,
            fallback=self.fallback,
            n_instances=self.n_instances,
            theta_max=theta_max,
            table_cap=table_cap,
        )


def skew_workload(
    n_keys: int,
    n_intervals: int,
    n_instances: int,
    *,
    zipf: float = 0.85,
    fluctuation: float = 1.0,
    window: int = 1,
    fallback: np.ndarray | None = None,
    n_tuples: float | None = None,
    seed: int | np.random.Generator = DEFAULT_SEED,
) -> SkewWorkload:
    """Generate the synthetic workload of Fang et al.'s evaluation: Zipf keys whose popularity drifts.

    Key ``k`` of the integer domain ``0..K-1`` holds a Zipf rank (a seeded
    random permutation); its cost in an interval is the expected number of
    tuples of that rank, ``n_tuples * r**(-z) / sum_j j**(-z)``. At each new
    interval the generator swaps the frequencies of pairs of keys sitting on
    different fallback instances until some instance's load has changed by
    ``f`` times the mean: ``max_d |L_i(d) - L_{i-1}(d)| / mean >= f``, loads
    taken under the fallback hash. The paper's sentence leaves open which
    ``d`` and which pairs; here the largest change counts (so ``f`` is the size
    of the skew a rebalancer must absorb), and each pair is a popular key
    of another instance (drawn in proportion to its frequency) and a random
    key of one instance, drawn at random among those at or below the mean,
    which thus bursts. Random pairs alone cannot reach ``f = 1`` (a random
    re-hash of Zipf frequencies moves an instance by a few percent of the
    mean). The state of a key is its cost summed over the last ``w`` intervals.

    Parameters
    ----------
    n_keys : int
        Key domain size ``K`` (the paper: 5,000 to 10**6), ``>= 1``.
    n_intervals : int
        Intervals returned, ``>= 1``.
    n_instances : int
        ``N_D`` (the paper: 1 to 40), ``>= 1``; ``>= 2`` when ``fluctuation > 0``.
    zipf : float, default 0.85
        Skew ``z >= 0`` (the paper: 0 to 1, default 0.85).
    fluctuation : float, default 1.0
        ``f >= 0`` (the paper: 0 to 2, default 1). 0 repeats the first interval.
    window : int, default 1
        ``w >= 1`` intervals of state (the paper: 1, 5, 10, 15, 20).
    fallback : array of int, shape (K,), optional
        Fallback instance of each key, in ``[0, n_instances)``; default
        :func:`fibonacci_fallback`.
    n_tuples : float, optional
        Total cost of an interval (default ``100 * K``).
    seed : int or numpy.random.Generator, default 0
        The only source of randomness.

    Returns
    -------
    SkewWorkload
        ``costs`` and ``state_sizes`` of shape ``(n_intervals, K)``, ``fallback``,
        and :meth:`SkewWorkload.problem` to pose an interval as a
        :class:`~locality.rebalance.RebalanceProblem`.

    Raises
    ------
    InvalidParameterError
        On a parameter out of range, a ``fallback`` of the wrong shape or out
        of ``[0, n_instances)``, or ``fluctuation > 0`` with one instance.

    Examples
    --------
    >>> w = skew_workload(1000, 3, 4, zipf=0.85, fluctuation=0.5, window=2, seed=7)
    >>> w.costs.shape, bool(np.allclose(w.costs.sum(axis=1), 100_000))
    ((3, 1000), True)
    >>> change = np.abs(w.hash_loads(1) - w.hash_loads(0)).max() / w.hash_loads(0).mean()
    >>> bool(change >= 0.5)
    True

    References
    ----------
    .. [1] J. Fang, R. Zhang, T. Z. J. Fu, Z. Zhang, A. Zhou, J. Zhu. "Parallel stream processing
       against workload skewness and variance." HPDC 2017; arXiv:1610.05121 (Section V, Table II).
    """
    owner = "skew_workload"
    n_keys = check_integer(n_keys, "n_keys", owner, lower=1)
    n_intervals = check_integer(n_intervals, "n_intervals", owner, lower=1)
    n_instances = check_integer(n_instances, "n_instances", owner, lower=1)
    zipf = check_interval(zipf, "zipf", owner, lower=0)
    fluctuation = check_interval(fluctuation, "fluctuation", owner, lower=0)
    window = check_integer(window, "window", owner, lower=1)
    total = (
        100.0 * n_keys if n_tuples is None else check_interval(n_tuples, "n_tuples", owner, lower=0, closed="neither")
    )
    rng = check_random_state(seed, "seed", owner)
    if fluctuation > 0 and n_instances < 2:
        raise InvalidParameterError(
            f"the 'n_instances' parameter of {owner} must be an int >= 2 when fluctuation > 0; got {n_instances}",
            parameter="n_instances",
        )
    if fallback is None:
        fallback = fibonacci_fallback(n_keys, n_instances)
    else:
        fallback = np.asarray(fallback)
        if fallback.shape != (n_keys,) or not np.issubdtype(fallback.dtype, np.integer):
            raise InvalidParameterError(
                f"the 'fallback' parameter of {owner} must be an int array of shape ({n_keys},); "
                f"got {fallback.dtype} of shape {fallback.shape}",
                parameter="fallback",
            )
        if n_keys and (fallback.min() < 0 or fallback.max() >= n_instances):
            raise InvalidParameterError(
                f"the 'fallback' parameter of {owner} must hold instances in [0, {n_instances - 1}]",
                parameter="fallback",
            )
        fallback = fallback.astype(np.int64)

    ranks = np.arange(1, n_keys + 1, dtype=float)
    pmf = ranks**-zipf
    freq = (pmf * (total / pmf.sum()))[rng.permutation(n_keys)]
    history = np.empty((n_intervals + window - 1, n_keys))
    history[0] = freq
    for i in range(1, history.shape[0]):
        history[i] = _fluctuate(history[i - 1], fallback, n_instances, fluctuation, rng)
    # S_i(k, w) = sum of the last w costs, summed directly (a running sum's differences round).
    state = history[window - 1 :].copy()
    for lag in range(1, window):
        state += history[window - 1 - lag : window - 1 - lag + n_intervals]
    costs = history[window - 1 :].copy()
    for arr in (costs, state, fallback):
        arr.setflags(write=False)
    return SkewWorkload(costs, state, fallback, n_instances, zipf, fluctuation, window)


def _fluctuate(freq: np.ndarray, inst: np.ndarray, n: int, f: float, rng: np.random.Generator) -> np.ndarray:
    """One new interval: swap frequencies between popular keys and random keys until one instance moved ``f * mean``.

    Random pairs do not work: a random re-hash of the same Zipf frequencies
    moves an instance by a few percent of the mean at most (at ``K = 10**6``,
    ``N_D = 5``, about 7%), so ``f = 1`` would never be reached. One instance
    changes instead: a *burst* on a random instance among those at or below
    the mean, whose keys take over the frequencies of popular keys elsewhere.
    Bursting an underloaded instance keeps the skew stationary (bursts on any
    instance pile up: the hash theta drifts to 2); a cool-down of a loaded
    instance is no alternative, since most of its load sits in tail keys no
    swap can cool.
    """
    freq = freq.copy()
    mean = freq.sum() / n
    target = f * mean
    if target <= 0:
        return freq
    below = np.flatnonzero(np.bincount(inst, weights=freq, minlength=n) <= mean)
    focus = int(below[rng.integers(below.size)])
    src, dst = np.flatnonzero(inst != focus), np.flatnonzero(inst == focus)
    moved = np.zeros(n)
    for _ in range(_MAX_BATCHES):
        weight = freq[src]
        a = src[rng.choice(src.size, size=_BATCH, p=weight / weight.sum())]  # popular keys
        b = dst[rng.integers(0, dst.size, size=_BATCH)]  # any key
        # Keep each key's first pair only: disjoint swaps commute, so the batch applies at once.
        _, first_a = np.unique(a, return_index=True)
        _, first_b = np.unique(b, return_index=True)
        keep = np.zeros(_BATCH, dtype=bool)
        keep[np.intersect1d(first_a, first_b)] = True
        a, b = a[keep], b[keep]
        gain = freq[a] - freq[b]  # the instance of b gains it, the instance of a loses it
        rows = np.arange(a.size)
        steps = np.zeros((a.size, n))
        np.add.at(steps, (rows, inst[b]), gain)
        np.subtract.at(steps, (rows, inst[a]), gain)
        path = moved + np.cumsum(steps, axis=0)
        hit = np.flatnonzero(np.abs(path).max(axis=1) >= target)
        stop = int(hit[0]) + 1 if hit.size else a.size
        a, b = a[:stop], b[:stop]
        freq[a], freq[b] = freq[b], freq[a]
        moved = path[stop - 1]
        if hit.size:
            return freq
    logger.warning(
        "fluctuation %.3g not reached after %d swaps; largest change %.3g of the mean",
        f,
        _MAX_BATCHES * _BATCH,
        np.abs(moved).max() / mean,
    )
    return freq
