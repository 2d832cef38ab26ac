"""One run of the online job on a window's counts: blend, change the tables in force, decide, publish.

The Spark job (:mod:`pipelines.online`) counts the window and, with a balance
window, what each instance served; everything else is here, on the driver
and without Spark: the deployment to route on (:func:`deployment`), the
window's counts blended with the history kept in the store
(:func:`blended_history`), then either a reconfiguration (METIS, relabeled
against the version in force, :func:`locality.reconfiguration.reconfigure`)
or a rebalancing step (the tables in force adjusted to the window's key loads
by a rebalancer, :func:`locality.rebalance.tables.rebalance_configuration`),
the decision (:func:`locality.reconfiguration.decide`, or for a rebalancing
step: publish when a key moves), and the publication with its report and
migration plan (:func:`run_window`).

A rebalancing step scales the window's key loads to what lies ahead
(:func:`ahead`: until the horizon, or the end of the balance window), and
weighs a key's state as its window load plus one period of its stored
history (:func:`with_history`), so that a key known for weeks is not moved
as if it had just appeared.

Its settings are :class:`OnlineSettings`, checked when built; the online job's
parameters (:class:`pipelines.params.OnlineParams`) are those settings and what
the job itself reads (the trace, the store, the switch's lead).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import KW_ONLY, dataclass
from datetime import datetime

import pandas as pd

from locality._validation import check_duration, check_interval
from locality.counts import KeyCounts, blend
from locality.defaults import (
    DEFAULT_DECAY,
    DEFAULT_HORIZON,
    DEFAULT_MAX_IMBALANCE,
    DEFAULT_MIN_BLENDED_WEIGHT,
    DEFAULT_MIN_GAIN,
)
from locality.errors import InvalidParameterError, TopologyError
from locality.evaluation import Evaluation, EvaluationReport, estimate_from_counts
from locality.hashing import FallbackHash, make_fallback
from locality.migration import MigrationPlan, plan_migration
from locality.optimizer import OptimizerSettings, make_fallbacks, optimize
from locality.publication import publish_run
from locality.rebalance import BASE_AWARE, check_locality_aware
from locality.rebalance.options import RebalanceOptions
from locality.rebalance.tables import rebalance_configuration
from locality.reconfiguration import Decision, decide, reconfigure
from locality.report import format_summary
from locality.routing import RoutingConfiguration
from locality.store import ConfigStore
from locality.time_range import parse_time
from locality.topology import Topology

__all__ = [
    "OnlineSettings",
    "Window",
    "run_window",
    "deployment",
    "blended_history",
    "ahead",
    "with_history",
    "rebalance_decision",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OnlineSettings(OptimizerSettings):
    """How one online run changes the tables in force, checked when built (:class:`pipelines.params.OnlineParams`).

    The :class:`~locality.optimizer.OptimizerSettings` (``alpha``, ``hash``,
    ``capacity``, ``top_pairs``, ``max_entries``, ``seed``), and:

    ``topology`` is used when the store is empty; afterwards the current
    version's fallback hash is kept, and so is its topology unless
    ``topology`` names another one: the run then publishes a version for that
    topology, whatever the gain (:func:`deployment`). ``decay`` weighs the
    stored history (0 forgets); ``min_gain`` and ``max_imbalance`` decide
    whether a reconfiguration publishes (:func:`locality.reconfiguration.decide`);
    ``incremental`` starts it from the version in force instead of a new
    METIS partition. ``rebalance`` makes the run a rebalancing step instead
    (:class:`~locality.rebalance.options.RebalanceOptions`): its moves serve
    until ``horizon`` (:data:`~locality.defaults.DEFAULT_HORIZON` when None), or
    with a balance window (``balance_since`` .. ``balance_until``, ISO 8601)
    until its end, on top of what each instance served since it began.
    """

    _: KW_ONLY
    topology: Topology | None = None
    decay: float = DEFAULT_DECAY
    min_gain: float = DEFAULT_MIN_GAIN
    max_imbalance: float = DEFAULT_MAX_IMBALANCE
    rebalance: RebalanceOptions | None = None
    horizon: str | None = None
    balance_since: str | None = None
    balance_until: str | None = None
    incremental: bool = False

    _OWNER = "OnlineSettings"

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = self._OWNER
        if self.rebalance is not None:
            if not isinstance(self.rebalance, RebalanceOptions):
                raise InvalidParameterError(
                    f"the 'rebalance' parameter of {owner} must be RebalanceOptions; got {self.rebalance!r}",
                    parameter="rebalance",
                )
            if self.incremental:
                raise InvalidParameterError(
                    f"incremental in {owner} starts a reconfiguration from the version in force; a rebalancing run "
                    f"(rebalance {self.rebalance.method!r}) adjusts that version already: give one or the other",
                    parameter="incremental",
                )
        if self.horizon is not None:
            check_duration(self.horizon, "horizon", owner)
        self._check_balance_window(owner)
        check_interval(self.min_gain, "min_gain", owner, lower=0.0)
        check_interval(self.max_imbalance, "max_imbalance", owner, lower=self.alpha)
        check_interval(self.decay, "decay", owner, lower=0.0, upper=1.0)

    def _check_balance_window(self, owner: str) -> None:
        if self.balance_since is None and self.balance_until is None:
            return
        if self.balance_since is None or self.balance_until is None:
            raise InvalidParameterError(
                f"the 'balance_since' and 'balance_until' parameters of {owner} go together (the balance window)",
                parameter="balance_since" if self.balance_since is None else "balance_until",
            )
        method = self.rebalance.method if self.rebalance is not None else None
        check_locality_aware(method, "rebalance", owner, "a balance window")
        if self.horizon is not None:
            raise InvalidParameterError(
                f"give {owner} either a horizon or a balance window: with a balance window the moves serve "
                "until its end (balance_until)",
                parameter="horizon",
            )
        since, until = self.balance_window()
        if until <= since:
            raise InvalidParameterError(
                f"the balance window of {owner} must end after it begins; "
                f"got {self.balance_since} .. {self.balance_until}",
                parameter="balance_until",
            )

    def balance_window(self) -> tuple[datetime, datetime]:
        """``(balance_since, balance_until)`` as UTC-aware datetimes."""
        return parse_time(self.balance_since, "balance_since"), parse_time(self.balance_until, "balance_until")


@dataclass(frozen=True)
class Window:
    """The window a run reads: its name in the store, its key columns, its time range, and whether it gives state.

    ``start`` and ``end`` are None when the window is not a time range (the
    newest files of a directory); ``state_given`` says the trace has a state
    column, whose sums are then each key's state.
    """

    name: str
    keys: tuple[str, ...]
    start: datetime | None
    end: datetime | None
    state_given: bool = False


def deployment(
    settings: OnlineSettings, window: Window, current: RoutingConfiguration | None
) -> tuple[Topology, dict[str, FallbackHash]]:
    """The topology and fallbacks the run routes on: the version in force's, or the new topology with its hash.

    Raises
    ------
    TopologyError
        The store is empty and no topology is given, the version in force
        routes other operators, or a rebalancing step is asked for another
        topology.
    """
    if current is None:
        if settings.topology is None:
            raise TopologyError("the store is empty: the first run needs the topology", parameter="topology")
        return settings.topology, make_fallbacks(settings.topology, settings.hash)
    if tuple(current.topology.operators) != tuple(window.keys):
        raise TopologyError(
            f"the current version routes {list(current.topology.operators)}; got key columns {list(window.keys)}"
        )
    if settings.topology is None or settings.topology == current.topology:
        return current.topology, {op: t.fallback for op, t in current.tables.items()}
    if settings.rebalance is not None:
        raise TopologyError(
            f"the topology differs from the current version's ({len(current.topology.servers)} servers, now "
            f"{len(settings.topology.servers)}): a rebalancing run adjusts the tables in force; change the topology "
            "with a reconfiguration run (no rebalance)",
            parameter="topology",
        )
    fallbacks = {}
    for op, table in current.tables.items():  # the engine's hash, sized to the new instances
        spec = table.fallback.to_dict()
        fallbacks[op] = make_fallback(spec["engine"], settings.topology.n_instances(op), **spec["parameters"])
    return settings.topology, fallbacks


def blended_history(store: ConfigStore, window: str, counts: KeyCounts, decay: float, limit: int) -> KeyCounts:
    """Counts of this window blended with the latest earlier window's, stored once per window (under the lock).

    Blends are pruned to ``limit`` pairs and keys (the sketch capacity) so they
    stay bounded; ``decay`` 0 forgets: the window's counts are kept alone.
    """
    stored = store.statistics(window)
    if stored is not None:
        return stored
    latest = store.latest_window()
    previous = store.statistics(latest) if decay > 0 and latest not in (None, window) else None
    if previous is not None:
        counts = blend(
            [previous, counts], windows=None, decay=decay, min_weight=DEFAULT_MIN_BLENDED_WEIGHT, limit=limit
        )
    store.record_statistics(window, counts)
    return counts


def ahead(settings: OnlineSettings, window: Window) -> float:
    """How many times its window's length lies ahead of the run: until the horizon, or the balance window's end.

    Raises
    ------
    InvalidParameterError
        The window is not a time range, or the balance window ends before it does.
    """
    start, end = window.start, window.end
    if start is None or end is None:
        raise InvalidParameterError(
            f"the {settings.rebalance.method!r} rebalancer scales the window's loads to what lies ahead: "
            "the window needs a start and an end (a time range of the trace, or its last window)",
            parameter="window",
        )
    if settings.balance_until is None:
        return pd.Timedelta(settings.horizon or DEFAULT_HORIZON) / (end - start)
    rest = settings.balance_window()[1] - end
    if rest.total_seconds() <= 0:
        raise InvalidParameterError(
            f"the balance window ends ({settings.balance_until}) before the run's window does ({end.isoformat()}): "
            "nothing is left of it to balance",
            parameter="balance_until",
        )
    return rest / (end - start)


def with_history(state: Mapping[str, pd.Series], stored: KeyCounts, decay: float) -> dict[str, pd.Series]:
    """Each key's window state plus one period of its stored history (the blended load times ``1 - decay``)."""
    share = 1.0 - decay
    out = {}
    for op, window in state.items():
        past = stored.key_load(op) * share
        out[op] = window + past.reindex(window.index, fill_value=0.0)
    return out


