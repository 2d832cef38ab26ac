"""Walk a timed trace window by window and measure what each routing strategy buys on unseen data.

This is the paper's Figure 11 experiment [1]_ on any trace with a timestamp:

- ``hash``: never route; the engine's hash decides everything;
- ``offline``: build tables once from the first window and keep them;
- ``online``: at the start of every window, reconfigure from the windows
  before it (the latest one, the last ``history`` ones, or all of them with
  exponential ``decay``), relabeled against the tables in force so that
  little state moves, published when :func:`~locality.reconfiguration.decide`
  says so (always, by default).

Every window after the first is judged with the tables built *before* it.
Between two reconfigurations a skew rebalancer (``rebalancer="mixed"``, any
of :data:`locality.rebalance.METHODS`) can run every ``rebalance_every``
(e.g. daily) on each operator, from the loads seen since the window began,
to keep instances within ``1 + theta_max`` of the mean as key frequencies drift.

References
----------
.. [1] Caneill, El Rheddane, Leroy, De Palma. "Locality-aware routing in
   stateful streaming applications." Middleware 2016 (section 4.3).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from locality._validation import check_interval, check_option
from locality.counts import KeyCounts, blend, count_keys
from locality.evaluation import estimate_from_counts, replay, report_from_totals
from locality.optimizer import make_fallbacks, optimize
from locality.rebalance.tables import rebalance_tables
from locality.reconfiguration import decide, reconfigure
from locality.routing import RoutingConfiguration
from locality.topology import Topology

__all__ = ["WindowResult", "ReplayResult", "replay_trace", "windows_of", "MODES"]

logger = logging.getLogger(__name__)

MODES = ("online", "offline", "hash")
#: Blended pairs and keys lighter than this are dropped (at decay 0.85 a pair seen once lasts 14 windows).
_MIN_BLENDED_WEIGHT = 0.1


@dataclass
class WindowResult:
    """Figures of one window, measured with the tables built before it (and rebalanced within it)."""

    start: str
    end: str
    tuples: int
    locality: float
    hash_locality: float
    imbalance: dict[str, float]
    hash_imbalance: dict[str, float]
    migration_cost: float
    moved_keys: int
    migration_cost_without_relabeling: float | None
    rebalance_cost: float
    table_entries: dict[str, int]
    published: bool
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ReplayResult:
    """Every window's figures and their means (over the windows after the first)."""

    mode: str
    period: str
    windows: list[WindowResult] = field(default_factory=list)

    def _mean(self, attr: str) -> float:
        values = [getattr(w, attr) for w in self.windows[1:]]
        return float(np.mean(values)) if values else float("nan")

    @property
    def mean_locality(self) -> float:
        return self._mean("locality")

    @property
    def mean_hash_locality(self) -> float:
        return self._mean("hash_locality")

    def mean_imbalance(self) -> dict[str, float]:
        """Per operator, the mean over windows of the window's imbalance."""
        ops = self.windows[0].imbalance.keys() if self.windows else []
        return {op: float(np.mean([w.imbalance[op] for w in self.windows[1:]])) for op in ops}

    def mean_migration_cost(self) -> float:
        """Mean share of state moved per reconfiguration (windows that published one, the first excepted)."""
        moved = [w.migration_cost for w in self.windows if w.published and w.reason != "first configuration"]
        return float(np.mean(moved)) if moved else 0.0

    def mean_worst_imbalance(self) -> float:
        """Mean over windows of the worst operator's imbalance."""
        return float(np.mean([max(w.imbalance.values()) for w in self.windows[1:]]))

    def to_dict(self) -> dict:
        return {
            "mode": self.mode,
            "period": self.period,
            "mean_locality": self.mean_locality,
            "mean_hash_locality": self.mean_hash_locality,
            "mean_imbalance": self.mean_imbalance(),
            "mean_worst_imbalance": self.mean_worst_imbalance(),
            "mean_migration_cost": self.mean_migration_cost(),
            "mean_rebalance_cost": self._mean("rebalance_cost"),
            "windows": [w.to_dict() for w in self.windows],
        }

    def frame(self) -> pd.DataFrame:
        """One row per window (imbalance per operator as ``imbalance_<op>`` columns)."""
        rows = []
        for w in self.windows:
            row = {k: v for k, v in w.to_dict().items() if not isinstance(v, dict)}
            row.update({f"imbalance_{op}": v for op, v in w.imbalance.items()})
            row.update({f"hash_imbalance_{op}": v for op, v in w.hash_imbalance.items()})
            rows.append(row)
        return pd.DataFrame(rows)


def windows_of(
    ts: pd.Series, period: str, start: str | pd.Timestamp | None = None
) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """Consecutive ``[start, end)`` windows of length ``period`` covering ``ts`` (from its first day)."""
    step = pd.Timedelta(period)
    first = pd.Timestamp(start) if start is not None else ts.min().floor("D")
    if first.tzinfo is None and ts.dt.tz is not None:
        first = first.tz_localize(ts.dt.tz)
    last = ts.max()
    bounds = []
    while first <= last:
        bounds.append((first, first + step))
        first = first + step
    return bounds


def _window_figures(
    config: RoutingConfiguration,
    frame: pd.DataFrame,
    ops: list[str],
    rebalancer: str | None,
    rebalance_every: str,
    theta_max: float,
    table_cap: int | None,
    ts: str,
) -> tuple[object, RoutingConfiguration, float]:
    """The window's evaluation, rebalancing every ``rebalance_every`` if asked; also the final config."""
    if rebalancer is None:
        optimized, hashed = replay(frame, config)
        return report_from_totals(config, optimized, hashed), config, 0.0
    optimized = hashed = None
    cost = 0.0
    for start, end in windows_of(frame[ts], rebalance_every, frame[ts].min().floor("D")):
        part = frame[(frame[ts] >= start) & (frame[ts] < end)]
        if optimized is not None:
            seen = frame[frame[ts] < start]
            config, moved, _ = rebalance_tables(
                config, seen[ops], method=rebalancer, theta_max=theta_max, table_cap=table_cap
            )
            cost += moved
        if len(part) == 0:
            continue
        o, h = replay(part, config)
        optimized = o if optimized is None else optimized + o
        hashed = h if hashed is None else hashed + h
    return report_from_totals(config, optimized, hashed), config, cost


