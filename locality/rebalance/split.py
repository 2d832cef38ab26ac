"""Hot keys: find the keys no routing can place within the bound, and split them (associative state).

A key whose load alone exceeds ``(1 + theta_max) * mean`` overloads whatever
instance holds it, so every rebalancer reports it (``feasible=False``,
``hot_keys``). When the operator's state is associative (counts, sums, max),
such a key can be *split*: its tuples are spread over ``d`` instances, each
keeping a partial state, as Partial Key Grouping [1]_ (``d = 2``) and
D-Choices [2]_ (``d`` chosen from the key's load) do. :func:`split_hot_keys`
does this as a post-step of any rebalancer, choosing the least-loaded
instances as they do; like them it ignores where the key's tuples come from,
so most of its hops cross the network.

:func:`split_locally` splits by *neighbour server* instead: a tuple of the hot
key goes to the key's part on the server of the tuple's neighbouring key (the
upstream key; for the first operator of a chain, the downstream one), when
that part has room. The hops that were local to the key's old instance stay
local, and so do those from every other server that gets a part.

The merge step an operator needs: each part holds a partial state of the key
(a partial count, sum, max, top-k...). A consumer of the key's result must
combine the parts, either downstream (a final aggregation keyed by the key,
as with Partial Key Grouping) or when the parts are folded back into one
instance (at the next reconfiguration, whose migration moves the partial
states to the key's single instance and merges them there).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

import numpy as np

from locality._validation import check_integer
from locality.errors import InvalidParameterError
from locality.imbalance import ROUNDING
from locality.rebalance._base import RebalanceProblem, RebalanceResult, instance_loads

__all__ = ["split_hot_keys", "LocalSplit", "split_locally", "plan_local_splits"]

logger = logging.getLogger(__name__)


def _water_fill(base: np.ndarray, load: float) -> float:
    """Level ``x`` with ``sum(max(0, x - base)) == load`` over the sorted loads ``base``."""
    prefix = np.cumsum(base)
    counts = np.arange(1, base.shape[0] + 1)
    # Level if the first i instances take water; the right i is the last one whose level is above base[i-1].
    levels = (load + prefix) / counts
    fits = levels >= base
    return float(levels[np.flatnonzero(fits)[-1]])


def split_hot_keys(
    problem: RebalanceProblem,
    result: RebalanceResult,
    *,
    max_ways: int | None = None,
) -> RebalanceResult:
    """Spread every hot key over the fewest least-loaded instances that keep them within the bound.

    For associative state only: each instance of a split key keeps a
    **partial state, which must be merged downstream** (a final aggregation
    step, as with Partial Key Grouping). Hot keys are taken heaviest first.
    For each, the instances are ranked by their load without the hot keys
    (ties by instance id, so the choice is deterministic), and ``d`` is the
    smallest count of the least-loaded ones over which the key's load fits
    under ``(1 + theta_max) * mean``, at most ``max_ways``. The key's load is
    modelled as water-filling those ``d`` instances, which is what routing
    each tuple to the least-loaded of its instances (PKG, D-Choices) tends to.

    Parameters
    ----------
    problem : RebalanceProblem
        The problem ``result`` solves.
    result : RebalanceResult
        Output of any rebalancer for ``problem``.
    max_ways : int, optional
        Most instances one key may be split over, ``>= 2`` (default: all).

    Returns
    -------
    RebalanceResult
        A copy of ``result`` with ``split_keys`` (key -> its instances, first
        choice first), ``method`` suffixed ``+split`` and ``planning_seconds``
        including the split. ``assignment`` holds each split key's first choice:
        its current instance when that is among the chosen ones (its existing
        state then stays as one of the partials and nothing migrates), else
        the least loaded. Split keys count as table entries. ``imbalance_after``
        and ``theta_after`` use the split loads (``finish`` would put a split key
        whole on its first choice); ``feasible`` says whether every instance is
        within the bound after the split; ``hot_keys`` still lists the hot keys.

    Raises
    ------
    InvalidParameterError
        If ``result`` does not fit ``problem``, ``max_ways`` is not an int >= 2,
        or the problem's instances have unequal shares (PKG's least-loaded
        choice assumes equal instances; :func:`split_locally` takes per-instance bounds).

    References
    ----------
    .. [1] M. A. U. Nasir, G. De Francisci Morales, D. Garcia-Soriano, N. Kourtellis,
       M. Serafini. "The power of both choices: practical load balancing for
       distributed stream processing engines." ICDE 2015.
    .. [2] M. A. U. Nasir, G. De Francisci Morales, N. Kourtellis, M. Serafini.
       "When two choices are not enough: balancing at scale in distributed
       stream processing." ICDE 2016.
    """
    started = time.perf_counter()
    owner = "split_hot_keys"
    n = problem.n_instances
    ways = n if max_ways is None else min(check_integer(max_ways, "max_ways", owner, lower=2), n)
    assignment = np.asarray(result.assignment, dtype=np.int64)
    if problem.shares is not None:
        raise InvalidParameterError(
            f"{owner} spreads hot keys over equal instances; the problem's shares differ: "
            "split by neighbour server instead (split_locally, a locality-aware rebalancer's split_hot_keys)"
        )
    if assignment.shape != (problem.n_keys,):
        raise InvalidParameterError(
            f"the 'result' parameter of {owner} must assign the problem's {problem.n_keys} keys; "
            f"got an assignment of shape {assignment.shape}",
            parameter="result",
        )
    hot = problem.hot_keys()
    if hot.shape[0] == 0 or ways < 2:
        return result
    bound = problem.hot_bound()
    cold = np.ones(problem.n_keys, dtype=bool)
    cold[hot] = False
    per_instance = instance_loads(np.where(cold, problem.loads, 0.0), assignment, n)
    new_assignment = assignment.copy()
    split: dict[int, list[int]] = {}
    for key in hot.tolist():
        load = float(problem.loads[key])
        order = np.argsort(per_instance, kind="stable")
        base = per_instance[order]
        # The fewest instances that fit; all of them (best effort) when none does.
        d = next((d for d in range(2, ways + 1) if _water_fill(base[:d], load) <= bound * (1.0 + ROUNDING)), ways)
        chosen = order[:d]
        level = _water_fill(base[:d], load)
        per_instance[chosen] = np.maximum(base[:d], level)
        instances = [int(i) for i in chosen]
        current = int(problem.current[key])
        first = current if current in instances else instances[0]
        instances.remove(first)
        split[int(key)] = [first, *instances]
        new_assignment[key] = first
        logger.info("split hot key %d (load %.4g, bound %.4g) over %d instances", key, load, bound, d)

    moved = np.flatnonzero(new_assignment != problem.current)
    total_state = problem.state_sizes.sum()
    table = np.union1d(np.flatnonzero(new_assignment != problem.fallback), np.asarray(sorted(split), dtype=np.int64))
    return dataclasses.replace(
        result,
        method=f"{result.method}+split",
        assignment=new_assignment,
        table=table,
        moved=moved,
        imbalance_after=problem.imbalance(per_instance),
        theta_after=problem.theta(per_instance),
        migration_cost=float(problem.state_sizes[moved].sum() / total_state) if total_state > 0 else 0.0,
        table_size=int(table.shape[0]),
        planning_seconds=result.planning_seconds + time.perf_counter() - started,
        feasible=bool(per_instance.max() <= bound * (1.0 + ROUNDING)),
        hot_keys=hot,
        split_keys=split,
    )


@dataclass
class LocalSplit:
    """A hot key spread over instances by neighbour server.

    ``route[s]`` is the instance that receives the key's tuples whose
    neighbouring key sits on server ``s``; the instances in ``route`` that
    receive load hold the partial states (:attr:`parts`).
    """

    key: int
    route: np.ndarray
    load: float
    flows: np.ndarray

    @property
    def parts(self) -> list[int]:
        """Instances that receive some of the key's expected load (they hold partial states)."""
        return sorted({int(i) for i in self.route[self.flows > 0]}) or [int(self.route[0])]

    def route_rows(self, neighbour_servers: np.ndarray) -> np.ndarray:
        """Instance of each tuple of the key, from the server of its neighbouring key."""
        return self.route[neighbour_servers]

    def to_dict(self) -> dict:
        return {"route": self.route.tolist(), "parts": self.parts, "load": self.load}


