"""Gedik's hybrid partitioning function: which keys get an explicit entry, and the resources it balances.

The partitioning function of Gedik [1]_ is ``p = <H_p, H_c>``: an explicit
map ``H_p`` for the keys whose frequency is at least ``delta``, and a
consistent hash ``H_c`` for every other key. In a :class:`RebalanceProblem`
the consistent-hash instance of each key is ``problem.fallback``, so the
hybrid function is a rebalancer's ``assignment``: the tracked keys where a
construction (:func:`~locality.rebalance.scan.scan`,
:func:`~locality.rebalance.redist.redist`,
:func:`~locality.rebalance.readj.readj`) put them, every other key on its
fallback; the routing table keeps the entries that differ from the fallback.

Resources. Each key costs memory (``s``), processing (``c``) and network
(``n``) as a *resource function* of its frequency ``f`` (Section 2 of [1]_),
written as three letters in that order, each one of

* ``C`` constant (``beta(f) = 1``: balanced by the hash for free, left out of
  the balance penalty, Section 4.4),
* ``L`` linear (``beta(f) = f``), ``Q`` quadratic (``beta(f) = f**2``),
* ``M`` measured: the problem's own figures, ``state_sizes`` for memory and
  ``loads`` for processing and network.

The frequency of a key defaults to its share of the load, ``loads / loads.sum()``.
The paper's default is ``"LCL"`` (time-window state, incremental aggregation).
Migration is always measured in ``state_sizes`` (the state of keys whose
instance changes), whatever the memory letter. An instance's load in resource
``k`` is ``sum beta_k(f)`` over its keys: Eq. 3 prints an extra factor ``f``
for processing, which every other use in the paper (Eqs. 1, 5, 16-17, the
toy example of Fig. 1) contradicts (seeds-algorithms.md §2.1).

References
----------
.. [1] B. Gedik. "Partitioning functions for stateful data parallelism in
   stream processing." The VLDB Journal 23(4): 517-539, 2014.
   https://doi.org/10.1007/s00778-013-0335-9
"""

from __future__ import annotations

import logging
import math

import numpy as np

from locality._validation import check_integer, check_interval
from locality.errors import InvalidParameterError
from locality.rebalance._base import RebalanceProblem

__all__ = [
    "RESOURCE_LETTERS",
    "check_resources",
    "theta_from_ratio",
    "ratio_from_theta",
    "frequency_threshold",
    "refine_threshold",
    "key_frequencies",
    "resource_costs",
    "tracked_keys",
]

logger = logging.getLogger(__name__)

RESOURCE_LETTERS = "CLQM"
"""Resource-function letters: Constant, Linear, Quadratic, Measured."""


def check_resources(resources: object, owner: str) -> str:
    """Return ``resources`` if it is three letters of :data:`RESOURCE_LETTERS` (memory, processing, network)."""
    if not isinstance(resources, str) or len(resources) != 3 or any(c not in RESOURCE_LETTERS for c in resources):
        raise InvalidParameterError(
            f"the 'resources' parameter of {owner} must be 3 letters from {RESOURCE_LETTERS!r} "
            f"(memory, processing, network), e.g. 'LCL'; got {resources!r}",
            parameter="resources",
        )
    return resources


def theta_from_ratio(ratio: float, n_channels: int) -> float:
    """Deviation bound ``theta`` implied by a bound ``ratio`` on max / min channel load (Eq. 15 of [1]_, its alpha).

    The worst case under ``max / min <= ratio`` is one channel at ``ratio * x``
    and the others at ``x``, so ``theta = (ratio - 1)(N - 1) / (ratio + N - 1)``.
    (Gedik calls the ratio alpha; in the rest of locality alpha bounds max / fair.)

    >>> round(theta_from_ratio(1.2, 10), 4)
    0.1765
    """
    ratio = check_interval(ratio, "ratio", "theta_from_ratio", lower=1.0)
    n = check_integer(n_channels, "n_channels", "theta_from_ratio", lower=2)
    return (ratio - 1.0) * (n - 1) / (ratio + n - 1)


