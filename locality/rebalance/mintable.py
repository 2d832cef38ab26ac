"""MinTable: clean the whole routing table, then rebalance heaviest keys first (Fang et al., Algorithm 2)."""

from __future__ import annotations

from locality.rebalance._base import RebalanceProblem, RebalanceResult
from locality.rebalance._greedy import check_problem, clean_order, run_trial, solve, timer

__all__ = ["mintable"]


def mintable(problem: RebalanceProblem) -> RebalanceResult:
    """Rebalance with the smallest routing table: move every entry back to its hash, then LLFD.

    Problem: bring every instance within ``theta_max`` of the mean load while
    keeping few explicit routing entries (the table holds only keys whose
    instance differs from the fallback hash).

    Method (Algorithm 2 of Fang et al. [1]_): Phase I moves back *all* table
    entries (their keys return to ``fallback``, which migrates their state
    unless they end where they are); Phases II and III are those of
    :func:`~locality.rebalance.llfd.llfd` with psi = "highest computation cost
    first", so each entry added carries as much load as possible. Hot keys
    (cost above ``(1 + theta_max) * mean``) keep their entries and stay put.
    The readings of LLFD chosen (ascending current load, Adjust with ``<=``,
    both sides of theta) are listed in :func:`~locality.rebalance.llfd.llfd`.

    Parameters
    ----------
    problem : RebalanceProblem
        Costs, state sizes, current and fallback instances, ``theta_max``, ``table_cap``.

    Returns
    -------
    RebalanceResult
        ``method="mintable"``. ``table_size`` is small but ``migration_cost`` is
        large (the paper's Fig. 9: about 3x Mixed's). ``feasible`` is True when
        ``theta_after <= theta_max`` and ``table_size <= table_cap`` (if set);
        MinTable does not read ``table_cap``, it only reports against it.
        ``hot_keys`` lists keys costing more than ``(1 + theta_max) * mean``.

    Raises
    ------
    InvalidParameterError
        If ``problem`` is not a :class:`RebalanceProblem`.

    Examples
    --------
    The right example of the paper's Fig. 4: two entries instead of LLFD's four.

    >>> import numpy as np
    >>> from locality.rebalance import RebalanceProblem
    >>> cost = np.array([7., 4., 2., 1., 5., 1.])
    >>> p = RebalanceProblem(cost, cost, current=[0, 0, 1, 1, 0, 1], fallback=[0, 0, 0, 1, 1, 1],
    ...                      n_instances=2, theta_max=0.0)
    >>> r = mintable(p)
    >>> r.assignment.tolist(), r.table_size, r.theta_after
    ([0, 1, 0, 0, 1, 1], 2, 0.0)

    References
    ----------
    .. [1] J. Fang, R. Zhang, T. Z. J. Fu, Z. Zhang, A. Zhou, J. Zhu. "Parallel stream processing
       against workload skewness and variance." HPDC 2017; arXiv:1610.05121.

    See Also
    --------
    locality.rebalance.mixed.mixed : cleans only as many entries as the table cap requires.
    """
    started = timer()
    check_problem(problem, "mintable")

    def search(units, tg):
        table, cum = clean_order(units)
        return run_trial(units, tg, (table, cum), int(cum[-1]) if cum.size else 0)

    return solve(problem, "mintable", lambda units: units.cost, search, started)
