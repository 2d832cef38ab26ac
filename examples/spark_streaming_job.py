"""A Spark streaming job that follows the routing tables ``locality optimize`` publishes.

Copy it and replace :func:`count_key` (your stateful logic, written for one real
key) and the source and sink. The nightly job publishes tables into a store::

    locality optimize TRACE --keys location,hashtag --servers 6 --hash spark --store /data/store

and this job, started once, keys its stateful operator by the tables of the
store's current version::

    python examples/spark_streaming_job.py --store /data/store --operator hashtag \\
        --input /data/incoming --checkpoint /data/checkpoints/hashtag --output /data/counts

Every record of a key with a table entry is processed in the partition (the
operator instance) its table names, every other key where Spark's own hash puts
it (``docs/engines/spark.md``). A :class:`locality.Router` watches the store: when
a new version is published the job stops at a micro-batch boundary, hands the
state of the keys that move over to their new partition (the version's
migration plan), and restarts on the same checkpoint with the new tables.
``--once`` processes what is in ``--input`` now and exits (a batch-style run).

Each output row is one real key's running count after a micro-batch, with the
partition that ran it, so the placement can be checked against the table.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from pyspark import TaskContext

from locality.engines.spark import per_key_function, with_handover, with_route, write_handover
from locality.router import Router, load_snapshot

logger = logging.getLogger("spark_streaming_job")

OUTPUT_SCHEMA = "key string, count long, partition int, version int"


def count_key(key: tuple, pdfs: Iterator[pd.DataFrame], state, version: int) -> Iterator[pd.DataFrame]:
    """Running count of one key: the same code as for ``groupBy(key).applyInPandasWithState``.

    Each row also says where it ran: the partition (operator instance) and the table version.
    """
    count = (state.get[0] if state.exists else 0) + sum(len(pdf) for pdf in pdfs)
    state.update((count,))
    partition = TaskContext.get().partitionId()
    yield pd.DataFrame({"key": [key[0]], "count": [count], "partition": [partition], "version": [version]})


def start_query(spark, table, version: int, args: argparse.Namespace):
    """The streaming query, keyed by the route column of ``table`` (version ``version`` of the store)."""
    spark.conf.set("spark.sql.shuffle.partitions", str(table.fallback.n_instances))
    records = spark.readStream.schema(args.schema).parquet(args.input)
    records = with_handover(records, args.checkpoint + "-handover", args.operator)
    routed = with_route(records, table, args.operator, checkpoint=args.checkpoint)
    counts = per_key_function(functools.partial(count_key, version=version), args.operator, "count long")
    writer = (
        routed.groupBy("route")
        .applyInPandasWithState(counts, OUTPUT_SCHEMA, counts.group_state_schema, "Append", "NoTimeout")
        .writeStream.outputMode("append")
        .format("parquet")
        .option("path", args.output)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.once:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def switch_tables(spark, store, args: argparse.Namespace, snapshot):
    """Start the query with the tables of ``snapshot``, handing state over from the version it last ran with.

    The version a query ran with is kept beside its checkpoint, so a job restarted
    after a new version was published (a crash, a deployment) hands over too.
    """
    marker = Path(args.checkpoint + "-version")
    previous = int(marker.read_text()) if marker.exists() else None
    table = snapshot.table(args.operator)
    if previous is not None and previous != snapshot.version:
        old_table = load_snapshot(store, previous).table(args.operator)
        moved = write_handover(spark, args.checkpoint, old_table, table, args.operator, args.checkpoint + "-handover")
        logger.info("version %d -> %d: state of %d keys handed over", previous, snapshot.version, moved)
    query = start_query(spark, table, snapshot.version, args)
    marker.write_text(str(snapshot.version))
    logger.info("serving version %d of %s", snapshot.version, store.location)
    return query


def run(spark, args: argparse.Namespace) -> int:
    """Run the job until it is stopped (or, with ``--once``, until the input is consumed)."""
    new_version = threading.Event()
    with Router(args.store, poll_interval=args.poll, on_change=lambda old, new: new_version.set()) as router:
        query = switch_tables(spark, router.store, args, router.snapshot())
        while True:
            query.awaitTermination(timeout=1)
            if not query.isActive:
                break
            if new_version.is_set():  # stop at a micro-batch boundary, then restart on the new tables
                new_version.clear()
                query.stop()
                query = switch_tables(spark, router.store, args, router.snapshot())
        if query.exception() is not None:
            raise query.exception()
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--store", required=True, help="The store locality optimize publishes into (a directory or s3://)."
    )
    parser.add_argument("--operator", required=True, help="The key column this stateful operator groups by.")
    parser.add_argument("--input", required=True, help="Directory of Parquet files (the stream).")
    parser.add_argument("--schema", default="location string, hashtag string", help="Schema of the input files.")
    parser.add_argument("--checkpoint", required=True, help="Checkpoint directory (local or mounted).")
    parser.add_argument("--output", required=True, help="Directory of the Parquet output.")
    parser.add_argument("--poll", type=float, default=30.0, help="Seconds between two looks at the store.")
    parser.add_argument("--once", action="store_true", help="Process the input present now, then exit.")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from pyspark.sql import SparkSession

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    Path(args.output).mkdir(parents=True, exist_ok=True)
    spark = SparkSession.builder.appName("locality-streaming-job").getOrCreate()
    return run(spark, args)


if __name__ == "__main__":
    raise SystemExit(main())