def rebalance_decision(before: Evaluation, after: Evaluation, plan: MigrationPlan, resplit: bool) -> Decision:
    """A rebalancing step publishes when it moves a key or changes a split (balance is its purpose, not the gain)."""
    worst_before, worst_after = max(before.imbalance.values()), max(after.imbalance.values())
    if plan.moved_keys == 0 and not resplit:
        return Decision(False, f"nothing to rebalance: worst imbalance {worst_before:.3f} on the window", 0.0, None)
    reason = (
        f"rebalanced: worst imbalance {worst_before:.3f} -> {worst_after:.3f} on the window, "
        f"locality {before.locality:.1%} -> {after.locality:.1%}"
    )
    return Decision(True, reason, after.locality - before.locality, None)


def run_window(
    store: ConfigStore,
    settings: OnlineSettings,
    window: Window,
    counts: KeyCounts,
    state: Mapping[str, pd.Series],
    *,
    previous_version: int | None,
    current: RoutingConfiguration | None,
    served=None,
    switch_point: int | None = None,
    stage: Callable[[str], AbstractContextManager] = lambda name: nullcontext(),
) -> dict:
    """Blend, reconfigure or rebalance the version in force, decide, and publish if it pays (under the store's lock).

    Parameters
    ----------
    store : ConfigStore
        Held locked by the caller.
    settings : OnlineSettings
        The online job's parameters.
    window : Window
        The window counted.
    counts : KeyCounts
        Its counts.
    state : mapping of operator -> Series
        Each key's state in the window (its load there, :meth:`KeyCounts.key_load`, unless
        ``window.state_given``).
    previous_version : int or None
        The version in force (``CURRENT``, read under the lock); None for an empty store.
    current : RoutingConfiguration or None
        Its configuration.
    served : pipelines.served.ServedLoads, optional
        With a balance window: what each instance served since it began (``loads``).
    switch_point : int, optional
        The point from which the version is in force for routers by point.
    stage : callable, optional
        ``stage(name)`` returns a context manager around each step (the job's progress).

    Returns
    -------
    dict
        The JSON-ready outcome.
    """
    _check_switch_point(store, switch_point)
    topology, fallbacks = deployment(settings, window, current)
    change = _change(store, settings, window, counts, state, current, topology, fallbacks, served, stage)
    before = estimate_from_counts(current, counts, counts.usable_rows) if current is not None else None
    after = estimate_from_counts(change.config, counts, counts.usable_rows)
    verdict = _verdict(settings, current, topology, change, before, after)
    outcome = {
        "published": verdict.publish,
        "version": previous_version,
        "previous_version": previous_version,
        "locality_before": before.optimized.locality if before else None,
        "locality_after": after.optimized.locality,
        "hash_locality": after.hash.locality,
        "imbalance_before": before.optimized.imbalance if before else None,
        "imbalance_after": after.optimized.imbalance,
        **_moves(change),
        "reason": verdict.reason,
        "window": window.name,
        "rows": counts.rows,
        "dropped": counts.dropped,
        "table_entries": change.config.table_sizes(),
        "split_keys": change.config.split_keys(),
        "topology_change": change.topology_change,
        "in_force_from": switch_point,
    }
    if served is not None:
        outcome["served"] = {**served.to_dict(), "balance_until": settings.balance_window()[1].isoformat()}
    if verdict.publish:
        with stage("publish"):
            published, _ = publish_run(
                store,
                change.config,
                after,
                job="online",
                report=lambda _plan: {
                    "job": "online",
                    **outcome,
                    "counting": counts.summary(),
                    "in_window": after.to_dict(),
                },
                text=_window_text,
                plan=change.plan,
                from_version=previous_version,
                alpha=settings.alpha,
                fingerprint=f"online:{window.name}",
                metadata={"window": window.name},
                in_force_from=switch_point,
            )
        outcome["version"] = published.version
    elif switch_point is not None:  # nothing new, but routers by point may route up to the next switch
        store.seal(switch_point)
    return outcome


