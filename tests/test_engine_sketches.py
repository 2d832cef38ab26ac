"""The engines' sketches in a store (``locality.engine_sketches``) and ``locality reconfigure --sketches`` on them.

Each real trace is cut as engines would cut it: into wall-clock intervals, and within each interval
into 4 publishers by a hash of the key each publisher's operator is keyed by (a subtask of the first
operator sketches the pairs it sends and its own keys; a subtask of the second, its keys). Every
part is sketched with ``update_batch`` and published; ``reconfigure --sketches`` then reads, merges
and publishes a version, which is compared with ``reconfigure`` on the window's records: the counts
the Spark job would make of them (exact: the window holds fewer distinct pairs than the job's
default capacity), through the same :func:`locality.online.run_window`. No Spark runs here.
"""

from __future__ import annotations

import json
import re
import zlib

import numpy as np
import pandas as pd
import pytest

from locality.cli import ExitCode, main
from locality.counts import count_keys
from locality.defaults import DEFAULT_CAPACITY
from locality.engine_sketches import SKETCHES, Interval, SketchSelection, publish_sketches, read_sketches
from locality.errors import InvalidParameterError, StoreDamagedError, StoreError
from locality.evaluation import evaluate
from locality.online import Window, run_window
from locality.sketch import SpaceSaving
from locality.store import ConfigStore
from locality.topology import Topology
from pipelines.counting import TraceCounts
from pipelines.params import OnlineParams
from pipelines.trace import TraceSpec
from tests.conftest import read_trace, trace_keys

PUBLISHERS = 4
DAY = pd.Timedelta("1D")
#: The window each trace is reconfigured on, and the days published around it (intervals of one day).
FLIGHTS_DAYS, FLIGHTS_WINDOW = ("2013-03-01", 10), ("2013-03-04", "2013-03-11")
IRA_DAYS, IRA_WINDOW = ("2016-09-28", 10), ("2016-10-01", "2016-10-08")
#: The untimed tweets get wall-clock times from their order: 8 days, one interval each, all in the window.
TWEETS_START, TWEETS_DAYS = pd.Timestamp("2015-01-01", tz="UTC"), 8


