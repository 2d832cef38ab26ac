"""Local Parquet traces read by Spark tasks with pyarrow: the sketch pass without the JVM's row-to-Arrow copy.

Spark's Parquet reader decodes column batches in the JVM; ``mapInArrow`` then
turns them into rows and the rows back into Arrow batches for the Python
worker. On the benchmark trace that copy costs more than the sketching
itself (``benchmarks/RESULTS.md``), while pyarrow decodes
the same files straight into the Arrow batches the sketch consumes.

So, for a trace of local Parquet files, Spark still plans and runs the job
(one task per slice of row groups, retried like any task, on any executor that
sees the files), but each task reads its slice with pyarrow. It hands the
sketch exactly what ``mapInArrow`` would: the trace's columns with the Arrow
types of Spark's schema for them, and only the rows of the time range (the
same comparison Spark makes: times in UTC, a date is its midnight). CSV and
JSON traces, and paths Python cannot open (``hdfs://``, ``s3a://``), are read
by Spark (:func:`pipelines.trace.read_trace`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from locality.errors import TraceError
from locality.time_range import arrow_filter
from pipelines.trace import TraceSpec, input_files

__all__ = ["ParquetScan"]

#: Spark's defaults for packing files into tasks (spark.sql.files.maxPartitionBytes, openCostInBytes).
_MAX_SLICE_BYTES = 128 * 2**20
_MIN_SLICE_BYTES = 4 * 2**20
_BATCH_ROWS = 1_000_000

#: One task's share of the trace: ``(file, row group indices)`` pairs.
Slice = list[tuple[str, list[int]]]


@dataclass(frozen=True)
class ParquetScan:
    """The row groups of a local Parquet trace, sliced into Spark tasks, each read with pyarrow.

    Build it with :meth:`of`; :meth:`map_batches` runs a per-task function over
    each slice's Arrow batches as a Spark job, like ``DataFrame.mapInArrow``.
    """

    slices: tuple[Slice, ...]
    schema: pa.Schema
    ts: str | None = None
    start: datetime | None = None
    end: datetime | None = None

    @classmethod
    def of(cls, spark, spec: TraceSpec, spark_schema) -> ParquetScan | None:
        """The scan of ``spec``'s files, or None when Spark must read them (not Parquet, or not local).

        ``spark_schema`` is the schema of :func:`~pipelines.trace.read_trace`'s
        DataFrame: the Arrow types the batches are cast to.
        """
        from pyspark.sql.pandas.types import to_arrow_schema

        if not spec.local:
            return None
        files = [file.path for file in input_files(spec)]
        if not files or spec.file_format(files) != "parquet":
            return None
        slices = _slices(files, spark.sparkContext.defaultParallelism)
        # The types mapInArrow hands over: timestamps in the session's zone, large strings only when configured.
        conf = spark.conf
        schema = to_arrow_schema(
            spark_schema,
            timezone=conf.get("spark.sql.session.timeZone"),
            prefers_large_types=conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true",
        )
        schema = pa.schema([f.with_nullable(True) for f in schema])
        return cls(tuple(slices), schema, spec.ts, *spec.time_range())

    @property
    def n_tasks(self) -> int:
        return len(self.slices)

    def batches(self, task: int) -> Iterator[pa.RecordBatch]:
        """Task ``task``'s rows as Arrow batches of Spark's types, time-filtered."""
        columns, time_filter = self.schema.names, self._time_filter()
        local = pafs.LocalFileSystem()
        parquet = ds.ParquetFileFormat()
        for path, row_groups in self.slices[task]:
            fragment = parquet.make_fragment(path, filesystem=local, row_groups=row_groups)
            try:
                for batch in fragment.to_batches(
                    columns=columns, filter=time_filter, batch_size=_BATCH_ROWS, use_threads=False
                ):
                    yield batch.cast(self.schema) if batch.schema != self.schema else batch
            except (OSError, pa.ArrowException) as exc:
                if isinstance(exc, OSError) and exc.errno is not None:
                    raise  # the system's own I/O failure (a disk, a mount): not the file's content
                # Arrow reports a file it cannot decode as an OSError without an errno: the trace is damaged
                raise TraceError(f"cannot read the trace file {path!r}: {exc}") from None

    def map_batches(self, spark, fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]):
        """An RDD of the rows (tuples) ``fn`` yields for each task's batches: ``mapInArrow`` over the scan."""
        scan = self

        def run(tasks: Iterator[int]) -> Iterator[tuple]:
            for task in tasks:
                for out in fn(scan.batches(task)):
                    yield from zip(*(column.to_pylist() for column in out.columns))

        return spark.sparkContext.parallelize(range(self.n_tasks), self.n_tasks).mapPartitions(run)

    def _time_filter(self) -> ds.Expression | None:
        return arrow_filter(self.ts, self.start, self.end)  # Spark's comparison: UTC, a date as its midnight


def _slices(files: list[str], parallelism: int) -> list[Slice]:
    """Consecutive row groups packed into tasks the way Spark packs files into partitions.

    Spark's rule: each file costs its bytes plus an "open cost", and a task holds at most
    ``min(128 MB, max(4 MB, total cost / parallelism))``; here a row group is the unit a task reads.
    """
    groups = []  # (file, row group, compressed bytes; a file's first group carries its open cost)
    for path in files:
        meta = pq.ParquetFile(path).metadata
        for i in range(meta.num_row_groups):
            row_group = meta.row_group(i)
            size = sum(row_group.column(j).total_compressed_size for j in range(row_group.num_columns))
            groups.append((path, i, size + (_MIN_SLICE_BYTES if i == 0 else 0)))
    total = sum(size for _, _, size in groups)
    limit = min(_MAX_SLICE_BYTES, max(_MIN_SLICE_BYTES, -(-total // max(parallelism, 1))))
    n_slices = max(1, -(-total // limit))
    slices: list[Slice] = [[] for _ in range(n_slices)]
    done = 0
    for path, i, size in groups:
        # Cut at even byte shares (by each group's middle), not greedily: no small leftover task at the end.
        task = slices[min(n_slices - 1, int((done + size / 2) * n_slices / total))]
        if task and task[-1][0] == path:
            task[-1][1].append(i)
        else:
            task.append((path, [i]))
        done += size
    return [task for task in slices if task] or [[]]  # a trace of empty files still runs one (empty) task
