"""The nightly offline optimization: a trace in, a published routing configuration and a report out.

Stages: read the trace, count key pairs and loads (Space-Saving per partition,
or exact Spark aggregations; local Parquet read by the tasks with pyarrow),
build the key graph (driver arrays; its statistics from a GraphFrame of it or
on the driver, ``graph_stats_backend``), partition with METIS
under alpha and repair per-operator balance, build the routing tables, replay
the trace in-sample beside hash routing, and publish the configuration, the
report and a load plot into the configuration store atomically.

When the store holds a version routing the same operators with the same
fallback hash, the run relabels against it as ``locality reconfigure --decay
0`` would (METIS's parts onto the servers that hold their state, keys kept on
their instance; servers added or removed through
:func:`locality.reconfiguration.reconfigure`), publishes the migration plan
with the version and reports the state that moves: without it, METIS's
arbitrary labels moved most of a week's state every night on the weekly
traces (``benchmarks/RESULTS.md``, "Nightly runs relabel against the version in force").

Run it with ``locality optimize ...`` or, on a cluster::

    spark-submit --py-files locality.whl locality_job.py optimize TRACE --keys a,b --servers 6 --store DIR
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from locality._validation import boundary
from locality.evaluation import estimate_from_counts
from locality.optimizer import make_fallbacks, optimize
from locality.publication import publish_run
from locality.reconfiguration import reconfigure
from locality.report import format_summary
from locality.routing import RoutingConfiguration
from locality.store import REPORT, ConfigStore, PublishResult, fingerprint
from locality.topology import Topology
from pipelines.counting import read_and_count
from pipelines.evaluate import evaluate_trace
from pipelines.graph_backend import check_backend
from pipelines.graph_frames import graph_statistics, graphframes_available
from pipelines.params import OfflineParams
from pipelines.progress import Stages
from pipelines.trace import check_trace, input_identity

__all__ = ["OfflineResult", "run"]

logger = logging.getLogger(__name__)


@dataclass
class OfflineResult:
    """What a run published (or found already published) and its report."""

    publish: PublishResult
    report: dict
    config: RoutingConfiguration

    @property
    def summary(self) -> str:
        return format_summary(self.report)


@boundary
def run(spark, params: OfflineParams, stages: Stages | None = None) -> OfflineResult:
    """Run the offline optimization with ``spark`` and publish into ``params.store``.

    The trace's files and the store are checked before Spark does any work. A
    rerun on the same input files and parameters publishes nothing and leaves
    ``CURRENT`` where it is, even when the version they made is no longer the
    current one; it returns that version's report (``reused`` is true).

    Raises
    ------
    TraceError, InvalidParameterError
        The trace cannot be used (the message names the file or column).
    StoreError
        The store is not a writable directory, or the version could not be written.
    StoreBusyError
        Another writer held the store for ``params.lock_timeout`` seconds.
    JobError
        A Spark worker died; nothing was published.
    """
    stages = stages or Stages(show=False)
    store = ConfigStore(params.store, lock_timeout=params.lock_timeout, job="locality optimize")
    store.check_writable()
    check_trace(params.trace)
    key = fingerprint(input_identity(params.trace, store.digest_cache), params.fingerprint_parameters())
    existing = store.find(key)
    if existing is not None:
        stored = store.get(existing)
        current = store.current_version()
        report = stored.read_json(REPORT)
        report.update(version=existing, previous_version=current, current_version=current, reused=True)
        return OfflineResult(PublishResult(existing, current, False, current), report, stored.config)

    if params.graph_stats:  # "graphframes" without the jar fails now, not after the counting
        jar = graphframes_available(spark)
        check_backend(params.graph_stats_backend, jar, "graph_stats_backend", "the offline job")
    df, counts = read_and_count(spark, params, stages)
    graph = counts.graph(params.top_pairs)
    # The version in force is read, relabeled against and planned from under the writers' lock, so that the
    # plan starts from the version that is current when this one is published (as in the online job).
    with store.lock():
        previous = store.current_version()
        current = store.get(previous).config if previous is not None else None
        fallbacks = make_fallbacks(params.topology, params.hash)
        base = _relabel_base(current, params.topology, fallbacks)
        # Via GraphFrames, graph statistics are Spark jobs on a small graph (latency, not work): run them in a
        # thread while the driver partitions and routes; the report waits for both.
        with ThreadPoolExecutor(max_workers=1) as background:
            stats = (
                background.submit(graph_statistics, spark, graph, params.graph_stats_backend)
                if params.graph_stats
                else None
            )
            with stages.stage("partition (METIS) and route" + (", graph statistics" if stats else "")):
                result, plan, change = _optimized(graph, params, counts.mode, base, fallbacks)
                if params.replay:
                    evaluation = evaluate_trace(df, result.config, params.trace.keys, weight=params.trace.weight)
                else:
                    evaluation = estimate_from_counts(result.config, counts, counts.usable_rows)
                stats = stats.result() if stats else None

        def report_of(numbered) -> dict:
            """The run's report, once its plan (if any) is numbered from the version in force to this one."""
            return {
                "job": "offline",
                "trace": params.trace.path,
                "parameters": params.fingerprint_parameters(),
                "counting": counts.summary(),
                "graph_statistics": stats,
                "optimization": result.summary(),
                "in_sample": {**evaluation.to_dict(), "method": "replay" if params.replay else "counts"},
                "migration": _migration(numbered, previous, base, change),
                "timings": dict(stages.timings),
            }

        # Drawn (by the publication) once the statistics thread is done: matplotlib reads sys.modules["IPython"]
        # when it makes its first canvas, and that thread's first PySpark call imports IPython (pyspark's
        # call-site capture); drawing while it does killed one run in three ("partially initialized module
        # 'IPython'").
        with stages.stage("publish"):
            published, report = publish_run(
                store,
                result.config,
                evaluation,
                job="offline",
                report=report_of,
                plan=plan,
                from_version=previous,
                alpha=params.alpha,
                fingerprint=key,
                metadata={"trace": params.trace.path},
            )
    report.update(
        version=published.version,
        previous_version=published.previous_version,
        current_version=published.current_version,
        reused=not published.created,
    )
    return OfflineResult(published, report, result.config)


