"""The shared workflow of the mixed hash + routing-table rebalancers (LLFD and its callers).

Every rebalancer of Fang et al. [1]_ runs the same three phases: Phase I
(cleaning) moves some routing-table entries back to their hash instance,
Phase II (preparing) disassociates keys from overloaded instances into a
candidate set, Phase III (assigning) places the candidates with Least-Load Fit
Decreasing (LLFD) and its Adjust exchange step. This module implements the
phases once, on *units*: a unit is one key (the full key space) or a group of
``count`` identical keys (the compact representation of
:mod:`locality.rebalance.compact`), so MinTable, MinMig, Mixed and the compact
Mixed share one code path and differ only in their cleaning rule and their
priority ``psi``.

Vectorization. The phases are numpy over the key space: keys grouped by
instance with one radix sort per round, each touched instance's keys sorted by
priority lazily (``argpartition`` of a growing prefix, so only the keys a phase
reaches are sorted; no global sort of the key space), ``bincount`` loads and
prefix sums. The Python loops are LLFD's sequential part, over candidates
costing more than ``eps = theta_max * mean / 4``, and the scans that pick keys
to remove; the cheaper candidates are spread by a vectorized water-fill
(:func:`_water_fill`), which lands every receiving instance within one
candidate's cost of the common level, the guarantee a one-by-one LLFD gives
for keys that always fit (see its docstring).

Why one module: the three phases are one workflow over one
unit representation, shared by four planners; splitting the phases would
split the invariants they keep (loads, table size, candidate set) across files.

References
----------
.. [1] J. Fang, R. Zhang, T. Z. J. Fu, Z. Zhang, A. Zhou, J. Zhu. "Parallel stream
   processing against workload skewness and variance." HPDC 2017; arXiv:1610.05121.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from locality.errors import InvalidParameterError
from locality.imbalance import balance_bounds
from locality.rebalance._base import RebalanceProblem, RebalanceResult, finish, instance_loads

__all__ = [
    "Units",
    "Targets",
    "Order",
    "Plan",
    "MAX_ROUNDS",
    "check_problem",
    "gamma",
    "units_from_problem",
    "make_targets",
    "settle",
    "run_trial",
    "search_mixed",
    "search_every_n",
    "lpt",
    "lpt_eps",
    "conclude",
    "solve",
    "rescue",
    "polish",
    "timer",
]

logger = logging.getLogger(__name__)

MAX_ROUNDS = 4
"""Phase II + III rounds per plan: a round that leaves an instance outside the bounds
(a forced placement, a coarse overshoot) is followed by another on its result."""

_REL_TOL = 1e-12  # a removal "covers" a need within this fraction of the mean (prefix sums round)
_FIRST_PREFIX = 4096  # keys of the priority order sorted before a phase asks for more
_GROWTH = 4
_SCAN = 256  # keys converted to Python at a time by the sequential scans


@dataclass
class Units:
    """Balancing units: single keys, or groups of ``count`` identical keys.

    ``cost`` and ``state`` are per key; ``dest`` is the working instance (the
    caller's copy is never modified), ``origin`` the instance before
    rebalancing, ``pinned`` marks hot keys, which never move, ``priority`` is
    psi (larger first; ties to the lower index). ``item`` maps a unit back to
    the unit it was split from (``None``: identity).
    """

    cost: np.ndarray
    state: np.ndarray
    count: np.ndarray
    hash: np.ndarray
    origin: np.ndarray
    dest: np.ndarray
    pinned: np.ndarray
    priority: np.ndarray
    n_instances: int
    item: np.ndarray | None = None

    @property
    def size(self) -> int:
        return int(self.cost.shape[0])

    def loads(self) -> np.ndarray:
        return np.bincount(self.dest, weights=self.cost * self.count, minlength=self.n_instances)

    def items(self) -> np.ndarray:
        return np.arange(self.size) if self.item is None else self.item


@dataclass(frozen=True)
class Targets:
    """Balance bounds of one problem.

    Hot keys (cost above ``(1 + theta_max)`` times the largest fair share) are
    pinned where they are; their instances are emptied of everything else
    (``hi`` there is the pinned load) and the other, *normal*, instances share
    the rest in proportion to their ``weight`` (an instance's fair share over
    the mean one: 1 everywhere with equal shares), around ``mean * weight``
    (``mean``: the rest over the normal instances' weights). Without hot keys
    and with equal shares ``mean`` is the problem's mean and ``hi``/``lo`` are
    ``(1 +/- theta_max) * mean``. Levels (Phase II's, the water-fill's) and
    "least loaded" are relative to ``weight``.
    """

    hi: np.ndarray
    lo: np.ndarray
    floor: np.ndarray
    mean: float
    theta_max: float
    normal: np.ndarray
    hot_instances: np.ndarray
    pinned_load: np.ndarray
    eps: float
    tol: float
    weight: np.ndarray

    @property
    def uniform(self) -> bool:
        """Equal shares: every comparison of loads is a comparison of plain loads."""
        return bool(np.all(self.weight == 1.0))

    def relative(self, load: list[float]) -> Callable[[int], float]:
        """Sort key of an instance by its load relative to its weight (``load`` read when called)."""
        if self.uniform:
            return load.__getitem__
        weight = self.weight.tolist()
        return lambda d: load[d] / weight[d]

    def excess(self, loads: np.ndarray) -> float:
        """How far ``loads`` are outside the bounds, as a fraction of the mean (0 inside)."""
        if self.mean <= 0:
            return 0.0
        over = float(np.max(loads - self.hi))
        under = float(np.max(self.lo[self.normal] - loads[self.normal])) if self.normal.size else 0.0
        worst = max(over, under)
        return worst / self.mean if worst > self.tol else 0.0  # below tol: summation noise


class Order:
    """Positions of ``priority`` by descending value, ties by position, sorted one growing prefix at a time.

    Phase II and Adjust only read the head of an instance's keys, so sorting
    all of them is paid only when a phase really reaches the tail.
    """

    def __init__(self, priority: np.ndarray) -> None:
        key = -np.asarray(priority, dtype=float)
        key[np.isnan(key)] = 0.0
        self._key = key
        self._sorted = np.empty(0, dtype=np.int64)
        self.n = int(key.shape[0])

    @property
    def complete(self) -> bool:
        return self._sorted.shape[0] == self.n

    def prefix(self, size: int) -> np.ndarray:
        """The first ``size`` units (more when priorities tie at the cut)."""
        size = min(int(size), self.n)
        if size <= self._sorted.shape[0]:
            return self._sorted if self.complete else self._sorted[:size]
        if size * 8 >= self.n:
            self._sorted = np.argsort(self._key, kind="stable")
        else:
            # Everything at or above the size-th priority, sorted stably: an exact prefix of the full order.
            cut = self._key[np.argpartition(self._key, size - 1)[:size]].max()
            head = np.flatnonzero(self._key <= cut)
            self._sorted = head[np.argsort(self._key[head], kind="stable")]
        return self._sorted


@dataclass
class Plan:
    """One finished plan: units (with their final ``dest``), loads and figures."""

    units: Units
    loads: np.ndarray
    excess: float
    table: int
    migration: float
    cleaned: int = 0


def check_problem(problem: object, owner: str) -> RebalanceProblem:
    """Refuse anything but a :class:`RebalanceProblem` with the usual message."""
    if not isinstance(problem, RebalanceProblem):
        raise InvalidParameterError(
            f"the 'problem' parameter of {owner} must be a RebalanceProblem; got {type(problem).__name__}",
            parameter="problem",
        )
    return problem


def gamma(cost: np.ndarray, state: np.ndarray, beta: float) -> np.ndarray:
    """Migration priority ``gamma = c**beta / S`` (Fang et al., Algorithm 3).

    A key with no state moves for free: ``inf`` if it has a cost, 0 if not.
    """
    num = np.power(cost, beta)
    out = np.zeros_like(num)
    np.divide(num, state, out=out, where=state > 0)
    out[(state <= 0) & (cost > 0)] = np.inf
    return out


def units_from_problem(problem: RebalanceProblem) -> Units:
    """One unit per key, at its current instance."""
    k = problem.n_keys
    return Units(
        cost=problem.loads,
        state=problem.state_sizes,
        count=np.ones(k, dtype=np.int64),
        hash=problem.fallback,
        origin=problem.current,
        dest=problem.current.copy(),
        pinned=np.zeros(k, dtype=bool),
        priority=problem.loads,
        n_instances=problem.n_instances,
    )


def make_targets(units: Units, theta_max: float, shares: np.ndarray | None = None) -> Targets:
    """Pin the hot keys of ``units`` (in place) and derive the balance bounds (on ``shares``, equal if None)."""
    n = units.n_instances
    weight = np.ones(n) if shares is None else np.asarray(shares, dtype=float) * n
    mass = units.cost * units.count
    total = float(mass.sum())
    mean = total / n
    units.pinned = units.cost > (1.0 + theta_max) * (mean * float(weight.max()))
    pinned_load = np.bincount(units.origin[units.pinned], weights=mass[units.pinned], minlength=n)
    hot = np.zeros(n, dtype=bool)
    hot[units.origin[units.pinned]] = True
    if hot.all():
        # Nowhere to send the other keys: balance them over every instance, the hot keys stay put.
        hot[:] = False
    normal = np.flatnonzero(~hot)
    mean_eff = (total - float(pinned_load[hot].sum())) / float(weight[normal].sum())
    fair = mean_eff * weight
    hi, lo = balance_bounds(fair, theta_max)
    hi[hot] = pinned_load[hot]
    return Targets(
        hi=hi,
        lo=lo,
        floor=(1.0 - theta_max / 2.0) * fair,
        mean=mean_eff,
        theta_max=theta_max,
        normal=normal,
        hot_instances=np.flatnonzero(hot),
        pinned_load=pinned_load,
        eps=theta_max * (mean_eff * float(weight[normal].min())) / 4.0,
        tol=_REL_TOL * max(mean_eff, 1e-300),
        weight=weight,
    )


# ---------------------------------------------------------------------------------------------- Phase I


def clean_order(units: Units) -> tuple[np.ndarray, np.ndarray]:
    """Table units (not pinned) by ascending state, ties by index, and their cumulative key counts."""
    table = np.flatnonzero((units.dest != units.hash) & ~units.pinned)
    table = table[np.argsort(units.state[table], kind="stable")]
    return table, np.cumsum(units.count[table])


def _clean(units: Units, table: np.ndarray, cum: np.ndarray, n: int) -> int:
    """Move the ``n`` smallest-state table keys back to their hash instance (whole units)."""
    if n <= 0 or table.size == 0:
        return 0
    take = min(int(np.searchsorted(cum, n, side="left")) + 1, table.size)
    chosen = table[:take]
    units.dest[chosen] = units.hash[chosen]
    return int(cum[take - 1])


# --------------------------------------------------------------------------------------------- Phase II


def _take(seq: np.ndarray, need: float, units: Units, main: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """The shortest prefix of ``seq`` whose mass covers ``need``; the last unit may be taken in part."""
    cost = units.cost[seq]
    mass = cost * main[seq]
    cs = np.cumsum(mass)
    j = int(np.searchsorted(cs, need - tol, side="left"))
    if j >= seq.shape[0]:
        return seq, main[seq].copy()
    counts = main[seq[: j + 1]].copy()
    if cost[j] > 0:
        part = int(np.ceil((need - (cs[j] - mass[j]) - tol) / cost[j]))
        counts[j] = min(max(part, 1), counts[j])
    return seq[: j + 1], counts


def _take_fit(
    seq: np.ndarray, need: float, slack: float, units: Units, main: np.ndarray, tol: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Keys of ``seq``, in its order, removing between ``need`` and ``need + slack``; None if impossible.

    A key is skipped when taking it would overshoot ``need + slack``: it would
    leave its instance below the lower target and have to be placed
    elsewhere, where it fits nowhere and Adjust evicts a crowd of small keys to
    make room. With Zipf costs (K = 10**6, N_D = 40, theta_max = 0.02) the
    plain prefix turns one 0.85 x mean key into ~9,000 table entries.
    """
    rem = need
    got_u: list[int] = []
    got_n: list[int] = []
    for lo in range(0, seq.shape[0], _SCAN):
        part = seq[lo : lo + _SCAN]
        for u, c, m in zip(part.tolist(), units.cost[part].tolist(), main[part].tolist(), strict=True):
            if c <= 0:
                continue
            t = min(m, int((rem + slack + tol) // c), int(np.ceil((rem - tol) / c)))
            if t <= 0:
                continue
            got_u.append(u)
            got_n.append(t)
            rem -= t * c
            if rem <= tol:
                return np.asarray(got_u, dtype=np.int64), np.asarray(got_n, dtype=np.int64)
    return None


def _take_best(
    seq: np.ndarray, need: float, slack: float, units: Units, main: np.ndarray, tol: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_take_fit` if it covers ``need``, else the plain prefix of :func:`_take` (the paper's reading)."""
    found = _take_fit(seq, need, slack, units, main, tol)
    return found if found is not None else _take(seq, need, units, main, tol)


def _level(loads: np.ndarray, tg: Targets, incoming: float) -> float:
    """Phase II target: the highest level in ``[mean, hi]`` whose removals (plus ``incoming``) fill every
    normal instance up to ``(1 - theta_max / 2) * mean`` (levels times each instance's weight).

    The paper only empties overloaded instances down to ``L_max``; that leaves an
    underloaded instance below ``(1 - theta_max) * mean`` whenever the overload is
    smaller than the underload, and theta counts both sides.
    """
    lv = loads[tg.normal]
    weight = tg.weight[tg.normal]
    deficit = float(np.clip(tg.floor[tg.normal] - lv, 0.0, None).sum()) - incoming
    top = (1.0 + tg.theta_max) * tg.mean
    if float(np.clip(lv - top * weight, 0.0, None).sum()) >= deficit:
        return top
    low, high = tg.mean, top
    for _ in range(60):
        mid = 0.5 * (low + high)
        if float(np.clip(lv - mid * weight, 0.0, None).sum()) >= deficit:
            low = mid
        else:
            high = mid
    return low


class _Residents:
    """The keys of each instance in priority order (psi), sorted lazily per instance.

    Keys are grouped by instance once (a stable radix sort on the label, so
    ties keep the lower index first); an instance's keys are sorted by
    priority only when a phase reads them, one growing prefix at a time. A
    round's ``dest`` never changes (removed keys only lose ``main``), so Phase
    II and every Adjust of the round share the grouping.
    """

    def __init__(self, units: Units) -> None:
        self.units = units
        label = units.dest.astype(np.int16 if units.n_instances < 2**15 else np.int32)  # 16-bit: radix sort
        self.members = np.argsort(label, kind="stable")
        self.bounds = np.concatenate([[0], np.cumsum(np.bincount(label, minlength=units.n_instances))])
        self._orders: dict[int, Order] = {}
        self._sizes: dict[int, int] = {}

    def of(self, d: int) -> np.ndarray:
        """The first keys of instance ``d`` by priority (all of them once :meth:`grow` says so)."""
        mine = self.members[self.bounds[d] : self.bounds[d + 1]]
        if d not in self._orders:
            self._orders[d] = Order(self.units.priority[mine])
            self._sizes[d] = _FIRST_PREFIX
        return mine[self._orders[d].prefix(self._sizes[d])]

    def grow(self, d: int) -> bool:
        """Read further into instance ``d``; False when :meth:`of` already returns all its keys."""
        if self._sizes[d] >= self._orders[d].n:
            return False
        self._sizes[d] *= _GROWTH
        return True


def _prepare(
    units: Units, main: np.ndarray, loads: np.ndarray, residents: _Residents, tg: Targets
) -> tuple[np.ndarray, np.ndarray]:
    """Phase II: disassociate keys, in priority order, from every instance above its target."""
    n = units.n_instances
    pieces_u: list[np.ndarray] = []
    pieces_n: list[np.ndarray] = []

    def remove(sel: np.ndarray, counts: np.ndarray) -> None:
        main[sel] -= counts
        np.subtract.at(loads, units.dest[sel], units.cost[sel] * counts)
        pieces_u.append(sel)
        pieces_n.append(counts)

    # Hot instances keep their hot keys only: everything else leaves, in any order.
    incoming = 0.0
    for d in tg.hot_instances:
        sel = np.flatnonzero((units.dest == d) & ~units.pinned & (main > 0))
        if sel.size:
            incoming += float((units.cost[sel] * main[sel]).sum())
            remove(sel, main[sel].copy())
    need = np.zeros(n)
    level = _level(loads, tg, incoming)
    need[tg.normal] = loads[tg.normal] - level * tg.weight[tg.normal]
    need[need <= tg.tol] = 0.0

    slack = level * tg.weight - tg.floor
    for d in np.flatnonzero(need > 0):
        while True:
            seq = residents.of(d)
            seq = seq[(main[seq] > 0) & ~units.pinned[seq]]
            if float((units.cost[seq] * main[seq]).sum()) >= need[d] - tg.tol:
                found = _take_fit(seq, float(need[d]), float(slack[d]), units, main, tg.tol)
                if found is not None:
                    break
            if not residents.grow(d):
                # The paper's reading: the plain prefix, everything if even that falls short.
                found = _take(seq, float(need[d]), units, main, tg.tol)
                break
        remove(*found)
    return _cat(pieces_u, pieces_n)


def _cat(us: list[np.ndarray], ns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    if not us:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(us).astype(np.int64), np.concatenate(ns).astype(np.int64)


# -------------------------------------------------------------------------------------------- Phase III


class _Exchanger:
    """Adjust's exchangeable set E (Fang et al., Algorithm 1, lines 14-18).

    For a key ``k`` that overloads instance ``d``, E holds keys resident on ``d``
    since Phase II (never the ones LLFD placed in this round, so no key bounces),
    each cheaper than ``k`` (condition ii), taken in priority order until
    ``L(d) + c(k) - sum(E) <= L_max`` (condition iii, with ``<=`` as the prose says),
    skipping keys that would take ``d`` below the lower target (:func:`_take_fit`).
    """

    def __init__(self, units: Units, main: np.ndarray, residents: _Residents, tg: Targets) -> None:
        self.units, self.main, self.residents, self.tol = units, main, residents, tg.tol
        # E may take d down to the lower target, no further (see _take_fit)
        self.slack = (tg.hi - tg.floor).tolist()
        movable = ~units.pinned
        self.movable = np.bincount(
            units.dest[movable], weights=units.cost[movable] * main[movable], minlength=units.n_instances
        ).tolist()

    def find(self, d: int, c: float, need: float) -> tuple[np.ndarray, np.ndarray] | None:
        if self.movable[d] < need - self.tol:
            return None
        u, main = self.units, self.main
        while True:
            seq = self.residents.of(d)
            seq = seq[(main[seq] > 0) & (u.cost[seq] < c) & ~u.pinned[seq]]
            if float((u.cost[seq] * main[seq]).sum()) >= need - self.tol:
                sel, counts = _take_best(seq, need, self.slack[d], u, main, self.tol)
                main[sel] -= counts
                self.movable[d] -= float((u.cost[sel] * counts).sum())
                return sel, counts
            if not self.residents.grow(d):
                return None


def _assign(
    units: Units,
    main: np.ndarray,
    loads: np.ndarray,
    cand_u: np.ndarray,
    cand_n: np.ndarray,
    tg: Targets,
    exchanger: _Exchanger | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Phase III, LLFD: candidates by descending cost, each to the least-loaded instance it fits (relative to weight).

    A key that fits nowhere tries Adjust on every instance in ascending load; if
    that fails too it goes to the least-loaded instance anyway (the paper leaves
    it in C for ever). Candidates cheaper than ``tg.eps`` always fit and are
    spread by :func:`_water_fill` after the others. Returns placed pieces
    ``(unit, instance, count)``; ``loads`` is updated in place.
    """
    cost = units.cost
    big = cost[cand_u] > tg.eps if tg.eps > 0 else np.ones(cand_u.size, dtype=bool)  # eps = 0: all one by one
    heap = list(zip((-cost[cand_u[big]]).tolist(), cand_u[big].tolist(), cand_n[big].tolist(), strict=True))
    heapq.heapify(heap)
    small_u, small_n = cand_u[~big].tolist(), cand_n[~big].tolist()
    load = loads.tolist()
    hi = tg.hi.tolist()
    normal = tg.normal.tolist()
    relative = tg.relative(load)
    out_u: list[int] = []
    out_d: list[int] = []
    out_n: list[int] = []
    while heap:
        negc, u, cnt = heapq.heappop(heap)
        c = -negc
        for _ in range(cnt):  # identical keys of a group go one by one, as LLFD would
            first = min(normal, key=relative)
            dest = first
            if load[first] + c > hi[first] and exchanger is not None:
                for d in sorted(normal, key=relative):
                    found = exchanger.find(d, c, load[d] + c - hi[d])
                    if found is None:
                        continue
                    sel, counts = found
                    for v, m in zip(sel.tolist(), counts.tolist(), strict=True):
                        load[d] -= cost[v] * m
                        if cost[v] > tg.eps:
                            heapq.heappush(heap, (-cost[v], v, m))
                        else:
                            small_u.append(v)
                            small_n.append(m)
                    dest = d
                    break
            load[dest] += c
            out_u.append(u)
            out_d.append(dest)
            out_n.append(1)
    loads[:] = load
    su, sn = np.asarray(small_u, dtype=np.int64), np.asarray(small_n, dtype=np.int64)
    wu, wd, wn = _water_fill(units, su, sn, loads, tg)
    return (
        np.concatenate([np.asarray(out_u, dtype=np.int64), wu]),
        np.concatenate([np.asarray(out_d, dtype=np.int64), wd]),
        np.concatenate([np.asarray(out_n, dtype=np.int64), wn]),
    )


def _water_fill(
    units: Units, cand_u: np.ndarray, cand_n: np.ndarray, loads: np.ndarray, tg: Targets
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spread small candidates over the normal instances up to one common level, vectorized.

    The level ``lam`` solves ``sum((lam * weight(d) - L(d))+) = total candidate cost``; the
    candidates, by descending cost, are laid end to end over the instances'
    rooms (least loaded first) and each key goes to the room holding its
    midpoint. A receiving instance ends within one candidate's cost of ``lam``,
    and ``lam <= mean + eps``, so with candidates cheaper than
    ``eps = theta_max * mean / 4`` no instance passes ``L_max``: the keys LLFD
    would have placed one by one without ever calling Adjust, placed at once.
    """
    empty = np.empty(0, dtype=np.int64)
    if cand_u.size == 0:
        return empty, empty, empty
    cost = units.cost
    srt = np.lexsort((cand_u, -cost[cand_u]))
    cu, cn = cand_u[srt], cand_n[srt]
    c = cost[cu]
    mass = c * cn
    total = float(mass.sum())
    bins = tg.normal[np.argsort(loads[tg.normal] / tg.weight[tg.normal], kind="stable")]
    lb, wb = loads[bins], tg.weight[bins]
    # Water level: fill the j least-loaded instances (relative to their weight) to a common height.
    cums = np.cumsum(lb)
    j = np.cumsum(wb)  # 1, 2, ... with equal shares
    fits = j * (lb / wb) - cums <= total
    top = int(np.flatnonzero(fits)[-1]) + 1
    lam = (total + cums[top - 1]) / j[top - 1]
    rooms = np.clip(lam * wb - lb, 0.0, None)
    bound = np.cumsum(rooms)
    start = np.cumsum(mass) - mass
    last = bins.size - 1
    first_bin = np.minimum(np.searchsorted(bound, start + c / 2, side="right"), last)
    last_bin = np.minimum(np.searchsorted(bound, start + mass - c / 2, side="right"), last)
    first_bin[mass == 0] = last_bin[mass == 0] = 0  # weightless keys: to the least loaded, as LPT does
    whole = first_bin == last_bin
    out_u, out_d, out_n = [cu[whole]], [bins[first_bin[whole]]], [cn[whole]]
    for i in np.flatnonzero(~whole):  # groups cut by a room boundary: at most one per boundary
        edges = np.concatenate([[-np.inf], bound[first_bin[i] : last_bin[i]], [np.inf]])
        below = np.clip(np.ceil((edges - start[i]) / c[i] - 0.5), 0, cn[i]).astype(np.int64)
        got = np.diff(below)
        dests = bins[first_bin[i] : last_bin[i] + 1]
        keep = got > 0
        out_u.append(np.full(int(keep.sum()), cu[i]))
        out_d.append(dests[keep])
        out_n.append(got[keep])
    wu, wd, wn = (np.concatenate(x).astype(np.int64) for x in (out_u, out_d, out_n))
    np.add.at(loads, wd, cost[wu] * wn)
    return wu, wd, wn


# ------------------------------------------------------------------------------------------ one round


def _consolidate(units: Units, main: np.ndarray, pu: np.ndarray, pd: np.ndarray, pn: np.ndarray) -> Units:
    """Fold the placed pieces back into units.

    When every moved unit moved whole (always for single keys) the units keep
    their identity; otherwise split groups become separate units.
    """
    if pu.size == 0:
        return units
    if np.array_equal(pn, units.count[pu]) and np.unique(pu).size == pu.size:
        units.dest[pu] = pd
        return units
    keep = np.flatnonzero(main > 0)
    all_u = np.concatenate([keep, pu])
    all_d = np.concatenate([units.dest[keep], pd])
    all_n = np.concatenate([main[keep], pn])
    uniq, inv = np.unique(all_u * units.n_instances + all_d, return_inverse=True)
    src = uniq // units.n_instances
    return Units(
        cost=units.cost[src],
        state=units.state[src],
        count=np.bincount(inv, weights=all_n).astype(np.int64),
        hash=units.hash[src],
        origin=units.origin[src],
        dest=(uniq % units.n_instances).astype(np.int64),
        pinned=units.pinned[src],
        priority=units.priority[src],
        n_instances=units.n_instances,
        item=units.items()[src],
    )


def _round(units: Units, loads: np.ndarray, tg: Targets) -> tuple[Units, np.ndarray]:
    units = replace(units, dest=units.dest.copy())
    loads = loads.copy()
    main = units.count.copy()
    residents = _Residents(units)
    cand_u, cand_n = _prepare(units, main, loads, residents, tg)
    exchanger = _Exchanger(units, main, residents, tg)
    pu, pd, pn = _assign(units, main, loads, cand_u, cand_n, tg, exchanger)
    units = _consolidate(units, main, pu, pd, pn)
    return units, units.loads()  # re-summed: the running loads carry rounding from every update


def settle(units: Units, tg: Targets, max_rounds: int = MAX_ROUNDS) -> tuple[Units, np.ndarray]:
    """Phases II and III until the loads are within bounds (at most ``max_rounds``); keep the best round."""
    loads = units.loads()
    best = (tg.excess(loads), units, loads)
    for _ in range(max_rounds):
        if best[0] <= 0:
            break
        units, loads = _round(units, loads, tg)
        score = tg.excess(loads)
        if score < best[0]:
            best = (score, units, loads)
    return best[1], best[2]


# ----------------------------------------------------------------------------------------- the searches


def _figures(units: Units, loads: np.ndarray, tg: Targets, cleaned: int) -> Plan:
    table = int(units.count[units.dest != units.hash].sum())
    moved = units.dest != units.origin
    migration = float((units.state[moved] * units.count[moved]).sum())
    return Plan(units, loads, tg.excess(loads), table, migration, cleaned)


def run_trial(units: Units, tg: Targets, clean: tuple[np.ndarray, np.ndarray] | None, n: int) -> Plan:
    """Phase I with ``n`` keys cleaned (smallest state first), then :func:`settle`."""
    work = replace(units, dest=units.dest.copy())
    cleaned = _clean(work, *clean, n) if clean is not None else 0
    work, loads = settle(work, tg)
    return _figures(work, loads, tg, cleaned)


def _fits(plan: Plan, cap: int | None) -> bool:
    return cap is None or plan.table <= cap


def search_mixed(units: Units, tg: Targets, cap: int | None) -> tuple[Plan, int]:
    """Mixed's loop (Algorithm 4), with ``n`` accumulated and at least doubled: ``n += max(N_A' - A_max, n)``.

    The paper re-assigns ``n = N_A' - A_max``, which can oscillate between two
    values for ever. Accumulating (``n += N_A' - A_max``, seeds-algorithms.md
    3.1) can crawl: cleaning the ``n`` smallest-state entries lets LLFD add
    about as many back, and on a K = 10**5, N_D = 40 workload ``n`` grew by 14
    per trial for 319 trials. Growing by at least ``n`` ends after at most
    ``2 + log2(N_A)`` trials; the extra entries cleaned are the ones with the
    least state, so the overshoot migrates little. ``n`` is capped at ``N_A``.
    Returns the first plan whose table fits (or, if none does, the one with the
    smallest table, then least migration) and the number of trials.
    """
    clean = clean_order(units)
    n_table = int(clean[1][-1]) if clean[1].size else 0
    n = 0
    trials = 0
    best: Plan | None = None
    while True:
        plan = run_trial(units, tg, clean, n)
        trials += 1
        if _fits(plan, cap):
            return plan, trials
        if best is None or (plan.table, plan.migration) < (best.table, best.migration):
            best = plan
        if n >= n_table:
            return best, trials
        n = min(n_table, n + max(plan.table - cap, n))


def search_every_n(units: Units, tg: Targets, cap: int | None, stride: int = 1) -> tuple[Plan, int]:
    """MixedBF: a trial for every ``n = 0, stride, 2 * stride, ..., N_A``; the cheapest plan meeting both
    bounds, else the one closest to them (balance first, then table, then migration)."""
    clean = clean_order(units)
    n_table = int(clean[1][-1]) if clean[1].size else 0
    values = list(range(0, n_table + 1, stride))
    if values[-1] != n_table:
        values.append(n_table)
    ranked = []
    for n in values:
        plan = run_trial(units, tg, clean, n)
        over = max(0, plan.table - cap) if cap is not None else 0
        ranked.append(((plan.excess > 0, over > 0, plan.excess, over, plan.migration, n), plan))
    return min(ranked, key=lambda pair: pair[0])[1], len(values)


def lpt(units: Units, eps: float, shares: np.ndarray | None = None) -> np.ndarray:
    """The Simple algorithm (003, Algorithm 5): every key, by descending cost, to the least-loaded instance.

    Keys cheaper than ``eps`` are water-filled (:func:`_water_fill`); with
    ``eps = 0`` this is Graham's LPT exactly, ties to the lower key index and
    the lower instance. With ``shares``, "least loaded" is relative to each
    instance's share. Returns the new instance of every unit (units must be
    single keys).
    """
    n = units.n_instances
    every = np.arange(units.size, dtype=np.int64)
    tg = Targets(
        hi=np.full(n, np.inf),
        lo=np.zeros(n),
        floor=np.zeros(n),
        mean=float((units.cost * units.count).sum()) / n,
        theta_max=0.0,
        normal=np.arange(n),
        hot_instances=np.empty(0, dtype=np.int64),
        pinned_load=np.zeros(n),
        eps=eps,
        tol=0.0,
        weight=np.ones(n) if shares is None else np.asarray(shares, dtype=float) * n,
    )
    loads = np.zeros(n)
    main = np.zeros(units.size, dtype=np.int64)
    pu, pd, _ = _assign(units, main, loads, every, units.count.copy(), tg, None)
    dest = np.empty(units.size, dtype=np.int64)
    dest[pu] = pd
    return dest


def conclude(
    problem: RebalanceProblem, assignment: np.ndarray, method: str, started: float, **extra
) -> RebalanceResult:
    """:func:`finish` with ``feasible`` and ``hot_keys`` filled in the same way for every method.

    ``feasible`` is True when the plan meets every bound of the problem:
    ``theta_after <= theta_max`` and, if ``table_cap`` is set, ``table_size <= table_cap``,
    read from the figures :func:`finish` computed (so it can never disagree with them).
    ``hot_keys`` lists the keys whose cost alone exceeds ``(1 + theta_max)`` times the largest
    fair share (:meth:`RebalanceProblem.hot_bound`); any one of them makes the first bound unreachable.
    """
    hot = np.sort(problem.hot_keys())
    if hot.size:
        logger.info("%s: %d hot key(s) make theta_max=%g unreachable", method, hot.size, problem.theta_max)
    result = finish(problem, assignment, method, started, hot_keys=hot, **extra)
    cap = problem.table_cap
    result.feasible = bool(result.theta_after <= problem.theta_max and (cap is None or result.table_size <= cap))
    return result


def lpt_eps(problem: RebalanceProblem) -> float:
    """Keys cheaper than this always fit under ``theta_max``: LPT water-fills them (a quarter of the slack)."""
    return problem.theta_max * float(problem.fair_loads.min()) / 4.0


def timer() -> float:
    """``time.perf_counter()``, the clock :func:`finish` expects."""
    return time.perf_counter()


def polish(problem: RebalanceProblem, assignment: np.ndarray, priority: np.ndarray) -> np.ndarray:
    """Phases II and III on the full key space of ``problem``, starting from ``assignment`` (no cleaning)."""
    units = units_from_problem(problem)
    units.dest = np.array(assignment, dtype=np.int64)
    units.priority = priority
    units, _ = settle(units, make_targets(units, problem.theta_max, problem.shares))
    return units.dest


def rescue(
    problem: RebalanceProblem, assignment: np.ndarray, method: str, loads: np.ndarray | None = None
) -> np.ndarray:
    """Keep the Simple (LPT) plan instead of ``assignment`` when that misses ``theta_max`` and Simple balances better.

    This makes Theorem 4 of Fang et al. ("Mixed is not worse than the Simple
    algorithm", the step their Theorem 1 proof for LLFD rests on) hold by
    construction, which the heuristics alone do not on coarse instances. Balance
    comes first, as in Eq. 3 (it is a constraint, migration the objective).
    Skipped when hot keys make ``theta_max`` unreachable anyway: then the
    workflow's plan (hot instances hold only their hot keys) is kept.
    """
    if loads is None:
        loads = instance_loads(problem.loads, assignment, problem.n_instances)
    current = problem.theta(loads)
    if current <= problem.theta_max or np.any(problem.loads > problem.hot_bound()):
        return assignment
    alternative = lpt(units_from_problem(problem), lpt_eps(problem), problem.shares)
    better = problem.theta(instance_loads(problem.loads, alternative, problem.n_instances))
    if better < current:
        logger.info(
            "%s: theta %.4g missed theta_max, Simple reaches %.4g: taking Simple's plan", method, current, better
        )
        return alternative
    return assignment


def solve(
    problem: RebalanceProblem,
    method: str,
    priority: Callable[[Units], np.ndarray],
    search: Callable[[Units, Targets], Plan],
    started: float,
) -> RebalanceResult:
    """Run ``search`` on the full key space of ``problem`` with ``priority`` as psi, and conclude."""
    units = units_from_problem(problem)
    units.priority = priority(units)
    tg = make_targets(units, problem.theta_max, problem.shares)
    plan = search(units, tg)
    logger.debug(
        "%s: table %d, migration %.4g, excess %.3g after cleaning %d",
        method,
        plan.table,
        plan.migration,
        plan.excess,
        plan.cleaned,
    )
    # plan.loads is bincount(dest, cost): the same figures instance_loads gives for one unit per key
    return conclude(problem, rescue(problem, plan.units.dest, method, plan.loads), method, started)
