"""Locality-aware rebalancing: restore balance with the moves that cost the least locality and state.

The skew rebalancers of Fang et al. [1]_ (MinMig, Mixed) choose which keys to
move by load and state alone. Between two locality reconfigurations that
undoes the locality the tables were built for: on the IRA tweets a daily Mixed
balances the next week better and loses much of its locality
(``benchmarks/RESULTS.md``, "Balance under bursts"). This rebalancer knows the key graph of the tables in
force: the *affinity* of a key to a server is the weight of its edges to keys
placed there, so moving key ``k`` from instance ``a`` to instance ``b``
loses ``hops(k) * (aff(k, server(a)) - aff(k, server(b))) / aff(k)`` local
hops (negative: the move gains locality, e.g. a new hashtag joining the users
that use it), and migrates its state ``S(k)``.

:func:`follow` is the third phase alone, meant for a fine cadence (every 15
minutes to an hour): keys that appeared since the tables were built (a new
hashtag, a user back after weeks) join the server of the keys they travel
with while they still carry little state, without ever raising the most
loaded instance. On the IRA tweets it lifts next-week locality at the same
balance, while the weekly reconfigurations move less state, since the keys
already sit near their neighbours (``benchmarks/RESULTS.md``, "Balance under bursts").
"""

from __future__ import annotations

import logging

import numpy as np

from locality._validation import check_interval
from locality.defaults import DEFAULT_STATE_WEIGHT
from locality.errors import InvalidParameterError
from locality.rebalance._base import RebalanceProblem, RebalanceResult
from locality.rebalance._greedy import check_problem, conclude, timer

__all__ = ["local", "follow", "hops_per_tuple"]

logger = logging.getLogger(__name__)

_TOL = 1e-9
#: Safety cap on moves per call, as a multiple of the number of keys.
_MAX_MOVES_PER_KEY = 4


def hops_per_tuple(position: int, n_operators: int) -> float:
    """Hops a tuple makes at the operator in ``position`` of a chain: two in the middle (one each side), else one."""
    return 2.0 if 0 < position < n_operators - 1 else 1.0


class _Plan:
    """The assignment being built, its instance loads and its table size (mutated by :meth:`move`)."""

    def __init__(self, problem: RebalanceProblem, affinity, servers, hop_loads, state_weight, max_cost):
        self.problem = problem
        self.max_cost = max_cost
        self.dest = problem.current.copy()
        self.loads = problem.instance_loads(self.dest)
        self.fair = problem.fair_loads
        self.hi, self.lo = problem.bounds()  # per instance: capacity-weighted shares
        self.servers = servers
        self.cost_state = state_weight * problem.state_sizes
        # Share of each key's edges towards each server; keys without edges lose nothing anywhere.
        degree = affinity.sum(axis=1) if affinity is not None else np.zeros(problem.n_keys)
        self.share = np.zeros((problem.n_keys, servers.max() + 1))
        if affinity is not None:
            np.divide(affinity, degree[:, None], out=self.share, where=degree[:, None] > 0)
        self.hops = hop_loads
        self.hot = problem.loads > self.hi.max() * (1 + _TOL)
        self.movable = problem.loads > 0
        self.table = int(np.count_nonzero(self.dest != problem.fallback))
        self.cap = problem.table_cap
        self.moves = 0

    def peak(self) -> float:
        """The highest instance load, relative to its fair share on servers of different capacities."""
        return float(self.loads.max() if self.problem.shares is None else (self.loads / self.fair).max())

    def peak_limit(self, target: int, peak: float) -> float:
        """The load ``target`` may reach without raising :meth:`peak`."""
        return peak if self.problem.shares is None else peak * float(self.fair[target])

    def loss(self, keys: np.ndarray) -> np.ndarray:
        """Local hops lost by moving each of ``keys`` to each instance, shape ``(len(keys), n_instances)``."""
        share = self.share[keys][:, self.servers]
        here = share[np.arange(keys.shape[0]), self.dest[keys]]
        return self.hops[keys][:, None] * (here[:, None] - share) + self.cost_state[keys][:, None]

    def allowed(self, keys: np.ndarray) -> np.ndarray:
        """Moves that keep the table within its cap (moves to the fallback instance always are)."""
        n = self.problem.n_instances
        if self.cap is None or self.table < self.cap:
            return np.ones((keys.shape[0], n), dtype=bool)
        fallback = self.problem.fallback[keys]
        in_table = self.dest[keys] != fallback
        return in_table[:, None] | (np.arange(n)[None, :] == fallback[:, None])

    def move(self, key: int, target: int) -> None:
        fallback = self.problem.fallback[key]
        self.table += int(target != fallback) - int(self.dest[key] != fallback)
        w = self.problem.loads[key]
        self.loads[self.dest[key]] -= w
        self.loads[target] += w
        self.dest[key] = target
        self.moves += 1


