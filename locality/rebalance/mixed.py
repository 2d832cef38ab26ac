"""Mixed and MixedBF: MinMig plus just enough table cleaning to fit ``A_max`` (Fang et al., Algorithm 4)."""

from __future__ import annotations

import logging

from locality._validation import check_integer, check_interval
from locality.rebalance._base import RebalanceProblem, RebalanceResult
from locality.rebalance._greedy import check_problem, gamma, search_every_n, search_mixed, solve, timer
from locality.rebalance.minmig import DEFAULT_BETA

__all__ = ["mixed", "mixed_bf"]

logger = logging.getLogger(__name__)


def mixed(
    problem: RebalanceProblem, *, beta: float = DEFAULT_BETA, compact_degree: int | None = None
) -> RebalanceResult:
    """Rebalance within ``theta_max`` and ``table_cap`` moving little state: the paper's Mixed.

    Problem (Eq. 3 of Fang et al. [1]_): minimize the migrated state subject to
    ``theta(d) <= theta_max`` for every instance and ``N_A <= A_max``
    (``problem.table_cap``) for the routing table.

    Method (Algorithm 4): a trial runs Phase I, moving back the ``n`` table
    entries of smallest state (eta = smallest ``S(k, w)`` first), then
    MinMig's Phases II and III (psi = largest ``c(k)**beta / S(k, w)`` first,
    see :func:`~locality.rebalance.minmig.minmig`). The first trial has
    ``n = 0`` (MinMig); while the new table overflows, ``n`` grows by the
    overflow ``N_A' - A_max`` and the trial reruns from the original table.
    ``n = N_A`` is MinTable's cleaning with MinMig's priorities.

    Readings chosen: ``n`` is *accumulated* where the pseudocode re-assigns
    ``n = N_A' - A_max``, which can oscillate between two values for ever, and
    it grows by at least itself, ``n += max(N_A' - A_max, n)``, capped at
    ``N_A``: plain accumulation can crawl (cleaning the smallest-state entries
    lets LLFD add about as many back; we saw 319 trials of +14 on a
    ``K = 10**5``, ``N_D = 40`` workload), while doubling ends after at most
    ``2 + log2(N_A)`` trials and over-cleans only the entries with the least
    state. If even ``n = N_A`` overflows, Mixed returns the trial with the
    smallest table (the paper: Mixed "degenerates to MinTable") and reports
    ``feasible=False``. Hot keys keep their entries and never move. The LLFD
    readings (ascending current load, Adjust with ``<=``, both sides of theta)
    are listed in :func:`~locality.rebalance.llfd.llfd`. Without
    ``table_cap`` Mixed is MinMig.

    Parameters
    ----------
    problem : RebalanceProblem
        Costs, state sizes, current and fallback instances, ``theta_max``, ``table_cap``.
    beta : float, default 1.5
        Migration selection factor of psi, ``>= 0``.
    compact_degree : int or None, default None
        If set, plan on the compact representation with HLHE discretization of
        this degree ``R`` (a power of two), as
        :func:`locality.rebalance.compact.mixed_compact` does; the load-estimation
        error is logged at INFO (call ``mixed_compact`` to get it as a number).

    Returns
    -------
    RebalanceResult
        ``method="mixed"`` (``"mixed_compact"`` with ``compact_degree``).
        ``feasible`` is True when ``theta_after <= theta_max`` and
        ``table_size <= table_cap``; ``hot_keys`` lists keys costing more than
        ``(1 + theta_max) * mean``. The paper's figures for Mixed: migration
        cost about a third of MinTable's (Fig. 9), a plan within 1 s at
        ``theta_max = 0.02`` (Fig. 9a).

    Raises
    ------
    InvalidParameterError
        If ``problem`` is not a :class:`RebalanceProblem`, ``beta`` is not a
        float ``>= 0`` or ``compact_degree`` is not a power of two.

    Examples
    --------
    The table may hold one entry: MinMig alone would keep the old entry
    (key 4) and add one; Mixed cleans it first.

    >>> import numpy as np
    >>> from locality.rebalance import RebalanceProblem
    >>> cost = np.array([7., 4., 2., 1., 5., 1.])
    >>> p = RebalanceProblem(cost, cost, current=[0, 0, 0, 1, 1, 1], fallback=[0, 0, 0, 1, 0, 1],
    ...                      n_instances=2, theta_max=0.1, table_cap=1)
    >>> r = mixed(p)
    >>> r.table_size <= 1, r.theta_after <= 0.1, r.feasible
    (True, True, True)

    References
    ----------
    .. [1] J. Fang, R. Zhang, T. Z. J. Fu, Z. Zhang, A. Zhou, J. Zhu. "Parallel stream processing
       against workload skewness and variance." HPDC 2017; arXiv:1610.05121.

    See Also
    --------
    mixed_bf : every ``n``, keeping the cheapest plan.
    locality.rebalance.compact.mixed_compact : Mixed on the compact representation.
    """
    started = timer()
    check_problem(problem, "mixed")
    beta = check_interval(beta, "beta", "mixed", lower=0)
    if compact_degree is not None:
        from locality.rebalance.compact import mixed_compact  # compact imports this module's siblings

        out = mixed_compact(problem, degree=compact_degree, beta=beta)
        logger.info(
            "mixed_compact: R=%d, %d groups, load-estimation error %.3g", compact_degree, out.n_groups, out.load_error
        )
        return out.result
    cap = problem.table_cap
    return solve(
        problem,
        "mixed",
        lambda units: gamma(units.cost, units.state, beta),
        lambda u, tg: search_mixed(u, tg, cap)[0],
        started,
    )