def _relabel_base(current, topology: Topology, fallbacks) -> RoutingConfiguration | None:
    """The version in force when the nightly run relabels against it: the same operators and fallback hash.

    Another engine or other hash parameters move every key the tables do not
    list (a redeployment): the run then optimizes from scratch, without a
    plan. Another number of servers or instances is a topology change the
    relabeling handles (:func:`~locality.reconfiguration.reconfigure`).
    """
    if current is None or tuple(current.topology.operators) != tuple(topology.operators):
        return None
    for op in topology.operators:
        before, after = current.tables[op].fallback.to_dict(), fallbacks[op].to_dict()
        if (before["engine"], before["parameters"]) != (after["engine"], after["parameters"]):
            return None
    return current


def _optimized(graph, params: OfflineParams, mode: str, base, fallbacks):
    """The new tables: relabeled against ``base`` (the version in force) with the plan from it, or from scratch."""
    parameters = {"hash": params.hash, "mode": mode, "capacity": params.capacity}
    common = dict(alpha=params.alpha, seed=params.seed, max_entries=params.max_entries, parameters=parameters)
    if base is None:
        return optimize(graph, params.topology, fallbacks, **common), None, None
    step = reconfigure(graph, params.topology, base, fallbacks, compare_unrelabeled=False, **common)
    return step.optimization, step.plan, step.topology_change


def _migration(plan, previous: int | None, base, change: str | None) -> dict:
    """The report's account of the state this version moves from the one in force."""
    if plan is None:
        why = (
            "the store is empty"
            if previous is None
            else (
                f"version {previous} routes other operators or falls back to another hash: every key may move "
                "(a redeployment)"
            )
        )
        return {"relabeled": False, "from_version": previous, "reason": why}
    return {"relabeled": True, **plan.summary(), "topology_change": change}