def _shed(plan: _Plan) -> None:
    """Move keys off instances above ``hi``, least (locality + state) lost per unit of load relieved first.

    When no single key fits under ``hi`` anywhere, the move that most lowers
    the larger of the two excesses (source, target) is taken; an instance
    that cannot improve is given up.
    """
    loads, w = plan.loads, plan.problem.loads
    stuck: set[int] = set()
    limit = _MAX_MOVES_PER_KEY * max(plan.problem.n_keys, 1)
    while plan.moves < limit:
        over = loads - plan.hi
        over[list(stuck)] = -np.inf
        src = int(np.argmax(over))
        if over[src] <= _TOL * max(plan.hi[src], 1.0):
            return
        cand = np.flatnonzero((plan.dest == src) & plan.movable)
        if cand.size == 0:
            stuck.add(src)
            continue
        cost = plan.loss(cand)
        allowed = plan.allowed(cand)
        allowed[:, src] = False
        room = plan.hi - loads
        fits = allowed & (w[cand][:, None] <= room[None, :] + _TOL)
        per_unit = cost / np.minimum(w[cand], over[src])[:, None]
        allowed &= per_unit <= plan.max_cost
        fits &= allowed
        if fits.any():
            # Of the cheapest moves, the one to the least-loaded target: it leaves the most room for
            # the next burst (without it, ties went to the lowest index and filled it to the bound).
            score = np.where(fits, per_unit, np.inf)
            best = score.min()
            cheapest = np.argwhere(score <= best + _TOL * max(abs(best), 1.0))
            c, d = cheapest[int(np.argmin(loads[cheapest[:, 1]]))]
        else:
            after = np.maximum(over[src] - w[cand][:, None], w[cand][:, None] - room[None, :])
            after = np.where(allowed & (after < over[src] - _TOL), after, np.inf)
            if not np.isfinite(after).any():
                stuck.add(src)
                continue
            c, d = divmod(int(np.lexsort((cost.ravel(), after.ravel()))[0]), after.shape[1])
        plan.move(int(cand[c]), int(d))


def _fill(plan: _Plan) -> None:
    """Pull keys onto instances below ``lo`` from instances that stay at or above it, cheapest per unit first."""
    loads, w = plan.loads, plan.problem.loads
    stuck: set[int] = set()
    limit = _MAX_MOVES_PER_KEY * max(plan.problem.n_keys, 1)
    while plan.moves < limit:
        under = plan.lo - loads
        under[list(stuck)] = -np.inf
        dst = int(np.argmax(under))
        if under[dst] <= _TOL * max(plan.lo[dst], 1.0):
            return
        cand = np.flatnonzero(plan.movable & (plan.dest != dst))
        ok = (loads[plan.dest[cand]] - w[cand] >= plan.lo[plan.dest[cand]] - _TOL) & (
            loads[dst] + w[cand] <= plan.hi[dst] + _TOL
        )
        cand = cand[ok & plan.allowed(cand)[:, dst]] if cand.size else cand
        if cand.size == 0:
            stuck.add(dst)
            continue
        score = plan.loss(cand)[:, dst] / np.minimum(w[cand], under[dst])
        best = int(np.argmin(score))
        if score[best] > plan.max_cost:
            stuck.add(dst)
            continue
        plan.move(int(cand[best]), dst)


