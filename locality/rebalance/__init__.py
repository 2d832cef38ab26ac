"""Skew rebalancers: keep every instance of an operator within its balance bound
between two locality reconfigurations, moving little state and keeping the
routing table small.

All share one signature, ``method(problem: RebalanceProblem, **options) -> RebalanceResult``;
:func:`rebalance` picks one by name, like networkx's ``flow_func``.
"""

from __future__ import annotations

import importlib

from locality._validation import check_option
from locality.errors import InvalidParameterError
from locality.rebalance._base import RebalanceProblem, RebalanceResult, imbalance, instance_loads, theta

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
    "ssm": "locality.rebalance.ssm:ssm",
    "local": "locality.rebalance.local:local",
    "follow": "locality.rebalance.local:follow",
}
DEFAULT_METHOD = "mixed"
#: The locality-aware rebalancers: they take ``RebalanceProblem.base_loads`` (load an instance carries
#: whatever the keys do) and the keys' ``affinity`` to servers, ``hop_loads`` and ``state_weight``.
BASE_AWARE = frozenset({"local", "follow"})


def rebalance(problem: RebalanceProblem, method: str = DEFAULT_METHOD, **options) -> RebalanceResult:
    """Rebalance one operator with the rebalancer named ``method``.

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
    if getattr(problem, "base_loads", None) is not None and method not in BASE_AWARE:
        raise InvalidParameterError(
            f"the {method!r} rebalancer does not take base_loads; use one of {sorted(BASE_AWARE)}"
        )
    module, function = METHODS[method].split(":")
    return getattr(importlib.import_module(module), function)(problem, **options)
