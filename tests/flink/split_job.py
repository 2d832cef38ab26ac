"""A PyFlink job (location -> hashtag) whose hashtag table splits hot keys: each record's part is the one on the
server of the location subtask that sends it, read from the record by the key selector.

Run with the Python of the PyFlink environment, with the repository on ``PYTHONPATH``::

    python split_job.py RECORDS CONFIGURATION OUT_DIR

``RECORDS`` has columns ``seq``, ``location``, ``hashtag``; ``CONFIGURATION`` is a directory
written by ``RoutingConfiguration.write`` (PyFlink fallbacks, the hashtag table with split keys).
The operators are ``tweets_job.py``'s: each counts its real keys in a ``MapState`` under the
routing key (for a split key, a partial count per part) and tags the record; the location
operator appends its subtask index, which the hashtag selector maps to its server. ``OUT_DIR``
gets ``tweets_job.py``'s CSV lines, branch ``split``.
"""

from __future__ import annotations

import sys

import pandas as pd
from pyflink.common import Configuration, Encoder, Row, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink

from locality.engines.flink import RoutingKeySelector
from locality.routing import RoutingConfiguration
from tests.flink import tweets_job  # its operators; importing it sets the workers' execution mode, read at start


def main(records_path: str, configuration_path: str, out_dir: str) -> None:
    configuration = RoutingConfiguration.read(configuration_path)
    hosts = configuration.topology.instance_servers("location").tolist()  # server position of each location subtask
    by_location = RoutingKeySelector(configuration, "location", field=1)
    # a located record is (seq, location, hashtag, location subtask, pid, count): its server is its subtask's
    by_hashtag = RoutingKeySelector(configuration, "hashtag", field=2, server=lambda record: hosts[record[3]])

    config = Configuration()
    config.set_string("python.executable", sys.executable)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(tweets_job.PARALLELISM)
    env.set_max_parallelism(by_location.max_parallelism)
    frame = pd.read_parquet(records_path, columns=tweets_job.FIELDS)
    rows = [Row(int(s), loc, tag) for s, loc, tag in frame.itertuples(index=False)]
    records = env.from_collection(rows, type_info=Types.ROW([Types.LONG(), Types.STRING(), Types.STRING()]))
    out = tweets_job.branch(records, by_location.key_by, by_hashtag.key_by, by_location.max_parallelism, "split")
    out.sink_to(FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build())
    env.execute("split hashtags")


if __name__ == "__main__":
    main(*sys.argv[1:4])
