"""Route one window of a trace interval by interval, rebalancing the tables between intervals as a running job would.

Between two reconfigurations the loads drift and burst: on the IRA tweets a
campaign hashtag can carry a day's fair share in a few hours. A rebalancer
that runs once a day on the loads seen since the window began moves load that
is already served; what an operator can still change is where the *rest* of
the balance window goes. :class:`WindowRouter` replays a window's rows in
order and, at the start of every interval (``every``, e.g. 30 minutes), runs a
rebalancer on every operator:

- the ``local`` rebalancer (:func:`locality.rebalance.local.local`) balances
  the load each instance carried since the balance window began (its
  ``base_loads``; by default the whole window) plus each key's forecast for the
  rest of that balance window (:mod:`locality.forecast` over the last
  intervals), choosing moves by the locality they cost on the key graph of
  the tables in force plus the window's pairs seen so far;
- the ``follow`` rebalancer (:func:`locality.rebalance.local.follow`) only
  moves keys next to the keys they travel with (a new hashtag joins its
  users' server), when the hops gained until the window's end pay for the
  key's state and the most loaded instance does not grow: run every 15
  minutes to an hour, it catches new keys while they carry little state;
- the load-only rebalancers (Mixed, MinMig, ...) see, as before, the loads of
  the keys seen since the window began.

A key's state, what its move migrates, is its load over the last period
(the previous window's load scaled by the part of the period not yet
elapsed, plus its load so far): the state the reconfiguration's migration plan
counts. The router records every row's instance, so the replay measures
locality and balance (per window and per day) from exactly what was routed.

Hot keys, whose forecast alone exceeds an instance's bound, can be split
(``split_hot_keys``, associative state only): see :mod:`locality.rebalance.split`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from locality._validation import check_duration, check_integer
from locality.defaults import DEFAULT_REBALANCE_EVERY, DEFAULT_REBALANCE_FORECAST, DEFAULT_REBALANCE_HISTORY
from locality.errors import InvalidParameterError, parameters_of
from locality.forecast import forecast_matrix, parse_forecast
from locality.graph import KeyGraph
from locality.imbalance import unequal_shares
from locality.rebalance import BASE_AWARE, RebalanceProblem, rebalance, table_room, within_cap
from locality.rebalance.local import hops_per_tuple
from locality.rebalance.options import RebalanceOptions
from locality.rebalance.split import LocalSplit, plan_local_splits
from locality.routing import RoutingConfiguration, RoutingTable

__all__ = ["RebalancePolicy", "WindowRouter", "WindowRoutes"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RebalancePolicy(RebalanceOptions):
    """How and how often the tables are rebalanced within a window: the rebalancer's options, and when it runs.

    The attributes of :class:`~locality.rebalance.options.RebalanceOptions`
    (``method``, ``theta_max``, ``state_weight``, ``split_hot_keys``,
    ``split_share``, ``split_merge``: a key's parts fold at the next
    reconfiguration, :attr:`WindowRoutes.folded_state`), and:

    Attributes
    ----------
    every : str
        Interval between two rebalancing runs (a pandas offset: ``"30min"``, ``"1D"``).
    balance_window : str or None
        Base-aware rebalancers balance the load of each balance window (from
        the window's start; ``"1D"``: each UTC day): what each instance
        carried since it began plus the forecast of the rest. None: the whole
        window (until the next reconfiguration).
    forecast : str
        Estimator of each key's load in the next interval from the
        intervals of the last ``history`` (:func:`locality.forecast.parse_forecast` form).
    history : str
        How far back the forecast reads (a pandas offset; the rows before the
        window's start count too).
    table_cap : int or None
        Most entries of each operator's table.
    options : mapping
        More keyword options of the rebalancer (``max_cost``, ``follow`` for
        ``local``; ``beta`` for Mixed...).
    """

    every: str = DEFAULT_REBALANCE_EVERY
    balance_window: str | None = None
    forecast: str = DEFAULT_REBALANCE_FORECAST
    history: str = DEFAULT_REBALANCE_HISTORY
    table_cap: int | None = None
    options: Mapping = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = type(self).__name__
        with parameters_of("rebalance"):
            parse_forecast(self.forecast)
            for name in ("every", "balance_window", "history"):
                if getattr(self, name) is not None:
                    check_duration(getattr(self, name), name, owner)
            if pd.Timedelta(self.history) < pd.Timedelta(self.every):
                raise InvalidParameterError(
                    f"the 'history' of {owner} ({self.history}) must cover at least one interval ({self.every})",
                    parameter="history",
                )
            if self.table_cap is not None:
                check_integer(self.table_cap, "table_cap", owner, lower=0)

    @property
    def memory(self) -> int:
        """Intervals the forecast reads."""
        return int(pd.Timedelta(self.history) // pd.Timedelta(self.every))


@dataclass
class WindowRoutes:
    """What the window's rows went through: an instance per row and operator, for the tables and for the hash."""

    routes: dict[str, np.ndarray]
    hash_routes: dict[str, np.ndarray]
    config: RoutingConfiguration
    moved_state: float = 0.0
    moved_keys: int = 0
    folded_state: float = 0.0
    """State the fold of the split keys' parts moves (``split_merge="fold"``; 0 when merged downstream)."""
    runs: int = 0
    split: dict[str, dict] = field(default_factory=dict)
    """Per operator, each split key: its last plan (``route`` by neighbour server, ``parts``), the
    instances holding a partial state of it (``holders``: every instance its rows reached in the
    window, the ones a merge must combine) and the one instance it folds back into (``instance``)."""


class _Operator:
    """One operator's keys in the window (the tables', the graph's and the rows'), and where each one is."""

    def __init__(self, op: str, config: RoutingConfiguration, keys: pd.Index, codes: np.ndarray) -> None:
        table = config.tables[op]
        values = keys.to_numpy(dtype=object)
        self.name = op
        self.keys = keys
        self.codes = codes
        self.instance = config.route_many(op, values).astype(np.int64)
        self.fallback = table.fallback.instances_of(values).astype(np.int64)
        self.servers = config.topology.instance_servers(op).astype(np.int64)
        self.n_instances = int(self.servers.shape[0])
        self.shares = unequal_shares(config.topology.instance_shares(op))
        size = len(keys)
        self.so_far = np.zeros(size)
        self.previous = np.zeros(size)
        self.affinity: np.ndarray | None = None
        # rows of each key in time order (CSR), for the affinity updates of a move
        self.row_order = np.argsort(codes, kind="stable")
        self.row_start = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=size))])
        self.split: dict[int, LocalSplit] = {}


