"""Shared machinery of Gedik's constructions (Scan, Redist, Readj): setup, penalties, utilities.

Private: the public functions validate their options here once and then
drive a :class:`Construction`. Section 4.2.1 of Gedik (VLDB J. 2014) defines
the two penalties every construction ranks candidate placements with:

* balance penalty ``rho`` (Eqs. 19-20): per balanced resource,
  ``(max_i L(i) - min_i L(i)) / (theta * mean)`` over the *tracked* keys
  (each ``L(i)`` relative to the instance's fair share on servers of
  different capacities, :attr:`RebalanceProblem.shares`)
  placed so far, then the geometric mean over the balanced resources (the
  paper's exponent 1/3 becomes ``1 / #balanced``, constant resources being
  left out per Section 4.4);
* migration penalty ``gamma`` (Eq. 18): state moved by the keys that stop
  being tracked plus by the tracked keys placed off their current instance,
  over the ideal migration ``sum of the state of D_a / N``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from locality._validation import check_interval
from locality.errors import InvalidParameterError
from locality.rebalance._base import RebalanceProblem, RebalanceResult, finish
from locality.rebalance.hybrid import _select_tracked, check_resources, key_frequencies, resource_costs

__all__ = ["UTILITIES", "Construction", "GedikOptions", "setup"]

logger = logging.getLogger(__name__)

Utility = Callable[[np.ndarray, np.ndarray], np.ndarray]

# Section 4.3; lower is better. Natural log (the paper gives no base).
UTILITIES: dict[str, Utility] = {
    "A": lambda rho, gamma: rho,
    "APM": lambda rho, gamma: rho + gamma,
    "APLM": lambda rho, gamma: rho + np.log1p(gamma),
    "ATM": lambda rho, gamma: rho * (1.0 + gamma),
    "ATLM": lambda rho, gamma: rho * (1.0 + np.log1p(gamma)),
}


class GedikOptions(TypedDict, total=False):
    """The options Scan, Redist and Readj share; :func:`setup` holds the defaults, :func:`~.scan.scan` the docs."""

    utility: str | Utility
    resources: str
    sigma: float
    delta: float | None
    frequencies: np.ndarray | None
    tracked_before: np.ndarray | None
    untracked_load: bool


# theta_max = 0 would make every rho infinite and every placement tie; a tiny
# floor keeps rho proportional to the spread so the rankings stay meaningful.
_THETA_FLOOR = 1e-9


@dataclass
class Construction:
    """State of one construction: the tracked keys, where they are placed, the running penalties.

    Tracked keys are indexed ``0..R-1`` in decreasing frequency; ``keys`` maps
    them back to problem keys. ``placed[r]`` is ``-1`` until key ``r`` is placed.
    """

    problem: RebalanceProblem
    keys: np.ndarray  # (R,) problem key of each tracked key
    freq: np.ndarray  # (R,) frequency f
    cost: np.ndarray  # (R, B) cost in each balanced resource
    state: np.ndarray  # (R,) state size (migration weight)
    old: np.ndarray  # (R,) current instance, p^(t)(d)
    loads: np.ndarray  # (B, N) load of each instance in each balanced resource
    placed: np.ndarray  # (R,) instance, or -1
    theta: float
    m_cur: float  # migration so far (numerator of gamma)
    m_bar: float  # ideal migration (denominator of gamma)
    utility: Utility
    weight: np.ndarray  # (N,) each instance's fair share over the mean one (1 with equal shares)

    @property
    def n(self) -> int:
        return self.loads.shape[1]

    # -- penalties -----------------------------------------------------------------------

    def rho(self) -> float:
        """Balance penalty of the current placement."""
        empty = np.empty(0, dtype=np.int64)
        return float(self.rho_after(np.zeros(1, dtype=np.int64), np.zeros((1, self.loads.shape[0])), empty)[0])

    def rho_after(
        self,
        chan_a: np.ndarray,
        add_a: np.ndarray,
        chan_b: np.ndarray | None = None,
        add_b: np.ndarray | None = None,
    ) -> np.ndarray:
        """Balance penalty of ``C`` candidates, each adding ``add_a[c]`` to instance ``chan_a[c]``
        (and ``add_b[c]`` to a different instance ``chan_b[c]``), all at once in O(C * B).

        The max and min over the untouched instances come from the three
        largest and smallest loads, so no candidate copies the load matrix.
        """
        n_res, n = self.loads.shape
        if n_res == 0:
            return np.zeros(chan_a.shape[0])
        depth = min(3, n)
        relative = self.loads / self.weight  # loads as shares of the fair one: equal loads with equal shares
        order = np.argsort(relative, axis=1, kind="stable")
        lo_idx, hi_idx = order[:, :depth], order[:, ::-1][:, :depth]
        lo_val = np.take_along_axis(relative, lo_idx, axis=1)
        hi_val = np.take_along_axis(relative, hi_idx, axis=1)
        keep_lo = lo_idx[None] != chan_a[:, None, None]
        keep_hi = hi_idx[None] != chan_a[:, None, None]
        new_a = (self.loads[:, chan_a].T + add_a) / self.weight[chan_a][:, None]
        total = self.loads.sum(axis=1)[None, :] + add_a
        new_max, new_min = new_a, new_a
        if chan_b is not None and chan_b.shape[0]:
            keep_lo &= lo_idx[None] != chan_b[:, None, None]
            keep_hi &= hi_idx[None] != chan_b[:, None, None]
            new_b = (self.loads[:, chan_b].T + add_b) / self.weight[chan_b][:, None]
            total = total + add_b
            new_max, new_min = np.maximum(new_max, new_b), np.minimum(new_min, new_b)
        new_max = np.maximum(new_max, np.where(keep_hi, hi_val[None], -np.inf).max(axis=2))
        new_min = np.minimum(new_min, np.where(keep_lo, lo_val[None], np.inf).min(axis=2))
        denom = self.theta * total / n
        with np.errstate(divide="ignore", invalid="ignore"):
            per_resource = np.where(denom > 0, (new_max - new_min) / denom, 0.0)
        return np.prod(per_resource, axis=1) ** (1.0 / n_res)

    def gamma(self, extra: np.ndarray | float) -> np.ndarray:
        """Migration penalty after adding ``extra`` state to the migration so far."""
        extra = np.asarray(extra, dtype=float)
        if self.m_bar <= 0:
            return np.zeros_like(extra)
        return (self.m_cur + extra) / self.m_bar

    def moved_state(self, r: np.ndarray, chan: np.ndarray) -> np.ndarray:
        """State that placing tracked keys ``r`` on instances ``chan`` migrates."""
        return self.state[r] * (chan != self.old[r])

    # -- updates -------------------------------------------------------------------------

    def place(self, r: int, chan: int) -> None:
        """Put tracked key ``r`` (unplaced, or placed elsewhere) on instance ``chan``."""
        was = int(self.placed[r])
        if was >= 0:
            self.loads[:, was] -= self.cost[r]
            self.m_cur -= float(self.state[r]) * (was != self.old[r])
        self.loads[:, chan] += self.cost[r]
        self.m_cur += float(self.state[r]) * (chan != self.old[r])
        self.placed[r] = chan

    def result(self, method: str, started: float) -> RebalanceResult:
        """The :class:`RebalanceResult`: tracked keys where placed, every other key on its fallback."""
        problem = self.problem
        assignment = problem.fallback.copy()
        assignment[self.keys] = self.placed
        hot = problem.hot_keys()
        logger.debug(
            "%s: %d tracked keys, rho %.4g, gamma %.4g", method, self.keys.shape[0], self.rho(), self.gamma(0.0)
        )
        return finish(problem, assignment, method, started, feasible=hot.shape[0] == 0, hot_keys=hot)


def _tracked_before(problem: RebalanceProblem, tracked_before: object, owner: str) -> np.ndarray:
    """Boolean mask of ``D_p^(t)``: given key ids, else the keys now off their fallback."""
    if tracked_before is None:
        return problem.current != problem.fallback
    ids = np.asarray(tracked_before)
    if (
        ids.ndim != 1
        or (ids.size and (not np.issubdtype(ids.dtype, np.integer) or ids.min() < 0))
        or (ids.size and ids.max() >= problem.n_keys)
    ):
        raise InvalidParameterError(
            f"the 'tracked_before' parameter of {owner} must be a 1-d array of key ids in [0, {problem.n_keys - 1}]",
            parameter="tracked_before",
        )
    mask = np.zeros(problem.n_keys, dtype=bool)
    mask[ids] = True
    return mask


def setup(
    problem: RebalanceProblem,
    owner: str,
    *,
    utility: str | Utility = "APM",
    resources: str = "LCL",
    sigma: float = 0.1,
    delta: float | None = None,
    frequencies: np.ndarray | None = None,
    tracked_before: np.ndarray | None = None,
    untracked_load: bool = False,
) -> Construction:
    """Validate the options shared by Scan, Redist and Readj and run the common setup of Algorithms 2-4.

    ``D_p^(t+1)`` is :func:`~locality.rebalance.hybrid.tracked_keys`;
    ``D_p^(t)`` is ``tracked_before`` or, by default, the keys whose current
    instance differs from the fallback (the entries a table over the new hash
    holds). Keys leaving the table go to their fallback; the state this moves
    starts the migration penalty (``m`` in the algorithms).
    """
    if not isinstance(problem, RebalanceProblem):
        raise InvalidParameterError(
            f"the 'problem' parameter of {owner} must be a RebalanceProblem; got {problem!r}", parameter="problem"
        )
    if isinstance(utility, str):
        if utility not in UTILITIES:
            raise InvalidParameterError(
                f"the 'utility' parameter of {owner} must be one of {sorted(UTILITIES)} or a callable; got {utility!r}",
                parameter="utility",
            )
        utility = UTILITIES[utility]
    elif not callable(utility):
        raise InvalidParameterError(
            f"the 'utility' parameter of {owner} must be one of {sorted(UTILITIES)} or a callable; got {utility!r}",
            parameter="utility",
        )
    resources = check_resources(resources, owner)
    sigma = check_interval(sigma, "sigma", owner, lower=0.0, upper=1.0, closed="right")
    if delta is not None:
        delta = check_interval(delta, "delta", owner, lower=0.0, upper=1.0)
    if not isinstance(untracked_load, bool):
        raise InvalidParameterError(
            f"the 'untracked_load' parameter of {owner} must be a bool; got {untracked_load!r}",
            parameter="untracked_load",
        )
    f = key_frequencies(problem, frequencies, owner)
    costs = resource_costs(problem, resources, f)
    keys = _select_tracked(problem, f, costs, sigma, delta)
    before = _tracked_before(problem, tracked_before, owner)

    now = np.zeros(problem.n_keys, dtype=bool)
    now[keys] = True
    state = problem.state_sizes
    leaving = before & ~now
    m_cur = float(state[leaving & (problem.current != problem.fallback)].sum())
    m_bar = float(state[before | now].sum()) / problem.n_instances

    loads = np.zeros((costs.shape[1], problem.n_instances))
    # The hash spreads the untracked keys evenly over the instances, not by their shares: with unequal
    # shares the tracked keys must make up for it, so rho sees the untracked load.
    if untracked_load or problem.shares is not None:
        rest = ~now
        for b in range(costs.shape[1]):
            loads[b] = np.bincount(problem.fallback[rest], weights=costs[rest, b], minlength=problem.n_instances)
    return Construction(
        problem=problem,
        keys=keys,
        freq=f[keys],
        cost=costs[keys],
        state=state[keys],
        old=problem.current[keys],
        loads=loads,
        placed=np.full(keys.shape[0], -1, dtype=np.int64),
        theta=max(problem.theta_max, _THETA_FLOOR),
        m_cur=m_cur,
        m_bar=m_bar,
        utility=utility,
        weight=np.ones(problem.n_instances) if problem.shares is None else problem.shares * problem.n_instances,
    )
