"""The Simple algorithm: Graham's LPT greedy, the yardstick of Fang et al.'s balance proofs."""

from __future__ import annotations

from locality.rebalance._base import RebalanceProblem, RebalanceResult
from locality.rebalance._greedy import check_problem, conclude, lpt, lpt_eps, timer, units_from_problem

__all__ = ["simple"]


def simple(problem: RebalanceProblem) -> RebalanceResult:
    """Reassign every key from scratch, heaviest first, to the least-loaded instance.

    Problem: balance the keys of one operator over ``N_D`` instances so that
    ``theta = max |L(d) - mean| / mean`` is small, ignoring migration and table size.

    Method: Algorithm 5 of the arXiv version (1610.05121v2) of Fang et al. [1]_,
    which the HPDC version uses in its proofs without printing: disassociate
    every key, sort by descending cost, give each to the instance with the
    least load so far (Graham's LPT [2]_). Ties go to the lower key index and
    the lower instance index. No feasibility test: a key may overload its
    instance. Keys without load in the interval go to their fallback instance.
    Keys cheaper than ``theta_max * mean / 4`` are spread by a
    vectorized water-fill instead of one by one, which lands each instance
    within one such key of the common level (what LPT gives for them too);
    with ``theta_max = 0`` the result is exactly LPT.

    Bound (Lemma 3 / Theorem 1 of [1]_, Graham's 4/3 bound): if a perfect
    assignment exists and the heaviest key costs less than the mean,
    ``theta <= (1/3) * (1 - 1/N_D)``.

    Parameters
    ----------
    problem : RebalanceProblem
        Costs, state sizes, current and fallback instances, ``theta_max``, ``table_cap``.

    Returns
    -------
    RebalanceResult
        ``method="simple"``; ``migration_cost`` is typically close to ``1 - 1/N_D``
        (almost every key moves), ``table_size`` close to ``(1 - 1/N_D) * K``.
        ``feasible`` says whether ``theta_after <= theta_max`` and the table fits
        ``table_cap``; ``hot_keys`` lists keys costing more than ``(1 + theta_max) * mean``.

    Raises
    ------
    InvalidParameterError
        If ``problem`` is not a :class:`RebalanceProblem`.

    Examples
    --------
    >>> import numpy as np
    >>> from locality.rebalance import RebalanceProblem
    >>> p = RebalanceProblem(np.array([5., 4., 3., 3., 3.]), np.ones(5), np.zeros(5, int), np.zeros(5, int), 2)
    >>> simple(p).assignment.tolist()
    [0, 1, 1, 0, 1]

    References
    ----------
    .. [1] J. Fang, R. Zhang, T. Z. J. Fu, Z. Zhang, A. Zhou, J. Zhu. "Parallel stream processing
       against workload skewness and variance." HPDC 2017; arXiv:1610.05121 (Appendix A).
    .. [2] R. L. Graham. "Bounds on multiprocessing timing anomalies." SIAM J. Appl. Math. 17(2), 1969.

    See Also
    --------
    locality.rebalance.llfd.llfd : the same greedy restricted to keys of overloaded instances.
    """
    started = timer()
    check_problem(problem, "simple")
    units = units_from_problem(problem)
    assignment = lpt(units, lpt_eps(problem), problem.shares)
    # Keys idle this interval weigh nothing to LPT, which would pile them on one instance; their load
    # next interval is unknown, so they go where the hash spreads them (no table entry).
    idle = problem.loads == 0
    assignment[idle] = problem.fallback[idle]
    return conclude(problem, assignment, "simple", started)