def _follow(plan: _Plan, *, peak: bool = False) -> None:
    """Keys whose edges pull them to another server go there when it gains locality net of state.

    One pass, highest net gain first. Each move keeps the target at or under
    ``hi`` and the source at or above ``lo`` (balance is never traded); with
    ``peak``, the target may instead reach the load of the most loaded
    instance, and the source is not held up: the highest load never rises,
    whatever the bound.
    """
    keys = np.flatnonzero(plan.movable)
    if keys.size == 0 or not plan.share.any():
        return
    cost = plan.loss(keys)
    cost[~plan.allowed(keys)] = np.inf
    best = np.argmin(cost, axis=1)
    gain = -cost[np.arange(keys.size), best]
    w = plan.problem.loads
    top = plan.peak()  # the most loaded instance, refreshed after each move
    for r in np.flatnonzero(gain > _TOL)[np.argsort(-gain[gain > _TOL], kind="stable")]:
        k, d = int(keys[r]), int(best[r])
        src = plan.dest[k]
        if d == src:
            continue
        after = plan.loads[d] + w[k]
        if after > plan.hi[d] + _TOL and not (peak and after <= plan.peak_limit(d, top) + _TOL):
            continue
        if not peak and plan.loads[src] - w[k] < plan.lo[src] - _TOL:
            continue
        if not plan.allowed(np.array([k]))[0, d]:
            continue
        plan.move(k, d)
        top = plan.peak()


def _plan(problem, affinity, servers, hop_loads, state_weight, max_cost, owner: str) -> _Plan:
    """Check the options of :func:`local` and :func:`follow` and start the plan from the current assignment."""
    check_problem(problem, owner)
    state_weight = check_interval(state_weight, "state_weight", owner, lower=0.0)
    n, k = problem.n_instances, problem.n_keys
    servers = np.arange(n) if servers is None else np.asarray(servers, dtype=np.int64)
    if servers.shape != (n,) or (n and servers.min() < 0):
        raise InvalidParameterError(
            f"the 'servers' parameter of {owner} must hold {n} servers >= 0", parameter="servers"
        )
    if affinity is not None:
        affinity = np.asarray(affinity, dtype=float)
        if affinity.shape != (k, int(servers.max()) + 1):
            raise InvalidParameterError(
                f"the 'affinity' parameter of {owner} must have shape {(k, int(servers.max()) + 1)}; "
                f"got {affinity.shape}",
                parameter="affinity",
            )
    hop_loads = problem.loads if hop_loads is None else np.asarray(hop_loads, dtype=float)
    max_cost = check_interval(max_cost, "max_cost", owner, lower=0.0, upper=np.inf)  # inf: no limit
    if hop_loads.shape != (k,):
        raise InvalidParameterError(f"the 'hop_loads' parameter of {owner} must hold {k} values", parameter="hop_loads")
    return _Plan(problem, affinity, servers, hop_loads, state_weight, max_cost)


