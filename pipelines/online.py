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

Instead of a trace, a run may read the window's sketches the engines
published into the store (:func:`run_sketches`, ``locality reconfigure
--sketches``: :mod:`locality.engine_sketches`): merged, they are the window's
counts, with their error bound; no Spark runs, and the rest is the same.

The job is thin: it reads and counts the window with Spark (and, with a
balance window, replays what was served since it began), and hands the rest
to the library (:func:`locality.online.run_window`); the state it keeps
between runs (blended statistics, decisions, the served ledger) is the
store's (:class:`~locality.store.ConfigStore`, which documents its folders).

Everything from reading the version in force to recording the decision
happens under the store's writer lock (:meth:`locality.store.ConfigStore.lock`),
so a nightly job publishing into the same store waits instead of interleaving:
the migration plan always starts from the version that is current when it is
published. Counting the window (the Spark pass) runs before the lock is taken.

Run it with ``locality reconfigure ...`` or, on a cluster::

    spark-submit --py-files locality.whl locality_job.py reconfigure TRACE --keys a,b --store DIR [...]
"""

from __future__ import annotations

import logging

from locality._validation import boundary
from locality.engine_sketches import SketchWindow
from locality.errors import TopologyError
from locality.online import Window, ahead, deployment, run_window
from locality.rebalance import BASE_AWARE
from locality.routing import RoutingConfiguration
from locality.store import ConfigStore
from pipelines.counting import EngineSketchCounts, read_and_count
from pipelines.params import OnlineParams
from pipelines.progress import Stages
from pipelines.served import ServedLoads
from pipelines.trace import check_trace

__all__ = ["run", "run_sketches"]

logger = logging.getLogger(__name__)


@boundary
def run(spark, params: OnlineParams, stages: Stages | None = None) -> dict:
    """One reconfiguration run; returns the JSON-ready outcome (also recorded in the store).

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
    window = Window(params.window_key(), tuple(params.trace.keys), *params.trace.time_range(), bool(params.trace.state))
    recorded, current_version, current = _before_counting(store, params, window)
    if recorded is not None:
        return recorded
    keys = list(params.trace.keys)
    df, counts = read_and_count(spark, params, stages, what="window")
    if params.trace.state:
        state = _state_sizes(df, keys, params.trace.state)
    else:  # a key's state defaults to its load in the window (not in the blended history)
        state = {op: counts.key_load(op) for op in keys}
    ledger = served = None
    if params.balance_since is not None and current is not None:
        with stages.stage("served since the balance window began"):
            ledger = _ledger(store, params, current)
            served = _served(spark, params, ledger, current)

    with store.lock():
        recorded = _recorded(store, window.name)  # another run may have decided this window while we counted
        if recorded is not None:
            return recorded
        in_force, current = _in_force(store, current_version, current, ledger is not None)
        if ledger is not None:
            stored = _ledger(store, params, current)
            if in_force != current_version or stored.until != ledger.until:
                # another writer moved CURRENT or the ledger meanwhile: count again from what is stored now
                served = _served(spark, params, stored, current)
        if served is not None:  # before publishing: a run killed after it counts nothing twice when rerun
            served.write(store)
        return _decided(store, params, window, counts, state, (in_force, current), stages, served=served)


@boundary
def run_sketches(params: OnlineParams, sketches: SketchWindow | None = None, stages: Stages | None = None) -> dict:
    """One reconfiguration run on the engines' sketches of a window (``params.sketches``): no trace, no Spark.

    The window's sketches (``sketches``, or read from the store as
    ``params.sketches`` selects them) are the counts; each key's state is its
    load there. The window is named ``sketches-<from>-<to>-<identity>``
    (:meth:`OnlineParams.sketch_window_name`): a rerun on the same sketches
    returns the recorded outcome with ``rerun`` set. The outcome's
    ``sketches`` says what was read and how exact it is
    (:meth:`locality.engine_sketches.SketchWindow.summary`).

    Raises
    ------
    StoreError
        The store has no sketches, none in the window, or sketches that cannot be merged (the message names them).
    TopologyError
        The topology's operators are not the sketches' (in chain order).
    StoreBusyError
        Another writer held the store for ``params.lock_timeout`` seconds.
    """
    stages = stages or Stages(show=False)
    store = ConfigStore(params.store, lock_timeout=params.lock_timeout, job="locality reconfigure")
    store.check_writable()
    if sketches is None:
        with stages.stage("read the engines' sketches"):
            sketches = params.sketches.read(store)
    if params.topology is not None and tuple(params.topology.operators) != sketches.operators:
        raise TopologyError(
            f"the topology's operators {list(params.topology.operators)} must be the sketches' operators, in the "
            f"order their hops chain: {list(sketches.operators)}"
        )
    span = sketches.span
    window = Window(params.sketch_window_name(sketches), sketches.operators, span.start_time, span.end_time)
    recorded, current_version, current = _before_counting(store, params, window)
    if recorded is not None:
        return recorded
    counts = EngineSketchCounts.of(sketches)
    state = {op: counts.key_load(op) for op in sketches.operators}  # a key's state: its load in the window
    with store.lock():
        recorded = _recorded(store, window.name)  # another run may have decided this window meanwhile
        if recorded is not None:
            return recorded
        in_force = _in_force(store, current_version, current)
        return _decided(store, params, window, counts, state, in_force, stages, sketches=counts.sketches)