def _utc(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def _publisher_of(keys: pd.Series) -> np.ndarray:
    """The publisher (subtask) a record's key is routed to: a CRC-32 of its text, as a deterministic hash."""
    return np.fromiter((zlib.crc32(str(k).encode()) % PUBLISHERS for k in keys), dtype=np.int64, count=len(keys))


def days(first: str | pd.Timestamp, n: int) -> list[Interval]:
    start = _utc(first) if isinstance(first, str) else first
    return [Interval.between(start + i * DAY, start + (i + 1) * DAY) for i in range(n)]


def publish_trace(store, records: pd.DataFrame, ops: list[str], intervals: list[Interval], capacity: int) -> None:
    """Sketch ``records`` (a ``ts`` column; two operators) per interval and publisher, and publish every part."""
    a, b = ops
    for interval in intervals:
        part = records[(records["ts"] >= interval.start_time) & (records["ts"] < interval.end_time)]
        sends, receives = _publisher_of(part[a]), _publisher_of(part[b])
        for p in range(PUBLISHERS):
            upstream, downstream = part[sends == p], part[receives == p]
            pairs, loads_a, loads_b = SpaceSaving(capacity, 2), SpaceSaving(capacity), SpaceSaving(capacity)
            pairs.update_batch([upstream[a].to_numpy(object), upstream[b].to_numpy(object)])
            loads_a.update_batch(upstream[a].to_numpy(object))
            loads_b.update_batch(downstream[b].to_numpy(object))
            publish_sketches(store, interval, f"task-{p}", pairs={(a, b): pairs}, loads={a: loads_a, b: loads_b})


def in_window(records: pd.DataFrame, start: str, end: str) -> pd.DataFrame:
    return records[(records["ts"] >= _utc(start)) & (records["ts"] < _utc(end))]


def trace_version(root, records: pd.DataFrame, ops: list[str]):
    """What ``reconfigure`` on a trace of ``records`` publishes into an empty store with 6 servers."""
    counts = count_keys(records, ops)
    assert all(len(pairs) < DEFAULT_CAPACITY for pairs in counts.pair_counts)  # the job's sketch is exact here
    counts = TraceCounts(ops, counts.pair_counts, counts.key_loads, counts.totals, rows=len(records), mode="exact")
    spec = TraceSpec(str(root / "trace"), ops)
    params = OnlineParams(trace=spec, store=str(root), topology=Topology.uniform(ops, 6))
    store = ConfigStore(root)
    with store.lock():
        state = {op: counts.key_load(op) for op in ops}
        run_window(
            store, params, Window("trace", tuple(ops), None, None), counts, state, previous_version=None, current=None
        )
    return store.get().config


@pytest.fixture
def run(capsys):
    """``locality reconfigure --sketches ARGS --json``: its exit code and JSON document."""

    def run(*args: str) -> tuple[int, dict]:
        code = main(["reconfigure", "--sketches", *args, "--json", "--quiet"])
        return code, json.loads(capsys.readouterr().out)

    return run


@pytest.fixture(scope="module")
def ira() -> pd.DataFrame:
    records = read_trace("ira")
    start, n = IRA_DAYS
    return records[(records["ts"] >= _utc(start)) & (records["ts"] < _utc(start) + n * DAY)]


@pytest.fixture(scope="module")
def tweets(geotweets) -> pd.DataFrame:
    """The tweets in their order, spread evenly over TWEETS_DAYS days (the trace has no times)."""
    seconds = np.arange(len(geotweets)) * (TWEETS_DAYS * 86_400) // len(geotweets)
    return geotweets.assign(ts=TWEETS_START + pd.to_timedelta(seconds, unit="s"))


# ---------------------------------------------------------------------- within a point of the trace
@pytest.mark.parametrize("name", ["flights", "ira", "tweets"])
def test_a_version_from_the_sketches_is_within_a_point_of_one_from_the_trace(name, request, tmp_path, run):
    ops = trace_keys({"tweets": "geotweets"}.get(name, name))
    records = request.getfixturevalue(name)
    if name == "tweets":
        intervals, window = days(TWEETS_START, TWEETS_DAYS), ["--window", f"{TWEETS_DAYS}D"]
        records_in_window, span = records, Interval(intervals[0].start, intervals[-1].end)
    else:
        (first, n), (start, end) = {"flights": (FLIGHTS_DAYS, FLIGHTS_WINDOW), "ira": (IRA_DAYS, IRA_WINDOW)}[name]
        intervals, window = days(first, n), ["--window", "7D"]
        records_in_window, span = in_window(records, start, end), Interval.between(start, end)
    store = tmp_path / "store"
    publish_trace(store, records, ops, intervals, DEFAULT_CAPACITY)

    code, outcome = run(*window, "--store", str(store), "--servers", "6")
    assert code == ExitCode.OK and outcome["published"] and outcome["version"] == 1
    sketches = outcome["sketches"]
    n_days = TWEETS_DAYS if name == "tweets" else 7
    assert (sketches["intervals"], sketches["publishers"], sketches["objects"]) == (n_days, 4, n_days * 4 * 3)
    assert sketches["operators"] == ops and outcome["rows"] == len(records_in_window)
    assert sketches["error_bound"] == 0 and sketches["exact_capacity"] is None  # the capacity held every key
    assert outcome["window"].startswith(f"sketches-{span.name}-")

    from_sketches = evaluate(records_in_window, ConfigStore(store).get().config)
    from_trace = evaluate(records_in_window, trace_version(tmp_path / "trace", records_in_window, ops))
    sketched, traced = from_sketches.optimized.locality, from_trace.optimized.locality
    assert abs(sketched - traced) <= 0.01 and sketched > 2 * from_sketches.hash.locality

    # a rerun on the same sketches returns the recorded outcome and publishes nothing
    again_code, again = run(*window, "--store", str(store), "--servers", "6")
    assert again_code == ExitCode.OK and again["rerun"] and again["version"] == 1
    assert again["window"] == outcome["window"] and ConfigStore(store).versions() == [1]
    print(f"{name}: locality from the sketches {sketched:.2%}, from the trace {traced:.2%}")


def test_a_sketch_published_late_into_the_window_makes_it_a_new_window(flights, tmp_path, run):
    ops, store = trace_keys("flights"), tmp_path / "store"
    publish_trace(store, flights, ops, days(*FLIGHTS_DAYS), DEFAULT_CAPACITY)
    first = run("--window", "7D", "--store", str(store), "--servers", "6")[1]
    late = SpaceSaving(DEFAULT_CAPACITY, 2)
    late.update_batch([["N12345"], ["ORD"]])
    publish_sketches(store, days("2013-03-10", 1)[0], "task-late", pairs={tuple(ops): late})
    code, second = run("--window", "7D", "--store", str(store))
    assert code == ExitCode.OK and "rerun" not in second and second["window"] != first["window"]
    assert second["sketches"]["publishers"] == 5 and second["previous_version"] == 1


def test_the_report_states_the_error_bound_and_the_capacity_that_makes_the_counts_exact(flights, tmp_path, run):
    """At 2,000 counters the merged sketches miss pairs: the bound holds for every pair, and the capacity it names
    (the distinct pairs the publishers' exact sketches held) is the window's distinct pairs."""
    ops, store = trace_keys("flights"), tmp_path / "store"
    publish_trace(store, flights, ops, days(*FLIGHTS_DAYS), 2_000)
    code, outcome = run("--window", "7D", "--store", str(store), "--servers", "6")
    assert code == ExitCode.OK
    sketches = outcome["sketches"]
    records = in_window(flights, *FLIGHTS_WINDOW)
    true = records.groupby(ops).size()
    assert sketches["exact_capacity"] == len(true) and not sketches["exact_capacity_is_lower_bound"]
    bound = sketches["error_bound_by_sketch"]["tailnum->dest"]
    assert 0 < bound <= sketches["apriori_error_bound"] == pytest.approx(len(records) / 2_000)
    merged = read_sketches(store, last="7D").counts.pair_counts[0]
    counted = true.reindex(pd.MultiIndex.from_frame(merged[["key0", "key1"]]), fill_value=0).to_numpy()
    over = merged["weight"].to_numpy() - counted
    assert len(merged) == 2_000 and (over >= 0).all() and (over <= bound).all()
    report = ConfigStore(store).get().read_bytes("report.txt").decode()
    assert f"a capacity of {len(true):,} would have made them exact" in report and "count error <= " in report
    assert json.loads(ConfigStore(store).get().read_bytes("report.json"))["counting"]["sketches"] == sketches
    # publishers whose own sketches are full missed keys: the capacity named is then a lower bound
    publish_trace(tmp_path / "small", flights, ops, days(*FLIGHTS_DAYS), 100)
    small = read_sketches(tmp_path / "small", last="7D").summary()
    assert small["exact_capacity_is_lower_bound"] and 100 < small["exact_capacity"] < len(true)


# ---------------------------------------------------------------------- the window
def test_intervals_straddling_the_window_are_left_out(flights, tmp_path):
    ops, store = trace_keys("flights"), tmp_path / "store"
    publish_trace(store, flights, ops, days(*FLIGHTS_DAYS), DEFAULT_CAPACITY)
    # another publisher cut its time at noon: its interval straddles the window's start
    noon = Interval.between("2013-03-03T12:00", "2013-03-04T12:00")
    publish_trace(store, flights.assign(tailnum="N-NOON"), ops, [noon], DEFAULT_CAPACITY)
    window = read_sketches(store, start="2013-03-04", end="2013-03-11")
    assert [iv.name for iv in window.intervals] == [iv.name for iv in days("2013-03-04", 7)]
    assert window.left_out == (noon,) and window.counts.total_weight == len(in_window(flights, *FLIGHTS_WINDOW))
    # the last 7 days end at the newest interval's end; with an end, at the newest one before it
    assert read_sketches(store, last="7D").intervals == window.intervals
    before = read_sketches(store, last="2D", end="2013-03-06T06:00")
    assert [iv.name for iv in before.intervals] == [iv.name for iv in days("2013-03-04", 2)]
    assert (
        before.left_out == (noon,)
        and SketchSelection(last="2D", end="2013-03-06T06:00").read(store).digest == before.digest
    )
    # a window that takes the noon interval in whole
    assert noon in read_sketches(store, start="2013-03-03T12:00", end="2013-03-05").intervals


def test_an_empty_window_or_no_sketches_say_so_naming_the_store_and_the_window(flights, tmp_path, run, capsys):
    ops, store = trace_keys("flights"), tmp_path / "store"
    with pytest.raises(StoreError, match=re.escape(f"the store {store} has no sketches")):
        read_sketches(store)
    publish_trace(store, flights, ops, days(*FLIGHTS_DAYS), DEFAULT_CAPACITY)
    with pytest.raises(StoreError) as empty:
        read_sketches(store, start="2014-01-01", end="2014-01-02")
    message = str(empty.value)
    assert (
        f"in the store {store} lies inside the window [2014-01-01T00:00:00+00:00, 2014-01-02T00:00:00+00:00)" in message
    )
    assert "its 10 intervals span 2013-03-01T00:00:00+00:00 to 2013-03-11T00:00:00+00:00" in message
    with pytest.raises(StoreError, match="1 straddle the window's bounds"):
        read_sketches(store, start="2013-03-04T06:00", end="2013-03-04T18:00")
    code, document = run("--start", "2014-01-01", "--window", "7D", "--store", str(store), "--servers", "6")
    assert (
        code == ExitCode.BAD_INPUT
        and "inside the last 7D of the window [2014-01-01T00:00:00+00:00, ...)" in document["error"]
    )


# ---------------------------------------------------------------------- what is refused
def test_sketches_of_two_capacities_are_refused_naming_both(flights, tmp_path, run):
    ops, store = trace_keys("flights"), tmp_path / "store"
    publish_trace(store, flights, ops, days(*FLIGHTS_DAYS), DEFAULT_CAPACITY)
    other = SpaceSaving(500)
    other.update_batch(["JFK"])
    publish_sketches(store, days("2013-03-05", 1)[0], "task-9", loads={"dest": other})
    with pytest.raises(StoreError, match="one capacity") as refused:
        read_sketches(store, last="7D")
    message = str(refused.value)
    assert f"{DEFAULT_CAPACITY:,} counters" in message and "500" in message
    assert str(store / SKETCHES / days("2013-03-05", 1)[0].name / "loads" / "dest" / "task-9.lcss") in message
    code, document = run("--window", "7D", "--store", str(store), "--servers", "6")
    assert code == ExitCode.BAD_INPUT and "task-9.lcss" in document["error"]
    assert ConfigStore(store).versions() == []


@pytest.mark.parametrize("damage", ["truncated", "arity"])
def test_a_corrupt_sketch_is_named(damage, flights, tmp_path, run):
    ops, store = trace_keys("flights"), tmp_path / "store"
    publish_trace(store, flights, ops, days(*FLIGHTS_DAYS), DEFAULT_CAPACITY)
    victim = store / SKETCHES / days("2013-03-06", 1)[0].name / "pairs" / "tailnum" / "dest" / "task-2.lcss"
    loads = victim.parents[3] / "loads" / "dest" / "task-2.lcss"
    victim.write_bytes(victim.read_bytes()[:100] if damage == "truncated" else loads.read_bytes())
    with pytest.raises(StoreDamagedError, match=str(victim)) as damaged:
        read_sketches(store, last="7D")
    assert ("truncated" if damage == "truncated" else "arity 1") in str(damaged.value)
    code, document = run("--window", "7D", "--store", str(store), "--servers", "6")
    assert code == ExitCode.BAD_INPUT and str(victim) in document["error"]


def _sketch(arity: int, *keys) -> SpaceSaving:
    sketch = SpaceSaving(64, arity)
    sketch.update_batch([[k] for k in keys] if arity == 2 else list(keys))
    return sketch


@pytest.mark.parametrize(
    "pairs, loads, says",
    [
        ({("a", "b"): ("x", "y"), ("c", "b"): ("z", "y")}, "abc", "'b' receives from both 'a' and 'c'"),
        ({("a", "b"): ("x", "y"), ("b", "a"): ("y", "x")}, "ab", "form a cycle"),
        ({("a", "b"): ("x", "y"), ("c", "d"): ("z", "w")}, "abcd", "start 2 chains, at ['a', 'c']"),
        ({("a", "b"): ("x", "y")}, "a", "no loads of ['b'] were published"),
        ({("a", "b"): ("x", "y")}, "abz", "loads of ['z'] are of no hop"),
        ({}, "ab", "hold no pairs"),
    ],
)
def test_operators_that_do_not_chain_are_named(pairs, loads, says, tmp_path):
    interval = Interval.between("2013-03-04", "2013-03-05")
    publish_sketches(
        tmp_path,
        interval,
        "p0",
        pairs={hop: _sketch(2, *keys) for hop, keys in pairs.items()},
        loads={op: _sketch(1, "k") for op in loads},
    )
    with pytest.raises(StoreError, match=re.escape(says)):
        read_sketches(tmp_path)


@pytest.mark.parametrize(
    "publisher, hop, arity, says",
    [
        ("../up", ("a", "b"), 2, "the 'publisher' parameter of publish_sketches must be 1-100 characters"),
        (".hidden", ("a", "b"), 2, "got '.hidden'"),
        ("p" * 101, ("a", "b"), 2, "'publisher' parameter"),
        (7, ("a", "b"), 2, "got 7"),
        (
            "ok",
            ("a/b", "c"),
            2,
            "the 'pairs' parameter of publish_sketches must be 1-100 characters of [A-Za-z0-9_.-], "
            "not starting with '.'; got 'a/b'",
        ),
        ("ok", ("a", "a"), 2, "keyed by (operator a, operator b), two operators; got ('a', 'a')"),
        ("ok", ("a", "b"), 1, "to a SpaceSaving of arity 2; got arity 1"),
    ],
)
def test_bad_names_are_refused_naming_the_parameter_and_the_value(publisher, hop, arity, says, tmp_path):
    interval = Interval.between("2013-03-04", "2013-03-05")
    sketch = _sketch(2, "x", "y") if arity == 2 else _sketch(1, "x")
    with pytest.raises(InvalidParameterError, match=re.escape(says)):
        publish_sketches(tmp_path, interval, publisher, pairs={hop: sketch}, loads={"a": _sketch(1, "x")})
    assert not (tmp_path / SKETCHES).exists()  # nothing written


def test_intervals_are_named_by_their_bounds_in_13_digits():
    interval = Interval.between("2013-03-04", "2013-03-05T00:00:00+00:00")
    assert interval.name == "1362355200000-1362441600000" and Interval.parse(interval.name) == interval
    assert (
        Interval(0, 1).name == "0000000000000-0000000000001" and Interval.parse("0000000000001-0000000000000") is None
    )
    assert Interval.containing("2013-03-04T10:07:30", "5min") == Interval.between(
        "2013-03-04T10:05", "2013-03-04T10:10"
    )
    for start, end, says in ((5, 5, "must end after it starts"), (-1, 5, "'start' parameter"), (0, 10**13, "'end'")):
        with pytest.raises(InvalidParameterError, match=says):
            Interval(start, end)


def test_the_options_of_a_trace_are_refused_with_sketches(flights, tmp_path, run, capsys):
    ops, store = trace_keys("flights"), tmp_path / "store"
    publish_trace(store, flights, ops, days(*FLIGHTS_DAYS)[:2], DEFAULT_CAPACITY)
    for extra, says in (
        (["some/trace.parquet"], "leave out TRACE"),
        (["--capacity", "5"], "leave out --capacity"),
        (["--exact", "--ts", "ts"], "leave out --ts, --exact"),
        (["--keys", "dest,tailnum"], "the sketches' hops chain ['tailnum', 'dest']"),
        (["--balance-since", "2013-03-01", "--balance-until", "2013-03-08", "--rebalance", "local"], "balance_since"),
    ):
        code, document = run(*extra, "--store", str(store), "--servers", "6")
        assert code == ExitCode.BAD_INPUT and says in document["error"], document
    assert main(["reconfigure", "--store", str(store), "--servers", "6"]) == ExitCode.BAD_INPUT
    assert "Missing argument 'TRACE'" in capsys.readouterr().err
    code, outcome = run("--keys", "tailnum,dest", "--store", str(store), "--servers", "6")
    assert code == ExitCode.OK and outcome["version"] == 1
    # a rebalancing step on the last day's sketches, against the version just published
    code, step = run("--window", "1D", "--rebalance", "follow", "--store", str(store))
    assert code == ExitCode.OK and step["sketches"]["intervals"] == 1 and step["previous_version"] == 1
    assert step["reason"].startswith(("rebalanced", "nothing to rebalance"))


# ---------------------------------------------------------------------- an S3 store
def test_the_sketches_of_an_s3_store_read_as_those_of_a_directory(flights, s3_store, tmp_path):
    ops = trace_keys("flights")
    for store in (s3_store, tmp_path / "store"):
        publish_trace(store, flights, ops, days("2013-03-04", 3), DEFAULT_CAPACITY)
    remote, local = read_sketches(s3_store), read_sketches(tmp_path / "store")
    assert remote.digest == local.digest and remote.bytes == local.bytes and remote.objects == 3 * 4 * 3
    assert (
        remote.counts.total_weight == local.counts.total_weight == len(in_window(flights, "2013-03-04", "2013-03-07"))
    )
    pd.testing.assert_frame_equal(remote.counts.pair_counts[0], local.counts.pair_counts[0])
