"""Compact representation of the key space with HLHE discretization, and Mixed on it (Fang et al., Section IV).

Why one module: the discretization (HLHE groups of keys
with identical cost and state) and Mixed run on those groups are one idea,
the paper's Section IV; the phases themselves are shared with the full-key
planners in :mod:`locality.rebalance._greedy`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from locality._validation import check_integer, check_interval, check_option
from locality.errors import InvalidParameterError
from locality.rebalance._base import RebalanceProblem, RebalanceResult, instance_loads
from locality.rebalance._greedy import (
    Units,
    check_problem,
    conclude,
    gamma,
    make_targets,
    polish,
    rescue,
    search_mixed,
    timer,
)
from locality.rebalance.minmig import DEFAULT_BETA

__all__ = [
    "hlhe_levels",
    "hlhe",
    "CompactRepresentation",
    "compress",
    "CompactResult",
    "mixed_compact",
    "DEFAULT_DEGREE",
    "VALUES",
]

logger = logging.getLogger(__name__)

DEFAULT_DEGREE = 8
"""``R = 8``: the paper's Fig. 11 point (0.6 s against 6 s for the original key space)."""

VALUES = ("mean", "representative")
"""What a group's ``v_c``, ``v_S`` are: its keys' mean (default) or the HLHE representative (the paper)."""


def _check_degree(degree: object, owner: str) -> int:
    degree = check_integer(degree, "degree", owner, lower=1)
    if degree & (degree - 1):
        raise InvalidParameterError(
            f"the 'degree' parameter of {owner} must be a power of two >= 1; got {degree}", parameter="degree"
        )
    return degree