def split_locally(
    key: int,
    load: float,
    affinity: np.ndarray | None,
    loads: np.ndarray,
    servers: np.ndarray,
    bound: float | np.ndarray,
) -> LocalSplit:
    """Split a hot key over instances so that its tuples stay on their neighbour's server where there is room.

    The key's expected ``load`` arrives from each server in proportion to its
    ``affinity`` (edge weight to keys on that server; uniform without edges).
    Heaviest flow first, each server's flow goes to the least-loaded instance
    on that server if it stays within ``bound`` there, else to the instance
    with the most room (one already holding a part when it fits, so that the
    key is split over few instances). ``loads`` (per instance, without the
    key) are updated in place with the flows.

    Parameters
    ----------
    key : int
        The key's position in the caller's numbering (recorded in the result).
    load : float
        The key's expected load.
    affinity : ndarray of float, shape (n_servers,), or None
        Edge weight from the key to the keys on each server.
    loads : ndarray of float, shape (n_instances,)
        Instance loads without the key (updated in place).
    servers : ndarray of int, shape (n_instances,)
        Server of each instance.
    bound : float or ndarray of float, shape (n_instances,)
        The most an instance should carry (per instance on servers of different capacities).

    Returns
    -------
    LocalSplit

    Examples
    --------
    A key of load 9 whose neighbours are mostly on server 0; two servers, one
    instance each, bound 7: server 0's flow (6) stays local, server 1's (3) too.

    >>> import numpy as np
    >>> s = split_locally(0, 9.0, np.array([2.0, 1.0]), np.array([1.0, 3.0]), np.array([0, 1]), 7.0)
    >>> s.route.tolist(), s.parts
    ([0, 1], [0, 1])
    """
    n_servers = int(servers.max()) + 1
    share = np.full(n_servers, 1.0 / n_servers)
    if affinity is not None and float(np.sum(affinity)) > 0:
        share = np.asarray(affinity, dtype=float) / float(np.sum(affinity))
    flows = load * share
    bound = np.broadcast_to(np.asarray(bound, dtype=float), loads.shape)
    route = np.empty(n_servers, dtype=np.int64)
    used: set[int] = set()
    for s in np.argsort(-flows, kind="stable").tolist():
        here = np.flatnonzero(servers == s)
        best = int(here[np.argmin(loads[here])])
        if loads[best] + flows[s] > bound[best] * (1 + ROUNDING) and flows[s] > 0:
            room = bound - loads
            fits = np.flatnonzero(room + ROUNDING * bound >= flows[s])
            in_use = [i for i in fits.tolist() if i in used]
            best = in_use[int(np.argmax(room[in_use]))] if in_use else int(np.argmax(room))
        route[s] = best
        loads[best] += flows[s]
        if flows[s] > 0:
            used.add(best)
    return LocalSplit(key, route, float(load), flows)


