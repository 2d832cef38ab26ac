"""Walk a timed trace window by window and measure what each routing strategy buys on unseen data.

This is the paper's Figure 11 experiment [1]_ on any trace with a timestamp:

- ``hash``: no locality tables; the engine's hash places every key (and a
  rebalancer, if one is given, moves keys from there: Fang et al.'s setting);
- ``offline``: build tables once from the first window and keep them;
- ``online``: at the start of every window, reconfigure from the windows
  before it (the latest one, the last ``history`` ones, or all of them with
  exponential ``decay``), relabeled against the tables in force so that
  little state moves, published when :func:`~locality.reconfiguration.decide`
  says so (always, by default).

Every window after the first is judged with the tables built *before* it,
on the window as a whole and day by day (a week hides the bursts an operator
suffers within it). The reconfiguration can balance a *forecast* of next
window's key loads (``forecast``, :mod:`locality.forecast`) instead of the
blended history its edges come from.

Between two reconfigurations a rebalancer (``rebalance``, any of
:data:`locality.rebalance.METHODS`, or a whole
:class:`~locality.rebalance.window.RebalancePolicy`) can run every
``rebalance.every`` on each operator (:class:`~locality.rebalance.window.WindowRouter`): the
locality-aware ``"local"`` balances each balance window's load (what was
served plus the forecast of the rest), the load-only ones (``"mixed"``...)
the loads seen since the window began, to keep instances within
``1 + theta_max`` of the mean as key frequencies drift. ``split_hot_keys``
splits keys too heavy for any instance (associative state only).

References
----------
.. [1] Caneill, El Rheddane, Leroy, De Palma. "Locality-aware routing in
   stateful streaming applications." Middleware 2016 (section 4.3).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from locality._validation import boundary, check_integer, check_interval, check_option, check_period
from locality.counts import KeyCounts, blend, count_keys
from locality.defaults import (
    DEFAULT_ALPHA,
    DEFAULT_HASH,
    DEFAULT_MIN_BLENDED_WEIGHT,
    DEFAULT_PERIOD,
    DEFAULT_REPLAY_MODE,
    DEFAULT_SEED,
    DEFAULT_TS,
)
from locality.errors import InvalidParameterError, TraceError
from locality.evaluation import ReplayTotals, estimate_from_counts, hop_name
from locality.forecast import forecast_counts, parse_forecast
from locality.imbalance import imbalance
from locality.optimizer import check_optimizer_parameters, make_fallbacks, optimize
from locality.rebalance.window import RebalancePolicy, WindowRouter, WindowRoutes
from locality.reconfiguration import decide, reconfigure
from locality.routing import RoutingConfiguration
from locality.time_range import in_column_zone, to_utc
from locality.topology import Topology

__all__ = [
    "WindowResult",
    "ReplayResult",
    "replay_trace",
    "replay_windows",
    "check_replay_options",
    "windows_of",
    "MODES",
]

logger = logging.getLogger(__name__)

MODES = ("online", "offline", "hash")


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
    daily_worst_imbalance: list[float] = field(default_factory=list)
    hash_daily_worst_imbalance: list[float] = field(default_factory=list)
    rebalance_moved_keys: int = 0
    hot_keys: dict[str, int] = field(default_factory=dict)
    split_keys: dict[str, int] = field(default_factory=dict)
    fold_cost: float = 0.0

    @property
    def worst_imbalance(self) -> float:
        return max(self.imbalance.values())

    @property
    def state_moved(self) -> float:
        """Share of the window's state moved: by the reconfiguration, the rebalancer and the fold of split keys."""
        return self.migration_cost + self.rebalance_cost + self.fold_cost

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
        return float(np.mean([w.worst_imbalance for w in self.windows[1:]]))

    def mean_daily_worst_imbalance(self, hashed: bool = False) -> float:
        """Mean over the days of the windows after the first of the worst operator's imbalance that day."""
        days = [
            d for w in self.windows[1:] for d in (w.hash_daily_worst_imbalance if hashed else w.daily_worst_imbalance)
        ]
        return float(np.mean(days)) if days else float("nan")

    def mean_state_moved(self) -> float:
        """Mean over the windows after the first of the share of state moved (reconfiguration, rebalancing, fold)."""
        return self._mean("state_moved")

    def to_dict(self) -> dict:
        return {
            "mode": self.mode,
            "period": self.period,
            "mean_locality": self.mean_locality,
            "mean_hash_locality": self.mean_hash_locality,
            "mean_imbalance": self.mean_imbalance(),
            "mean_worst_imbalance": self.mean_worst_imbalance(),
            "mean_daily_worst_imbalance": self.mean_daily_worst_imbalance(),
            "mean_hash_daily_worst_imbalance": self.mean_daily_worst_imbalance(hashed=True),
            "mean_migration_cost": self.mean_migration_cost(),
            "mean_rebalance_cost": self._mean("rebalance_cost"),
            "mean_fold_cost": self._mean("fold_cost"),
            "mean_state_moved": self.mean_state_moved(),
            "windows": [w.to_dict() for w in self.windows],
        }

    def frame(self) -> pd.DataFrame:
        """One row per window (imbalance per operator as ``imbalance_<op>`` columns)."""
        rows = []
        for w in self.windows:
            row = {k: v for k, v in w.to_dict().items() if not isinstance(v, (dict, list))}
            row["worst_imbalance"] = w.worst_imbalance
            row["daily_worst_imbalance"] = float(np.mean(w.daily_worst_imbalance)) if w.daily_worst_imbalance else None
            row["state_moved"] = w.state_moved
            row.update({f"imbalance_{op}": v for op, v in w.imbalance.items()})
            row.update({f"hash_imbalance_{op}": v for op, v in w.hash_imbalance.items()})
            rows.append(row)
        return pd.DataFrame(rows)


