"""Skew rebalancers: bring every instance of an operator within its balance bound
between two locality reconfigurations, moving little state and keeping the
routing table small. The bound holds on the loads a rebalancer plans on (the
window just seen, or a forecast), not on the loads that follow
(``docs/balance.md``, "What the rebalancers guarantee").

All share one signature, ``method(problem: RebalanceProblem, **options) -> RebalanceResult``;
:func:`rebalance` picks one by name, like networkx's ``flow_func``. Each adjusts
per-key routing tables over a hash: the replay, the online job, the window
rebalancer and :func:`~locality.rebalance.tables.rebalance_configuration` take
any of :data:`METHODS`.
"""

from __future__ import annotations

import importlib

from locality._validation import check_interval, check_option
from locality.errors import InvalidParameterError
from locality.migration import SPLIT_MERGES
from locality.rebalance._base import (
    RebalanceProblem,
    RebalanceResult,
    imbalance,
    instance_loads,
    table_room,
    theta,
    within_cap,
)

__all__ = [
    "RebalanceProblem",
    "RebalanceResult",
    "rebalance",
    "METHODS",
    "DEFAULT_METHOD",
    "BASE_AWARE",
    "instance_loads",
    "theta",
    "imbalance",
    "table_room",
    "within_cap",
    "check_rebalance_bounds",
    "check_split_options",
]

# name -> "module:function"; modules are imported on first use.
METHODS = {
    "simple": "locality.rebalance.simple:simple",
    "llfd": "locality.rebalance.llfd:llfd",
    "mintable": "locality.rebalance.mintable:mintable",
    "minmig": "locality.rebalance.minmig:minmig",
    "mixed": "locality.rebalance.mixed:mixed",
    "mixed_bf": "locality.rebalance.mixed:mixed_bf",
    "scan": "locality.rebalance.scan:scan",
    "redist": "locality.rebalance.redist:redist",
    "readj": "locality.rebalance.readj:readj",
    "local": "locality.rebalance.local:local",
    "follow": "locality.rebalance.local:follow",
}
DEFAULT_METHOD = "mixed"
#: The locality-aware rebalancers: they take ``RebalanceProblem.base_loads`` (load an instance carries
#: whatever the keys do) and the keys' ``affinity`` to servers, ``hop_loads`` and ``state_weight``.
BASE_AWARE = frozenset({"local", "follow"})


def check_locality_aware(method: object, name: str, owner: str, needs: str) -> None:
    """Raise unless ``method`` is a locality-aware rebalancer (:data:`BASE_AWARE`), which ``needs`` requires.

    Hot-key splitting, a balance window and base loads all need one: they
    take the keys' neighbours and the load instances carry whatever the keys
    do, which only those rebalancers read.
    """
    if method not in BASE_AWARE:
        raise InvalidParameterError(
            f"{needs} needs a locality-aware rebalancer: the {name!r} parameter of {owner} must be one of "
            f"{sorted(BASE_AWARE)}; got {method!r}",
            parameter=name,
        )


def check_rebalance_bounds(theta_max: object, state_weight: object, owner: str) -> None:
    """Raise unless the rebalancer's bound ``theta_max`` and the locality-aware ones' ``state_weight`` are >= 0."""
    check_interval(theta_max, "theta_max", owner, lower=0.0)
    check_interval(state_weight, "state_weight", owner, lower=0.0)


def check_split_options(
    split_merge: object, split_share: object, split_hot_keys: bool, method: object, name: str, owner: str
) -> None:
    """Raise unless the hot-key splitting options of ``owner`` hold (``method``, its rebalancer, is named ``name``).

    ``split_merge`` is one of :data:`~locality.migration.SPLIT_MERGES`,
    ``split_share`` (if given) > 0, and splitting needs a locality-aware
    rebalancer (:func:`check_locality_aware`).
    """
    check_option(split_merge, "split_merge", owner, SPLIT_MERGES)
    if split_share is not None:
        check_interval(split_share, "split_share", owner, lower=0.0, closed="neither")
    if split_hot_keys:
        check_locality_aware(method, name, owner, "split_hot_keys")


def rebalance(problem: RebalanceProblem, method: str = DEFAULT_METHOD, **options) -> RebalanceResult:
    """Rebalance one operator with the rebalancer named ``method``.

    ``problem.table_cap`` is counted one way by every method (keys off
    their fallback instance): Mixed, ``local``, ``follow`` and Gedik's
    constructions plan within it; Simple, LLFD, MinTable and MinMig report
    against it, as Fang et al. define them. The tables the tool builds
    (:func:`~locality.rebalance.tables.rebalance_configuration`, the window
    rebalancer) hold every method within it with :func:`within_cap`.

    Parameters
    ----------
    problem : RebalanceProblem
        Loads, state sizes, current and fallback instances, ``theta_max``, ``table_cap``.
    method : str
        One of :data:`METHODS` (default ``"mixed"``).
    **options
        Passed to the rebalancer (e.g. ``beta`` for MinMig and Mixed, ``affinity`` for ``local``).
    """
    check_option(method, "method", "rebalance", METHODS)
    if getattr(problem, "base_loads", None) is not None:
        check_locality_aware(method, "method", "rebalance", "base_loads")
    module, function = METHODS[method].split(":")
    return getattr(importlib.import_module(module), function)(problem, **options)