def mixed_bf(problem: RebalanceProblem, *, beta: float = DEFAULT_BETA, stride: int = 1) -> RebalanceResult:
    """Mixed by brute force: a trial for every number ``n`` of cleaned entries, the best one kept.

    Problem: as :func:`mixed` (Eq. 3 of Fang et al. [1]_).

    Method ("MixedBF", Section III-C): run Mixed's trial (Phase I cleaning
    ``n`` smallest-state entries, then MinMig's Phases II and III) for every
    ``n = 0, 1, ..., N_A`` and return the plan that meets both ``theta_max``
    and ``table_cap`` with the least migrated state; if none does, the one
    closest (balance first, then table overflow, then migration). This is the
    reading of Section III; Section V's "rebuilds the routing table from
    scratch at each scheduling point" describes the same search from the
    original table at every trial. Cost: ``N_A + 1`` trials, which is why the
    paper finds it slow (Fig. 12a).

    Parameters
    ----------
    problem : RebalanceProblem
        Costs, state sizes, current and fallback instances, ``theta_max``, ``table_cap``.
    beta : float, default 1.5
        Migration selection factor of psi, ``>= 0``.
    stride : int, default 1
        Try ``n = 0, stride, 2 * stride, ..., N_A`` (``N_A`` always included);
        1 is the paper's exhaustive search, larger values trade optimality for time.

    Returns
    -------
    RebalanceResult
        ``method="mixed_bf"``; ``migration_cost`` is at most that of any single
        ``n``, so at most Mixed's whenever both meet the bounds (the paper's
        Fig. 12b: about the same). ``feasible`` and ``hot_keys`` as in :func:`mixed`.

    Raises
    ------
    InvalidParameterError
        If ``problem`` is not a :class:`RebalanceProblem`, ``beta`` is not a
        float ``>= 0`` or ``stride`` is not an int ``>= 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from locality.rebalance import RebalanceProblem
    >>> cost = np.array([7., 4., 2., 1., 5., 1.])
    >>> p = RebalanceProblem(cost, cost, current=[0, 0, 0, 1, 1, 1], fallback=[0, 0, 0, 1, 0, 1],
    ...                      n_instances=2, theta_max=0.1, table_cap=1)
    >>> mixed_bf(p).migration_cost <= mixed(p).migration_cost
    True

    References
    ----------
    .. [1] J. Fang, R. Zhang, T. Z. J. Fu, Z. Zhang, A. Zhou, J. Zhu. "Parallel stream processing
       against workload skewness and variance." HPDC 2017; arXiv:1610.05121.

    See Also
    --------
    mixed : the heuristic that tries only a few ``n``.
    """
    started = timer()
    check_problem(problem, "mixed_bf")
    beta = check_interval(beta, "beta", "mixed_bf", lower=0)
    stride = check_integer(stride, "stride", "mixed_bf", lower=1)
    cap = problem.table_cap
    return solve(
        problem,
        "mixed_bf",
        lambda units: gamma(units.cost, units.state, beta),
        lambda u, tg: search_every_n(u, tg, cap, stride)[0],
        started,
    )
