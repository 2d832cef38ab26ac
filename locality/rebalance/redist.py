"""Redist: Gedik's construction that places, at each step, the key with the best utility per frequency (Algorithm 3)."""

from __future__ import annotations

import time
from typing import Unpack

import numpy as np

from locality.rebalance._base import RebalanceProblem, RebalanceResult
from locality.rebalance._gedik import GedikOptions, setup

__all__ = ["redist"]


def redist(
    problem: RebalanceProblem,
    **options: Unpack[GedikOptions],
) -> RebalanceResult:
    """Repeatedly place the (key, instance) pair with the lowest utility per unit of frequency.

    Problem: as :func:`~locality.rebalance.scan.scan`, build the next hybrid
    partitioning function (explicit entries for the frequent keys, the
    fallback hash for the rest) balancing memory, processing and network at a
    low migration cost. Method (Gedik's Redist): instead of a fixed order,
    every step scores each unplaced tracked key on each instance by
    ``U(rho, gamma) / f`` and places the best pair, so heavy keys still tend to
    go first but a lighter key whose placement is much better can jump ahead.
    O(R^2 N) penalty evaluations, vectorised per step.

    Parameters
    ----------
    problem : RebalanceProblem
        See :func:`~locality.rebalance.scan.scan` for how its fields map onto the paper.
    utility, resources, sigma, delta, frequencies, tracked_before, untracked_load
        As for :func:`~locality.rebalance.scan.scan` (same meaning, same defaults).

    Returns
    -------
    RebalanceResult
        ``feasible`` is False (and ``hot_keys`` lists them) when a key alone
        exceeds ``(1 + theta_max) * mean``.

    Raises
    ------
    InvalidParameterError
        On bad options, as for :func:`~locality.rebalance.scan.scan`.

    Notes
    -----
    Guarantees: every key gets exactly one instance, untracked keys stay on
    their fallback, the table holds only tracked keys; ``theta_max`` is not
    guaranteed (the balance penalty sees only tracked keys).

    Reconstruction (seeds-algorithms.md §2.8): the printed Algorithm 3 never
    initialises nor shrinks the candidate set ``D_c``, so its loop would not
    end; ``D_c`` starts as all tracked keys and loses each key placed. Keys of
    zero frequency cannot be scored per frequency; they are placed last, by
    utility alone. Ties go to the heavier key, then the lower instance.

    References
    ----------
    .. [1] B. Gedik. "Partitioning functions for stateful data parallelism in
       stream processing." The VLDB Journal 23(4): 517-539, 2014.
       https://doi.org/10.1007/s00778-013-0335-9

    See Also
    --------
    locality.rebalance.scan.scan, locality.rebalance.readj.readj

    Examples
    --------
    >>> import numpy as np
    >>> p = RebalanceProblem(np.array([5.0, 4, 3, 3]), np.ones(4), np.zeros(4, int), np.array([0, 0, 1, 1]), 2)
    >>> redist(p, delta=0.0).assignment.tolist()
    [0, 1, 1, 0]
    """
    started = time.perf_counter()
    c = setup(problem, "redist", **options)
    unplaced = np.arange(c.keys.shape[0])  # kept in decreasing frequency, so argmin ties favour heavy keys
    channels = np.arange(c.n)
    while unplaced.shape[0]:
        items = np.repeat(unplaced, c.n)
        chans = np.tile(channels, unplaced.shape[0])
        u = c.utility(c.rho_after(chans, c.cost[items]), c.gamma(c.moved_state(items, chans)))
        freq = c.freq[items]
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(freq > 0, u / freq, np.inf)
        if not np.isfinite(score).any():
            score = u
        best = int(np.argmin(score))
        c.place(int(items[best]), int(chans[best]))
        unplaced = np.delete(unplaced, best // c.n)
    return c.result("redist", started)
