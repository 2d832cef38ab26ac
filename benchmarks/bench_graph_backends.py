"""Where the key graph's statistics should run: GraphFrames vs the driver by size, and the job with and without the jar.

The problem: with the GraphFrames jar on the classpath the offline job used to
compute its graph statistics with a ``GraphFrame``, the same figures as scipy on
the driver but much slower, and it waits for them beside METIS. ``auto``
(:mod:`pipelines.graph_backend`) keeps the driver below the graph size from which
GraphFrames is faster; this measures that crossover and what the job pays.

Both parts, in one run:

1. **crossover**: for each size (the random power-law key graphs of
   ``bench_partition.py``; default 1e5, 1e6, 1e7 edges), a fresh process whose
   embedded session has the jar builds the graph, warms both backends up on a
   1e4-edge graph, then times ``--repeat`` calls of
   :func:`pipelines.graph_frames.graph_statistics` with each backend (medians)
   and records their peak memory (:func:`measure`: Python's allocations, the
   session's JVM's heap, where local mode's executors run, and its resident size).
   A size whose process runs past ``--timeout`` keeps what it printed (the
   driver runs first) and says it timed out.
2. **jobs**: for each trace card (tweets, flights, IRA), a fresh process per
   configuration runs the whole offline job (:func:`pipelines.offline.run`, a
   fresh store per run) ``--repeat`` times after a warm-up run: no jar (so
   ``auto`` runs the driver), the jar with ``auto``, the jar with
   ``graphframes`` (what the job did before issue 37). The jar folder is a
   temporary folder holding links to the GraphFrames jars only, and "no jar"
   an empty one, so that nothing else differs.

    .venv/bin/python benchmarks/bench_graph_backends.py --repeat 3
    .venv/bin/python benchmarks/bench_graph_backends.py --edges 100000 --traces geotweets_hashtags_2015 --repeat 1
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

TRACES = ("geotweets_hashtags_2015", "nycflights13_tailnum_dest", "ira_troll_hashtags")
#: The job's configurations: (name, whether the session has the jar, graph_stats_backend).
CONFIGS = (("no jar, auto", False, "auto"), ("jar, auto", True, "auto"), ("jar, graphframes", True, "graphframes"))
WARM_UP_EDGES = 10_000


def _status_mb(field: str, pid: int | str = "self") -> float:
    """A memory field of ``/proc/<pid>/status`` (``VmHWM``, ``VmRSS``) in MB."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith(field + ":"))


def _reset_peak(pid: int | str) -> None:
    """Start a new high-water mark for ``pid`` (Linux: 5 into clear_refs resets VmHWM to the current RSS)."""
    with open(f"/proc/{pid}/clear_refs", "w") as refs:
        refs.write("5")


def jar_folder(with_jar: bool) -> str:
    """A temporary folder with links to the GraphFrames jars found (the set-up's, else ../shared/jars), or empty."""
    from pipelines.jars import GRAPHFRAMES_JARS, spark_jars, spark_jars_dir

    shared = Path(os.environ.get("LOCALITY_SHARED_JARS") or REPO.parent / "shared" / "jars")
    found = spark_jars(GRAPHFRAMES_JARS) or sorted(str(p) for p in shared.glob(GRAPHFRAMES_JARS))
    if with_jar and not found:
        sys.exit(f"no GraphFrames jar in {spark_jars_dir()} nor in {shared}: run `make graphframes`")
    folder = tempfile.mkdtemp(prefix="bench-jars-")
    for jar in found if with_jar else []:
        os.symlink(jar, Path(folder) / Path(jar).name)
    return folder


def measure(spark, graph, backend: str, repeat: int) -> dict:
    """``repeat`` calls with ``backend``: median and runs (s), peak memory above the start, the figures.

    Memory: ``python_peak_mb`` is what Python allocated at most (tracemalloc,
    numpy's arrays included), ``jvm_heap_peak_mb`` the JVM's heap pools' peak use
    (reset before), ``jvm_rss_growth_mb`` how far the JVM's resident size rose.
    A call that fails (the JVM out of memory) ends the runs with its error.
    """
    import tracemalloc

    from pipelines.graph_frames import graph_statistics

    jvm = spark.sparkContext._jvm
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    pools = [
        p
        for p in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
        if str(p.getType()) == "Heap memory"
    ]
    gc.collect()
    rss_before = _status_mb("VmRSS", pid)
    _reset_peak(pid)
    for pool in pools:
        pool.resetPeakUsage()
    runs, stats, error = [], None, None
    tracemalloc.start()
    try:
        for _ in range(repeat):
            started = time.perf_counter()
            stats = graph_statistics(spark, graph, backend=backend)
            runs.append(round(time.perf_counter() - started, 3))
    except Exception as failure:  # Py4JJavaError: the JVM ran out of heap, or the context died of it
        error = f"{type(failure).__name__} after {time.perf_counter() - started:.0f} s: {str(failure).splitlines()[0]}"
    python_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    row = {
        "backend": backend,
        "median_s": statistics.median(runs) if runs else None,
        "runs_s": runs,
        "python_peak_mb": round(python_peak / 2**20),
        "jvm_rss_before_mb": round(rss_before),
        "stats": stats,
    }
    if error is None:  # a dead JVM answers nothing more
        row["jvm_heap_peak_mb"] = round(sum(pool.getPeakUsage().getUsed() for pool in pools) / 2**20)
        row["jvm_rss_growth_mb"] = round(_status_mb("VmHWM", pid) - rss_before)
    else:
        row["error"] = error
    return row


