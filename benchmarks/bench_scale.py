"""The offline job's cost model: stage costs measured here, the model's curve, and measured runs on it.

Measures, on the benchmark's Zipf trace (``bench_offline_job.write_trace``):

- ``rate``: rows per second one core sketches (the task's work: pyarrow scan of
  local Parquet, exact Arrow count per chunk, Space-Saving merge), no Spark;
- ``task_bytes``: what one task sends the driver (its serialized sketches);
- ``merge``: driver seconds to merge one task's sketches into the result;
- ``fixed``: the job minus its sketch pass (planning, METIS, tables, report, publish),
  measured on the smallest size, where it dominates.

and models a run on ``cores`` cores over ``tasks`` tasks as::

    T(N) = fixed + waves(tasks, cores) * N / (tasks * rate) + merge(tasks, cores)

(``waves = ceil(tasks / cores)``: the tasks' rows split evenly; up to 32 task
outputs the driver merges them, ``tasks * merge``; above, executors merge groups
of 16 first, in waves over the cores, as ``pipelines.counting`` does). It then runs
the whole job at each ``--rows`` size (median of ``--repeat``), prints the
model beside the measurement, extrapolates to a 1e9-tuple day on
``--cluster-cores`` cores, and plots the curve with the measured points
(``--plot``, default ``docs/scale.png``). ``docs/scale.md`` explains the model.

    .venv/bin/python benchmarks/bench_scale.py --rows 1000000,10000000,50000000,200000000
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_offline_job import KEYS, run_job, session, write_trace  # noqa: E402


def stage_costs(spark, trace: Path, capacity: int) -> dict:
    """One core's sketch rate, a task's bytes and the driver's merge time per task, on ``trace``."""
    from locality.sketch import SpaceSaving
    from pipelines.counting import _sketch_partition
    from pipelines.parquet_scan import ParquetScan
    from pipelines.trace import TraceSpec, read_trace

    spec = TraceSpec(str(trace), KEYS)
    scan = ParquetScan.of(spark, spec, read_trace(spark, spec).schema)
    sketch = _sketch_partition(KEYS, None, capacity)
    rows, seconds, payloads = 0, 0.0, []
    for task in range(scan.n_tasks):
        started = time.perf_counter()
        (out,) = list(sketch(scan.batches(task)))
        seconds += time.perf_counter() - started
        *sketches, stats = [bytes(p) for p in out.column("payload").to_pylist()]
        rows += json.loads(stats)["rows"]
        payloads.append(sketches)
    started = time.perf_counter()
    merged = [SpaceSaving.from_bytes(p) for p in payloads[0]]
    for task in payloads[1:]:
        merged = [a.merge(SpaceSaving.from_bytes(p)) for a, p in zip(merged, task)]
    return {
        "rate": rows / seconds,
        "task_bytes": statistics.mean(sum(len(p) for p in task) for task in payloads),
        "merge": (time.perf_counter() - started) / max(len(payloads) - 1, 1),
        "bytes_per_row": sum(f.stat().st_size for f in trace.glob("*.parquet")) / rows,
    }


def tasks_for(rows: float, costs: dict, cores: int) -> int:
    """Spark's split rule: tasks of ``min(128 MB, max(4 MB, bytes / cores))`` each."""
    size = rows * costs["bytes_per_row"]
    return max(1, math.ceil(size / min(2**27, max(2**22, size / cores))))


def merge_seconds(tasks: int, costs: dict, cores: int) -> float:
    """Executors merge groups of ``_MERGE_FANOUT`` (in waves over the cores) until the driver's share is small."""
    from pipelines.counting import _DRIVER_MERGE_LIMIT, _MERGE_FANOUT

    seconds, n = 0.0, tasks
    while n > _DRIVER_MERGE_LIMIT:
        n = math.ceil(n / _MERGE_FANOUT)
        seconds += math.ceil(n / cores) * _MERGE_FANOUT * costs["merge"]
    return seconds + n * costs["merge"]


