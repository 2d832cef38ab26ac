"""The one signature every skew rebalancer shares.

A rebalancer sees a single operator: ``K`` keys (numbered ``0..K-1`` by the
caller), their computation cost in the last interval, their state size over the
state window, the instance each key is on now, and the instance the fallback
hash gives it. It returns the instance each key should be on next: the routing
table is the set of keys whose new instance differs from the fallback, the
migration is the set of keys whose new instance differs from the current one.

Instances are numbered ``0..n_instances-1`` in the engine's order. Loads are
balanced against equal shares (the mean); ``theta`` is the largest relative
deviation from the mean, ``imbalance`` is max / mean (the locality paper's
alpha), so ``alpha = 1 + theta_max`` on the high side.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from locality._validation import check_integer, check_interval
from locality.errors import InvalidParameterError

__all__ = ["RebalanceProblem", "RebalanceResult", "instance_loads", "theta", "imbalance", "finish"]


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
        ``A_max``: most explicit entries the routing table may hold.
    base_loads : ndarray of float, shape (n_instances,), or None
        Load each instance carries whatever the keys do (what it already
        served in the balance window, or keys outside the problem). Every
        figure (mean, theta, imbalance, hot keys) is on ``base_loads`` plus
        the keys' loads. Only rebalancers in :data:`BASE_AWARE` accept it.
    """

    loads: np.ndarray
    state_sizes: np.ndarray
    current: np.ndarray
    fallback: np.ndarray
    n_instances: int
    theta_max: float = 0.08
    table_cap: int | None = None
    base_loads: np.ndarray | None = None

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
                    f"the 'base_loads' parameter of {owner} must hold {n} finite values >= 0; got shape {base.shape}"
                )
            arrays["base_loads"] = base
        for name, arr in arrays.items():
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
    def mean_load(self) -> float:
        """Mean instance load, ``base_loads`` included."""
        base = 0.0 if self.base_loads is None else float(self.base_loads.sum())
        return (float(self.loads.sum()) + base) / self.n_instances


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


def theta(per_instance: np.ndarray) -> float:
    """Largest relative deviation from the mean load, ``max |L(d) - mean| / mean`` (0 when idle)."""
    mean = per_instance.mean() if per_instance.size else 0.0
    return float(np.abs(per_instance - mean).max() / mean) if mean > 0 else 0.0


def imbalance(per_instance: np.ndarray) -> float:
    """``max L(d) / mean`` (1 when idle)."""
    mean = per_instance.mean() if per_instance.size else 0.0
    return float(per_instance.max() / mean) if mean > 0 else 1.0


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
        imbalance_before=imbalance(before),
        imbalance_after=imbalance(after),
        theta_before=theta(before),
        theta_after=theta(after),
        migration_cost=float(problem.state_sizes[moved].sum() / total_state) if total_state > 0 else 0.0,
        table_size=int(table.shape[0]),
        planning_seconds=time.perf_counter() - started,
        **extra,
    )


Rebalancer = Callable[..., RebalanceResult]
