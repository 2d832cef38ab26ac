"""MinMig: rebalance moving keys with the most load per unit of state first (Fang et al., Algorithm 3)."""

from __future__ import annotations

from locality._validation import check_interval
from locality.rebalance._base import RebalanceProblem, RebalanceResult
from locality.rebalance._greedy import check_problem, gamma, run_trial, solve, timer

__all__ = ["minmig", "DEFAULT_BETA"]

DEFAULT_BETA = 1.5
"""The paper's default migration selection factor (Table II; Appendix C, Figs. 20-21)."""


def minmig(problem: RebalanceProblem, *, beta: float = DEFAULT_BETA) -> RebalanceResult:
    """Rebalance with little state migration: move keys of high ``c(k)**beta / S(k, w)`` first.

    Problem: bring every instance within ``theta_max`` of the mean load while
    moving as little state as possible (migration cost = state of the moved
    keys, as a fraction of all state).

    Method (Algorithm 3 of Fang et al. [1]_): no cleaning (Phase I does
    nothing: a cleaned entry migrates its key); Phases II and III are those of
    :func:`~locality.rebalance.llfd.llfd` with psi = largest migration priority
    ``gamma(k) = c(k)**beta / S(k, w)`` first, in both the choice of keys to
    disassociate and the choice of Adjust's exchangeable set. ``beta`` trades
    load moved per key (large ``beta``: fewer, heavier keys, a smaller table)
    against state moved (small ``beta``). A key with no state has infinite
    priority (it moves for free); a key with neither cost nor state, zero.
    The readings of LLFD chosen are listed in :func:`~locality.rebalance.llfd.llfd`.

    Parameters
    ----------
    problem : RebalanceProblem
        Costs, state sizes, current and fallback instances, ``theta_max``, ``table_cap``.
    beta : float, default 1.5
        Migration selection factor, ``>= 0``.

    Returns
    -------
    RebalanceResult
        ``method="minmig"``. MinMig does not bound the table: under repeated
        rebalancing it tends to ``(N_D - 1) / N_D * K`` entries (Fig. 18,
        about 9,350 at ``K = 10**4``). ``feasible`` is True when
        ``theta_after <= theta_max`` and the table fits ``table_cap`` (if set);
        ``hot_keys`` lists keys costing more than ``(1 + theta_max) * mean``.

    Raises
    ------
    InvalidParameterError
        If ``problem`` is not a :class:`RebalanceProblem` or ``beta`` is not a float ``>= 0``.

    Examples
    --------
    Key 1 carries as much load as key 0 with a quarter of the state, so it moves:

    >>> import numpy as np
    >>> from locality.rebalance import RebalanceProblem
    >>> p = RebalanceProblem(loads=[4., 4., 1., 1.], state_sizes=[8., 2., 1., 1.], current=[0, 0, 1, 1],
    ...                      fallback=[0, 0, 1, 1], n_instances=2, theta_max=0.1)
    >>> r = minmig(p)
    >>> r.assignment.tolist(), round(r.migration_cost, 3)
    ([0, 1, 0, 1], 0.25)

    References
    ----------
    .. [1] J. Fang, R. Zhang, T. Z. J. Fu, Z. Zhang, A. Zhou, J. Zhu. "Parallel stream processing
       against workload skewness and variance." HPDC 2017; arXiv:1610.05121.

    See Also
    --------
    locality.rebalance.mixed.mixed : MinMig plus just enough cleaning to fit ``table_cap``.
    """
    started = timer()
    check_problem(problem, "minmig")
    beta = check_interval(beta, "beta", "minmig", lower=0)
    return solve(
        problem,
        "minmig",
        lambda units: gamma(units.cost, units.state, beta),
        lambda u, tg: run_trial(u, tg, None, 0),
        started,
    )
