"""A PyFlink job with two keyed operators in a chain (location -> hashtag), keyed on locality's routing keys.

Run with the Python of the PyFlink environment (``tests/flink/conftest.py``), with
``locality`` importable (``PYTHONPATH``)::

    python tweets_job.py RECORDS CONFIGURATION OUT_DIR

- ``RECORDS``: Parquet file with columns ``seq`` (int), ``location``, ``hashtag`` (str) and
  ``raw`` (bool: the record also goes through the ``raw`` branch).
- ``CONFIGURATION``: a directory written by ``RoutingConfiguration.write`` whose
  ``location`` and ``hashtag`` tables fall back to ``PyFlinkKeyGroups``.
- ``OUT_DIR``: where Flink's file sink writes one CSV line per record and branch:
  ``branch, seq, then subtask, pid, count of the location operator, then of the hashtag operator``.

Two branches of the same shape: ``routed`` takes every record and keys both
operators with :class:`~locality.engines.flink.RoutingKeySelector` (a table key
on its subtask's surrogate); ``raw`` takes the records marked ``raw`` and keys
them on the keys themselves (Flink's own hash). Every keyed operator counts its real keys in a ``MapState`` under the
routing key (several real keys share a surrogate) and tags the record with its
subtask index, the count so far, and the process id of its Python worker:
flink-python runs one Python process per task slot, shared by every Python
operator in that slot (``BeamPythonFunctionRunner`` takes it from the slot's
memory manager), so equal process ids mean the same slot. The job runs with
parallelism 6, one slot-sharing group and the tables' max parallelism on a
local mini-cluster, with the Python workers in their own processes (PyFlink's
default for a mini-cluster runs them all inside this client process).
"""

from __future__ import annotations

import os
import sys

import pandas as pd

os.environ["_python_worker_execution_mode"] = "process"  # read by PyFlink when the job starts

from pyflink.common import Configuration, Encoder, Row, Types  # noqa: E402
from pyflink.datastream import KeyedProcessFunction, RuntimeContext, StreamExecutionEnvironment  # noqa: E402
from pyflink.datastream.connectors.file_system import FileSink  # noqa: E402
from pyflink.datastream.state import MapStateDescriptor  # noqa: E402

from locality.engines.flink import RoutingKeySelector  # noqa: E402
from locality.routing import RoutingConfiguration  # noqa: E402

PARALLELISM = 6
FIELDS = ["seq", "location", "hashtag"]
#: A record after the location operator: the trace fields, then that operator's subtask, pid and count.
LOCATED = Types.ROW([Types.LONG(), Types.STRING(), Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()])


class CountAndTag(KeyedProcessFunction):
    """Counts the real key of one field in a MapState and tags the record with (subtask, pid, count).

    The location operator appends the tags to the record; the hashtag operator
    (``branch`` set) emits the finished CSV line.
    """

    def __init__(self, column: str, max_parallelism: int, branch: str | None = None) -> None:
        self.column = column
        self.position = FIELDS.index(column)  # records reach Python functions without field names
        self.max_parallelism = max_parallelism
        self.branch = branch

    def open(self, runtime_context: RuntimeContext) -> None:
        found = (
            runtime_context.get_max_number_of_parallel_subtasks(),
            runtime_context.get_number_of_parallel_subtasks(),
        )
        if found != (self.max_parallelism, PARALLELISM):
            raise RuntimeError(
                f"{self.column}: max parallelism and parallelism are {found}; the tables are for "
                f"{(self.max_parallelism, PARALLELISM)}"
            )
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.counts = runtime_context.get_map_state(MapStateDescriptor("counts", Types.STRING(), Types.LONG()))

    def process_element(self, value: Row, ctx: KeyedProcessFunction.Context):
        key = value[self.position]
        count = (self.counts.get(key) or 0) + 1
        self.counts.put(key, count)
        tags = (self.subtask, os.getpid(), count)
        if self.branch is None:
            yield Row(*value, *tags)
        else:
            yield ",".join(map(str, (self.branch, value[0], *value[3:], *tags)))


def branch(records, key_location, key_hashtag, max_parallelism: int, name: str):
    """``records`` keyed by location and tagged, then keyed by hashtag and tagged (``key_*``: stream -> keyed)."""
    located = key_location(records).process(CountAndTag("location", max_parallelism), output_type=LOCATED)
    return key_hashtag(located).process(CountAndTag("hashtag", max_parallelism, name), output_type=Types.STRING())


def raw_key_by(column: str):
    """Key on the field's own value: Flink's own hash of the key, which the tables' fallback predicts."""
    position = FIELDS.index(column)
    return lambda stream: stream.key_by(lambda r: r[position], key_type=Types.STRING())


def main(records_path: str, configuration_path: str, out_dir: str) -> None:
    configuration = RoutingConfiguration.read(configuration_path)
    routed = {op: RoutingKeySelector(configuration, op, field=FIELDS.index(op)) for op in ("location", "hashtag")}
    max_parallelism = routed["location"].max_parallelism

    config = Configuration()
    config.set_string("python.executable", sys.executable)  # the workers run in this environment too
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(PARALLELISM)
    env.set_max_parallelism(max_parallelism)

    frame = pd.read_parquet(records_path, columns=[*FIELDS, "raw"])
    row_type = Types.ROW([Types.LONG(), Types.STRING(), Types.STRING()])

    def source(part: pd.DataFrame):
        rows = [Row(int(s), loc, tag) for s, loc, tag in part[FIELDS].itertuples(index=False)]
        return env.from_collection(rows, type_info=row_type)

    outputs = [
        branch(source(frame), routed["location"].key_by, routed["hashtag"].key_by, max_parallelism, "routed"),
        branch(source(frame[frame["raw"]]), raw_key_by("location"), raw_key_by("hashtag"), max_parallelism, "raw"),
    ]
    sink = FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build()
    outputs[0].union(outputs[1]).sink_to(sink)
    env.execute("tweets routed and raw")


if __name__ == "__main__":
    main(*sys.argv[1:4])
