"""The one signature every skew rebalancer shares.

A rebalancer sees a single operator: ``K`` keys (numbered ``0..K-1`` by the
caller), their computation cost in the last interval, their state size over the
state window, the instance each key is on now, and the instance the fallback
hash gives it. It returns the instance each key should be on next: the routing
table is the set of keys whose new instance differs from the fallback, the
migration is the set of keys whose new instance differs from the current one.

Instances are numbered ``0..n_instances-1`` in the engine's order. Loads are
balanced against each instance's fair share (``shares``: in proportion to its
server's capacity, equal by default, where the fair share is the mean):
``theta`` is the largest relative deviation from the fair share, ``imbalance``
the largest load over fair share (the locality paper's alpha), so
``alpha = 1 + theta_max`` on the high side. Both are
:mod:`locality.imbalance`'s, the optimizer's and the evaluator's measure.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from locality._validation import check_integer, check_interval
from locality.defaults import DEFAULT_THETA_MAX
from locality.errors import InvalidParameterError
from locality.imbalance import balance_bounds, fair_loads, heavier_than, imbalance, theta, unequal_shares

__all__ = [
    "RebalanceProblem",
    "RebalanceResult",
    "instance_loads",
    "finish",
    "within_cap",
    "table_room",
]


@dataclass(frozen=True)
class RebalanceProblem:
    """Input of a rebalancer, validated once on construction.

    Attributes
    ----------
    loads : ndarray of float, shape (K,)
        Computation cost ``c(k)`` of each key in the current interval (>= 0).
    state_sizes : ndarray of float, shape (K,)
        State size ``S(k, w)`` of each key over the state window (>= 0); the
        migration cost of moving a key.
    current : ndarray of int, shape (K,)
        Instance each key is on now (routing table, else fallback).
    fallback : ndarray of int, shape (K,)
        Instance the fallback hash gives each key.
    n_instances : int
        Number of instances ``N_D``.
    theta_max : float
        Tolerated relative deviation of an instance's load from the mean.
    table_cap : int or None
        ``A_max``: most explicit entries the routing table may hold, counted
        as the tables count them: keys whose instance differs from their
        fallback's (``assignment != fallback``). A caller whose table holds
        entries outside the problem passes what :func:`table_room` leaves.
    base_loads : ndarray of float, shape (n_instances,), or None
        Load each instance carries whatever the keys do (what it already
        served in the balance window, or keys outside the problem). Every
        figure (mean, theta, imbalance, hot keys) is on ``base_loads`` plus
        the keys' loads. Only rebalancers in :data:`BASE_AWARE` accept it.
    shares : ndarray of float, shape (n_instances,), or None
        Each instance's fair share of the load (positive; normalized to sum
        to 1), e.g. :meth:`~locality.topology.Topology.instance_shares` on
        servers of different capacities. None, or equal shares: the mean.
        Every bound and figure is on these shares.
    """

    loads: np.ndarray
    state_sizes: np.ndarray
    current: np.ndarray
    fallback: np.ndarray
    n_instances: int
    theta_max: float = DEFAULT_THETA_MAX
    table_cap: int | None = None
    base_loads: np.ndarray | None = None
    shares: np.ndarray | None = None

    def __post_init__(self) -> None:
        owner = "RebalanceProblem"
        n = check_integer(self.n_instances, "n_instances", owner, lower=1)
        check_interval(self.theta_max, "theta_max", owner, lower=0.0)
        if self.table_cap is not None:
            check_integer(self.table_cap, "table_cap", owner, lower=0)
        loads = np.asarray(self.loads, dtype=float)
        size = loads.shape[0] if loads.ndim == 1 else -1
        arrays = {
            "loads": loads,
            "state_sizes": np.asarray(self.state_sizes, dtype=float),
            "current": np.asarray(self.current, dtype=np.int64),
            "fallback": np.asarray(self.fallback, dtype=np.int64),
        }
        for name, arr in arrays.items():
            if arr.ndim != 1 or arr.shape[0] != size:
                raise InvalidParameterError(
                    f"the {name!r} parameter of {owner} must be a 1-d array of length {size}; got shape {arr.shape}"
                )
        for name in ("loads", "state_sizes"):
            if not np.all(np.isfinite(arrays[name])) or np.any(arrays[name] < 0):
                raise InvalidParameterError(f"the {name!r} parameter of {owner} must hold finite values >= 0")
        for name in ("current", "fallback"):
            if size and (arrays[name].min() < 0 or arrays[name].max() >= n):
                raise InvalidParameterError(f"the {name!r} parameter of {owner} must hold instances in [0, {n - 1}]")
        if self.base_loads is not None:
            base = np.asarray(self.base_loads, dtype=float)
            if base.shape != (n,) or not np.all(np.isfinite(base)) or np.any(base < 0):
                raise InvalidParameterError(
                    f"the 'base_loads' parameter of {owner} must hold {n} finite values >= 0; got shape {base.shape}",
                    parameter="base_loads",
                )
            arrays["base_loads"] = base
        if self.shares is not None:
            shares = np.asarray(self.shares, dtype=float)
            if shares.shape != (n,) or not np.all(np.isfinite(shares)) or np.any(shares <= 0):
                raise InvalidParameterError(
                    f"the 'shares' parameter of {owner} must hold {n} finite values > 0; got {self.shares!r}",
                    parameter="shares",
                )
            arrays["shares"] = unequal_shares(shares)
        for name, arr in arrays.items():
            if arr is not None:
                arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def n_keys(self) -> int:
        return int(self.loads.shape[0])

    def instance_loads(self, assignment: np.ndarray) -> np.ndarray:
        """Load of each instance under ``assignment``, ``base_loads`` included."""
        loads = instance_loads(self.loads, assignment, self.n_instances)
        return loads if self.base_loads is None else loads + self.base_loads

    @property
    def total_load(self) -> float:
        """Load of all instances, ``base_loads`` included."""
        base = 0.0 if self.base_loads is None else float(self.base_loads.sum())
        return float(self.loads.sum()) + base

    @property
    def mean_load(self) -> float:
        """Mean instance load, ``base_loads`` included (each instance's fair share when shares are equal)."""
        return self.total_load / self.n_instances

    @property
    def fair_loads(self) -> np.ndarray:
        """Each instance's fair share of :attr:`total_load` (the mean with equal shares)."""
        return fair_loads(self.total_load, self.n_instances, self.shares)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per instance, the loads ``(1 +/- theta_max) * fair share`` it must stay within."""
        return balance_bounds(self.fair_loads, self.theta_max)

    def hot_bound(self) -> float:
        """A key heavier than this fits on no instance: ``(1 + theta_max)`` times the largest fair share."""
        return (1.0 + self.theta_max) * float(self.fair_loads.max())

    def hot_keys(self) -> np.ndarray:
        """Keys whose load alone exceeds :meth:`hot_bound`, heaviest first (:func:`locality.imbalance.heavier_than`).

        >>> RebalanceProblem(np.array([9.0, 1, 1, 1]), np.ones(4), np.zeros(4, int), np.zeros(4, int), 2).hot_keys()
        array([0])
        """
        return heavier_than(self.loads, self.hot_bound())

    def theta(self, per_instance: np.ndarray) -> float:
        """:func:`locality.imbalance.theta` of ``per_instance`` on this problem's shares."""
        return theta(per_instance, self.shares)

    def imbalance(self, per_instance: np.ndarray) -> float:
        """:func:`locality.imbalance.imbalance` of ``per_instance`` on this problem's shares."""
        return imbalance(per_instance, self.shares)


@dataclass
class RebalanceResult:
    """Output of a rebalancer.

    ``assignment[k]`` is the new instance of key ``k``. ``table`` holds the
    keys whose new instance differs from the fallback (the explicit entries);
    ``moved`` the keys whose instance changed (their state migrates).
    ``split_keys`` maps a key spread over several instances (associative
    state only) to those instances; its partial states must be merged
    downstream, and ``assignment`` holds its first choice.
    """

    method: str
    assignment: np.ndarray
    table: np.ndarray
    moved: np.ndarray
    imbalance_before: float
    imbalance_after: float
    theta_before: float
    theta_after: float
    migration_cost: float
    table_size: int
    planning_seconds: float
    feasible: bool = True
    hot_keys: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    split_keys: dict[int, list[int]] = field(default_factory=dict)

    def summary(self) -> dict:
        """The figures as a JSON-ready dict."""
        return {
            "method": self.method,
            "imbalance_before": self.imbalance_before,
            "imbalance_after": self.imbalance_after,
            "theta_before": self.theta_before,
            "theta_after": self.theta_after,
            "migration_cost": self.migration_cost,
            "moved_keys": int(self.moved.shape[0]),
            "table_size": self.table_size,
            "planning_seconds": self.planning_seconds,
            "feasible": self.feasible,
            "hot_keys": [int(k) for k in self.hot_keys],
            "split_keys": {int(k): list(v) for k, v in self.split_keys.items()},
        }


def instance_loads(loads: np.ndarray, assignment: np.ndarray, n_instances: int) -> np.ndarray:
    """Load of each instance when key ``k`` with cost ``loads[k]`` goes to ``assignment[k]``."""
    return np.bincount(assignment, weights=loads, minlength=n_instances)


def finish(
    problem: RebalanceProblem,
    assignment: np.ndarray,
    method: str,
    started: float,
    **extra,
) -> RebalanceResult:
    """Build the :class:`RebalanceResult` of ``assignment`` with every figure computed the same way.

    ``started`` is the ``time.perf_counter()`` reading taken when planning began.
    """
    assignment = np.asarray(assignment, dtype=np.int64)
    before = problem.instance_loads(problem.current)
    after = problem.instance_loads(assignment)
    moved = np.flatnonzero(assignment != problem.current)
    table = np.flatnonzero(assignment != problem.fallback)
    total_state = problem.state_sizes.sum()
    return RebalanceResult(
        method=method,
        assignment=assignment,
        table=table,
        moved=moved,
        imbalance_before=problem.imbalance(before),
        imbalance_after=problem.imbalance(after),
        theta_before=problem.theta(before),
        theta_after=problem.theta(after),
        migration_cost=float(problem.state_sizes[moved].sum() / total_state) if total_state > 0 else 0.0,
        table_size=int(table.shape[0]),
        planning_seconds=time.perf_counter() - started,
        **extra,
    )


def table_room(cap: int | None, outside: int) -> tuple[int | None, int]:
    """The one cap rule for a table that also holds ``outside`` entries of keys a rebalancing run does not see.

    Returns ``(room, excess)``: the cap the run's problem gets, and how many
    of the outside entries must go back to their fallback instance for the
    whole table to fit (non-zero only when the outside entries alone exceed
    ``cap``, e.g. after the cap was lowered).
    """
    if cap is None:
        return None, 0
    return max(0, cap - outside), max(0, outside - cap)


def within_cap(problem: RebalanceProblem, result: RebalanceResult) -> RebalanceResult:
    """``result`` with its table brought within ``problem.table_cap``, for rebalancers that do not bound it.

    Entries beyond the cap go back to their fallback instance: first those
    the run itself created (the key was on its fallback, so undoing the move
    migrates nothing), then the lightest keys (the least balance lost). The
    figures are recomputed; ``feasible`` says whether ``theta_max`` still holds.
    """
    cap = problem.table_cap
    if cap is None or result.table_size <= cap:
        return result
    assignment = result.assignment.copy()
    table = np.flatnonzero(assignment != problem.fallback)
    order = np.lexsort((problem.loads[table], problem.current[table] != problem.fallback[table]))
    back = table[order[: table.shape[0] - cap]]
    assignment[back] = problem.fallback[back]
    started = time.perf_counter() - result.planning_seconds
    capped = finish(problem, assignment, result.method, started, hot_keys=result.hot_keys, split_keys=result.split_keys)
    capped.feasible = bool(capped.theta_after <= problem.theta_max)
    return capped


Rebalancer = Callable[..., RebalanceResult]