def one_size(edges: int, repeat: int, master: str, driver_memory: str) -> None:
    """Child process of the crossover: prints one JSON line per backend as soon as it is measured."""
    from bench_graph_statistics import agree
    from bench_partition import power_law_graph

    from pipelines.graph_frames import graph_statistics
    from pipelines.session import build_session

    started = time.perf_counter()
    graph = power_law_graph(edges)
    built = round(time.perf_counter() - started, 1)
    spark = build_session("bench-graph-backends", master=master, driver_memory=driver_memory)
    small = power_law_graph(WARM_UP_EDGES)
    for backend in ("driver", "graphframes"):
        graph_statistics(spark, small, backend=backend)
    head = {"edges": graph.n_edges, "vertices": graph.n_vertices, "built_s": built}
    results = {}
    for backend in ("driver", "graphframes"):
        results[backend] = measure(spark, graph, backend, repeat)
        row = {**head, **{k: v for k, v in results[backend].items() if k != "stats"}}
        if backend == "graphframes" and "error" not in row:
            row["same_figures"] = agree(results["driver"]["stats"], results["graphframes"]["stats"])
        print(json.dumps(row), flush=True)
    if "error" not in results["graphframes"]:
        spark.stop()


def one_job(card_name: str, backend: str, repeat: int, master: str) -> None:
    """Child process of the jobs' part: the offline job on a card, a warm-up and ``repeat`` timed runs: a JSON line."""
    from locality.datasets.catalog import card
    from locality.topology import Topology
    from pipelines.graph_frames import graphframes_available
    from pipelines.offline import run
    from pipelines.params import OfflineParams
    from pipelines.session import build_session
    from pipelines.trace import TraceSpec

    entry = card(card_name)
    keys = list(entry.keys)
    spark = build_session("bench-graph-backends", master=master)
    runs, report = [], None
    with tempfile.TemporaryDirectory() as stores:
        for i in range(repeat + 1):
            params = OfflineParams(
                trace=TraceSpec(str(entry.path), keys),
                topology=Topology.uniform(keys, 6),
                store=str(Path(stores) / str(i)),
                graph_stats_backend=backend,
            )
            started = time.perf_counter()
            report = run(spark, params).report
            if i:  # the first run warms the session up
                runs.append(round(time.perf_counter() - started, 2))
    graph_stage = next(v for k, v in report["timings"].items() if k.startswith("partition"))
    stats = report["graph_statistics"]
    print(
        json.dumps(
            {
                "trace": card_name,
                "jar": graphframes_available(spark),
                "graph_stats_backend": backend,
                "ran": stats["backend"],
                "reason": stats["backend_reason"],
                "edges": stats["edges"],
                "median_s": statistics.median(runs),
                "runs_s": runs,
                "graph_stage_s_last_run": graph_stage,
            }
        ),
        flush=True,
    )
    spark.stop()


def child(command: list[str], env: dict, timeout: float) -> tuple[list[dict], bool]:
    """Run a child of this script; its JSON lines, and whether it ran past ``timeout`` (then its group is killed)."""
    process = subprocess.Popen(
        [sys.executable, __file__, *command], stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        out, _ = process.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        timed_out = True
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return rows, timed_out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", default="100000,1000000,10000000", help="graph sizes, comma-separated ('' none)")
    parser.add_argument("--traces", default=",".join(TRACES), help="dataset cards, comma-separated ('' none)")
    parser.add_argument("--configs", default="0,1,2", help="the jobs' configurations, by index in CONFIGS")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g", help="the sizes' session (the job's embedded default: 2g)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per child process")
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)  # child: one size
    parser.add_argument("--job", help=argparse.SUPPRESS)  # child: card,backend
    args = parser.parse_args(argv)
    if args.size:
        return one_size(args.size, args.repeat, args.master, args.driver_memory)
    if args.job:
        card_name, backend = args.job.split(",")
        return one_job(card_name, backend, args.repeat, args.master)

    common = ["--repeat", str(args.repeat), "--master", args.master]
    with_jar = {"LOCALITY_SPARK_JARS": jar_folder(True)}
    for edges in [int(float(x)) for x in args.edges.split(",") if x]:
        started = time.perf_counter()
        command = ["--size", str(edges), "--driver-memory", args.driver_memory, *common]
        rows, timed_out = child(command, {**os.environ, **with_jar}, args.timeout)
        for row in rows:
            print(json.dumps(row), flush=True)
        if timed_out or len(rows) < 2:
            done = [r["backend"] for r in rows]
            print(json.dumps({"edges": edges, "timed_out": timed_out, "measured": done, "after_s": args.timeout}))
        print(f"# {edges:,} edges: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    for name in [t for t in args.traces.split(",") if t]:
        for label, jar, backend in [CONFIGS[int(i)] for i in args.configs.split(",")]:
            env = {**os.environ, "LOCALITY_SPARK_JARS": with_jar["LOCALITY_SPARK_JARS"] if jar else jar_folder(False)}
            rows, timed_out = child(["--job", f"{name},{backend}", *common], env, args.timeout)
            for row in rows:
                print(json.dumps({"config": label, **row}), flush=True)
            if timed_out or not rows:
                print(json.dumps({"trace": name, "config": label, "timed_out": timed_out, "after_s": args.timeout}))


if __name__ == "__main__":
    main()
