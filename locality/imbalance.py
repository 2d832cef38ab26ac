"""How far instances are from their fair share of an operator's load: one definition, used everywhere.

An instance's fair share of its operator's load is proportional to the
capacity of its server (:meth:`~locality.topology.Topology.instance_shares`);
with equal capacities it is the mean load. The optimizer's bound ``alpha``
[1]_, the rebalancers' ``theta_max`` [2]_, the evaluator's and the replay's
figures all measure loads against these fair loads, with the functions of
this module:

- :func:`imbalance`: ``max_d L(d) / fair(d)``, the paper's alpha (1 is
  perfect balance);
- :func:`theta`: ``max_d |L(d) - fair(d)| / fair(d)``, the skew rebalancers'
  measure (both sides);
- :func:`balance_bounds`: the loads ``(1 +/- theta_max) * fair(d)`` an
  instance may carry, nudged so that a load within them passes :func:`theta`
  in floating point;
- :func:`heavier_than`: the keys too heavy for any instance under a bound
  (the optimizer's hot keys under alpha, the rebalancers' under theta_max).

``shares=None`` means equal shares; the figures are then computed from the
mean exactly as Fang et al. [2]_ write them.

References
----------
.. [1] Caneill, El Rheddane, Leroy, De Palma. "Locality-aware routing in
   stateful streaming applications." Middleware 2016 (section 3.1).
.. [2] J. Fang, R. Zhang, T. Z. J. Fu, Z. Zhang, A. Zhou, J. Zhu. "Parallel
   stream processing against workload skewness and variance." HPDC 2017.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fair_loads", "imbalance", "theta", "balance_bounds", "heavier_than", "unequal_shares", "ROUNDING"]

#: A load that reaches a bound up to floating-point rounding (sums of floats) is within it.
ROUNDING = 1e-9


def unequal_shares(shares: np.ndarray | None) -> np.ndarray | None:
    """``shares`` normalized to sum to 1, or None when they are all equal (the mean is then every fair share).

    Equal shares go the mean's arithmetic path everywhere, so that results on
    servers of one capacity do not depend on how the shares were written.
    """
    if shares is None:
        return None
    shares = np.asarray(shares, dtype=float)
    return None if np.all(shares == shares[0]) else shares / shares.sum()


def fair_loads(total: float, n_instances: int, shares: np.ndarray | None = None) -> np.ndarray:
    """Each of ``n_instances`` instances' fair share of ``total`` (the mean everywhere when ``shares`` is None)."""
    if shares is None:
        return np.full(n_instances, total / n_instances if n_instances else 0.0)
    return np.asarray(shares, dtype=float) * total


def _against_fair(per_instance: np.ndarray, shares: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The loads and their fair shares (the mean, a scalar, with equal shares); None when nothing is loaded."""
    per_instance = np.asarray(per_instance, dtype=float)
    if shares is None:
        mean = per_instance.mean() if per_instance.size else 0.0
        return (per_instance, mean) if mean > 0 else None
    total = float(per_instance.sum())
    return (per_instance, fair_loads(total, per_instance.size, shares)) if total > 0 else None


def imbalance(per_instance: np.ndarray, shares: np.ndarray | None = None) -> float:
    """``max_d L(d) / fair(d)`` (1 when idle).

    >>> imbalance(np.array([3.0, 1.0]))
    1.5
    >>> imbalance(np.array([3.0, 1.0]), shares=np.array([0.75, 0.25]))
    1.0
    """
    loaded = _against_fair(per_instance, shares)
    return float((loaded[0] / loaded[1]).max()) if loaded is not None else 1.0


def theta(per_instance: np.ndarray, shares: np.ndarray | None = None) -> float:
    """``max_d |L(d) - fair(d)| / fair(d)`` (0 when idle).

    >>> theta(np.array([3.0, 1.0]))
    0.5
    >>> theta(np.array([3.0, 1.0]), shares=np.array([0.75, 0.25]))
    0.0
    """
    loaded = _against_fair(per_instance, shares)
    return float((np.abs(loaded[0] - loaded[1]) / loaded[1]).max()) if loaded is not None else 0.0


def balance_bounds(fair: np.ndarray | float, theta_max: float) -> tuple[np.ndarray, np.ndarray]:
    """``(1 + theta_max) * fair`` and ``(1 - theta_max) * fair``, per instance.

    Each bound is nudged by an ulp where needed so that a load within it has
    ``|L - fair| / fair <= theta_max`` in floating point, exactly as
    :func:`theta` computes it. Instances with no fair load get bounds 0.
    """
    fair = np.atleast_1d(np.asarray(fair, dtype=float))
    hi, lo = fair * (1.0 + theta_max), fair * (1.0 - theta_max)
    positive = fair > 0
    hi[~positive] = lo[~positive] = 0.0
    for _ in range(4):  # one or two ulps always suffice
        over = positive & ((hi - fair) / np.where(positive, fair, 1.0) > theta_max)
        under = positive & ((fair - lo) / np.where(positive, fair, 1.0) > theta_max)
        if not (over.any() or under.any()):
            break
        hi[over] = np.nextafter(hi[over], -np.inf)
        lo[under] = np.nextafter(lo[under], np.inf)
    return hi, lo


def heavier_than(loads: np.ndarray, bound: float) -> np.ndarray:
    """Positions of the ``loads`` above ``bound``, heaviest first (ties in position order).

    A key heavier than the most any one instance may carry makes the bound
    unreachable whatever the placement; a load that reaches the bound up to
    rounding is within it.

    >>> heavier_than(np.array([5.0, 12.0, 10.0, 11.0]), 10.0).tolist()
    [1, 3]
    """
    loads = np.asarray(loads, dtype=float)
    heavy = np.flatnonzero(loads > bound * (1.0 + ROUNDING))
    return heavy[np.argsort(-loads[heavy], kind="stable")]
