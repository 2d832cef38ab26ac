"""Readj: Gedik's construction that readjusts the current placement by moves and swaps (Algorithm 4)."""

from __future__ import annotations

import logging
import time
from typing import Unpack

import numpy as np

from locality._validation import check_integer
from locality.errors import InvalidParameterError
from locality.rebalance._base import RebalanceProblem, RebalanceResult
from locality.rebalance._gedik import Construction, GedikOptions, setup

__all__ = ["readj"]

logger = logging.getLogger(__name__)

# rho is recomputed from updated loads; demand a decrease beyond rounding so
# that float noise can never let Readj cycle.
_REL_DECREASE = 1e-12


def _candidates(c: Construction, eligible: np.ndarray) -> dict[str, np.ndarray]:
    """Every move ``<i, d1, j, -->`` and swap ``<i, d1, j, d2>`` among ``eligible`` tracked keys (Eq. 21).

    Each swap appears once (``d1`` before ``d2``); the printed loop over
    ordered channel pairs lists it twice with the same effect.
    """
    n = c.n
    d1 = np.repeat(eligible, n)
    dest = np.tile(np.arange(n), eligible.shape[0])
    keep = dest != c.placed[d1]
    d1, dest = d1[keep], dest[keep]
    a, b = np.triu_indices(eligible.shape[0], 1)
    a, b = eligible[a], eligible[b]
    keep = c.placed[a] != c.placed[b]
    a, b = a[keep], b[keep]
    none = np.full(d1.shape[0], -1, dtype=np.int64)
    first = np.concatenate([d1, a])
    second = np.concatenate([none, b])
    src = c.placed[first]
    dst = np.concatenate([dest, c.placed[b]])
    is_swap = second >= 0
    other = np.where(is_swap, second, 0)
    # What moves from src to dst: d1's cost, minus d2's for a swap.
    delta = c.cost[first] - np.where(is_swap[:, None], c.cost[other], 0.0)
    # Eq. 22: change of migration cost; negative when a key returns to its old instance.
    old1, old2 = c.old[first], c.old[other]
    mig = c.state[first] * ((old1 != dst).astype(float) - (old1 != src))
    mig += np.where(is_swap, c.state[other] * ((old2 != src).astype(float) - (old2 != dst)), 0.0)
    df = np.abs(c.freq[first] - np.where(is_swap, c.freq[other], 0.0))
    return {"first": first, "second": second, "src": src, "dst": dst, "delta": delta, "mig": mig, "df": df}