#: Windows a replay walks at most: more is a period too short for the trace (1s over a year: 31 million windows,
#: a replay that would never end), refused before any work.
MAX_WINDOWS = 100_000
#: Rebalancing runs a replay makes at most, over all its windows (e.g. every minute for two years: 1,051,200).
MAX_REBALANCE_RUNS = 1_000_000


def windows_of(
    ts: pd.Series, period: str, start: str | pd.Timestamp | None = None, *, owner: str = "windows_of"
) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """Consecutive ``[start, end)`` windows of length ``period`` covering ``ts``.

    A length (``"7D"``, ``"12h"``) starts the first window on the first day of
    ``ts``; a calendar period (``"YS"``, ``"QS"``, ``"MS"``:
    :func:`~locality._validation.check_period`) on the first day of the year,
    quarter or month holding it, so that every window is one calendar period.
    ``start``, when given, starts the first window instead; without a zone it
    is UTC (:mod:`locality.time_range`). Bounds are spelled as ``ts`` spells
    time. No windows when ``ts`` holds no time.

    Raises
    ------
    InvalidParameterError
        ``period`` is neither a positive duration nor a calendar period, or
        cuts the trace into more than :data:`MAX_WINDOWS` windows.
    """
    step = check_period(period, "period", owner)
    times = ts.dropna()
    if times.empty:
        return []
    if start is not None:
        first = in_column_zone(to_utc(start, "start"), ts)
    elif isinstance(step, pd.Timedelta):
        first = times.min().floor("D")
    else:
        first = step.rollback(times.min().floor("D"))
    last = times.max()
    if isinstance(step, pd.Timedelta):  # counted before any is built: a period of 1ns over a year is refused at once
        count = int((last - first) // step) + 1 if last >= first else 0
        if count > MAX_WINDOWS:
            raise _too_many_windows(period, owner, first, last, f"{count:,}")
        return [(first + i * step, first + (i + 1) * step) for i in range(count)]
    bounds = []
    while first <= last:
        if len(bounds) == MAX_WINDOWS:
            raise _too_many_windows(period, owner, bounds[0][0], last, "more")
        bounds.append((first, first + step))
        first = first + step
    return bounds


def _too_many_windows(period: str, owner: str, first, last, count: str) -> InvalidParameterError:
    return InvalidParameterError(
        f"the 'period' parameter of {owner} must cut the trace into at most {MAX_WINDOWS:,} windows; "
        f"{period!r} cuts {first} .. {last} into {count} (a longer period, or a shorter time range)",
        parameter="period",
    )


def _figures(config: RoutingConfiguration, routes: Mapping[str, np.ndarray], rows: int) -> ReplayTotals:
    """Replay totals of rows routed to ``routes`` (an instance per row and operator; every row weighs 1)."""
    topo = config.topology
    ops = list(topo.operators)
    servers = {op: topo.instance_servers(op)[routes[op]] for op in ops}
    local = {hop_name(a, b): float(np.count_nonzero(servers[a] == servers[b])) for a, b in zip(ops, ops[1:])}
    loads = {op: np.bincount(routes[op], minlength=topo.n_instances(op)).astype(float) for op in ops}
    return ReplayTotals(rows, 0, float(rows), loads, local)


def _daily_worst(topology: Topology, routes: Mapping[str, np.ndarray], day: np.ndarray) -> list[float]:
    """Worst operator's imbalance on each day (``day`` numbers the rows' days, 0 first)."""
    out = []
    for d in range(int(day.max()) + 1 if day.size else 0):
        rows = day == d
        total = float(np.count_nonzero(rows))
        if total == 0:
            continue
        worst = 0.0
        for op, r in routes.items():
            shares = topology.instance_shares(op)
            worst = max(worst, imbalance(np.bincount(r[rows], minlength=shares.shape[0]).astype(float), shares))
        out.append(worst)
    return out


@boundary
def replay_trace(
    trace: pd.DataFrame,
    topology: Topology,
    *,
    ts: str = DEFAULT_TS,
    period: str = DEFAULT_PERIOD,
    mode: str = DEFAULT_REPLAY_MODE,
    alpha: float = DEFAULT_ALPHA,
    hash: str = DEFAULT_HASH,
    history: int | None = 1,
    decay: float | None = None,
    min_gain: float | None = None,
    max_imbalance: float | None = None,
    rebalance: str | RebalancePolicy | None = None,
    table_cap: int | None = None,
    forecast: str | None = None,
    seed: int = DEFAULT_SEED,
    incremental: bool = False,
) -> ReplayResult:
    """Replay ``trace`` window by window under one routing strategy.

    Parameters
    ----------
    trace : pandas.DataFrame
        Key columns named like ``topology.operators`` and a timestamp column ``ts``.
    topology : Topology
    period : str
        Window length (a pandas offset: ``"7D"``, ``"1D"``, ``"30D"``), or a
        calendar period (``"YS"`` years, ``"QS"`` quarters, ``"MS"`` months).
    mode : {"online", "offline", "hash"}
    alpha, hash, seed
        As for :class:`~locality.optimizer.LocalityOptimizer`.
    history : int or None, default 1
        Online: build from the last ``history`` windows (None: all of them).
    decay : float in [0, 1], optional
        Online: weigh a window ``age`` windows old by ``decay ** age`` (0:
        the latest window alone, as the online job's ``decay=0``).
    min_gain, max_imbalance : float, optional
        Online: publish only when :func:`~locality.reconfiguration.decide`
        agrees with these thresholds (default: publish every window).
    rebalance : str or RebalancePolicy, optional
        A rebalancer run within each window: a whole
        :class:`~locality.rebalance.window.RebalancePolicy` (how often, its
        bound, forecast, balance window, hot-key splitting...), or the name of
        one, run with the policy's defaults and ``table_cap``.
    table_cap : int, optional
        Most entries of each table: the reconfigurations' (``max_entries``)
        and the rebalancer's, counted one way (keys off their fallback). A
        :class:`RebalancePolicy` with its own ``table_cap`` sets it when
        this is None.
    forecast : str, optional
        Online: balance the reconfiguration on this forecast of each key's
        next-window load (:func:`locality.forecast.parse_forecast` form, e.g.
        ``"decay:0.3"``) instead of the blended history; the edges keep the
        blended history.
    incremental : bool, default False
        Online: start each reconfiguration from the tables in force (METIS
        re-cuts the keys another server now draws more, and their undecided
        neighbours; the rest stays) instead of a new METIS partition of the
        whole graph (:func:`~locality.reconfiguration.reconfigure`).

    Returns
    -------
    ReplayResult

    Raises
    ------
    TraceError
        The trace has fewer than two windows of ``period`` (the replay measures
        the windows after the first), or no row with every key and a time.
    InvalidParameterError
        A parameter out of its range, or a period or a rebalancer's interval
        that would make more windows or runs than a replay walks.
    """
    owner = "replay_trace"
    check_option(mode, "mode", owner, MODES)
    check_replay_options(
        alpha=alpha, history=history, decay=decay, min_gain=min_gain, max_imbalance=max_imbalance, seed=seed
    )
    if table_cap is not None:
        check_integer(table_cap, "table_cap", owner, lower=0)
    policy = rebalance
    if isinstance(rebalance, str):
        policy = RebalancePolicy(method=rebalance, table_cap=table_cap)
    load_forecast = parse_forecast(forecast) if forecast is not None else None
    if table_cap is None and policy is not None:
        table_cap = policy.table_cap
    ops = list(topology.operators)
    frame = trace.dropna(subset=ops).sort_values(ts, kind="stable")
    windows = replay_windows(frame[ts], period, owner)
    if policy is not None:
        _check_runs(policy, windows, period, owner)
    fallbacks = make_fallbacks(topology, hash)
    hashed = RoutingConfiguration.hash_routing(topology, fallbacks, {"mode": "hash"})
    config, graph = hashed, None
    past: list[KeyCounts] = []  # counts of every window so far, oldest first
    result = ReplayResult(mode, period)
    for start, end in windows:
        window = frame[(frame[ts] >= start) & (frame[ts] < end)]
        step = _Step(0.0, 0, None, False, "hash routing" if mode == "hash" else "first window: no tables yet")
        if mode == "online" and past and config is not hashed:
            counts = blend(past, windows=history, decay=decay, min_weight=DEFAULT_MIN_BLENDED_WEIGHT)
            if load_forecast is not None:
                counts = forecast_counts(counts, past, load_forecast[0], **load_forecast[1])
            config, graph, step = _reconfigure(
                config, graph, counts, past[-1], fallbacks, alpha, seed, min_gain, max_imbalance, table_cap, incremental
            )
        elif mode != "hash" and past and config is hashed:
            graph = past[0].graph()
            built = optimize(graph, topology, fallbacks, alpha=alpha, seed=seed, max_entries=table_cap)
            config = built.config
            step = _Step(0.0, 0, None, True, "first configuration", _hot(built))
        elif mode == "offline" and past:
            step = _Step(0.0, 0, None, False, "offline: tables built once from the first window")
        if len(window) == 0:
            continue
        previous = {op: past[-1].key_load(op) for op in ops} if past else None
        warmup = None
        if policy is not None:
            opened = start - pd.Timedelta(policy.history)
            warmup = frame.loc[(frame[ts] >= opened) & (frame[ts] < start), [*ops, ts]]
        router = WindowRouter(
            config, window[[*ops, ts]], ts=ts, start=start, end=end, graph=graph, previous=previous, warmup=warmup
        )
        waiting = mode != "hash" and config is hashed  # online and offline rebalance their tables, once built
        routed = router.route(None if waiting else policy)
        config = routed.config
        result.windows.append(_window_result(start, end, config, routed, window[ts], step))
        past.append(count_keys(window, ops))
        logger.info("window [%s, %s): %d tuples, locality %.3f", start, end, len(window), result.windows[-1].locality)
    return result


def replay_windows(ts: pd.Series, period: str, owner: str = "replay_trace") -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """The windows a replay walks (:func:`windows_of`): at least two, since it measures the windows after the first.

    Raises
    ------
    TraceError
        ``ts`` holds no time, or fewer than two windows of ``period``
        (``parameter``: ``period``, the remedy when there is a row).
    """
    windows = windows_of(ts, period, owner=owner)
    if len(windows) < 2:
        times = ts.dropna()
        span = "no row with every key and a time" if times.empty else f"{times.min()} .. {times.max()}"
        raise TraceError(
            f"the trace to replay holds {span}: {len(windows)} window of {period}; a replay measures the windows "
            "after the first, so it needs two: a shorter period or a longer time range",
            parameter=None if times.empty else "period",
        )
    return windows


def _check_runs(policy: RebalancePolicy, windows: list, period: str, owner: str) -> None:
    """Raise unless the rebalancer's interval makes at most :data:`MAX_REBALANCE_RUNS` runs over ``windows``."""
    every = pd.Timedelta(policy.every)
    runs = sum(-(-(end - start) // every) for start, end in windows)
    if runs > MAX_REBALANCE_RUNS:
        raise InvalidParameterError(
            f"the 'every' parameter of {type(policy).__name__} must make at most {MAX_REBALANCE_RUNS:,} rebalancing "
            f"runs of {owner}; {policy.every!r} over {len(windows):,} windows of {period} makes {runs:,}",
            parameter="rebalance.every",
        )


def check_replay_options(
    *,
    alpha: float = DEFAULT_ALPHA,
    history: int | None = None,
    decay: float | None = None,
    min_gain: float | None = None,
    max_imbalance: float | None = None,
    seed: int = DEFAULT_SEED,
) -> None:
    """Raise unless :func:`replay_trace` can use these options (checked before any window, or any reading).

    The online mode's options are checked here rather than when the first
    reconfiguration reads them, which a short trace may never reach.
    """
    owner = "replay_trace"
    check_optimizer_parameters(owner, alpha=alpha, seed=seed)
    if history is not None:
        check_integer(history, "history", owner, lower=1)
    if decay is not None:
        check_interval(decay, "decay", owner, lower=0.0, upper=1.0)
    if min_gain is not None:
        check_interval(min_gain, "min_gain", owner, lower=0.0)
    if max_imbalance is not None:
        check_interval(max_imbalance, "max_imbalance", owner, lower=alpha)


def _window_result(start, end, config: RoutingConfiguration, routed: WindowRoutes, ts: pd.Series, step) -> WindowResult:
    """The figures of one window from what its rows were routed to."""
    rows = len(ts)
    optimized = _figures(config, routed.routes, rows).figures(config, config.table_sizes())
    hashed = _figures(config, routed.hash_routes, rows).figures(config, dict.fromkeys(routed.routes, 0))
    day = ((ts - pd.Timestamp(start)) // pd.Timedelta("1D")).to_numpy(dtype=np.int64)
    window_state = max(rows * len(routed.routes), 1)  # a unit of state per tuple and operator
    return WindowResult(
        start=str(start),
        end=str(end),
        tuples=rows,
        locality=optimized.locality,
        hash_locality=hashed.locality,
        imbalance=optimized.imbalance,
        hash_imbalance=hashed.imbalance,
        migration_cost=step.moved_share,
        moved_keys=step.moved_keys,
        migration_cost_without_relabeling=step.raw_share,
        rebalance_cost=routed.moved_state / window_state,
        table_entries=config.table_sizes(),
        published=step.published,
        reason=step.reason,
        daily_worst_imbalance=_daily_worst(config.topology, routed.routes, day),
        hash_daily_worst_imbalance=_daily_worst(config.topology, routed.hash_routes, day),
        rebalance_moved_keys=routed.moved_keys,
        hot_keys=step.hot_keys,
        split_keys={op: len(keys) for op, keys in routed.split.items() if keys},
        fold_cost=routed.folded_state / window_state,
    )


@dataclass(frozen=True)
class _Step:
    """What the start of a window did to the tables."""

    moved_share: float
    moved_keys: int
    raw_share: float | None
    published: bool
    reason: str
    hot_keys: dict[str, int] = field(default_factory=dict)


def _hot(optimization) -> dict[str, int]:
    """Keys of each operator too heavy for the bound when the tables were built (placed first, reported)."""
    out: dict[str, int] = {}
    for h in optimization.partition.hot_keys:
        out[h.operator] = out.get(h.operator, 0) + 1
    return out


def _reconfigure(
    config, graph, counts, latest, fallbacks, alpha, seed, min_gain, max_imbalance, table_cap, incremental
):
    """The online step: new tables from ``counts`` relabeled against ``config``, kept or published.

    Returns the configuration in force afterwards, the key graph it was built
    from (the rebalancer's locality) and what the step did.
    """
    topology = config.topology
    state = {op: latest.key_load(op) for op in topology.operators}
    new_graph = counts.graph()
    step = reconfigure(
        new_graph,
        topology,
        config,
        fallbacks,
        alpha=alpha,
        seed=seed,
        state=state,
        max_entries=table_cap,
        incremental=incremental,
    )
    hot = _hot(step.optimization)
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
            return config, graph, _Step(0.0, 0, None, False, verdict.reason, hot)
        reason = verdict.reason
    moved = _Step(step.plan.cost_share, step.plan.moved_keys, step.unrelabeled_cost, True, reason, hot)
    return step.config, new_graph, moved


def _estimate(config: RoutingConfiguration, counts: KeyCounts):
    return estimate_from_counts(config, counts, int(counts.total_weight)).optimized
