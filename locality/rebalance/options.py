"""Which rebalancer adjusts the tables in force, within what bound, and what it does with hot keys.

The online job's rebalancing runs (``locality reconfigure --rebalance``) and the
replay's rebalancer within each window (``locality replay --rebalance``) take
the same settings: :class:`RebalanceOptions`, one frozen object that the online
job's parameters hold as ``rebalance`` and that the replay's
:class:`~locality.rebalance.window.RebalancePolicy` extends with how often it
runs and what its forecast reads. Its checks name its fields as the jobs hold
them (``rebalance.theta_max``: :attr:`locality.errors.LocalityError.parameter`).
"""

from __future__ import annotations

from dataclasses import dataclass

from locality._validation import check_option
from locality.defaults import DEFAULT_SPLIT_MERGE, DEFAULT_STATE_WEIGHT, DEFAULT_THETA_MAX
from locality.errors import parameters_of
from locality.rebalance import METHODS, check_rebalance_bounds, check_split_options

__all__ = ["RebalanceOptions"]


@dataclass(frozen=True)
class RebalanceOptions:
    """A rebalancer of per-key tables over a hash and its settings, checked when built.

    Attributes
    ----------
    method : str
        A rebalancer of :data:`locality.rebalance.METHODS` (``"follow"`` to
        keep locality as keys come and go, ``"local"`` to restore balance too).
    theta_max : float
        The rebalancer's bound: the most ``max |load - fair| / fair`` may be after a run.
    state_weight : float
        ``local`` and ``follow``: local hops one unit of migrated state is worth.
    split_hot_keys : bool
        Split hot keys over several instances by neighbour server (associative
        state only; ``local`` or ``follow``).
    split_share : float or None
        With ``split_hot_keys``: a key is hot when its expected load exceeds
        this share of an instance's fair share. None: when it fits on no
        instance (under ``1 + theta_max`` times the mean even on the least-loaded one).
    split_merge : {"fold", "downstream"}
        How the operator combines a split key's partial states. ``"fold"``:
        they are folded into the key's one instance when the split ends, and
        the partials held elsewhere count as moved state. ``"downstream"``: a
        final aggregation keyed by the key combines them, as with Partial Key
        Grouping; nothing migrates.

    Raises
    ------
    InvalidParameterError
        A field out of its range, or hot-key splitting with a rebalancer that
        does not weigh locality.
    """

    method: str = "local"
    theta_max: float = DEFAULT_THETA_MAX
    state_weight: float = DEFAULT_STATE_WEIGHT
    split_hot_keys: bool = False
    split_share: float | None = None
    split_merge: str = DEFAULT_SPLIT_MERGE

    def __post_init__(self) -> None:
        owner = type(self).__name__
        with parameters_of("rebalance"):
            check_option(self.method, "method", owner, METHODS)
            check_rebalance_bounds(self.theta_max, self.state_weight, owner)
            check_split_options(self.split_merge, self.split_share, self.split_hot_keys, self.method, "method", owner)