@dataclass(frozen=True)
class _Change:
    """What a run proposes: the new tables, the plan from the version in force, and what else moved."""

    config: RoutingConfiguration
    plan: MigrationPlan | None
    unrelabeled_cost: float | None = None
    topology_change: str | None = None


def _check_switch_point(store: ConfigStore, switch_point: int | None) -> None:
    """Refuse a version scheduled before the store's seal: routers by point already routed past it."""
    if switch_point is not None and switch_point < store.schedule().sealed_until:
        raise InvalidParameterError(
            f"the switch's lead schedules this window's version from {switch_point} (ms), before the store's "
            f"schedule is sealed ({store.schedule().sealed_until}): a later window has run already, or the lead is "
            "shorter than before",
            parameter="switch_after",
        )


def _change(
    store: ConfigStore,
    settings: OnlineSettings,
    window: Window,
    counts: KeyCounts,
    state: Mapping[str, pd.Series],
    current: RoutingConfiguration | None,
    topology: Topology,
    fallbacks: Mapping[str, FallbackHash],
    served,
    stage: Callable[[str], AbstractContextManager],
) -> _Change:
    """The run's proposal: the tables in force rebalanced, or a reconfiguration on the blended history."""
    if settings.rebalance is not None:
        with stage(f"rebalance ({settings.rebalance.method})"):
            return _rebalanced(store, settings, window, current, counts, state, served)
    with stage("blend with earlier windows"):
        blended = blended_history(store, window.name, counts, settings.decay, settings.capacity)
    with stage("partition (METIS), relabel and plan"):
        return _reconfigured(settings, current, topology, fallbacks, blended, state, window)