def hlhe_levels(max_value: float, degree: int = DEFAULT_DEGREE) -> np.ndarray:
    """The representative values of half-linear-half-exponential (HLHE) discretization, largest first.

    For normalized values (the smallest is 1) up to ``max_value`` and degree
    ``R = 2**r``: the linear part ``s*R, (s-1)*R, ..., R`` with
    ``s = floor(max_value / R)``, then the exponential part
    ``R/2, R/4, ..., 2, 1``; ``m = r + s`` values in all (Fang et al. [1]_,
    Section IV-B).

    Parameters
    ----------
    max_value : float
        Largest normalized value, ``>= 1``.
    degree : int, default 8
        ``R``, a power of two.

    Returns
    -------
    ndarray of float
        ``y_1 > y_2 > ... > y_m``.

    Raises
    ------
    InvalidParameterError
        If ``max_value < 1`` or ``degree`` is not a power of two.

    Examples
    --------
    The paper's example: largest cost 8, ``R = 4``.

    >>> hlhe_levels(8, 4).tolist()
    [8.0, 4.0, 2.0, 1.0]

    References
    ----------
    .. [1] J. Fang, R. Zhang, T. Z. J. Fu, Z. Zhang, A. Zhou, J. Zhu. "Parallel stream processing
       against workload skewness and variance." HPDC 2017; arXiv:1610.05121.
    """
    degree = _check_degree(degree, "hlhe_levels")
    max_value = check_interval(max_value, "max_value", "hlhe_levels", lower=1)
    s = int(max_value // degree)
    linear = degree * np.arange(s, 0, -1, dtype=float)
    exponential = degree / 2.0 ** np.arange(1, int(np.log2(degree)) + 1)
    return np.concatenate([linear, exponential])


def hlhe(
    values: np.ndarray, degree: int = DEFAULT_DEGREE, *, groups: np.ndarray | None = None, unit: float | None = None
) -> np.ndarray:
    """Discretize non-negative values onto the HLHE representatives, keeping running sums exact.

    Problem: replace each value by one of few representative values (so keys
    with equal representatives can be merged) while every sum over many keys
    stays accurate.

    Method (Fang et al. [1]_, Section IV-B): values are divided by ``unit``
    (default: the smallest positive value, so the smallest is 1) and visited
    in non-increasing order. A value ``x >= y_1`` becomes ``y_1``; any other
    lies between two consecutive representatives ``y_{j-1} > x >= y_j`` of
    :func:`hlhe_levels` and becomes the one that brings the accumulated
    deviation ``sum(x - phi(x))`` closest to zero, the smaller on a tie. This
    reproduces the paper's example (costs 8, 6, 3, 2, 2, 1 x 5 with ``R = 4``
    give 8, 4, 4, 2, 2, 2, 1, 1, 1, 1 and total deviation 0); the printed rule
    "if the accumulated deviation is positive take the larger candidate" ends
    at -1 on it (seeds-algorithms.md, M15). Zeros stay 0.

    Vectorized: between two consecutive representatives the gap ``g`` is
    constant and both candidates are multiples of ``g``, so within each band
    the number of larger choices so far is ``clip(round_half_down(B_i / g), 0, i)``
    where ``B_i`` is the band's running deviation from its lower candidate plus
    the deviation carried in; one cumulative sum per band (``r + 2`` bands)
    replaces the per-key loop.

    Parameters
    ----------
    values : array of float, shape (n,)
        Values ``>= 0``.
    degree : int, default 8
        ``R``, a power of two; larger is coarser (fewer representatives).
    groups : array of int, shape (n,), optional
        Discretize each group on its own (its own order and accumulated
        deviation), e.g. the instance reporting the keys: every group's sum
        then stays within one gap of exact. Representatives are shared.
    unit : float, optional
        The normalization unit (default: the smallest positive value).

    Returns
    -------
    ndarray of float, shape (n,)
        ``phi(values)``, in the units of ``values``.

    Raises
    ------
    InvalidParameterError
        On negative or non-finite values, a ``groups`` of the wrong shape, a
        ``unit <= 0`` or a ``degree`` that is not a power of two.

    Examples
    --------
    >>> hlhe(np.array([8., 6., 3., 2., 2., 1., 1., 1., 1., 1.]), 4).tolist()
    [8.0, 4.0, 4.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0]

    References
    ----------
    .. [1] J. Fang, R. Zhang, T. Z. J. Fu, Z. Zhang, A. Zhou, J. Zhu. "Parallel stream processing
       against workload skewness and variance." HPDC 2017; arXiv:1610.05121.
    """
    owner = "hlhe"
    degree = _check_degree(degree, owner)
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or not np.all(np.isfinite(x)) or np.any(x < 0):
        raise InvalidParameterError(
            f"the 'values' parameter of {owner} must be a 1-d array of finite values >= 0", parameter="values"
        )
    if groups is None:
        groups = np.zeros(x.shape[0], dtype=np.int64)
    groups = np.asarray(groups)
    if groups.shape != x.shape or not np.issubdtype(groups.dtype, np.integer):
        raise InvalidParameterError(
            f"the 'groups' parameter of {owner} must be an int array of shape {x.shape}", parameter="groups"
        )
    positive = x > 0
    out = np.zeros_like(x)
    if not positive.any():
        return out
    if unit is None:
        unit = float(x[positive].min())
    unit = check_interval(unit, "unit", owner, lower=0, closed="neither")
    out[positive] = _hlhe_normalized(x[positive] / unit, groups[positive], degree) * unit
    return out


def _hlhe_normalized(x: np.ndarray, groups: np.ndarray, degree: int) -> np.ndarray:
    """HLHE of normalized values (any order); see :func:`hlhe`."""
    levels = hlhe_levels(max(float(x.max()), 1.0), degree)
    top = float(levels[0])
    x = np.maximum(x, 1.0)  # values below the unit (a caller's unit) share the smallest representative
    if groups.min() >= 0 and groups.max() < 2**20:  # instance labels: use them as they are
        g = groups.astype(np.int64)
    else:
        _, g = np.unique(groups, return_inverse=True)
    # One sort by (group, -x) on a combined float key when it is exact, ties in any order.
    span = float(np.ceil(x.max())) + 1.0
    if span * (g.max() + 1) < 2.0**52:
        order = np.argsort(g * span - x)
    else:
        order = np.lexsort((-x, g))
    xs, g = x[order], g[order]
    carry = np.zeros(g.max() + 1)
    phi = np.empty_like(xs)
    # Bands, visited in non-increasing x: the top, the linear part, then [2^j, 2^(j+1)) downwards.
    lo = np.where(xs >= top, top, np.where(xs >= degree, np.floor(xs / degree) * degree, 2.0 ** np.floor(np.log2(xs))))
    gap = np.where(xs >= top, 0.0, np.where(xs >= degree, float(degree), lo))
    band = np.where(xs >= top, -1.0, np.where(xs >= degree, 0.0, 1.0 / lo))  # increases along the visit
    bands = np.concatenate([[-1.0, 0.0], 1.0 / levels[levels < degree]])
    for b in bands:
        idx = np.flatnonzero(band == b)  # in (group, -x) order, so each group's run is contiguous
        if idx.size == 0:
            continue
        dev = xs[idx] - lo[idx]
        gi = g[idx]
        starts = np.flatnonzero(np.r_[True, gi[1:] != gi[:-1]])
        lengths = np.diff(np.r_[starts, idx.size])
        cs = np.cumsum(dev)
        within = cs - np.repeat(cs[starts] - dev[starts], lengths)
        b_run = np.repeat(carry[gi[starts]], lengths) + within  # B_i: carried plus running deviation
        ends = starts + lengths - 1
        if b < 0:  # the top band has one candidate
            phi[idx] = lo[idx]
            carry[gi[starts]] = b_run[ends]
            continue
        step = gap[idx]
        pos = np.arange(idx.size) - np.repeat(starts, lengths) + 1
        larger = np.clip(np.ceil(b_run / step - 0.5), 0, pos)  # round half down: ties keep the smaller candidate
        before = np.r_[0.0, larger[:-1]]
        before[starts] = 0.0
        phi[idx] = lo[idx] + step * (larger - before)
        carry[gi[starts]] = b_run[ends] - step[ends] * larger[ends]
    out = np.empty_like(phi)
    out[order] = phi
    return out


@dataclass(frozen=True)
class CompactRepresentation:
    """Keys merged into groups ``(d, d_h, v_c, v_S, #)`` after HLHE discretization (Fang et al., Section IV).

    Attributes
    ----------
    problem : RebalanceProblem
        The full problem.
    degree : int
        HLHE degree ``R``.
    cost, state : ndarray of float, shape (G,)
        Discretized per-key cost ``v_c`` and state ``v_S`` of each group.
    count : ndarray of int, shape (G,)
        Keys in each group (``#``).
    current, fallback : ndarray of int, shape (G,)
        ``d`` and ``d_h`` of each group.
    members : ndarray of int, shape (K,)
        Key indices grouped by group (ascending key index within a group);
        group ``i`` holds ``members[offsets[i]:offsets[i + 1]]``.
    offsets : ndarray of int, shape (G + 1,)
    build_seconds : float
        Time to discretize and group (work the reporting instances do in the paper's design).
    """

    problem: RebalanceProblem
    degree: int
    cost: np.ndarray
    state: np.ndarray
    count: np.ndarray
    current: np.ndarray
    fallback: np.ndarray
    members: np.ndarray
    offsets: np.ndarray
    build_seconds: float

    @property
    def n_groups(self) -> int:
        return int(self.count.shape[0])


def compress(problem: RebalanceProblem, degree: int = DEFAULT_DEGREE, *, values: str = "mean") -> CompactRepresentation:
    """Build the compact representation of ``problem``: HLHE-discretize costs and states, merge equal keys.

    Each instance discretizes the keys it reports (``groups=current`` in
    :func:`hlhe`), so its reported load stays exact within one gap; keys with
    equal ``(current, fallback, phi(c), phi(S))`` become one group. The paper's
    ``d'`` (next instance) is the planner's output, not part of the input.

    Parameters
    ----------
    problem : RebalanceProblem
        The full problem.
    degree : int, default 8
        HLHE degree ``R``, a power of two.
    values : {"mean", "representative"}, default "mean"
        A group's ``v_c`` and ``v_S``: its keys' means (the group's exact totals
        divided by its count), or the HLHE representative as in the paper. See
        :func:`mixed_compact` for why the mean is the default.

    Returns
    -------
    CompactRepresentation

    Raises
    ------
    InvalidParameterError
        If ``problem`` is not a :class:`RebalanceProblem` or ``degree`` is not a power of two.

    Examples
    --------
    >>> from locality.rebalance import RebalanceProblem
    >>> cost = np.array([8., 6., 3., 2., 2., 1., 1., 1., 1., 1.])
    >>> p = RebalanceProblem(cost, cost, np.zeros(10, int), np.zeros(10, int), 2)
    >>> c = compress(p, 4, values="representative")
    >>> c.n_groups, c.cost.tolist(), c.count.tolist()
    (4, [1.0, 2.0, 4.0, 8.0], [4, 3, 2, 1])
    >>> compress(p, 4).cost.tolist()  # group means: the keys 2, 2, 1 share the representative 2
    [1.0, 1.6666666666666667, 4.5, 8.0]
    """
    started = timer()
    check_problem(problem, "compress")
    degree = _check_degree(degree, "compress")
    values = check_option(values, "values", "compress", VALUES)
    n = problem.n_instances
    # Representatives are integer multiples of the unit, so a value's index is the value in units.
    cost, ic = _discretize(problem.loads, degree, problem.current)
    state, iS = _discretize(problem.state_sizes, degree, problem.current)
    nc, ns = int(ic.max()) + 1 if ic.size else 1, int(iS.max()) + 1 if iS.size else 1
    if n * n * nc * ns < 2**62:
        key = ((problem.current * n + problem.fallback) * nc + ic) * ns + iS
    else:  # a mixed-radix key would overflow: rank the rows instead
        _, key = np.unique(np.stack([problem.current, problem.fallback, ic, iS], axis=1), axis=0, return_inverse=True)
    members = np.argsort(key, kind="stable")
    sorted_key = key[members]
    first = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]]) if key.size else np.empty(0, np.int64)
    offsets = np.r_[first, key.size].astype(np.int64)
    heads = members[first]
    count = np.diff(offsets)
    if values == "mean":
        label = np.repeat(np.arange(first.size), count)
        group_cost = np.bincount(label, weights=problem.loads[members], minlength=first.size) / count
        group_state = np.bincount(label, weights=problem.state_sizes[members], minlength=first.size) / count
    else:
        group_cost, group_state = cost[heads], state[heads]
    return CompactRepresentation(
        problem=problem,
        degree=degree,
        cost=group_cost,
        state=group_state,
        count=count,
        current=problem.current[heads],
        fallback=problem.fallback[heads],
        members=members,
        offsets=offsets,
        build_seconds=timer() - started,
    )