def ratio_from_theta(theta: float, n_channels: int) -> float:
    """Inverse of :func:`theta_from_ratio`: ``ratio = (N - 1)(1 + theta) / (N - 1 - theta)``."""
    n = check_integer(n_channels, "n_channels", "ratio_from_theta", lower=2)
    theta = check_interval(theta, "theta", "ratio_from_theta", lower=0.0, upper=n - 1.0, closed="left")
    return (n - 1) * (1.0 + theta) / (n - 1 - theta)


def _check_threshold_args(owner: str, n_channels: int, theta: float, sigma: float, resources: str) -> tuple:
    n = check_integer(n_channels, "n_channels", owner, lower=1)
    theta = check_interval(theta, "theta", owner, lower=0.0)
    sigma = check_interval(sigma, "sigma", owner, lower=0.0, upper=1.0, closed="right")
    return n, theta, sigma, check_resources(resources, owner)


def frequency_threshold(
    n_channels: int,
    theta: float,
    *,
    sigma: float = 0.1,
    resources: str = "LCL",
    n_domain: int | None = None,
) -> float:
    """The frequency ``delta`` above which a key needs an explicit entry (Eqs. 16-17 of [1]_).

    An untracked key lands where the hash puts it, so its cost in every
    balanced resource must stay within the share ``sigma`` of the tolerated
    deviation: ``beta_k(delta_k) <= sigma * theta * mean_k``, and
    ``delta = min_k delta_k``. Closed forms: constant ``1`` (track nothing),
    linear ``sigma * theta / N``, quadratic ``sqrt(sigma * theta / (|D| N))``
    (the mean is bounded by the uniform case, ``1 / |D|``, which is a lower
    bound: the paper calls it an upper bound, but the resulting ``delta`` is
    conservative either way). A measured letter is treated as linear (state
    over a time window grows with frequency).

    Parameters
    ----------
    n_channels : int
        Number of channels (instances) ``N`` of the next period.
    theta : float
        Tolerated relative deviation from the mean load (see :func:`theta_from_ratio`).
    sigma : float
        Share of the tolerated deviation given to untracked keys, in ``(0, 1]`` (paper: 0.1).
    resources : str
        Resource-function letters (memory, processing, network); see the module docstring.
    n_domain : int, optional
        Domain size ``|D|``, needed when a letter is ``Q``.

    Returns
    -------
    float
        ``delta`` in ``[0, 1]``; query a lossy counter with support ``delta``
        (and ``epsilon`` about ``delta / 10``).
    """
    n, theta, sigma, resources = _check_threshold_args("frequency_threshold", n_channels, theta, sigma, resources)
    deltas = [1.0]
    for letter in resources:
        if letter in "LM":
            deltas.append(sigma * theta / n)
        elif letter == "Q":
            if n_domain is None:
                raise InvalidParameterError(
                    "the 'n_domain' parameter of frequency_threshold is required with a quadratic resource; got None",
                    parameter="n_domain",
                )
            d = check_integer(n_domain, "n_domain", "frequency_threshold", lower=1)
            deltas.append(math.sqrt(sigma * theta / (d * n)))
    return min(deltas)


def refine_threshold(
    frequencies: np.ndarray,
    n_channels: int,
    theta: float,
    *,
    sigma: float = 0.1,
    resources: str = "LCL",
    n_domain: int,
) -> float:
    """Gedik's quadratic post-processing: a higher ``delta`` once the frequent keys are known.

    The first, conservative quadratic threshold tracks many keys. With the
    frequencies of the keys found (``frequencies``), estimate the total
    quadratic load, spreading the untracked mass evenly over the other
    ``|D| - |I|`` keys, ``L = sum f^2 + (|D| - |I|) * ((1 - sum f) / (|D| - |I|))^2``,
    and recompute ``delta_k = sqrt(sigma * theta * L / N)``; keep the keys at
    or above the result. Linear and constant letters are unchanged.
    (The paper calls the even spread the worst case; by convexity it is the
    lightest, so the refined threshold stays conservative.)
    """
    n, theta, sigma, resources = _check_threshold_args("refine_threshold", n_channels, theta, sigma, resources)
    d = check_integer(n_domain, "n_domain", "refine_threshold", lower=1)
    f = np.asarray(frequencies, dtype=float)
    rest = max(d - f.shape[0], 0)
    mass = max(1.0 - float(f.sum()), 0.0)
    quad = float(np.sum(f * f)) + (mass * mass / rest if rest else 0.0)
    deltas = [1.0]
    for letter in resources:
        if letter in "LM":
            deltas.append(sigma * theta / n)
        elif letter == "Q":
            deltas.append(math.sqrt(sigma * theta * quad / n))
    return min(deltas)