def plan_local_splits(
    ids: np.ndarray,
    loads: np.ndarray,
    current: np.ndarray,
    base: np.ndarray,
    affinity: np.ndarray | None,
    servers: np.ndarray,
    *,
    theta_max: float,
    split_share: float | None = None,
    keep: np.ndarray | None = None,
    shares: np.ndarray | None = None,
) -> tuple[dict[int, LocalSplit], np.ndarray]:
    """Choose the hot keys of a rebalancing run and split each by neighbour server (:func:`split_locally`).

    A key is hot when its expected load exceeds ``split_share`` of an
    instance's fair share of the load to come, or (``split_share`` None) when
    it fits on no instance: over ``(1 + theta_max)`` times the mean even on
    the least-loaded one. Keys marked in ``keep`` (split before) are
    re-planned whatever their load. Hot keys are split heaviest first, each
    around the instances' ``base`` loads plus the other keys where they are.

    Parameters
    ----------
    ids : ndarray of int
        Each key's number in the caller's numbering (recorded in the plans).
    loads, current : ndarray, shape (K,)
        Each key's expected load and instance.
    base : ndarray of float, shape (n_instances,)
        Load each instance carries whatever the keys do.
    affinity : ndarray of float, shape (K, n_servers), or None
        Edge weight from each key to the keys on each server.
    servers : ndarray of int, shape (n_instances,)
        Server of each instance.
    shares : ndarray of float, shape (n_instances,), optional
        Each instance's fair share of the load (default: equal); bounds are per instance.

    Returns
    -------
    (dict, ndarray)
        The plan of each split key by its position in ``loads``, and ``base``
        plus the split keys' planned flows (the load the other keys are
        rebalanced around).
    """
    n = servers.shape[0]
    planned = base + np.bincount(current, weights=loads, minlength=n)
    if shares is None:
        bound = (1.0 + theta_max) * planned.sum() / n
        fair_share = loads.sum() / n
    else:
        bound = (1.0 + theta_max) * planned.sum() * np.asarray(shares, dtype=float)
        fair_share = loads.sum() * float(np.max(shares))
    if split_share is None:  # too heavy for the least-loaded instance
        hot = loads > np.max(bound - base)
    else:  # heavier than that share of the fair share of the load to come
        hot = loads > split_share * fair_share
    if keep is not None:
        hot |= keep
    if not hot.any():
        return {}, base
    cold = ~hot
    expected = base + np.bincount(current[cold], weights=loads[cold], minlength=n)
    without = expected.copy()
    plans = {}
    for r in np.flatnonzero(hot)[np.argsort(-loads[hot], kind="stable")].tolist():
        row = affinity[r] if affinity is not None else None
        plans[r] = split_locally(int(ids[r]), float(loads[r]), row, expected, servers, bound)
    return plans, base + (expected - without)
