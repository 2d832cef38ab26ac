"""The sketcher between the two stages of the Kafka Streams application (``KeyPairSketcher``) on a real broker.

Two applications of ``TwoStageCountsApp`` (six instances each, one per server of the tweet tables, as in
``test_streams_app.py``) run side by side with ``--sketches``: a ``KeyPairSketcher``, inserted with
``processValues`` after the location stage, sketches the (location, hashtag) pairs and both stages' keys of the
second half of the tweets into a directory store of each, once with a capacity above the distinct pairs, once well
below them, and reports as Kafka Streams metrics the share of records whose hashtag task is on its instance's
server. Each instance prints those metrics (``KafkaStreams#metrics()``) when it stops.

- :func:`read_sketches` of the store gives the exact pair and key counts with the large capacity, from one
  publisher per location task (``<application id>-0_<i>-location-hashtag``), and counts within their bound
  (``error_bound``) with the small one;
- the metric's share, summed over the tasks, is the share of records whose two stages ran on one server as the
  instances' processed-records logs say, within 0.5 point.
"""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

from locality.engine_sketches import read_sketches
from locality.router import Router
from testbed.measure import EVERY_RECORD
from tests._sketch_checks import assert_bounded, assert_exact

from .conftest import read_topic
from .streams_apps import (
    expected_tasks,
    fail_if_exited,
    produce_by_location,
    read_processed,
    start_instances,
    wait_until_each_runs_its_tasks,
)

INPUT = "sketched-tweets-by-location"
OPERATORS = ["location", "hashtag"]
#: Below the distinct (location, hashtag) pairs of the records: the counts are estimates then.
SMALL_CAPACITY = 2_000
#: What starts the line of metrics an instance prints when it stops (``TwoStageCountsApp.METRICS_LINE``).
METRICS_LINE = "locality metrics "


def stop_all(instances: dict[str, subprocess.Popen], timeout: float = 90.0) -> None:
    """SIGTERM to every instance at once (each prints its metrics, publishes its last sketches and leaves the
    group), then wait for each; SIGKILL past ``timeout``."""
    for process in instances.values():
        if process.poll() is None:
            process.terminate()
    for process in instances.values():
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)


def printed_metrics(out) -> list[dict]:
    """The locality metrics an instance printed when it stopped."""
    lines = [line for line in out.read_text().splitlines() if line.startswith(METRICS_LINE)]
    assert len(lines) == 1, f"{out}: {len(lines)} lines of locality metrics"
    return json.loads(lines[0][len(METRICS_LINE) :])


@pytest.fixture(scope="module")
def sketched(kafka_broker, kafka_store, kafka_tables, tmp_path_factory):
    """mode -> (work folder, sketch store, capacity, application id), both apps run on the second half."""
    records = kafka_tables[2]
    with Router(kafka_store.root) as router:
        snapshot = router.snapshot()
    topology = snapshot.configuration.topology
    distinct = len(records.drop_duplicates(OPERATORS))
    kafka_broker.create_topic(INPUT, 6)
    runs, instances = {}, {}
    try:
        for mode, capacity in [("exact", distinct + 1), ("small", SMALL_CAPACITY)]:
            work = tmp_path_factory.mktemp(f"kafka-sketcher-{mode}")
            application, output, store = f"locality-sketch-{mode}", f"sketched-{mode}-by-hashtag", work / "sketches"
            kafka_broker.create_topic(output, 6)
            instances[mode] = start_instances(
                topology.servers,
                work,
                **{"bootstrap-servers": kafka_broker.bootstrap, "store": kafka_store.root, "input": INPUT},
                **{"output": output, "application-id": application, "sketches": store},
                **{"sketch-interval": 3600, "sketch-capacity": capacity, "sketch-updates-per-second": EVERY_RECORD},
            )
            runs[mode] = work, store, capacity, application, output
        for mode, (work, *_) in runs.items():
            wait_until_each_runs_its_tasks(instances[mode], work, expected_tasks(topology))
        produce_by_location(kafka_broker, INPUT, snapshot, records)
        for mode, (work, _, _, _, output) in runs.items():
            read_topic(kafka_broker, output, len(records), timeout=240)
            fail_if_exited(instances[mode], work)
    finally:
        for started in instances.values():
            stop_all(started)
    return {mode: run[:4] for mode, run in runs.items()}, records, snapshot


def test_the_sketches_hold_the_exact_counts_when_the_capacity_exceeds_the_distinct_pairs(sketched):
    runs, records, _ = sketched
    _, store, capacity, application = runs["exact"]
    window = read_sketches(store)
    assert window.capacity == capacity and max(window.error_bound.values()) == 0
    # one publisher per task of the location stage: <application id>-0_<i>-location-hashtag
    assert sorted(window.publishers) == [f"{application}-0_{i}-location-hashtag" for i in range(6)]
    assert_exact(window, records, OPERATORS)


def test_the_sketches_bound_the_counts_when_the_capacity_is_below_them(sketched):
    runs, records, _ = sketched
    _, store, capacity, _ = runs["small"]
    window = read_sketches(store)
    assert window.capacity == capacity and len(window.publishers) == 6
    bound = assert_bounded(window, records, OPERATORS)
    print(
        f"Kafka Streams sketcher, capacity {capacity:,} of {len(records):,} records: error bound {bound:g} "
        f"(a priori {window.apriori_bound['location->hashtag']:g})"
    )


def test_the_metrics_local_share_is_the_share_measured_from_the_processed_logs(sketched):
    runs, records, snapshot = sketched
    for mode, (work, *_) in runs.items():
        metrics = pd.DataFrame(
            [{"server": s, "name": m["name"], **m["tags"], "value": m["value"]}
             for s in snapshot.configuration.topology.servers for m in printed_metrics(work / f"{s}.out")]
        )  # fmt: skip
        assert set(metrics["version"]) == {str(snapshot.version)}
        by_task = metrics.pivot(index="task-id", columns="name", values="value")
        assert sorted(by_task.index) == [f"0_{i}" for i in range(6)]
        assert by_task["local-share"].to_numpy() == pytest.approx(
            (by_task["local-records-total"] / by_task["records-total"]).to_numpy()
        )
        counted, local = by_task["records-total"].sum(), by_task["local-records-total"].sum()
        assert counted == len(records)
        processed = read_processed(work, snapshot.configuration.topology.servers)
        servers = processed.pivot(index="seq", columns="operator", values="server").loc[records["seq"]]
        measured = float((servers["location"] == servers["hashtag"]).mean())
        print(
            f"Kafka Streams with the sketcher ({mode}): metric share {local / counted:.4f} ({local:,.0f} of "
            f"{counted:,.0f}), measured from the processed logs {measured:.4f}"
        )
        assert abs(local / counted - measured) < 0.005
        assert measured > 0.3  # the tables keep far more than hash routing's 1/6 together