def model(rows: float, costs: dict, cores: int, tasks: int | None = None) -> float:
    tasks = tasks or tasks_for(rows, costs, cores)
    waves = math.ceil(tasks / cores)
    return costs["fixed"] + waves * rows / (tasks * costs["rate"]) + merge_seconds(tasks, costs, cores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,10000000,50000000", help="comma-separated trace sizes")
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2, help="cores of this machine's local[N] session")
    parser.add_argument("--cluster-cores", type=int, default=256, help="for the 1e9-tuple extrapolation")
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "locality-bench"))
    parser.add_argument("--plot", default=str(REPO / "docs" / "scale.png"))
    args = parser.parse_args()
    sizes = [int(r) for r in args.rows.split(",")]
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    spark = session(f"local[{args.cores}]")

    measured = {}
    for rows in sizes:
        trace = write_trace(rows, work)
        run_job(spark, trace, Path(tempfile.mkdtemp(dir=work)), args.capacity)  # warm-up
        runs = [run_job(spark, trace, Path(tempfile.mkdtemp(dir=work)), args.capacity) for _ in range(args.repeat)]
        seconds = statistics.median(r["seconds"] for r in runs)
        sketch = statistics.median(r["timings"]["count keys (sketch)"] for r in runs)
        measured[rows] = (seconds, sketch)
        print(f"rows {rows:>13,}: job {seconds:6.2f} s (sketch pass {sketch:.2f} s)", flush=True)

    costs = stage_costs(spark, write_trace(sizes[min(1, len(sizes) - 1)], work), args.capacity)
    smallest = min(sizes)
    costs["fixed"] = measured[smallest][0] - measured[smallest][1]
    print(
        f"one core sketches {costs['rate'] / 1e6:.2f} M rows/s; a task sends {costs['task_bytes'] / 2**20:.1f} MB; "
        f"the driver merges a task in {costs['merge'] * 1e3:.0f} ms; fixed part {costs['fixed']:.2f} s"
    )
    from pipelines.parquet_scan import ParquetScan
    from pipelines.trace import TraceSpec, read_trace

    points = []
    for rows in sizes:
        spec = TraceSpec(str(write_trace(rows, work)), KEYS)
        tasks = ParquetScan.of(spark, spec, read_trace(spark, spec).schema).n_tasks  # the job's own split
        predicted = model(rows, costs, args.cores, tasks)
        points.append((rows, measured[rows][0], predicted))
        print(f"rows {rows:>13,}: {tasks} tasks, model {predicted:6.2f} s, measured {measured[rows][0]:6.2f} s")
    spark.stop()

    day, cores = 1e9, args.cluster_cores
    tasks = tasks_for(day, costs, cores)
    print(
        f"1e9 tuples on {cores} cores, {tasks} tasks: model {model(day, costs, cores):.1f} s "
        f"(sketching {math.ceil(tasks / cores) * day / (tasks * costs['rate']):.1f} s, merge "
        f"{merge_seconds(tasks, costs, cores):.1f} s, all on the driver {tasks * costs['merge']:.1f} s; "
        f"fixed {costs['fixed']:.1f} s); "
        f"{tasks * costs['task_bytes'] / 2**30:.2f} GB of sketches to the driver"
    )
    plot(points, costs, args, Path(args.plot))


def plot(points, costs: dict, args, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes = np.logspace(6, 9.3, 60)
    for cores, label in ((args.cores, "this machine"), (args.cluster_cores, "a cluster")):
        ax.plot(sizes, [model(n, costs, cores) for n in sizes], label=f"model, {cores} cores ({label})")
    ax.scatter([p[0] for p in points], [p[1] for p in points], color="black", zorder=3, label="measured here")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tuples in the trace")
    ax.set_ylabel("offline job, seconds")
    ax.set_title("Offline job: cost model and measured runs")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