def key_frequencies(problem: RebalanceProblem, frequencies: np.ndarray | None = None, owner: str = "") -> np.ndarray:
    """Frequency ``f(k)`` of each key: ``frequencies`` if given (values in ``[0, 1]``), else the load share."""
    if frequencies is None:
        total = problem.loads.sum()
        return problem.loads / total if total > 0 else np.zeros_like(problem.loads)
    f = np.asarray(frequencies, dtype=float)
    if f.shape != problem.loads.shape or not np.all(np.isfinite(f)) or np.any(f < 0) or np.any(f > 1):
        raise InvalidParameterError(
            f"the 'frequencies' parameter of {owner or 'key_frequencies'} must be a 1-d array of "
            f"{problem.n_keys} values in [0, 1]; got shape {f.shape}",
            parameter="frequencies",
        )
    return f


def resource_costs(problem: RebalanceProblem, resources: str, frequencies: np.ndarray) -> np.ndarray:
    """Per-key cost of each *balanced* resource, shape ``(K, R)``; constant letters are left out."""
    measured = {0: problem.state_sizes, 1: problem.loads, 2: problem.loads}
    columns = []
    for position, letter in enumerate(resources):
        if letter == "L":
            columns.append(frequencies)
        elif letter == "Q":
            columns.append(frequencies * frequencies)
        elif letter == "M":
            columns.append(measured[position])
    return np.stack(columns, axis=1) if columns else np.zeros((problem.n_keys, 0))


def tracked_keys(
    problem: RebalanceProblem,
    *,
    sigma: float = 0.1,
    resources: str = "LCL",
    delta: float | None = None,
    frequencies: np.ndarray | None = None,
) -> np.ndarray:
    """The keys that get an explicit entry, ``D_p^(t+1)``, in decreasing frequency (ties by key).

    With ``delta`` given: the keys with ``f >= delta``. Otherwise the
    threshold rule of Eq. 16 of [1]_ on the exact costs the problem holds: a
    key is tracked when, for some balanced resource ``k``, its cost is at
    least ``sigma * theta_max * mean_k`` (``mean_k`` = total cost over
    ``n_instances``). For linear resources this is ``f >= sigma * theta / N``
    (Eq. 17); for quadratic ones it is the post-processed threshold of
    :func:`refine_threshold` computed with the exact second moment.
    With ``problem.table_cap`` set, only the ``table_cap`` most frequent are kept
    (so the routing table can never exceed the cap).
    """
    owner = "tracked_keys"
    resources = check_resources(resources, owner)
    sigma = check_interval(sigma, "sigma", owner, lower=0.0, upper=1.0, closed="right")
    if delta is not None:
        delta = check_interval(delta, "delta", owner, lower=0.0, upper=1.0)
    f = key_frequencies(problem, frequencies, owner)
    return _select_tracked(problem, f, resource_costs(problem, resources, f), sigma, delta)


def _select_tracked(
    problem: RebalanceProblem, f: np.ndarray, costs: np.ndarray, sigma: float, delta: float | None
) -> np.ndarray:
    """:func:`tracked_keys` on checked input (frequencies and balanced-resource costs computed)."""
    if delta is not None:
        mask = f >= delta
    else:
        # Eq. 16: tracked when some balanced resource's cost reaches sigma * theta * its mean per instance.
        mask = np.zeros(problem.n_keys, dtype=bool)
        for column in costs.T:
            total = column.sum()
            if total > 0:  # a resource nobody uses needs no balancing
                mask |= column >= sigma * problem.theta_max * total / problem.n_instances
    keys = np.flatnonzero(mask)
    keys = keys[np.lexsort((keys, -f[keys]))]
    if problem.table_cap is not None and keys.shape[0] > problem.table_cap:
        logger.info("tracking the %d most frequent of %d keys (table_cap)", problem.table_cap, keys.shape[0])
        keys = keys[: problem.table_cap]
    return keys