def readj(
    problem: RebalanceProblem,
    *,
    max_moves: int | None = 5,
    require_gain: bool = False,
    **options: Unpack[GedikOptions],
) -> RebalanceResult:
    """Start from where the tracked keys are and apply the best balance-improving move or swap until none is left.

    Problem: as :func:`~locality.rebalance.scan.scan`, build the next hybrid
    partitioning function (explicit entries for the frequent keys, the
    fallback hash for the rest) balancing memory, processing and network at a
    low migration cost. Method (Gedik's Readj): keys that stop being tracked
    go to their fallback, tracked keys start on their current instance; then,
    while some readjustment lowers the balance penalty ``rho``, apply the one
    with the largest utility reduction per unit of frequency moved,
    ``(U_now - U_after) / |f(d1) - f(d2)|``. A readjustment moves a key to
    another instance or swaps two keys of different instances. Each key takes
    part in at most ``max_moves`` readjustments.

    Parameters
    ----------
    problem : RebalanceProblem
        See :func:`~locality.rebalance.scan.scan` for how its fields map onto the paper.
    utility, resources, sigma, delta, frequencies, tracked_before, untracked_load
        As for :func:`~locality.rebalance.scan.scan` (same meaning, same defaults).
    max_moves : int or None
        Most readjustments one key takes part in (the paper's ``c``, 5;
        ``None``: no limit). Bounds the run at O(R^3) candidate evaluations.
    require_gain : bool
        Stop as soon as the best readjustment does not lower the utility
        (the text's "until no readjustment improves the utility"); by default
        the printed algorithm's rule applies, keep going while ``rho`` drops.

    Returns
    -------
    RebalanceResult
        ``feasible`` is False (and ``hot_keys`` lists them) when a key alone
        exceeds ``(1 + theta_max) * mean``.

    Raises
    ------
    InvalidParameterError
        On bad options, as for :func:`~locality.rebalance.scan.scan`, or a
        ``max_moves`` that is not an int >= 1.

    Notes
    -----
    Guarantees: every key gets exactly one instance, untracked keys stay on
    their fallback, the table holds only tracked keys, and every applied
    readjustment strictly lowers ``rho``, so the tracked keys end at least as
    balanced as they started (where they are now) and the run ends.
    ``theta_max`` is not guaranteed (``rho`` sees only tracked keys).

    Reconstruction (seeds-algorithms.md §2.9): (1) the printed algorithm
    starts the "last utility" ``u`` at 0 and overwrites it inside the
    candidate loop, so candidates are compared with a moving reference; here
    ``u`` is the utility of the current placement, computed once per
    iteration. (2) "if a >= rho then break" is read as its comment says,
    *skip this candidate*. (3) Eq. 22 lost the ``+`` before the swap's second
    term. (4) A swap of equal-frequency keys has no gain per frequency and is
    skipped. (5) The move limit ``c`` is in the text, not in the pseudocode.
    The interface never removes an instance (``current < n_instances``), so
    the paper's case ``N(t+1) < N(t)`` does not arise.

    References
    ----------
    .. [1] B. Gedik. "Partitioning functions for stateful data parallelism in
       stream processing." The VLDB Journal 23(4): 517-539, 2014.
       https://doi.org/10.1007/s00778-013-0335-9

    See Also
    --------
    locality.rebalance.scan.scan, locality.rebalance.redist.redist

    Examples
    --------
    >>> import numpy as np
    >>> p = RebalanceProblem(np.array([5.0, 4, 3, 3]), np.ones(4), np.zeros(4, int), np.array([0, 0, 1, 1]), 2)
    >>> readj(p, delta=0.0).assignment.tolist()
    [1, 0, 1, 0]
    """
    started = time.perf_counter()
    owner = "readj"
    if max_moves is not None:
        max_moves = check_integer(max_moves, "max_moves", owner, lower=1)
    if not isinstance(require_gain, bool):
        raise InvalidParameterError(
            f"the 'require_gain' parameter of {owner} must be a bool; got {require_gain!r}", parameter="require_gain"
        )
    c = setup(problem, owner, **options)
    for r in range(c.keys.shape[0]):
        c.place(r, int(c.old[r]))
    moves = np.zeros(c.keys.shape[0], dtype=np.int64)
    iterations = 0
    while True:
        eligible = np.flatnonzero(moves < max_moves) if max_moves is not None else np.arange(moves.shape[0])
        if eligible.shape[0] == 0:
            break
        cand = _candidates(c, eligible)
        rho_now = c.rho()
        u_now = float(c.utility(np.asarray(rho_now), c.gamma(0.0)))
        rho = c.rho_after(cand["src"], -cand["delta"], cand["dst"], cand["delta"])
        ok = (rho < rho_now * (1.0 - _REL_DECREASE)) & (cand["df"] > 0)
        if not ok.any():
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.where(ok, (u_now - c.utility(rho, c.gamma(cand["mig"]))) / cand["df"], -np.inf)
        best = int(np.argmax(gain))
        if require_gain and gain[best] <= 0:
            break
        d1, d2 = int(cand["first"][best]), int(cand["second"][best])
        src, dst = int(cand["src"][best]), int(cand["dst"][best])
        c.place(d1, dst)
        moves[d1] += 1
        if d2 >= 0:
            c.place(d2, src)
            moves[d2] += 1
        iterations += 1
    logger.debug("readj: %d readjustments over %d tracked keys", iterations, c.keys.shape[0])
    return c.result(owner, started)
