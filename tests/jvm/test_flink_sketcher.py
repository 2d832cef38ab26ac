"""The sketcher between the two operators of the Flink Java job (``KeyPairSketcher``) on the real tweets.

``TwoStageJob`` (the job of ``test_flink_job.py``, on the same records, parallelism 6 on a MiniCluster)
runs with ``--sketches``: between its two keyed operators, chained to the first, a ``KeyPairSketcher``
sketches the (location, hashtag) pairs and both operators' keys into a directory store and reports the
share of records whose two subtasks share a slot as Flink metrics. Once keyed by the tables with a
capacity above the distinct pairs, once on the raw keys with a capacity well below them:

- :func:`read_sketches` of the store gives the exact pair and key counts with the large capacity, and
  counts within their bound (``error_bound``) with the small one;
- the metric's share, read from Flink's metric system (a reporter the job's MiniCluster is configured with,
  ``RetainedMetrics``, which keeps the metric objects, so their values at the job's end), is the share the
  job measured from where its subtasks ran (``same_slot_share``), within 0.5 point.
"""

from __future__ import annotations

import numpy as np
import pytest

from locality.engine_sketches import read_sketches
from testbed.measure import EVERY_RECORD
from tests._sketch_checks import assert_bounded, assert_exact
from tests.jvm.test_flink_job import OPERATORS, run_job, same_slot_share

#: Below the distinct (location, hashtag) pairs of the records: the counts are estimates then.
SMALL_CAPACITY = 2_000


@pytest.fixture(scope="module")
def sketched(job_input, tmp_path_factory):
    """mode -> (summary, output records, sketch store, capacity) of the job run with the sketcher."""
    records = job_input[2]
    distinct = len(records.drop_duplicates(OPERATORS))
    runs = {}
    for mode, capacity in [("tables", distinct + 1), ("raw", SMALL_CAPACITY)]:
        store = tmp_path_factory.mktemp(f"sketches-{mode}") / "store"
        summary, out = run_job(
            job_input, mode, tmp_path_factory.mktemp(f"out-sketched-{mode}"),
            "--sketches", store, "--sketch-interval", 3600, "--sketch-capacity", capacity,
            "--sketch-updates-per-second", EVERY_RECORD,
        )  # fmt: skip
        runs[mode] = summary, out, store, capacity
    return runs


def test_the_sketches_hold_the_exact_counts_when_the_capacity_exceeds_the_distinct_pairs(sketched, job_input):
    records = job_input[2]
    summary, _, store, capacity = sketched["tables"]
    window = read_sketches(store)
    assert window.capacity == capacity and max(window.error_bound.values()) == 0
    # one publisher per subtask: <job id>-location-hashtag-<subtask>
    assert sorted(p.split("-location-hashtag-")[1] for p in window.publishers) == [str(i) for i in range(6)]
    assert len({p.split("-location-hashtag-")[0] for p in window.publishers}) == 1
    assert_exact(window, records, OPERATORS)
    assert summary["records"] == len(records)


def test_the_sketches_bound_the_counts_when_the_capacity_is_below_them(sketched, job_input):
    records = job_input[2]
    _, _, store, capacity = sketched["raw"]
    window = read_sketches(store)
    assert window.capacity == capacity
    bound = assert_bounded(window, records, OPERATORS)
    print(
        f"sketcher, capacity {capacity:,} of {len(records):,} records: error bound {bound:g} (a priori "
        f"{window.apriori_bound['location->hashtag']:g}), exact capacity {window.exact_capacity():,}"
    )


def test_the_metrics_local_share_is_the_share_measured_from_the_slots(sketched):
    for mode, (summary, out, _, _) in sketched.items():
        metric = summary["locality_metrics"][str(summary["version"])]
        assert metric["records"] == summary["records"] == int(np.sum(summary["hops"]))
        assert [s["subtask"] for s in metric["subtasks"]] == list(range(6))
        assert sum(s["local_records"] for s in metric["subtasks"]) == metric["local_records"]
        for s in metric["subtasks"]:
            assert s["local_share"] == pytest.approx(s["local_records"] / s["records"])
        measured = same_slot_share(summary, out)
        print(
            f"Flink Java job with the sketcher, {mode}: metric localShare {metric['local_share']:.4f} "
            f"({metric['local_records']:,} of {metric['records']:,}), same-slot share "
            f"{summary['same_slot_share']:.4f} ({summary['same_slot']:,}; from the output records {measured:.4f})"
        )
        assert abs(metric["local_share"] - summary["same_slot_share"]) < 0.005
        assert abs(metric["local_share"] - measured) < 0.005
    shares = {mode: run[0]["locality_metrics"][str(run[0]["version"])]["local_share"] for mode, run in sketched.items()}
    assert abs(shares["raw"] - 1 / 6) < 0.03 and shares["tables"] > 1.5 * shares["raw"]