def _verdict(
    settings: OnlineSettings,
    current: RoutingConfiguration | None,
    topology: Topology,
    change: _Change,
    before: EvaluationReport | None,
    after: EvaluationReport,
) -> Decision:
    """Whether the proposal is published: a rebalancing step when it moves, a topology change always, else decide."""
    if settings.rebalance is not None:
        resplit = any(current.tables[op].splits != change.config.tables[op].splits for op in topology.operators)
        return rebalance_decision(before.optimized, after.optimized, change.plan, resplit)
    if change.topology_change is not None:  # the version in force routes on servers no longer the deployment's
        servers = f"{len(current.topology.servers)} -> {len(topology.servers)} servers"
        return Decision(True, f"the topology changes ({servers}): {change.topology_change}", 0.0, None)
    return decide(
        before.optimized if before else None,
        after.optimized,
        change.plan,
        alpha=settings.alpha,
        min_gain=settings.min_gain,
        max_imbalance=settings.max_imbalance,
    )


def _moves(change: _Change) -> dict:
    """The outcome's account of the state the proposal moves."""
    plan = change.plan
    return {
        "migration_cost": plan.cost if plan else 0.0,
        "migration_cost_share": plan.cost_share if plan else 0.0,
        "migration_cost_share_without_relabeling": change.unrelabeled_cost,
        "moved_keys": plan.moved_keys if plan else 0,
    }