def _before_counting(
    store: ConfigStore, params: OnlineParams, window: Window
) -> tuple[dict | None, int | None, RoutingConfiguration | None]:
    """The outcome recorded for ``window`` (a rerun), else None and the version in force with its configuration.

    Fails before counting when the store cannot take this run (checked again
    under the lock): the deployment, and what lies ahead of a rebalancing step.
    """
    recorded = _recorded(store, window.name)
    if recorded is not None:
        return recorded, None, None
    current_version = store.current_version()
    current = store.get(current_version).config if current_version is not None else None
    deployment(params, window, current)
    if params.rebalance is not None and params.rebalance.method in BASE_AWARE:
        ahead(params, window)  # the window's length and what lies ahead are known before counting
    return None, current_version, current


def _decided(
    store: ConfigStore,
    params: OnlineParams,
    window: Window,
    counts,
    state: dict,
    in_force: tuple[int | None, RoutingConfiguration | None],
    stages: Stages,
    *,
    served: ServedLoads | None = None,
    sketches: dict | None = None,
) -> dict:
    """The window's outcome (:func:`locality.online.run_window`, under the lock), recorded as its decision.

    ``in_force`` is the version in force and its configuration; ``sketches``, what the
    engines' sketches were (added to the outcome).
    """
    version, current = in_force
    outcome = run_window(
        store,
        params,
        window,
        counts,
        state,
        previous_version=version,
        current=current,
        served=served,
        switch_point=params.switch_point(window.end),
        stage=stages.stage,
    )
    if sketches is not None:
        outcome["sketches"] = sketches
    store.record_decision(window.name, outcome)
    return outcome


def _in_force(
    store: ConfigStore, read: int | None, current: RoutingConfiguration | None, needed: bool = False
) -> tuple[int | None, RoutingConfiguration | None]:
    """The version in force under the lock and its configuration (``current``, read as ``read``, unless it moved).

    ``needed``: a version in force is required (a balance window), so that an
    empty store is named by :meth:`ConfigStore.get`.
    """
    in_force = store.current_version()
    if in_force != read:  # another writer moved CURRENT meanwhile: route as it says now
        current = store.get(in_force).config if in_force is not None or needed else None
    return in_force, current


def _ledger(store: ConfigStore, params: OnlineParams, config: RoutingConfiguration) -> ServedLoads:
    """The stored ledger of the run's balance window."""
    return ServedLoads.read(store, params.balance_window()[0], config)


def _served(spark, params: OnlineParams, ledger: ServedLoads, config: RoutingConfiguration) -> ServedLoads:
    """``ledger`` with the rows up to the end of the run's window added as ``config`` routes them."""
    return ledger.caught_up(spark, params.trace, config, params.trace.time_range()[1])


def _recorded(store: ConfigStore, window: str) -> dict | None:
    """The outcome recorded for ``window`` by an earlier run, marked as a rerun; None if there is none."""
    outcome = store.decision(window)
    if outcome is None:
        return None
    outcome["rerun"] = True
    return outcome


def _state_sizes(df, keys: list[str], column: str) -> dict:
    """State size per key and operator: the sum of ``column`` over the window (Spark aggregation)."""
    from pyspark.sql import functions as F

    out = {}
    for key in keys:
        table = df.groupBy(key).agg(F.sum(column).alias("state")).toPandas()
        out[key] = table.set_index(key)["state"].astype(float)
    return out
