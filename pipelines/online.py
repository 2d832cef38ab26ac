"""The periodic online reconfiguration: the latest window in, new tables and a migration plan out, if it pays.

A scheduler (cron, Airflow) runs it once per period. Stages: pick the window
(a time range of the timestamp column, the last ``window`` of the trace, or
the newest files of a directory), count it with the same Spark path as the
offline job, blend in earlier windows with exponential decay (statistics kept
in the store), partition with METIS, relabel the parts onto the servers that
hold most of their state, plan the migration from the configuration in
force, and publish the new version with its plan only when the locality
gained on the window pays for the state that moves (or when balance is
broken). Every run records its decision, so rerunning a window returns the
same answer without publishing twice.

With ``rebalance`` set, a run is a rebalancing step instead, meant for a
finer cadence between two reconfigurations (every 15 minutes with
``"follow"``, every 6 hours with ``"local"``, on that last stretch of the
trace): no METIS, no new statistics; the tables in force are adjusted to the
window's key loads by a rebalancer (``"local"`` and ``"follow"`` weigh each
move's locality on the key graph of the stored statistics plus the window's
pairs, over the hops a key makes until ``horizon``: its window load scaled
from the window's length to the horizon), and the result is published with
its migration plan when a key moves. A key's state in such a run is its load
in the window plus one period's worth of its stored history (the blended
load times ``1 - decay``), so that a key known for weeks is not moved as if
it had just appeared. With a balance window (``balance_since`` and
``balance_until``, the last and the next reconfiguration), the step balances
the whole window as the replay's ``local`` does: what each instance served
since it began (a ledger in the store, :mod:`pipelines.served`) plus the
window's key loads scaled to what is left of it. With ``split_hot_keys``
(associative state only) the step also splits the window's hot keys by
neighbour server and publishes the split plans in the tables
(:attr:`RoutingTable.splits`); ``split_merge`` says whether their partial
states fold home when a split ends (moves in the plan) or are merged
downstream (no moves).

Store layout added by this job (beside ``versions/`` and ``CURRENT``)::

    ROOT/statistics/<window>/          # blended counts after that window (KeyCounts.write)
    ROOT/statistics/LATEST             # the window whose counts the next run blends with
    ROOT/decisions/<window>.json       # the outcome of each window
    ROOT/balance/<since>.json          # rebalancing with a balance window: what each instance served in it

Everything from reading the version in force to recording the decision
happens under the store's writer lock (:meth:`locality.store.ConfigStore.lock`),
so a nightly job publishing into the same store waits instead of interleaving:
the migration plan always starts from the version that is current when it is
published. Counting the window (the Spark pass) runs before the lock is taken.

Run it with ``locality reconfigure ...`` or, on a cluster::

    spark-submit --py-files locality.whl locality_job.py reconfigure TRACE --keys a,b --store DIR [...]
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass
from datetime import datetime

from locality._validation import (
    MAX_WAIT_SECONDS,
    WAIT_LIMIT,
    check_at_most,
    check_duration,
    check_integer,
    check_interval,
    check_option,
)
from locality.counts import KeyCounts, blend
from locality.engines import ENGINES, make_fallback
from locality.errors import InvalidParameterError, StoreDamagedError, TopologyError
from locality.evaluation import estimate_from_counts
from locality.migration import plan_migration
from locality.optimizer import make_fallbacks, optimize
from locality.partition import MAX_SEED, SEED_LIMIT
from locality.plots import figure_png, instance_load_figure
from locality.rebalance import BASE_AWARE, check_table_method
from locality.rebalance.tables import rebalance_configuration
from locality.reconfiguration import DEFAULT_MIN_GAIN, Decision, decide, reconfigure
from locality.report import format_summary
from locality.routing import RoutingConfiguration
from locality.store import DEFAULT_LOCK_TIMEOUT, ConfigStore, fingerprint
from locality.topology import Topology
from pipelines.counting import read_and_count
from pipelines.progress import Stages
from pipelines.served import ServedLoads
from pipelines.trace import TraceSpec, check_trace, input_identity, parse_time

__all__ = ["OnlineParams", "run", "DEFAULT_DECAY", "DEFAULT_MIN_GAIN", "DEFAULT_MAX_IMBALANCE", "DEFAULT_HORIZON"]

logger = logging.getLogger(__name__)

#: Weight of a window one period older than the latest. Measured on the weekly flights and tweet
#: replays (benchmarks/RESULTS.md): decayed history beats the paper's reset to the latest window.
DEFAULT_DECAY = 0.85
#: Imbalance of the tables in force above which the job publishes whatever the gain (the issue's next-week target).
DEFAULT_MAX_IMBALANCE = 1.10
#: How long a rebalancing run's moves are expected to serve (until the next reconfiguration): a day, less
#: than the weekly replay's average (half a week), so that production errs on the side of moving less.
DEFAULT_HORIZON = "1D"
#: A window's name in the store (statistics/<name>/, decisions/<name>.json): a file name, never a path.
_WINDOW_NAME = re.compile(r"(?!\.\.?$)[^/\\\x00]+")


@dataclass(frozen=True)
class OnlineParams:
    """Everything one reconfiguration run needs; validated on construction.

    ``topology`` and ``hash`` are used when the store is empty; afterwards the
    current version's fallback hash is kept, and so is its topology unless
    ``topology`` names another one: the run then publishes a version for
    that topology, servers added or removed, with a plan that moves little
    state (:func:`locality.reconfiguration.reconfigure`), whatever the gain.
    ``incremental`` starts a reconfiguration from the version in force
    instead of a new METIS partition (``reconfigure``'s ``incremental``).
    """

    trace: TraceSpec
    store: str
    topology: Topology | None = None
    alpha: float = 1.03
    hash: str = "kafka"
    capacity: int = 100_000
    exact: bool = False
    top_pairs: int | None = None
    max_entries: int | None = None
    decay: float | None = DEFAULT_DECAY
    min_gain: float = DEFAULT_MIN_GAIN
    max_imbalance: float = DEFAULT_MAX_IMBALANCE
    seed: int = 0
    rebalance: str | None = None
    theta_max: float = 0.08
    state_weight: float = 1.0
    horizon: str | None = None
    balance_since: str | None = None
    balance_until: str | None = None
    split_hot_keys: bool = False
    split_share: float | None = None
    split_merge: str = "fold"
    switch_after: str | None = None
    incremental: bool = False
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT

    def __post_init__(self) -> None:
        owner = "the online job"
        if self.rebalance is not None:
            check_table_method(self.rebalance, "rebalance", owner)
            if self.incremental:
                raise InvalidParameterError(
                    f"incremental in {owner} starts a reconfiguration from the version in force; a rebalancing run "
                    f"(--rebalance {self.rebalance}) adjusts that version already: give one or the other"
                )
            check_interval(self.theta_max, "theta_max", owner, lower=0.0)
            check_interval(self.state_weight, "state_weight", owner, lower=0.0)
        if self.horizon is not None:
            check_duration(self.horizon, "horizon", owner)
        self._check_balance_window(owner)
        if self.switch_after is not None:
            check_duration(self.switch_after, "switch_after", owner)
            if self.trace.time_range()[1] is None:
                raise InvalidParameterError(
                    f"switch_after in {owner} schedules the version from the window's end + {self.switch_after}: "
                    "it needs a window with an end (--window, or --end)"
                )
        check_option(self.split_merge, "split_merge", owner, ("fold", "downstream"))
        if self.split_share is not None:
            check_interval(self.split_share, "split_share", owner, lower=0.0, closed="neither")
        if self.split_hot_keys and self.rebalance not in BASE_AWARE:
            raise InvalidParameterError(
                f"split_hot_keys in {owner} needs --rebalance with a locality-aware rebalancer ({sorted(BASE_AWARE)}); "
                f"got {self.rebalance!r}"
            )
        check_interval(self.alpha, "alpha", owner, lower=1.0)
        check_at_most(
            check_interval(self.lock_timeout, "lock_timeout", owner, lower=0.0),
            MAX_WAIT_SECONDS,
            "lock_timeout",
            owner,
            WAIT_LIMIT,
        )
        check_at_most(check_integer(self.seed, "seed", owner, lower=0), MAX_SEED, "seed", owner, SEED_LIMIT)
        for name in ("top_pairs", "max_entries"):
            if getattr(self, name) is not None:
                check_integer(getattr(self, name), name, owner, lower=1 if name == "top_pairs" else 0)
        check_option(self.hash, "hash", owner, ENGINES)
        check_integer(self.capacity, "capacity", owner, lower=1)
        check_interval(self.min_gain, "min_gain", owner, lower=0.0)
        check_interval(self.max_imbalance, "max_imbalance", owner, lower=self.alpha)
        if self.decay is not None:
            check_interval(self.decay, "decay", owner, lower=0.0, upper=1.0, closed="right")
        if self.topology is not None:
            self.trace.check_operators(self.topology.operators)

    def _check_balance_window(self, owner: str) -> None:
        if self.balance_since is None and self.balance_until is None:
            return
        if self.balance_since is None or self.balance_until is None:
            raise InvalidParameterError(
                f"the 'balance_since' and 'balance_until' parameters of {owner} go together (the balance window)"
            )
        if self.rebalance not in BASE_AWARE:
            raise InvalidParameterError(
                f"a balance window in {owner} needs --rebalance with a locality-aware rebalancer "
                f"({sorted(BASE_AWARE)}); got {self.rebalance!r}"
            )
        if self.horizon is not None:
            raise InvalidParameterError(
                f"give {owner} either a horizon or a balance window: with a balance window the moves serve "
                "until its end (balance_until)"
            )
        since, until = self.balance_window()
        if until <= since:
            raise InvalidParameterError(
                f"the balance window of {owner} must end after it begins; "
                f"got {self.balance_since} .. {self.balance_until}"
            )

    def balance_window(self) -> tuple[datetime, datetime]:
        """``(balance_since, balance_until)`` as UTC-aware datetimes."""
        return parse_time(self.balance_since, "balance_since"), parse_time(self.balance_until, "balance_until")

    def switch_point(self) -> int | None:
        """The point (event time, ms) from which this run's version is in force: the window's end + switch_after."""
        if self.switch_after is None:
            return None
        moment = self.trace.time_range()[1] + check_duration(self.switch_after, "switch_after", "the online job")
        return int(moment.timestamp() * 1000)

    def window_key(self) -> str:
        """Identity of the window and the parameters (input files, time range, parameters)."""
        params = asdict(self)
        if not self.incremental:  # the windows of runs made before the option existed keep their identity
            params.pop("incremental")
        params.pop("store")
        params.pop("lock_timeout")
        params["trace"] = self.trace.describe()
        params["topology"] = self.topology.to_dict() if self.topology else None
        return fingerprint(input_identity(self.trace, ConfigStore(self.store).digests_path), params)[:32]


class _History:
    """The blended statistics kept in the store between runs (written under the store's lock)."""

    def __init__(self, store: ConfigStore) -> None:
        self.store = store
        self.dir = store.root / "statistics"

    def blended(self, window: str, counts: KeyCounts, decay: float | None, limit: int) -> KeyCounts:
        """Counts of this window blended with the latest earlier window's (stored once per window).

        Blends are pruned to ``limit`` pairs and keys (the sketch capacity) so they stay bounded.
        """
        target = self.dir / window
        if target.is_dir():
            return KeyCounts.read(target)
        latest = self.latest()
        if decay is not None and latest is not None and latest != window and (self.dir / latest).is_dir():
            result = blend(
                [KeyCounts.read(self.dir / latest), counts], windows=None, decay=decay, min_weight=0.1, limit=limit
            )
        else:
            result = counts
        self.store.write_atomically(f"statistics/{window}", result.write)
        self.store.write_atomically("statistics/LATEST", lambda p: p.write_text(window))
        return result

    def latest(self) -> str | None:
        """The window whose blended counts the next run blends with (None before the first)."""
        what = "the online job's statistics/LATEST"
        latest = self.store.read_state("statistics/LATEST", what)
        if latest is not None and not _WINDOW_NAME.fullmatch(latest.strip()):
            raise StoreDamagedError(f"{what} ({self.dir / 'LATEST'}) is damaged: {latest[:40]!r} names no window")
        return None if latest is None else latest.strip()


def _topology_and_fallbacks(params: OnlineParams, current: RoutingConfiguration | None):
    """The topology and fallbacks the run routes on: the version in force's, or the new topology with its hash."""
    if current is None:
        if params.topology is None:
            raise TopologyError("the store is empty: give the topology (--servers or --topology) for the first run")
        return params.topology, make_fallbacks(params.topology, params.hash)
    if tuple(current.topology.operators) != tuple(params.trace.keys):
        raise TopologyError(
            f"the current version routes {list(current.topology.operators)}; got key columns {list(params.trace.keys)}"
        )
    if params.topology is None or params.topology == current.topology:
        return current.topology, {op: t.fallback for op, t in current.tables.items()}
    if params.rebalance is not None:
        raise TopologyError(
            f"the topology differs from the current version's ({len(current.topology.servers)} servers, now "
            f"{len(params.topology.servers)}): a rebalancing run adjusts the tables in force; change the topology "
            "with a reconfiguration run (without --rebalance)"
        )
    fallbacks = {}
    for op, table in current.tables.items():  # the engine's hash, sized to the new instances
        spec = table.fallback.to_dict()
        fallbacks[op] = make_fallback(spec["engine"], params.topology.n_instances(op), **spec["parameters"])
    return params.topology, fallbacks


def run(spark, params: OnlineParams, stages: Stages | None = None) -> dict:
    """One reconfiguration run; returns the JSON-ready outcome (also stored under ``decisions/``).

    The trace's files and the store are checked before Spark does any work;
    the window is counted, then the store's writer lock is taken for the
    rest (reading the version in force, blending, deciding, publishing,
    recording). A window already decided returns its recorded outcome with
    ``rerun`` set.

    Raises
    ------
    TraceError, InvalidParameterError, TopologyError
        The trace or the parameters cannot be used (the message names what).
    StoreError
        The store is not a writable directory or is damaged.
    StoreBusyError
        Another writer held the store for ``params.lock_timeout`` seconds.
    JobError
        A Spark worker died; nothing was published or recorded.
    """
    stages = stages or Stages(show=False)
    store = ConfigStore(params.store, lock_timeout=params.lock_timeout, job="locality reconfigure")
    store.check_writable()
    check_trace(params.trace)
    window = params.window_key()
    recorded = _recorded(store, window)
    if recorded is not None:
        return recorded
    # Fail before counting when the store cannot take this run (checked again under the lock).
    current_version = store.current_version()
    current = store.get(current_version).config if current_version is not None else None
    _topology_and_fallbacks(params, current)
    keys = list(params.trace.keys)
    if params.rebalance in BASE_AWARE:
        _ahead(params)  # the window's length and what lies ahead are known before counting

    df, counts = read_and_count(spark, params, stages, what="window")
    if params.trace.state:
        state = _state_sizes(df, keys, params.trace.state)
    else:  # a key's state defaults to its load in the window (not in the blended history)
        state = {op: counts.key_loads[op].set_index("key")["weight"] for op in keys}
    ledger = served = None
    if params.balance_since is not None and current is not None:
        with stages.stage("served since the balance window began"):
            ledger, served = _served(spark, store, params, current)

    with store.lock():
        recorded = _recorded(store, window)  # another run may have decided this window while we counted
        if recorded is not None:
            return recorded
        if ledger is not None and (
            store.current_version() != current_version or _ledger(store, params, current).until != ledger.until
        ):  # another writer moved CURRENT or the ledger meanwhile: count again from what is stored now
            ledger, served = _served(spark, store, params, store.get(store.current_version()).config)
        if served is not None:  # before publishing: a run killed after it counts nothing twice when rerun
            served.write(store)
        outcome = _decide_and_publish(store, params, window, counts, state, stages, served)
        store.write_atomically(f"decisions/{window}.json", lambda p: p.write_text(json.dumps(outcome, default=str)))
    return outcome


def _ledger(store: ConfigStore, params: OnlineParams, config: RoutingConfiguration) -> ServedLoads:
    """The stored ledger of the run's balance window."""
    return ServedLoads.read(store, params.balance_window()[0], config)


def _served(spark, store: ConfigStore, params: OnlineParams, config: RoutingConfiguration):
    """The stored ledger, and the ledger with the rows up to the end of the run's window added as ``config`` routes."""
    ledger = _ledger(store, params, config)
    return ledger, ledger.caught_up(spark, params.trace, config, params.trace.time_range()[1])


def _recorded(store: ConfigStore, window: str) -> dict | None:
    """The outcome recorded for ``window`` by an earlier run, marked as a rerun; None if there is none."""
    outcome = store.read_state(f"decisions/{window}.json", f"the decision recorded for window {window}", fields={})
    if outcome is None:
        return None
    outcome["rerun"] = True
    return outcome


def _decide_and_publish(
    store: ConfigStore, params: OnlineParams, window: str, counts, state, stages: Stages, served: ServedLoads | None
) -> dict:
    """Blend, reconfigure from the version in force, decide, and publish if it pays (under the store's lock)."""
    switch_point = params.switch_point()
    if switch_point is not None and switch_point < store.schedule().sealed_until:
        raise InvalidParameterError(
            f"--switch-after {params.switch_after} schedules this window's version from {switch_point} (ms), before "
            f"the store's schedule is sealed ({store.schedule().sealed_until}): a later window has run already, or "
            "the lead is shorter than before"
        )
    previous_version = store.current_version()
    current = store.get(previous_version).config if previous_version is not None else None
    topology, fallbacks = _topology_and_fallbacks(params, current)
    change = None
    if params.rebalance is not None:
        with stages.stage(f"rebalance ({params.rebalance})"):
            new, plan, raw_cost = _rebalanced(store, params, current, counts, state, served)
    else:
        with stages.stage("blend with earlier windows"):
            blended = _History(store).blended(window, counts, params.decay, params.capacity)
        with stages.stage("partition (METIS), relabel and plan"):
            new, plan, raw_cost, change = _reconfigured(params, current, topology, fallbacks, blended, state, window)
    if plan is not None:
        plan.from_version = previous_version
    before = estimate_from_counts(current, counts, counts.usable_rows) if current is not None else None
    after = estimate_from_counts(new, counts, counts.usable_rows)
    if params.rebalance is not None:
        resplit = any(current.tables[op].splits != new.tables[op].splits for op in topology.operators)
        verdict = _rebalance_decision(before.optimized, after.optimized, plan, resplit)
    elif change is not None:  # the version in force routes on servers that are no longer the deployment's
        servers = f"{len(current.topology.servers)} -> {len(topology.servers)} servers"
        verdict = Decision(True, f"the topology changes ({servers}): {change}", 0.0, None)
    else:
        verdict = decide(
            before.optimized if before else None,
            after.optimized,
            plan,
            alpha=params.alpha,
            min_gain=params.min_gain,
            max_imbalance=params.max_imbalance,
        )

    outcome = {
        "published": verdict.publish,
        "version": previous_version,
        "previous_version": previous_version,
        "locality_before": before.optimized.locality if before else None,
        "locality_after": after.optimized.locality,
        "hash_locality": after.hash.locality,
        "imbalance_before": before.optimized.imbalance if before else None,
        "imbalance_after": after.optimized.imbalance,
        "migration_cost": plan.cost if plan else 0.0,
        "migration_cost_share": plan.cost_share if plan else 0.0,
        "migration_cost_share_without_relabeling": raw_cost,
        "moved_keys": plan.moved_keys if plan else 0,
        "reason": verdict.reason,
        "window": window,
        "rows": counts.rows,
        "dropped": counts.dropped,
        "table_entries": new.table_sizes(),
        "split_keys": new.split_keys(),
        "topology_change": change,
        "in_force_from": switch_point,
    }
    if served is not None:
        outcome["served"] = {**served.to_dict(), "balance_until": params.balance_window()[1].isoformat()}
    if verdict.publish:
        with stages.stage("publish"):
            shares = {op: topology.instance_shares(op) for op in topology.operators}
            artifacts = {
                "report.json": {"job": "online", **outcome, "counting": counts.summary(), "in_window": after.to_dict()},
                "report.txt": format_summary({"in_sample": after.to_dict(), "counting": counts.summary()}),
                "load.png": figure_png(instance_load_figure(after, shares, params.alpha)),
            }
            if plan is not None:
                plan.to_version = store.next_version()
                artifacts["migration_plan.json"] = plan.to_dict(new)
            published = store.publish(
                new,
                fingerprint=f"online:{window}",
                artifacts=artifacts,
                metadata={
                    "job": "online",
                    "window": window,
                    "summary": {
                        "locality": after.optimized.locality,
                        "hash_locality": after.hash.locality,
                        "imbalance": after.optimized.imbalance,
                        "table_entries": new.table_sizes(),
                    },
                },
                in_force_from=switch_point,
            )
        outcome["version"] = published.version
    elif switch_point is not None:  # nothing new, but routers by point may route up to the next switch
        store.seal(switch_point)
    return outcome


def _reconfigured(params: OnlineParams, current, topology, fallbacks, blended: KeyCounts, state, window: str):
    """New tables from the blended counts: the first configuration, or one relabeled against ``current``."""
    graph = blended.graph(params.top_pairs)
    engine = next(iter(fallbacks.values())).engine
    parameters = {"hash": engine, "decay": params.decay, "capacity": params.capacity, "window": window}
    if current is None:
        result = optimize(
            graph,
            topology,
            fallbacks,
            alpha=params.alpha,
            seed=params.seed,
            max_entries=params.max_entries,
            parameters=parameters,
        )
        return result.config, None, None, None
    step = reconfigure(
        graph,
        topology,
        current,
        fallbacks,
        alpha=params.alpha,
        seed=params.seed,
        state=state,
        max_entries=params.max_entries,
        parameters=parameters,
        min_gain=params.min_gain,
        incremental=params.incremental,
    )
    return step.config, step.plan, step.unrelabeled_cost, step.topology_change


def _rebalanced(store: ConfigStore, params: OnlineParams, current, counts: KeyCounts, state, served):
    """The tables in force adjusted to the window's key loads (locality from the stored statistics + the window).

    With a balance window (``served``), the loads are the window's scaled to
    what is left of it, balanced on top of what each instance served so far.
    """
    if current is None:
        raise TopologyError("the store is empty: rebalancing adjusts the tables in force; reconfigure first")
    history = _History(store)
    latest = history.latest()
    stored = KeyCounts.read(history.dir / latest) if latest and (history.dir / latest).is_dir() else None
    graph = blend([c for c in (stored, counts) if c is not None], windows=None).graph(params.top_pairs)
    loads = {op: counts.key_loads[op].set_index("key")["weight"] for op in counts.operators}
    options = {}
    if params.rebalance in BASE_AWARE:
        ahead = _ahead(params)
        options = {"state_weight": params.state_weight, "horizon": ahead}
        if served is not None:  # the window's loads forecast the rest of the balance window
            loads = {op: load * ahead for op, load in loads.items()}
            options.update(horizon=1.0, base_loads=served.loads)
        if not params.trace.state and stored is not None:
            state = _with_history(state, stored, params.decay)
    if params.split_hot_keys:
        options.update(split_hot_keys=True, split_share=params.split_share)
    new, _, _ = rebalance_configuration(
        current,
        loads,
        state=state,
        graph=graph,
        method=params.rebalance,
        theta_max=params.theta_max,
        table_cap=params.max_entries,
        **options,
    )
    return new, plan_migration(current, new, state, split_merge=params.split_merge), None


def _ahead(params: OnlineParams) -> float:
    """How many times its window's length lies ahead of the run: until the horizon, or the balance window's end."""
    start, end = params.trace.time_range()
    if start is None or end is None:
        raise InvalidParameterError(
            f"the {params.rebalance!r} rebalancer scales the window's loads to what lies ahead: "
            "give the window as --window or --start/--end"
        )
    if params.balance_until is None:
        return check_duration(params.horizon or DEFAULT_HORIZON, "horizon", "the online job") / (end - start)
    rest = params.balance_window()[1] - end
    if rest.total_seconds() <= 0:
        raise InvalidParameterError(
            f"the balance window ends ({params.balance_until}) before the run's window does ({end.isoformat()}): "
            "nothing is left of it to balance"
        )
    return rest / (end - start)


def _with_history(state: dict, stored: KeyCounts, decay: float | None) -> dict:
    """Each key's window state plus one period of its stored history (the blended load times ``1 - decay``)."""
    share = 1.0 if decay is None else 1.0 - decay
    out = {}
    for op, window in state.items():
        past = stored.key_loads[op].set_index("key")["weight"] * share
        out[op] = window + past.reindex(window.index, fill_value=0.0)
    return out


def _rebalance_decision(before, after, plan, resplit: bool) -> Decision:
    """A rebalancing step publishes when it moves a key or changes a split (balance is its purpose, not the gain)."""
    worst_before, worst_after = max(before.imbalance.values()), max(after.imbalance.values())
    if plan.moved_keys == 0 and not resplit:
        return Decision(False, f"nothing to rebalance: worst imbalance {worst_before:.3f} on the window", 0.0, None)
    reason = (
        f"rebalanced: worst imbalance {worst_before:.3f} -> {worst_after:.3f} on the window, "
        f"locality {before.locality:.1%} -> {after.locality:.1%}"
    )
    return Decision(True, reason, after.locality - before.locality, None)


def _state_sizes(df, keys: list[str], column: str) -> dict:
    """State size per key and operator: the sum of ``column`` over the window (Spark aggregation)."""
    from pyspark.sql import functions as F

    out = {}
    for key in keys:
        table = df.groupBy(key).agg(F.sum(column).alias("state")).toPandas()
        out[key] = table.set_index(key)["state"].astype(float)
    return out