def local(
    problem: RebalanceProblem,
    *,
    affinity: np.ndarray | None = None,
    servers: np.ndarray | None = None,
    hop_loads: np.ndarray | None = None,
    state_weight: float = DEFAULT_STATE_WEIGHT,
    max_cost: float = np.inf,
    fill: bool = False,
    follow: bool = True,
) -> RebalanceResult:
    """Bring every instance within ``theta_max`` moving the keys that cost the least locality and state.

    Problem: as Mixed's (Eq. 3 of Fang et al. [1]_: every instance within
    ``(1 +/- theta_max)`` times its fair share, the mean with equal
    shares, the table within ``table_cap``), with the
    objective extended from migrated state to migrated state plus the
    locality the moves lose on the key graph of the tables in force, as the
    locality-aware placement weighs it (Caneill et al. [2]_).

    Method: greedy phases on the instance loads (``base_loads`` included):

    1. *shed*: while an instance is above ``hi = (1 + theta_max) * mean``,
       move the key of that instance, and its target, with the least cost
       ``hops lost + state_weight * S(k)`` per unit of load relieved
       (``min(c(k), excess)``), among moves whose target stays under ``hi``;
       when none fits, the move that most lowers the larger of the two
       excesses (as :func:`locality.placement.place_keys` repairs); moves
       costing more than ``max_cost`` per unit of load are not taken;
    2. *fill* (``fill=True``): while an instance is below
       ``lo = (1 - theta_max) * mean``, pull the cheapest key per unit of
       load onto it from an instance that stays at or above ``lo``. Off by
       default: the imbalance operators suffer is the high side (max / mean,
       the locality paper's alpha), and filling moves state for nothing there;
    3. *follow* (``follow=True``): keys whose edges sit mostly on another
       server move there when the locality gained exceeds the state cost and
       both instances stay within ``[lo, hi]``: a new key joins its neighbours.

    A move that adds a table entry is refused while the table is at
    ``table_cap``. Without ``base_loads`` and ``max_cost``, if the plan still
    misses the bound (``hi``; ``theta_max`` both sides with ``fill``) or the
    cap and no hot key explains it, Mixed's phases run from it
    (:func:`~locality.rebalance.mixed.mixed`), so the guarantees are Mixed's.
    Hot keys (heavier than ``hi`` alone) move only when that lowers the
    largest excess (to the least-loaded instance), and are reported.

    Parameters
    ----------
    problem : RebalanceProblem
        Loads (the load to balance, e.g. forecast for the rest of the balance
        window), state sizes, current and fallback instances, ``theta_max``,
        ``table_cap``, and ``base_loads`` (load already carried).
    affinity : ndarray of float, shape (n_keys, n_servers), optional
        Edge weight from each key to the keys placed on each server (the key
        graph of the tables in force). Without it every move loses nothing but
        state, and the rebalancer is a min-migration greedy.
    servers : ndarray of int, shape (n_instances,), optional
        Server of each instance (default: instance ``i`` on server ``i``).
    hop_loads : ndarray of float, shape (n_keys,), optional
        Hops each key makes while the move lasts (default ``problem.loads``;
        twice that for an operator in the middle of a chain, whose tuples
        make a hop on each side).
    state_weight : float, default 1.0
        Local hops one unit of migrated state is worth (``>= 0``).
    max_cost : float, default inf
        Most ``hops lost + state_weight * S(k)`` a shed or fill move may cost
        per unit of load it relieves: a budget that leaves an instance above
        its bound rather than pay more (and waives the Mixed fallback).
    fill : bool, default False
        Run phase 2 (the low side of ``theta_max``).
    follow : bool, default True
        Run phase 3.

    Returns
    -------
    RebalanceResult
        ``method="local"``; figures include ``base_loads``. ``feasible`` is
        True when ``theta_after <= theta_max`` and the table fits its cap.

    Raises
    ------
    InvalidParameterError
        ``affinity``, ``servers`` or ``hop_loads`` of the wrong shape, a
        negative ``state_weight`` or ``max_cost``.

    Examples
    --------
    Instance 0 is overloaded; key 1 has its edges on server 1, key 0 on
    server 0, so key 1 moves:

    >>> import numpy as np
    >>> p = RebalanceProblem(loads=[3., 3., 2.], state_sizes=[1., 1., 1.], current=[0, 0, 1],
    ...                      fallback=[0, 0, 1], n_instances=2, theta_max=0.1)
    >>> aff = np.array([[5., 0.], [0., 5.], [0., 5.]])
    >>> local(p, affinity=aff).assignment.tolist()
    [0, 1, 1]

    References
    ----------
    .. [1] J. Fang, R. Zhang, T. Z. J. Fu, Z. Zhang, A. Zhou, J. Zhu. "Parallel stream processing
       against workload skewness and variance." HPDC 2017; arXiv:1610.05121.
    .. [2] Caneill, El Rheddane, Leroy, De Palma. "Locality-aware routing in
       stateful streaming applications." Middleware 2016.

    See Also
    --------
    locality.rebalance.mixed.mixed : the load- and state-only rebalancer whose guarantees this keeps.
    """
    started = timer()
    plan = _plan(problem, affinity, servers, hop_loads, state_weight, max_cost, "local")
    n = problem.n_instances
    _shed(plan)
    if fill:
        _fill(plan)
    if follow:
        _follow(plan)
    assignment = plan.dest
    over = problem.theta(plan.loads) > problem.theta_max if fill else bool(np.any(plan.loads > plan.hi * (1 + _TOL)))
    missed = over or (problem.table_cap is not None and plan.table > problem.table_cap)
    if missed and problem.base_loads is None and not np.isfinite(plan.max_cost) and not plan.hot.any():
        from locality.rebalance.mixed import mixed  # imported here: mixed's module loads the whole greedy workflow

        start = RebalanceProblem(
            problem.loads,
            problem.state_sizes,
            assignment,
            problem.fallback,
            n,
            problem.theta_max,
            problem.table_cap,
            shares=problem.shares,
        )
        logger.info(
            "local: theta %.4g or table %d misses the bounds; Mixed's phases finish",
            problem.theta(plan.loads),
            plan.table,
        )
        assignment = mixed(start).assignment
    return conclude(problem, assignment, "local", started)


