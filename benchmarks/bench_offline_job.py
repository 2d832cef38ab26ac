"""End-to-end offline job vs the floor any job pays: a plain Spark groupBy(k1, k2).count() scan.

Generates a two-key Zipf trace (``locality.datasets.synthetic.zipf_pairs``,
the feasibility study's generator) as 8 Parquet files, then, in one Spark
session, alternates the floor (group-by count written to the ``noop`` sink),
the same count by pyarrow alone (read + ``group_by``, no Spark), and the full
offline job (sketch, graph, METIS, tables, report, publish into a fresh
store) and prints the median wall times and their ratios.

With ``--memory`` it instead runs the job in fresh processes at each size
and reports the peak RSS of the Python driver and of the JVM (local mode:
the executors live in the driver JVM), which should stay flat as the trace
grows with a fixed sketch capacity.

    .venv/bin/python benchmarks/bench_offline_job.py --rows 10000000
    .venv/bin/python benchmarks/bench_offline_job.py --memory --rows 1000000,10000000
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locality.datasets.synthetic import zipf_pairs  # noqa: E402
from locality.topology import Topology  # noqa: E402

KEYS = ["k1", "k2"]


def write_trace(rows: int, directory: Path, files: int = 8) -> Path:
    """The Zipf trace as ``files`` Parquet files (generated once per size, seed 42)."""
    target = directory / f"zipf_{rows}"
    if (target / "_DONE").exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    frame = zipf_pairs(rows, seed=42)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    step = -(-rows // files)
    for i in range(files):
        pq.write_table(table.slice(i * step, step), target / f"part-{i:02d}.parquet")
    (target / "_DONE").touch()
    return target


def session(master: str):
    from pipelines.session import build_session

    spark = build_session("bench-offline", master=master, driver_memory="4g")
    spark.conf.set("spark.sql.shuffle.partitions", "8")
    return spark


def run_job(spark, trace: Path, store: Path, capacity: int) -> dict:
    from pipelines.offline import run
    from pipelines.params import OfflineParams
    from pipelines.trace import TraceSpec

    params = OfflineParams(
        trace=TraceSpec(str(trace), KEYS, format="parquet"),
        topology=Topology.uniform(KEYS, 6),
        store=str(store),
        capacity=capacity,
    )
    started = time.perf_counter()
    result = run(spark, params)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "timings": result.report["timings"],
        "locality": result.report["in_sample"]["locality"],
        "hash_locality": result.report["in_sample"]["hash_locality"],
    }


def floor(spark, trace: Path) -> float:
    started = time.perf_counter()
    spark.read.parquet(str(trace)).groupBy(*KEYS).count().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def arrow_floor(trace: Path) -> float:
    """The same count without Spark: pyarrow reads the files and hash-counts the pairs (all cores)."""
    started = time.perf_counter()
    pq.read_table(trace, columns=KEYS).group_by(KEYS).aggregate([([], "count_all")])
    return time.perf_counter() - started


def speed(args) -> None:
    spark = session(args.master)
    work = Path(args.workdir)
    for rows in args.rows:
        trace = write_trace(rows, work)
        floor(spark, trace)  # warm-up: JIT, Python workers, file listing
        run_job(spark, trace, Path(tempfile.mkdtemp(dir=work)), args.capacity)
        floors, arrow_floors, jobs, details = [], [], [], []
        for _ in range(args.repeat):
            floors.append(floor(spark, trace))
            arrow_floors.append(arrow_floor(trace))
            detail = run_job(spark, trace, Path(tempfile.mkdtemp(dir=work)), args.capacity)
            jobs.append(detail["seconds"])
            details.append(detail)
        f, a, j = statistics.median(floors), statistics.median(arrow_floors), statistics.median(jobs)
        print(
            f"rows {rows:,}: floor groupBy.count {f:.2f} s (runs {[round(x, 2) for x in floors]}), "
            f"offline job {j:.2f} s (runs {[round(x, 2) for x in jobs]}), ratio {j / f:.2f}; "
            f"pyarrow read + group_by count {a:.2f} s (job / it {j / a:.2f})"
        )
        print(f"  job stages (last run): {details[-1]['timings']}")
        print(f"  in-sample locality {details[-1]['locality']:.3f} (hash {details[-1]['hash_locality']:.3f})")
    spark.stop()


def _jvm_peak(pid: int, stop: threading.Event, out: list) -> None:
    import psutil

    peak = 0
    while not stop.is_set():
        for child in psutil.Process(pid).children(recursive=True):
            try:
                if "java" in child.name():
                    peak = max(peak, child.memory_info().rss)
            except psutil.Error:
                pass
        time.sleep(0.2)
    out.append(peak)


def memory_child(args) -> None:
    """Run once in this fresh process and print the peaks as JSON."""
    spark = session(args.master)
    stop, jvm = threading.Event(), []
    watcher = threading.Thread(target=_jvm_peak, args=(__import__("os").getpid(), stop, jvm), daemon=True)
    watcher.start()
    trace = write_trace(args.rows[0], Path(args.workdir))
    detail = run_job(spark, trace, Path(tempfile.mkdtemp(dir=args.workdir)), args.capacity)
    stop.set()
    watcher.join()
    spark.stop()
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        json.dumps(
            {
                "rows": args.rows[0],
                "driver_peak_mb": driver / 2**20,
                "jvm_peak_mb": jvm[0] / 2**20,
                "seconds": detail["seconds"],
            }
        )
    )


def memory(args) -> None:
    for rows in args.rows:
        write_trace(rows, Path(args.workdir))
        cmd = [
            sys.executable,
            __file__,
            "--memory-child",
            "--rows",
            str(rows),
            "--workdir",
            args.workdir,
            "--capacity",
            str(args.capacity),
            "--master",
            args.master,
        ]
        line = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        result = json.loads(line)
        print(
            f"rows {rows:>12,}: Python driver peak {result['driver_peak_mb']:.0f} MB, "
            f"JVM peak {result['jvm_peak_mb']:.0f} MB, job {result['seconds']:.1f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="10000000", help="comma-separated trace sizes")
    parser.add_argument("--capacity", type=int, default=100_000, help="sketch capacity")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "locality-bench"))
    parser.add_argument("--memory", action="store_true", help="peak memory per size, each in a fresh process")
    parser.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.rows = [int(r) for r in args.rows.split(",")]
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    if args.memory_child:
        memory_child(args)
    elif args.memory:
        memory(args)
    else:
        speed(args)


if __name__ == "__main__":
    main()