class WindowRouter:
    """Route a window's rows through ``config``, optionally rebalancing between intervals.

    Parameters
    ----------
    config : RoutingConfiguration
        The tables in force at the window's start.
    frame : pandas.DataFrame
        The window's rows in time order: one key column per operator and ``ts``.
    ts : str
        Timestamp column.
    start, end : pandas.Timestamp
        The window's bounds (intervals and balance windows start at ``start``).
    graph : KeyGraph, optional
        The key graph the tables in force were built from (their locality).
    previous : mapping of operator -> Series (key -> load), optional
        Each key's load in the previous window (its state when the window begins).
    warmup : pandas.DataFrame, optional
        Rows just before ``start`` (same columns as ``frame``): the first
        forecasts read them, so that a window does not start blind.
    """

    def __init__(
        self,
        config: RoutingConfiguration,
        frame: pd.DataFrame,
        *,
        ts: str,
        start: pd.Timestamp,
        end: pd.Timestamp,
        graph: KeyGraph | None = None,
        previous: Mapping[str, pd.Series] | None = None,
        warmup: pd.DataFrame | None = None,
    ) -> None:
        self.config = config
        self.start, self.end = _naive(start), _naive(end)
        self.times = _times(frame[ts])
        self.warmup = warmup if warmup is not None and len(warmup) else None
        self.warmup_times = _times(warmup[ts]) if self.warmup is not None else None
        self.n_rows = len(frame)
        self.graph = graph
        self.operators: list[_Operator] = []
        for op in config.topology.operators:
            keys = pd.Index(frame[op].unique())
            extra = [config.tables[op].entries.index] + ([graph.keys[op]] if graph is not None else [])
            if self.warmup is not None:
                extra.append(pd.Index(self.warmup[op].unique()))
            for part in extra:
                new = part[~part.isin(keys)]
                if len(new):
                    keys = keys.append(new)
            state = _Operator(op, config, keys, keys.get_indexer(frame[op]).astype(np.int64))
            if previous is not None and op in previous:
                state.previous = previous[op].reindex(keys).fillna(0.0).to_numpy(dtype=float)
            self.operators.append(state)
        self.consumed = 0
        self.routed = False

    # ------------------------------------------------------------------ routing
    def route(self, policy: RebalancePolicy | None = None) -> WindowRoutes:
        """Route every row; with a ``policy``, rebalance at the start of every interval but the first.

        A router routes its window once (rebalancing changes where its keys are).
        """
        if self.routed:
            raise RuntimeError("this WindowRouter already routed its window; build a new one")
        self.routed = True
        routes = {o.name: np.empty(self.n_rows, dtype=np.int64) for o in self.operators}
        hashed = {o.name: o.fallback[o.codes] for o in self.operators}
        out = WindowRoutes(routes, hashed, self.config)
        self.policy = policy
        if policy is None:
            for o in self.operators:
                routes[o.name][:] = o.instance[o.codes]
            return out
        self.forecast = parse_forecast(policy.forecast)
        self.recent = self._warm(pd.Timedelta(policy.every), policy.memory)
        if policy.method in BASE_AWARE:
            self._init_affinity()
        every = pd.Timedelta(policy.every)
        ticks = _ticks(self.start, self.end, every)
        bounds = np.searchsorted(self.times, ticks, side="left")
        for i, (r0, r1) in enumerate(zip(bounds[:-1], bounds[1:])):
            if i > 0 and self.consumed > 0:
                self._rebalance(pd.Timestamp(ticks[i]), out)
            self._consume(int(r0), int(r1), out)
        for o in self.operators:
            out.split[o.name] = {}
            for code, split in o.split.items():
                rows = o.row_order[o.row_start[code] : o.row_start[code + 1]]
                # Folding the parts back into the key's one instance (at the next reconfiguration) moves
                # the partial states held elsewhere.
                if policy.split_merge == "fold":
                    out.folded_state += float(np.count_nonzero(routes[o.name][rows] != o.instance[code]))
                holders = sorted({int(i) for i in routes[o.name][rows]})
                out.split[o.name][o.keys[code]] = {
                    **split.to_dict(),
                    "holders": holders,
                    "instance": int(o.instance[code]),
                }
        out.config = self._tables()
        return out

    def _consume(self, r0: int, r1: int, out: WindowRoutes) -> None:
        """Route rows ``[r0, r1)`` with the instances in force, and count them."""
        servers = []
        for o in self.operators:
            out.routes[o.name][r0:r1] = o.instance[o.codes[r0:r1]]
            servers.append(o.servers[out.routes[o.name][r0:r1]])
        for i, o in enumerate(self.operators):
            if o.split:  # split keys follow their neighbour: the upstream one, for the first operator the next
                neighbour = servers[i - 1] if i > 0 else servers[i + 1]
                codes = o.codes[r0:r1]
                for code, split in o.split.items():
                    rows = np.flatnonzero(codes == code)
                    out.routes[o.name][r0 + rows] = split.route_rows(neighbour[rows])
                servers[i] = o.servers[out.routes[o.name][r0:r1]]
        for i, o in enumerate(self.operators):
            counts = np.bincount(o.codes[r0:r1], minlength=len(o.keys)).astype(float)
            o.so_far += counts
            self.recent[i].push(counts)
            if o.affinity is not None:
                for j in (i - 1, i + 1):
                    if 0 <= j < len(self.operators):
                        np.add.at(o.affinity, (o.codes[r0:r1], servers[j]), 1.0)
        self.consumed = r1

    def _warm(self, every: pd.Timedelta, memory: int) -> list[_Recent]:
        """Per operator, the counts of the last ``memory`` intervals, starting with those before the window."""
        recent = [_Recent(memory, len(o.keys)) for o in self.operators]
        if self.warmup is None:
            return recent
        first = self.start - memory * every
        slot = ((self.warmup_times - np.datetime64(first)) // np.timedelta64(every)).astype(np.int64)
        inside = (slot >= 0) & (slot < memory)
        for i, o in enumerate(self.operators):
            codes = o.keys.get_indexer(self.warmup[o.name].to_numpy()[inside])
            block = np.zeros((memory, len(o.keys)))
            np.add.at(block, (slot[inside], codes), 1.0)
            for counts in block:
                recent[i].push(counts)
        return recent

    # ---------------------------------------------------------------- affinity
    def _init_affinity(self) -> None:
        """Edge weight from every key to each server: the graph's edges, then the window's rows as they pass."""
        n_servers = len(self.config.topology.servers)
        for o in self.operators:
            o.affinity = np.zeros((len(o.keys), n_servers))
        self.edges: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.adjacency = []
        g = self.graph
        for i in range(len(self.operators) - 1):
            a, b = self.operators[i], self.operators[i + 1]
            if g is None:
                src = dst = np.empty(0, dtype=np.int64)
                w = np.empty(0)
            else:
                hop = (g.src >= g.offsets[a.name]) & (g.src < g.offsets[a.name] + len(g.keys[a.name]))
                src = a.keys.get_indexer(g.keys[a.name][g.src[hop] - g.offsets[a.name]]).astype(np.int64)
                dst = b.keys.get_indexer(g.keys[b.name][g.dst[hop] - g.offsets[b.name]]).astype(np.int64)
                w = g.edge_weight[hop]
                np.add.at(a.affinity, (src, b.servers[b.instance[dst]]), w)
                np.add.at(b.affinity, (dst, a.servers[a.instance[src]]), w)
            self.edges.append((src, dst, w))
            self.adjacency.append((_csr(src, len(a.keys)), _csr(dst, len(b.keys))))

    def _move(self, i: int, key: int, target: int) -> None:
        """Put ``key`` of operator ``i`` on ``target``; its edges' weight moves in its neighbours' affinity."""
        o = self.operators[i]
        old, new = int(o.servers[o.instance[key]]), int(o.servers[target])
        o.instance[key] = target
        if old == new or o.affinity is None:
            return
        rows = o.row_order[o.row_start[key] : o.row_start[key + 1]]
        rows = rows[rows < self.consumed]
        for j in (i - 1, i + 1):
            if not 0 <= j < len(self.operators):
                continue
            other = self.operators[j]
            hop = min(i, j)
            src, dst, w = self.edges[hop]
            order, starts = self.adjacency[hop][0 if j > i else 1]
            picked = order[starts[key] : starts[key + 1]]
            ends = (dst if j > i else src)[picked]
            np.add.at(other.affinity[:, old], ends, -w[picked])
            np.add.at(other.affinity[:, new], ends, w[picked])
            if rows.size:
                np.add.at(other.affinity[:, old], other.codes[rows], -1.0)
                np.add.at(other.affinity[:, new], other.codes[rows], 1.0)

    # --------------------------------------------------------------- rebalancing
    def _rebalance(self, now: pd.Timestamp, out: WindowRoutes) -> None:
        """One run of the rebalancer on every operator, at ``now`` (the start of an interval)."""
        s = self.policy
        every = pd.Timedelta(s.every)
        elapsed = (now - self.start) / (self.end - self.start)
        aware = s.method in BASE_AWARE
        span = pd.Timedelta(s.balance_window) if s.balance_window is not None else self.end - self.start
        opened = self.start + ((now - self.start) // span) * span
        first_row = int(np.searchsorted(self.times, np.datetime64(opened), side="left"))
        horizon = (min(opened + span, self.end) - now) / every
        out.runs += 1
        for i, o in enumerate(self.operators):
            state = o.previous * max(0.0, 1.0 - elapsed) + o.so_far
            options: dict = {}
            if aware:
                rate = self._rates(i, now)
                keys = np.flatnonzero(rate > 0)
                loads = rate[keys] * horizon
                base = np.bincount(out.routes[o.name][first_row : self.consumed], minlength=o.n_instances)
                base = base.astype(float)
                options = dict(
                    affinity=o.affinity[keys] if o.affinity is not None else None,
                    servers=o.servers,
                    hop_loads=rate[keys] * ((self.end - now) / every) * hops_per_tuple(i, len(self.operators)),
                    state_weight=s.state_weight,
                )
                if s.split_hot_keys:
                    keys, loads, base, options = self._split(o, keys, loads, base, options)
            else:
                keys = np.flatnonzero(o.so_far > 0)
                loads, base = o.so_far[keys], None
            if keys.size == 0:
                continue
            cap = self._room(i, keys, state, out)
            problem = RebalanceProblem(
                loads, state[keys], o.instance[keys], o.fallback[keys], o.n_instances, s.theta_max, cap, base, o.shares
            )
            result = within_cap(problem, rebalance(problem, s.method, **options, **s.options))
            changed = np.flatnonzero(result.assignment != o.instance[keys])
            for c in changed.tolist():
                self._move(i, int(keys[c]), int(result.assignment[c]))
            out.moved_state += float(state[keys[changed]].sum())
            out.moved_keys += int(changed.size)

    def _room(self, i: int, keys: np.ndarray, state: np.ndarray, out: WindowRoutes) -> int | None:
        """The cap of a run's problem: the table's cap less the entries of keys outside it (:func:`table_room`).

        When those alone exceed the cap (it was lowered, or the tables came
        from elsewhere), the surplus with the least state goes back to the
        fallback first, its state counted as moved.
        """
        o = self.operators[i]
        outside = np.flatnonzero(o.instance != o.fallback)
        outside = outside[~np.isin(outside, keys)]
        room, excess = table_room(self.policy.table_cap, outside.shape[0])
        for key in outside[np.argsort(state[outside], kind="stable")][:excess].tolist():
            out.moved_state += float(state[key])
            out.moved_keys += 1
            self._move(i, key, int(o.fallback[key]))
        return room

    def _rates(self, i: int, now: pd.Timestamp) -> np.ndarray:
        """Each key's forecast load per interval of operator ``i`` from ``now`` on (the policy's forecast)."""
        method, params = self.forecast
        return self.recent[i].forecast(method, params)

    def _split(self, o: _Operator, keys: np.ndarray, loads: np.ndarray, base: np.ndarray, options: dict):
        """Split the keys too heavy for any instance (and re-plan those split before) by neighbour server.

        Their planned flows join the base loads; the other keys are rebalanced around them.
        """
        plans, base = plan_local_splits(
            keys,
            loads,
            o.instance[keys],
            base,
            options["affinity"],
            o.servers,
            theta_max=self.policy.theta_max,
            split_share=self.policy.split_share,
            keep=np.isin(keys, list(o.split)),
            shares=o.shares,
        )
        if not plans:
            return keys, loads, base, options
        for plan in plans.values():
            o.split[plan.key] = plan
        cold = np.ones(keys.shape[0], dtype=bool)
        cold[list(plans)] = False
        options = {k: (v[cold] if k in ("affinity", "hop_loads") and v is not None else v) for k, v in options.items()}
        return keys[cold], loads[cold], base, options

    def _tables(self) -> RoutingConfiguration:
        """The tables in force at the window's end (a split key keeps its single instance's entry)."""
        tables = {}
        for o in self.operators:
            table = self.config.tables[o.name]
            tables[o.name] = RoutingTable(o.name, table.fallback, pd.Series(o.instance, index=o.keys))
        return RoutingConfiguration(self.config.topology, tables, self.config.parameters)


class _Recent:
    """Each key's counts in the last ``memory`` intervals, oldest first, kept in a ring (no copy per interval).

    The default forecast, the plain mean, reads a running sum; the others get the ordered intervals.
    """

    def __init__(self, memory: int, n_keys: int) -> None:
        self.rows = np.zeros((memory, n_keys))
        self.total = np.zeros(n_keys)
        self.size = 0
        self.next = 0

    def push(self, counts: np.ndarray) -> None:
        memory = self.rows.shape[0]
        if self.size == memory:
            self.total -= self.rows[self.next]
        else:
            self.size += 1
        self.rows[self.next] = counts
        self.total += counts
        self.next = (self.next + 1) % memory

    def ordered(self) -> np.ndarray:
        """The intervals held, oldest first (intervals x keys)."""
        memory = self.rows.shape[0]
        return self.rows[(self.next - self.size + np.arange(self.size)) % memory]

    def forecast(self, method: str, params: dict) -> np.ndarray:
        """Each key's next-interval load by ``method`` (:func:`locality.forecast.forecast_matrix`)."""
        if method == "mean" and not params and self.size:
            return self.total / self.size
        return forecast_matrix(self.ordered(), method, **params)


def _times(column: pd.Series) -> np.ndarray:
    """A timestamp column as UTC datetime64 without a time zone."""
    times = pd.DatetimeIndex(column)
    return (times.tz_convert(None) if times.tz is not None else times).to_numpy(dtype="datetime64[ns]")


def _naive(ts: pd.Timestamp) -> pd.Timestamp:
    """``ts`` in UTC without a time zone (the window's row times are compared as datetime64)."""
    ts = pd.Timestamp(ts)
    return ts.tz_convert(None) if ts.tzinfo is not None else ts


def _ticks(start: pd.Timestamp, end: pd.Timestamp, every: pd.Timedelta) -> np.ndarray:
    """Interval bounds from ``start`` to ``end`` (both included), as datetime64."""
    count = int(np.ceil((end - start) / every))
    return np.array([start + i * every for i in range(count)] + [end], dtype="datetime64[ns]")


def _csr(owner: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Edge positions grouped by ``owner`` (a stable argsort) and each owner's first position."""
    order = np.argsort(owner, kind="stable")
    return order, np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=size))])
