"""The nightly offline optimization: a trace in, a published routing configuration and a report out.

Stages: read the trace, count key pairs and loads (Space-Saving per partition,
or exact Spark aggregations), build the key graph (driver arrays, and Spark
DataFrames in GraphFrames' schema for its statistics), partition with METIS
under alpha and repair per-operator balance, build the routing tables, replay
the trace in-sample beside hash routing, and publish the configuration, the
report and a load plot into the configuration store atomically.

Run it with ``locality optimize ...`` or, on a cluster::

    spark-submit --py-files locality.whl pipelines/offline.py TRACE --keys a,b --servers 6 --store DIR
"""

from __future__ import annotations

import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from locality._validation import check_integer, check_interval, check_option
from locality.engines import ENGINES
from locality.evaluation import estimate_from_counts
from locality.optimizer import make_fallbacks, optimize
from locality.plots import figure_png, instance_load_figure
from locality.report import format_summary
from locality.routing import RoutingConfiguration
from locality.store import ConfigStore, PublishResult, fingerprint
from locality.topology import Topology
from pipelines.counting import count_trace
from pipelines.evaluate import evaluate_trace
from pipelines.graph_frames import graph_statistics, key_graph_frames
from pipelines.progress import Stages
from pipelines.trace import TraceSpec, input_files, read_trace

__all__ = ["OfflineParams", "OfflineResult", "run", "main"]

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

    def __post_init__(self) -> None:
        owner = "the offline job"
        check_interval(self.alpha, "alpha", owner, lower=1.0)
        check_option(self.hash, "hash", owner, ENGINES)
        check_integer(self.capacity, "capacity", owner, lower=1)
        check_integer(self.seed, "seed", owner, lower=0)
        for name in ("top_pairs", "max_entries"):
            if getattr(self, name) is not None:
                check_integer(getattr(self, name), name, owner, lower=1 if name == "top_pairs" else 0)
        self.trace.check_operators(self.topology.operators)

    def fingerprint_parameters(self) -> dict:
        """What, besides the input files, decides the tables (the store's idempotency key)."""
        trace = {k: v for k, v in asdict(self.trace).items() if k not in ("path", "columns")}
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

    A rerun on the same input files and parameters publishes nothing new: it
    points ``CURRENT`` at the version they made and returns its report.
    """
    stages = stages or Stages(show=False)
    store = ConfigStore(params.store)
    key = fingerprint(input_files(params.trace), params.fingerprint_parameters())
    reused = store.reuse(key)
    if reused is not None:
        report = store.get(reused.version).read_json("report.json")
        report.update(version=reused.version, previous_version=reused.previous_version, reused=True)
        return OfflineResult(reused, report, store.get(reused.version).config)

    with stages.stage("read trace"):
        df = read_trace(spark, params.trace)
    with stages.stage("count keys" + (" (exact)" if params.exact else " (sketch)")):
        counts = count_trace(
            df,
            params.trace,
            exact=params.exact,
            capacity=params.capacity,
            top_pairs=params.top_pairs,
            on_partition=stages.advance,
        )
    graph = counts.graph(params.top_pairs)
    # Graph statistics are Spark jobs on a small graph (latency, not work): run them in a thread while the
    # driver partitions, routes and draws; the report waits for both.
    with ThreadPoolExecutor(max_workers=1) as background:
        stats = background.submit(_statistics, spark, graph) if params.graph_stats else None
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
            shares = {op: params.topology.instance_shares(op) for op in params.topology.operators}
            plot = figure_png(instance_load_figure(evaluation, shares, params.alpha))
            stats = stats.result() if stats else None
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
    report.update(version=published.version, previous_version=published.previous_version)
    return OfflineResult(published, report, result.config)


def _statistics(spark, graph) -> dict:
    """Degrees and components of the key graph, computed by Spark on its GraphFrames-schema DataFrames."""
    vertices, edges = key_graph_frames(spark, graph)
    return graph_statistics(spark, vertices, edges)


def _headline(report: dict) -> dict:
    figures = report["in_sample"]
    return {
        "locality": figures["locality"],
        "hash_locality": figures["hash_locality"],
        "imbalance": figures["imbalance"],
        "table_entries": figures["table_entries"],
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``spark-submit pipelines/offline.py TRACE --keys a,b --servers N --store DIR [...]``.

    Takes the options of ``locality optimize`` (the CLI is the one parser).
    """
    from locality.cli import main as cli_main

    return cli_main(["optimize", *(argv if argv is not None else sys.argv[1:])])


if __name__ == "__main__":
    raise SystemExit(main())
