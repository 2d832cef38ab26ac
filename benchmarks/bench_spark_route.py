"""Cost of the route column on a stream: broadcast stream-static join vs a map literal, beside no table.

A streaming query follows a routing table through a route column
(``locality.engines.spark.with_route``). Two ways to compute it in Spark:

- **join** (what ``with_route`` does): the table as a small DataFrame
  ``(key, surrogate)``, broadcast and left-joined to the stream, then
  ``coalesce(surrogate, key)``: one hash lookup per row;
- **map**: ``coalesce(map_literal[key], key)`` with the table as a
  ``create_map`` literal in the plan (Spark's ``GetMapValue`` scans the map's
  keys for each row, and the literal is re-planned each micro-batch).

Baseline, measured in the same run: ``route = key`` (no table). The stream is
a directory of Parquet files of Zipf string keys (``zipf_pairs(strings=True)``,
column ``k1``) read one file per micro-batch; the route feeds a
``groupBy(route).count()`` streaming aggregation (the shuffle a stateful
operator does). Prints, for each table size and mechanism, the median over
interleaved rounds of each query's median ``triggerExecution`` time per
micro-batch (first batch excluded: warm-up), and the ratio to the baseline.

    .venv/bin/python benchmarks/bench_spark_route.py [--rows 100000] [--batches 5] [--rounds 3]
        [--entries 100,1000,10000,100000] [--map-max 10000]   # larger map literals take minutes per micro-batch
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locality.datasets.synthetic import zipf_pairs  # noqa: E402
from locality.engines.spark import with_route  # noqa: E402
from locality.hashing.spark import SparkHashPartitioning  # noqa: E402
from locality.routing import RoutingTable  # noqa: E402

PARTITIONS = 8
KEY_SPACE = 100_000  # zipf_pairs draws k1 among u0 .. u99999


def write_stream(rows: int, batches: int, directory: Path) -> pd.Series:
    """``batches`` Parquet files of ``rows`` Zipf string keys each; returns the key counts."""
    frame = zipf_pairs(rows * batches, strings=True, seed=42)[["k1"]]
    for i in range(batches):
        frame.iloc[i * rows : (i + 1) * rows].to_parquet(directory / f"part-{i:03d}.parquet", index=False)
    return frame["k1"].value_counts()


def make_table(counts: pd.Series, entries: int) -> RoutingTable:
    """A table on the ``entries`` heaviest keys (then keys the stream lacks), each sent one partition
    past its hash partition."""
    fallback = SparkHashPartitioning(PARTITIONS)
    universe = pd.Index([f"u{i}" for i in range(max(entries, KEY_SPACE))])
    keys = counts.index.append(universe.difference(counts.index))[:entries].to_numpy(dtype=object)
    target = (fallback.instances_of(keys) + 1) % PARTITIONS
    return RoutingTable("k1", fallback, pd.Series(target, index=pd.Index(keys, dtype=object)))


def map_route(frame, table: RoutingTable, key: str):
    """The map-literal alternative: ``coalesce(map[key], key)``."""
    from pyspark.sql import functions as F

    surrogates = np.asarray(table.fallback.surrogates("string"), dtype=object)
    pairs = []
    for k, instance in table.entries.items():
        pairs += [F.lit(k), F.lit(surrogates[instance])]
    lookup = F.create_map(*pairs)
    return frame.withColumn("route", F.coalesce(lookup[F.col(key)], F.col(key)))


def run_stream(spark, source: Path, checkpoint: Path, route) -> list[float]:
    """Seconds of each micro-batch of ``groupBy(route).count()`` over the files, one per batch."""
    frame = spark.readStream.schema("k1 string").option("maxFilesPerTrigger", 1).parquet(str(source))
    query = (
        route(frame)
        .groupBy("route")
        .count()
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    query.processAllAvailable()
    progress = query.recentProgress
    query.stop()
    return [p["durationMs"]["triggerExecution"] / 1000 for p in progress if p["numInputRows"] > 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows per micro-batch (file)")
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--entries", default="100,1000,10000,100000", help="comma-separated table sizes")
    parser.add_argument("--map-max", type=int, default=10_000, help="largest table also timed as a map literal")
    parser.add_argument("--rounds", type=int, default=3, help="queries per variant, interleaved")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from pipelines.session import build_session

    spark = build_session("bench-spark-route", master=args.master)
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.shuffle.partitions", str(PARTITIONS))
    work = Path(tempfile.mkdtemp(prefix="locality-bench-route-"))
    source = work / "stream"
    source.mkdir()
    counts = write_stream(args.rows, args.batches, source)
    print(f"stream: {args.batches} files x {args.rows:,} rows, {len(counts):,} distinct keys, {PARTITIONS} partitions")

    def per_batch(route) -> float:
        """Median seconds per micro-batch of one query (first batch excluded: planning, warm-up)."""
        return statistics.median(run_stream(spark, source, Path(tempfile.mkdtemp(dir=work)), route)[1:])

    per_batch(lambda f: f.withColumn("route", f["k1"]))  # warm-up: JIT, Python workers, file listing
    for entries in [int(e) for e in args.entries.split(",")]:
        table = make_table(counts, entries)
        variants = {
            "baseline (route = key)": lambda f: f.withColumn("route", f["k1"]),
            "join (with_route)": lambda f, t=table: with_route(f, t, "k1"),
        }
        if entries <= args.map_max:
            variants["map literal"] = lambda f, t=table: map_route(f, t, "k1")
        # rounds interleave the variants, so that the machine's load drifts over all of them alike
        times = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, route in variants.items():
                times[name].append(per_batch(route))
        base = statistics.median(times["baseline (route = key)"])
        print(f"table of {len(table):,} entries")
        for name, runs in times.items():
            median = statistics.median(runs)
            rounds = [round(t, 2) for t in runs]
            print(f"  {name:<24} {median:6.3f} s/batch ({median / base:.2f}x baseline), rounds {rounds}")
    spark.stop()


if __name__ == "__main__":
    main()