def _window_text(report: dict) -> str:
    """A published window's ``report.txt``: its figures on the window and how it was counted."""
    return format_summary({"in_sample": report["in_window"], "counting": report["counting"]})


def _reconfigured(
    settings: OnlineSettings,
    current: RoutingConfiguration | None,
    topology: Topology,
    fallbacks: Mapping[str, FallbackHash],
    blended: KeyCounts,
    state: Mapping[str, pd.Series],
    window: Window,
) -> _Change:
    """New tables from the blended counts: the first configuration, or one relabeled against ``current``."""
    graph = blended.graph(settings.top_pairs)
    engine = next(iter(fallbacks.values())).engine
    parameters = {"hash": engine, "decay": settings.decay, "capacity": settings.capacity, "window": window.name}
    if current is None:
        result = optimize(
            graph,
            topology,
            fallbacks,
            alpha=settings.alpha,
            seed=settings.seed,
            max_entries=settings.max_entries,
            parameters=parameters,
        )
        return _Change(result.config, None)
    step = reconfigure(
        graph,
        topology,
        current,
        fallbacks,
        alpha=settings.alpha,
        seed=settings.seed,
        state=state,
        max_entries=settings.max_entries,
        parameters=parameters,
        min_gain=settings.min_gain,
        incremental=settings.incremental,
    )
    return _Change(step.config, step.plan, step.unrelabeled_cost, step.topology_change)


def _rebalanced(
    store: ConfigStore,
    settings: OnlineSettings,
    window: Window,
    current: RoutingConfiguration | None,
    counts: KeyCounts,
    state: Mapping[str, pd.Series],
    served,
) -> _Change:
    """The tables in force adjusted to the window's key loads (locality from the stored statistics + the window).

    With a balance window (``served``), the loads are the window's scaled to
    what is left of it, balanced on top of what each instance served so far.
    """
    if current is None:
        raise TopologyError("the store is empty: rebalancing adjusts the tables in force; reconfigure first")
    stored = store.statistics()
    graph = blend([c for c in (stored, counts) if c is not None], windows=None).graph(settings.top_pairs)
    # without a state column the caller's state is each key's load in the window already
    loads = {op: counts.key_load(op) for op in counts.operators} if window.state_given else dict(state)
    rebalancer = settings.rebalance
    options = {}
    if rebalancer.method in BASE_AWARE:
        scale = ahead(settings, window)
        options = {"state_weight": rebalancer.state_weight, "horizon": scale}
        if served is not None:  # the window's loads forecast the rest of the balance window
            loads = {op: load * scale for op, load in loads.items()}
            options.update(horizon=1.0, base_loads=served.loads)
        if not window.state_given and stored is not None:
            state = with_history(state, stored, settings.decay)
    if rebalancer.split_hot_keys:
        options.update(split_hot_keys=True, split_share=rebalancer.split_share)
    new, _, _ = rebalance_configuration(
        current,
        loads,
        state=state,
        graph=graph,
        method=rebalancer.method,
        theta_max=rebalancer.theta_max,
        table_cap=settings.max_entries,
        **options,
    )
    return _Change(new, plan_migration(current, new, state, split_merge=rebalancer.split_merge))