def follow(
    problem: RebalanceProblem,
    *,
    affinity: np.ndarray | None = None,
    servers: np.ndarray | None = None,
    hop_loads: np.ndarray | None = None,
    state_weight: float = DEFAULT_STATE_WEIGHT,
) -> RebalanceResult:
    """Move keys next to the keys they travel with when the locality gained pays for their state.

    Problem: between two reconfigurations new keys arrive (their hash puts
    ``(n-1)/n`` of their hops across the network) and known keys change
    company. A key ``k`` on instance ``a`` whose edges sit on the server of
    instance ``b`` gains ``hops(k) * (aff(k, server(b)) - aff(k, server(a))) / aff(k)``
    local hops by moving there, and migrates its state ``S(k)``; a new key
    has almost none, so run often, it joins its neighbours nearly for free.

    Method: the *follow* phase of :func:`local` alone (no shedding, no
    filling): one pass over the keys, highest net gain ``hops gained -
    state_weight * S(k)`` first, each to the instance of least loss, when the
    gain is positive, the table stays within its cap, and the target ends at
    or under ``max((1 + theta_max) * mean, the highest instance load)``: the
    highest load never rises, so following never makes balance worse (nor
    restores it: that is :func:`local`'s job, or the next reconfiguration's).

    Parameters
    ----------
    problem : RebalanceProblem
        Loads (what each key is expected to carry until the next
        reconfiguration), state sizes, current and fallback instances,
        ``theta_max``, ``table_cap`` and optional ``base_loads``.
    affinity, servers, hop_loads, state_weight
        As for :func:`local`. Without ``affinity`` no key has a reason to move.

    Returns
    -------
    RebalanceResult
        ``method="follow"``; ``feasible`` as for every rebalancer (the bound
        is reported, not enforced).

    Raises
    ------
    InvalidParameterError
        As :func:`local`.

    Examples
    --------
    Key 1 has all its edges on server 1 and no state yet. Joining them takes
    instance 1 from 2 to 3, above the peak (2): refused under ``theta_max=0.2``
    (bound 2.4), allowed under ``theta_max=0.5`` (bound 3):

    >>> import numpy as np
    >>> aff = np.array([[1.0, 0], [0, 1], [0, 1], [0, 1]])
    >>> p = RebalanceProblem([1.0, 1.0, 1.0, 1.0], [0.0] * 4, [0, 0, 1, 1], [0, 0, 1, 1], 2, theta_max=0.2)
    >>> follow(p, affinity=aff).assignment.tolist()
    [0, 0, 1, 1]
    >>> loose = RebalanceProblem(p.loads, p.state_sizes, p.current, p.fallback, 2, theta_max=0.5)
    >>> follow(loose, affinity=aff).assignment.tolist()
    [0, 1, 1, 1]

    References
    ----------
    .. [1] Caneill, El Rheddane, Leroy, De Palma. "Locality-aware routing in
       stateful streaming applications." Middleware 2016.

    See Also
    --------
    local : the same moves, after shedding load from instances above the bound.
    """
    started = timer()
    plan = _plan(problem, affinity, servers, hop_loads, state_weight, np.inf, "follow")
    _follow(plan, peak=True)
    return conclude(problem, plan.dest, "follow", started)
