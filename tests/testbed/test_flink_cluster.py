"""The bytes a Flink job sends between servers are the bytes ``locality evaluate`` predicts.

A standalone Flink cluster across emulated servers (a JobManager in one, a TaskManager with one
slot in each of three others, 1 Gb/s links) replays the tweet trace with a 1 kB padding through
two keyed operators, once keyed by Flink's hash and once by the tables. What crossed the links,
less an idle run's (the idle cluster's heartbeats over as long, the same job on no records), must
be ``(1 - locality) x records x record size`` within 5%, with the locality ``locality evaluate``
gives for the same records and tables.
"""

from __future__ import annotations

import pytest

from testbed import Testbed
from testbed.flink import FlinkCluster, flink_home_of
from testbed.replay import Routing, idle_rates, job_overhead, run_bounded
from testbed.workload import evaluate_locality, flink_record_bytes, learn_tables, write_replay_trace
from tests.conftest import trace_keys
from tests.flink.conftest import ensure_flink_env

PADDING = 1024
TASKMANAGERS = 3


@pytest.fixture(scope="module")
def replay(tmp_path_factory, geotweets):
    """The tweets as the job's trace, tables for 3 servers, and what ``locality evaluate`` says of them."""
    work = tmp_path_factory.mktemp("flink-replay")
    keys = trace_keys("geotweets")
    tsv, parquet = write_replay_trace(geotweets, keys, work)
    store = learn_tables(parquet, keys, TASKMANAGERS, work / "store")
    figures = evaluate_locality(parquet, keys, store)
    sizes = flink_record_bytes(geotweets[keys[0]], geotweets[keys[1]], PADDING)
    return work, tsv, store, figures, sizes


@pytest.fixture(scope="module")
def cluster(replay):
    work = replay[0]
    try:
        home = flink_home_of(ensure_flink_env().root)
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    with Testbed(TASKMANAGERS + 1, rate_mbit=1000) as bed:
        flink = FlinkCluster(bed, bed.servers[0], bed.servers[1:], work / "cluster", home).start()
        yield bed, flink, idle_rates(bed, 10)


@pytest.mark.parametrize("routing", ["hash", "tables"])
def test_bytes_between_servers_are_the_predicted_bytes(replay, cluster, routing):
    work, tsv, store, figures, sizes = replay
    bed, flink, idle = cluster
    route = Routing(routing, store)
    overhead = job_overhead(bed, flink, route, idle=idle)
    run = run_bounded(bed, flink, tsv, route, padding=PADDING, passes=1, idle=idle, overhead=overhead)
    assert run.records == len(sizes)  # every record reached the sink, once
    locality = figures["locality"] if routing == "tables" else figures["hash_locality"]
    predicted = (1 - locality) * len(sizes) * sizes.mean()
    measured = sum(run.sent_payload[1:])  # the TaskManagers' servers; the JobManager's sends no records
    assert measured == pytest.approx(predicted, rel=0.05)
    assert figures["locality"] > figures["hash_locality"] + 0.3  # the tables make a difference to measure
