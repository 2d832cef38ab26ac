"""The nightly offline optimization: a trace in, a published routing configuration and a report out.

Stages: read the trace, count key pairs and loads (Space-Saving per partition,
or exact Spark aggregations; local Parquet read by the tasks with pyarrow),
build the key graph (driver arrays; a GraphFrame of it for its statistics when
the GraphFrames jar is present), partition with METIS
under alpha and repair per-operator balance, build the routing tables, replay
the trace in-sample beside hash routing, and publish the configuration, the
report and a load plot into the configuration store atomically.

Run it with ``locality optimize ...`` or, on a cluster::

    spark-submit --py-files locality.whl locality_job.py optimize TRACE --keys a,b --servers 6 --store DIR
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from locality._validation import (
    MAX_WAIT_SECONDS,
    WAIT_LIMIT,
    check_at_most,
    check_integer,
    check_interval,
    check_option,
)
from locality.engines import ENGINES
from locality.evaluation import estimate_from_counts
from locality.optimizer import make_fallbacks, optimize
from locality.partition import MAX_SEED, SEED_LIMIT
from locality.plots import figure_png, instance_load_figure
from locality.report import format_summary
from locality.routing import RoutingConfiguration
from locality.store import DEFAULT_LOCK_TIMEOUT, ConfigStore, PublishResult, fingerprint
from locality.topology import Topology
from pipelines.counting import read_and_count
from pipelines.evaluate import evaluate_trace
from pipelines.graph_frames import graph_statistics
from pipelines.progress import Stages
from pipelines.trace import TraceSpec, check_trace, input_identity

__all__ = ["OfflineParams", "OfflineResult", "run"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OfflineParams:
    """Everything the offline job needs; validated on construction (errors name the parameter)."""

    trace: TraceSpec
    topology: Topology
    store: str
    alpha: float = 1.03
    hash: str = "kafka"
    top_pairs: int | None = None
    capacity: int = 100_000
    exact: bool = False
    max_entries: int | None = None
    seed: int = 0
    graph_stats: bool = True
    replay: bool = False
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT

    def __post_init__(self) -> None:
        owner = "the offline job"
        check_interval(self.alpha, "alpha", owner, lower=1.0)
        check_at_most(
            check_interval(self.lock_timeout, "lock_timeout", owner, lower=0.0),
            MAX_WAIT_SECONDS,
            "lock_timeout",
            owner,
            WAIT_LIMIT,
        )
        check_option(self.hash, "hash", owner, ENGINES)
        check_integer(self.capacity, "capacity", owner, lower=1)
        check_at_most(check_integer(self.seed, "seed", owner, lower=0), MAX_SEED, "seed", owner, SEED_LIMIT)
        for name in ("top_pairs", "max_entries"):
            if getattr(self, name) is not None:
                check_integer(getattr(self, name), name, owner, lower=1 if name == "top_pairs" else 0)
        self.trace.check_operators(self.topology.operators)

    def fingerprint_parameters(self) -> dict:
        """What, besides the input files, decides the tables (the store's idempotency key)."""
        trace = {k: v for k, v in self.trace.describe().items() if k != "path"}
        return {
            "trace": trace,
            "topology": self.topology.to_dict(),
            "alpha": self.alpha,
            "hash": self.hash,
            "top_pairs": self.top_pairs,
            "capacity": None if self.exact else self.capacity,
            "exact": self.exact,
            "max_entries": self.max_entries,
            "seed": self.seed,
        }


@dataclass
class OfflineResult:
    """What a run published (or found already published) and its report."""

    publish: PublishResult
    report: dict
    config: RoutingConfiguration

    @property
    def summary(self) -> str:
        return format_summary(self.report)


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
    key = fingerprint(input_identity(params.trace, store.digests_path), params.fingerprint_parameters())
    existing = store.find(key)
    if existing is not None:
        stored = store.get(existing)
        current = store.current_version()
        report = stored.read_json("report.json")
        report.update(version=existing, previous_version=current, current_version=current, reused=True)
        return OfflineResult(PublishResult(existing, current, False, current), report, stored.config)

    df, counts = read_and_count(spark, params, stages)
    graph = counts.graph(params.top_pairs)
    # With the GraphFrames jar, graph statistics are Spark jobs on a small graph (latency, not work): run them
    # in a thread while the driver partitions and routes; the report waits for both.
    with ThreadPoolExecutor(max_workers=1) as background:
        stats = background.submit(graph_statistics, spark, graph) if params.graph_stats else None
        with stages.stage("partition (METIS) and route" + (", graph statistics" if stats else "")):
            result = optimize(
                graph,
                params.topology,
                make_fallbacks(params.topology, params.hash),
                alpha=params.alpha,
                seed=params.seed,
                max_entries=params.max_entries,
                parameters={"hash": params.hash, "mode": counts.mode, "capacity": params.capacity},
            )
            if params.replay:
                evaluation = evaluate_trace(df, result.config, params.trace.keys, weight=params.trace.weight)
            else:
                evaluation = estimate_from_counts(result.config, counts, counts.usable_rows)
            stats = stats.result() if stats else None
    # Drawn once the statistics thread is done: matplotlib reads sys.modules["IPython"] when it makes its first
    # canvas, and that thread's first PySpark call imports IPython (pyspark's call-site capture); drawing while
    # it does killed one run in three with "partially initialized module 'IPython'" (issue 10).
    shares = {op: params.topology.instance_shares(op) for op in params.topology.operators}
    plot = figure_png(instance_load_figure(evaluation, shares, params.alpha))
    report = {
        "job": "offline",
        "trace": params.trace.path,
        "parameters": params.fingerprint_parameters(),
        "counting": counts.summary(),
        "graph_statistics": stats,
        "optimization": result.summary(),
        "in_sample": {**evaluation.to_dict(), "method": "replay" if params.replay else "counts"},
    }
    with stages.stage("publish"):
        report["timings"] = dict(stages.timings)
        published = store.publish(
            result.config,
            fingerprint=key,
            artifacts={"report.json": report, "report.txt": format_summary(report), "load.png": plot},
            metadata={"job": "offline", "trace": params.trace.path, "summary": _headline(report)},
        )
    report.update(
        version=published.version,
        previous_version=published.previous_version,
        current_version=published.current_version,
        reused=not published.created,
    )
    return OfflineResult(published, report, result.config)


def _headline(report: dict) -> dict:
    figures = report["in_sample"]
    return {
        "locality": figures["locality"],
        "hash_locality": figures["hash_locality"],
        "imbalance": figures["imbalance"],
        "table_entries": figures["table_entries"],
    }