def replay_trace(
    trace: pd.DataFrame,
    topology: Topology,
    *,
    ts: str = "ts",
    period: str = "7D",
    mode: str = "online",
    alpha: float = 1.03,
    fallback: str = "kafka",
    history: int | None = 1,
    decay: float | None = None,
    min_gain: float | None = None,
    max_imbalance: float | None = None,
    rebalancer: str | None = None,
    rebalance_every: str = "1D",
    theta_max: float = 0.08,
    table_cap: int | None = None,
    seed: int = 0,
) -> ReplayResult:
    """Replay ``trace`` window by window under one routing strategy.

    Parameters
    ----------
    trace : pandas.DataFrame
        Key columns named like ``topology.operators`` and a timestamp column ``ts``.
    topology : Topology
    period : str
        Window length (a pandas offset: ``"7D"``, ``"1D"``, ``"30D"``).
    mode : {"online", "offline", "hash"}
    alpha, fallback, seed
        As for :class:`~locality.optimizer.LocalityOptimizer`.
    history : int or None, default 1
        Online: build from the last ``history`` windows (None: all of them).
    decay : float in (0, 1], optional
        Online: weigh a window ``age`` windows old by ``decay ** age``.
    min_gain, max_imbalance : float, optional
        Online: publish only when :func:`~locality.reconfiguration.decide`
        agrees with these thresholds (default: publish every window).
    rebalancer : str, optional
        A skew rebalancer run every ``rebalance_every`` within each window.
    theta_max, table_cap
        The rebalancer's bound and table cap.

    Returns
    -------
    ReplayResult
    """
    check_option(mode, "mode", "replay_trace", MODES)
    check_interval(alpha, "alpha", "replay_trace", lower=1.0)
    ops = list(topology.operators)
    frame = trace.dropna(subset=ops).sort_values(ts, kind="stable")
    fallbacks = make_fallbacks(topology, fallback)
    hashed = RoutingConfiguration.hash_routing(topology, fallbacks, {"mode": "hash"})
    config = hashed
    past: list[KeyCounts] = []  # counts of every window so far, oldest first
    result = ReplayResult(mode, period)
    for start, end in windows_of(frame[ts], period):
        window = frame[(frame[ts] >= start) & (frame[ts] < end)]
        step = _Step(0.0, 0, None, False, "hash routing" if mode == "hash" else "first window: no tables yet")
        if mode == "online" and past and config is not hashed:
            counts = blend(past, windows=history, decay=decay, min_weight=_MIN_BLENDED_WEIGHT)
            config, step = _reconfigure(config, counts, past[-1], fallbacks, alpha, seed, min_gain, max_imbalance)
        elif mode != "hash" and past and config is hashed:
            config = optimize(past[0].graph(), topology, fallbacks, alpha=alpha, seed=seed).config
            step = _Step(0.0, 0, None, True, "first configuration")
        elif mode == "offline" and past:
            step = _Step(0.0, 0, None, False, "offline: tables built once from the first window")
        if len(window) == 0:
            continue
        rebalance = rebalancer if config is not hashed else None
        report, config, rebalance_cost = _window_figures(
            config, window, ops, rebalance, rebalance_every, theta_max, table_cap, ts
        )
        result.windows.append(
            WindowResult(
                start=str(start),
                end=str(end),
                tuples=report.optimized.tuples,
                locality=report.optimized.locality,
                hash_locality=report.hash.locality,
                imbalance=report.optimized.imbalance,
                hash_imbalance=report.hash.imbalance,
                migration_cost=step.moved_share,
                moved_keys=step.moved_keys,
                migration_cost_without_relabeling=step.raw_share,
                rebalance_cost=rebalance_cost,
                table_entries=config.table_sizes(),
                published=step.published,
                reason=step.reason,
            )
        )
        past.append(count_keys(window, ops))
        logger.info("window [%s, %s): %d tuples, locality %.3f", start, end, len(window), report.optimized.locality)
    return result


@dataclass(frozen=True)
class _Step:
    """What the start of a window did to the tables."""

    moved_share: float
    moved_keys: int
    raw_share: float | None
    published: bool
    reason: str


def _reconfigure(config, counts, latest, fallbacks, alpha, seed, min_gain, max_imbalance):
    """The online step: new tables from ``counts`` relabeled against ``config``, kept or published."""
    topology = config.topology
    state = {op: latest.key_loads[op].set_index("key")["weight"] for op in topology.operators}
    step = reconfigure(counts.graph(), topology, config, fallbacks, alpha=alpha, seed=seed, state=state)
    if min_gain is None:
        reason = "every window (no min_gain)"
    else:
        verdict = decide(
            _estimate(config, latest),
            _estimate(step.config, latest),
            step.plan,
            alpha=alpha,
            min_gain=min_gain,
            max_imbalance=max_imbalance,
        )
        if not verdict.publish:
            return config, _Step(0.0, 0, None, False, verdict.reason)
        reason = verdict.reason
    return step.config, _Step(step.plan.cost_share, step.plan.moved_keys, step.unrelabeled_cost, True, reason)


def _estimate(config: RoutingConfiguration, counts: KeyCounts):
    return estimate_from_counts(config, counts, int(counts.total_weight)).optimized