def _discretize(values: np.ndarray, degree: int, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """HLHE values per reporting instance, and each one's index (the value in units of the smallest)."""
    positive = values > 0
    unit = float(values[positive].min()) if positive.any() else 1.0
    phi = hlhe(values, degree, groups=groups, unit=unit)
    return phi, np.rint(phi / unit).astype(np.int64)


@dataclass
class CompactResult:
    """Mixed planned on the compact representation.

    Attributes
    ----------
    result : RebalanceResult
        The key-level plan, its figures computed on the true costs and states;
        ``planning_seconds`` counts planning on the groups and expanding the
        plan to keys, not building the representation.
    estimated_loads : ndarray of float, shape (N_D,)
        Instance loads the planner saw (discretized costs).
    load_error : float
        ``max_d |estimated - actual| / actual`` over instances with load: the
        paper's load-estimation error (Fig. 11b, at most 1%).
    n_groups : int
        Groups in the representation (the key space had ``K``).
    build_seconds : float
        Time to build the representation.
    trials : int
        Mixed trials run.
    """

    result: RebalanceResult
    estimated_loads: np.ndarray
    load_error: float
    n_groups: int
    build_seconds: float
    trials: int


def mixed_compact(
    problem: RebalanceProblem,
    degree: int = DEFAULT_DEGREE,
    *,
    beta: float = DEFAULT_BETA,
    representation: CompactRepresentation | None = None,
) -> CompactResult:
    """Plan Mixed on the compact representation, then pick the concrete keys to move.

    Problem: as :func:`locality.rebalance.mixed.mixed`, for key domains too
    large to plan key by key.

    Method (Fang et al. [1]_, Section IV-A): :func:`compress` merges keys into
    groups; Mixed (Algorithm 4, with the readings listed in
    :func:`~locality.rebalance.mixed.mixed`) runs on the groups, whose keys can
    be split: Phase I cleans whole groups (so ``n`` rounds up to a group
    boundary), Phase II and Adjust take part of a group when a few of its keys
    suffice, LLFD places a group's keys one by one (heavy groups) or by the
    water-fill (light ones). The plan says how many keys of each group go
    where; the keys themselves are taken in key-index order within the group,
    which is unbiased with respect to their true costs (the paper picks them
    by psi, which favours keys heavier than their representative). If the plan
    misses ``theta_max`` on the true costs (by the estimation error), one more
    round of Phases II and III runs on the exact costs from it; if that still
    misses and no hot key forbids it, the Simple plan is kept when better, as
    for the full key space.

    Group values: by default a group's ``v_c`` and ``v_S`` are its keys' means
    (``compress(values="mean")``), so moving part of a group is estimated
    without bias; the paper uses the HLHE representative itself
    (``values="representative"``), but a group is then made of keys all
    rounded the same way (all up or all down), and moving part of it is biased
    by up to a gap: 0.4-1.4% load-estimation error at ``K = 10**6``,
    ``N_D = 40``, enough to miss ``theta_max = 0.02``. HLHE still decides the
    groups.

    Parameters
    ----------
    problem : RebalanceProblem
        Costs, state sizes, current and fallback instances, ``theta_max``, ``table_cap``.
    degree : int, default 8
        HLHE degree ``R``, a power of two.
    beta : float, default 1.5
        Migration selection factor of psi, ``>= 0``.
    representation : CompactRepresentation, optional
        A representation of ``problem`` built earlier (by the reporting
        instances, in the paper's design; e.g. ``compress(problem, R,
        values="representative")``); built here with group means otherwise.

    Returns
    -------
    CompactResult
        The plan (``result.method == "mixed_compact"``), the estimated loads,
        the load-estimation error, the number of groups and the build time.
        The paper's figures: planning 10x faster than the full key space at
        ``R = 8`` (0.6 s against 6 s) with a load-estimation error of at most 1%
        for ``R`` from 1 to 256 (Fig. 11).

    Raises
    ------
    InvalidParameterError
        If ``problem`` is not a :class:`RebalanceProblem`, ``degree`` is not a
        power of two, ``beta`` is not a float ``>= 0`` or ``representation``
        was built from another problem.

    Examples
    --------
    >>> from locality.datasets.skew import skew_workload
    >>> w = skew_workload(20_000, 1, 10, seed=1)
    >>> out = mixed_compact(w.problem(0, table_cap=3000), degree=8)
    >>> out.n_groups < 20_000, out.load_error < 0.01, out.result.theta_after <= 0.08
    (True, True, True)

    References
    ----------
    .. [1] J. Fang, R. Zhang, T. Z. J. Fu, Z. Zhang, A. Zhou, J. Zhu. "Parallel stream processing
       against workload skewness and variance." HPDC 2017; arXiv:1610.05121.

    See Also
    --------
    locality.rebalance.mixed.mixed : the same planner on the full key space.
    """
    check_problem(problem, "mixed_compact")
    beta = check_interval(beta, "beta", "mixed_compact", lower=0)
    if representation is None:
        representation = compress(problem, degree)
    elif representation.problem is not problem:
        raise InvalidParameterError(
            "the 'representation' parameter of mixed_compact must be built from the same problem",
            parameter="representation",
        )
    rep = representation
    started = timer()
    units = Units(
        cost=rep.cost,
        state=rep.state,
        count=rep.count,
        hash=rep.fallback,
        origin=rep.current,
        dest=rep.current.copy(),
        pinned=np.zeros(rep.n_groups, dtype=bool),
        priority=gamma(rep.cost, rep.state, beta),
        n_instances=problem.n_instances,
    )
    tg = make_targets(units, problem.theta_max, problem.shares)
    plan, trials = search_mixed(units, tg, problem.table_cap)
    planned = _expand(rep, plan.units)
    actual = instance_loads(problem.loads, planned, problem.n_instances)
    seen = actual > 0
    error = float(np.max(np.abs(plan.loads[seen] - actual[seen]) / actual[seen])) if seen.any() else 0.0
    if problem.theta(actual) > problem.theta_max:
        # Missed by the estimation error: one more Phase II + III on the exact costs, from the plan.
        planned = polish(problem, planned, gamma(problem.loads, problem.state_sizes, beta))
        actual = None
    result = conclude(problem, rescue(problem, planned, "mixed_compact", actual), "mixed_compact", started)
    logger.debug("mixed_compact: %d groups for %d keys, %d trials", rep.n_groups, problem.n_keys, trials)
    return CompactResult(result, plan.loads, error, rep.n_groups, rep.build_seconds, trials)


def _expand(rep: CompactRepresentation, units: Units) -> np.ndarray:
    """Key-level assignment of a plan on groups: each moved piece takes the next keys of its group."""
    assignment = rep.problem.current.copy()
    group = units.items()
    moved = units.dest != rep.current[group]
    grp, dest, cnt = group[moved], units.dest[moved], units.count[moved]
    order = np.lexsort((dest, grp))
    grp, dest, cnt = grp[order], dest[order], cnt[order]
    if cnt.size == 0:
        return assignment
    before = np.cumsum(cnt) - cnt  # keys of earlier pieces, all groups
    first = np.flatnonzero(np.r_[True, grp[1:] != grp[:-1]])
    lengths = np.diff(np.r_[first, grp.size])
    within = before - np.repeat(before[first], lengths)  # keys of earlier pieces of the same group
    start = rep.offsets[grp] + within
    positions = np.arange(int(cnt.sum())) - np.repeat(before, cnt) + np.repeat(start, cnt)
    assignment[rep.members[positions]] = np.repeat(dest, cnt)
    return assignment
