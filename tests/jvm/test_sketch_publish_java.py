"""Java publishes the engines' sketches (``SketchPublisher``) where Python's ``read_sketches`` finds them.

The tweet trace is cut into two one-hour intervals and, within each, into two publishers (as two
subtasks would see it); Python sketches each part (location -> hashtag pairs, each operator's keys) with a
capacity above the distinct pairs, so each sketch is exact, and writes its bytes to a file. Java's
``PublishSketches`` publishes every part into a store, once a directory and once a prefix of a bucket on
the S3 server, through ``LocalDirectory.put`` and ``S3Prefix.put``; :func:`read_sketches` then reads the
window and must give the trace's exact counts, each object holding the bytes Python wrote.
"""

from __future__ import annotations

import json

import pytest

from locality.engine_sketches import SKETCHES, Interval, read_sketches
from locality.sketch import SpaceSaving
from locality.storage import open_objects
from tests.jvm.conftest import CORE_EXAMPLES, run_java

PUBLISH = "io.locality.sketch.PublishSketches"
OPS = ["location", "hashtag"]
PUBLISHERS = 2
HOUR = 3_600_000
#: 2015-01-01T00:00Z and the hour after it
INTERVALS = [Interval(1_420_070_400_000 + i * HOUR, 1_420_070_400_000 + (i + 1) * HOUR) for i in range(2)]


@pytest.fixture(scope="module")
def parts(geotweets, tmp_path_factory):
    """``[(interval, publisher id, {option args...})]`` of sketch files, and the records they sketch."""
    records = geotweets[OPS].reset_index(drop=True)
    capacity = len(records.drop_duplicates()) + 1
    work = tmp_path_factory.mktemp("java-sketch-parts")
    halves = [records.iloc[: len(records) // 2], records.iloc[len(records) // 2 :]]
    out = []
    for interval, half in zip(INTERVALS, halves):
        for p in range(PUBLISHERS):
            part = half.iloc[p::PUBLISHERS]
            pairs, loads = SpaceSaving(capacity, 2), {op: SpaceSaving(capacity) for op in OPS}
            pairs.update_batch([part[a].to_numpy(object) for a in OPS])
            for op in OPS:
                loads[op].update_batch(part[op].to_numpy(object))
            publisher = f"java-task.{p}"
            files = {}
            for kind, sketch in [("pairs", pairs), *loads.items()]:
                path = work / f"{interval.name}-{publisher}-{kind}.lcss"
                path.write_bytes(sketch.to_bytes())
                files[kind] = path
            args = ["--pairs", *OPS, files["pairs"], *(a for op in OPS for a in ("--loads", op, files[op]))]
            out.append((interval, publisher, args, files))
    return out, records


def publish(store: str, interval: Interval, publisher: str, args: list) -> list[str]:
    done = run_java(
        [CORE_EXAMPLES], PUBLISH, "--store", store, "--interval", f"{interval.start}-{interval.end}",
        "--publisher", publisher, *args,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_what_java_publishes_python_reads_with_the_exact_counts(store_location, parts):
    published, records = parts
    for interval, publisher, args, files in published:
        names = publish(store_location, interval, publisher, args)
        folder = f"{SKETCHES}/{interval.name}"
        assert names == [
            f"{folder}/pairs/location/hashtag/{publisher}.lcss",
            f"{folder}/loads/location/{publisher}.lcss",
            f"{folder}/loads/hashtag/{publisher}.lcss",
        ]
        objects = open_objects(store_location)
        for name, kind in zip(names, ["pairs", *OPS]):
            assert objects.get(name).data == files[kind].read_bytes(), name

    window = read_sketches(store_location)
    assert window.intervals == tuple(INTERVALS) and window.left_out == ()
    assert window.publishers == tuple(f"java-task.{p}" for p in range(PUBLISHERS))
    assert window.objects == 3 * PUBLISHERS * len(INTERVALS) and window.operators == tuple(OPS)
    assert max(window.error_bound.values()) == 0
    exact = records.groupby(OPS).size()
    pairs = window.counts.pair_counts[0].set_index(["key0", "key1"])["weight"]
    assert len(pairs) == len(exact) and (pairs.loc[exact.index].to_numpy() == exact.to_numpy()).all()
    for op in OPS:
        loads = window.counts.key_load(op)
        expected = records[op].value_counts()
        assert len(loads) == len(expected) and (loads.loc[expected.index].to_numpy() == expected.to_numpy()).all()
        assert window.counts.totals[op] == len(records)


def test_java_refuses_what_python_refuses_and_writes_nothing(tmp_path, parts):
    interval, _, args, _ = parts[0][0]
    store = tmp_path / "store"
    done = run_java(
        [CORE_EXAMPLES], PUBLISH, "--store", store, "--interval", f"{interval.start}-{interval.end}",
        "--publisher", "../x", *args,
    )  # fmt: skip
    assert done.returncode == 2
    assert (
        "the 'publisher' parameter of SketchPublisher.publish must be 1-100 characters of [A-Za-z0-9_.-], "
        "not starting with '.'; got '../x'"
    ) in done.stderr
    assert not store.exists()
