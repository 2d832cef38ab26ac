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

Its parameters are the online job's (:class:`pipelines.params.OnlineParams`),
checked there: this module takes them as they are (:class:`OnlineSettings`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import pandas as pd

from locality._validation import check_duration
from locality.counts import KeyCounts, blend
from locality.defaults import DEFAULT_HORIZON, DEFAULT_MIN_BLENDED_WEIGHT
from locality.errors import InvalidParameterError, TopologyError
from locality.evaluation import Evaluation, estimate_from_counts
from locality.hashing import FallbackHash, make_fallback
from locality.migration import MigrationPlan, plan_migration
from locality.optimizer import make_fallbacks, optimize
from locality.plots import figure_png, instance_load_figure
from locality.rebalance import BASE_AWARE
from locality.rebalance.tables import rebalance_configuration
from locality.reconfiguration import Decision, decide, reconfigure
from locality.report import format_summary
from locality.routing import RoutingConfiguration
from locality.store import ConfigStore
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


class OnlineSettings(Protocol):
    """What a run reads of the online job's parameters (:class:`pipelines.params.OnlineParams`), checked there."""

    topology: Topology | None
    alpha: float
    hash: str
    capacity: int
    top_pairs: int | None
    max_entries: int | None
    decay: float
    min_gain: float
    max_imbalance: float
    seed: int
    rebalance: str | None
    theta_max: float
    state_weight: float
    horizon: str | None
    balance_until: str | None
    split_hot_keys: bool
    split_share: float | None
    split_merge: str
    switch_after: str | None
    incremental: bool

    def balance_window(self) -> tuple[datetime, datetime]: ...


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
            raise TopologyError("the store is empty: give the topology (--servers or --topology) for the first run")
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
            "with a reconfiguration run (without --rebalance)"
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
            f"the {settings.rebalance!r} rebalancer scales the window's loads to what lies ahead: "
            "give the window as --window or --start/--end"
        )
    if settings.balance_until is None:
        return check_duration(settings.horizon or DEFAULT_HORIZON, "horizon", "the online job") / (end - start)
    rest = settings.balance_window()[1] - end
    if rest.total_seconds() <= 0:
        raise InvalidParameterError(
            f"the balance window ends ({settings.balance_until}) before the run's window does ({end.isoformat()}): "
            "nothing is left of it to balance"
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
    if switch_point is not None and switch_point < store.schedule().sealed_until:
        raise InvalidParameterError(
            f"--switch-after {settings.switch_after} schedules this window's version from {switch_point} (ms), "
            f"before the store's schedule is sealed ({store.schedule().sealed_until}): a later window has run "
            "already, or the lead is shorter than before"
        )
    topology, fallbacks = deployment(settings, window, current)
    change = None
    if settings.rebalance is not None:
        with stage(f"rebalance ({settings.rebalance})"):
            new, plan, raw_cost = _rebalanced(store, settings, window, current, counts, state, served)
    else:
        with stage("blend with earlier windows"):
            blended = blended_history(store, window.name, counts, settings.decay, settings.capacity)
        with stage("partition (METIS), relabel and plan"):
            new, plan, raw_cost, change = _reconfigured(settings, current, topology, fallbacks, blended, state, window)
    if plan is not None:
        plan.from_version = previous_version
    before = estimate_from_counts(current, counts, counts.usable_rows) if current is not None else None
    after = estimate_from_counts(new, counts, counts.usable_rows)
    if settings.rebalance is not None:
        resplit = any(current.tables[op].splits != new.tables[op].splits for op in topology.operators)
        verdict = rebalance_decision(before.optimized, after.optimized, plan, resplit)
    elif change is not None:  # the version in force routes on servers that are no longer the deployment's
        servers = f"{len(current.topology.servers)} -> {len(topology.servers)} servers"
        verdict = Decision(True, f"the topology changes ({servers}): {change}", 0.0, None)
    else:
        verdict = decide(
            before.optimized if before else None,
            after.optimized,
            plan,
            alpha=settings.alpha,
            min_gain=settings.min_gain,
            max_imbalance=settings.max_imbalance,
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
        "window": window.name,
        "rows": counts.rows,
        "dropped": counts.dropped,
        "table_entries": new.table_sizes(),
        "split_keys": new.split_keys(),
        "topology_change": change,
        "in_force_from": switch_point,
    }
    if served is not None:
        outcome["served"] = {**served.to_dict(), "balance_until": settings.balance_window()[1].isoformat()}
    if verdict.publish:
        with stage("publish"):
            shares = {op: topology.instance_shares(op) for op in topology.operators}
            artifacts = {
                "report.json": {"job": "online", **outcome, "counting": counts.summary(), "in_window": after.to_dict()},
                "report.txt": format_summary({"in_sample": after.to_dict(), "counting": counts.summary()}),
                "load.png": figure_png(instance_load_figure(after, shares, settings.alpha)),
            }
            if plan is not None:
                plan.to_version = store.next_version()
                artifacts["migration_plan.json"] = plan.to_dict(new)
            published = store.publish(
                new,
                fingerprint=f"online:{window.name}",
                artifacts=artifacts,
                metadata={
                    "job": "online",
                    "window": window.name,
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


def _reconfigured(
    settings: OnlineSettings,
    current: RoutingConfiguration | None,
    topology: Topology,
    fallbacks: Mapping[str, FallbackHash],
    blended: KeyCounts,
    state: Mapping[str, pd.Series],
    window: Window,
):
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
        return result.config, None, None, None
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
    return step.config, step.plan, step.unrelabeled_cost, step.topology_change


def _rebalanced(
    store: ConfigStore,
    settings: OnlineSettings,
    window: Window,
    current: RoutingConfiguration | None,
    counts: KeyCounts,
    state: Mapping[str, pd.Series],
    served,
):
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
    options = {}
    if settings.rebalance in BASE_AWARE:
        scale = ahead(settings, window)
        options = {"state_weight": settings.state_weight, "horizon": scale}
        if served is not None:  # the window's loads forecast the rest of the balance window
            loads = {op: load * scale for op, load in loads.items()}
            options.update(horizon=1.0, base_loads=served.loads)
        if not window.state_given and stored is not None:
            state = with_history(state, stored, settings.decay)
    if settings.split_hot_keys:
        options.update(split_hot_keys=True, split_share=settings.split_share)
    new, _, _ = rebalance_configuration(
        current,
        loads,
        state=state,
        graph=graph,
        method=settings.rebalance,
        theta_max=settings.theta_max,
        table_cap=settings.max_entries,
        **options,
    )
    return new, plan_migration(current, new, state, split_merge=settings.split_merge), None
