"""The nightly offline job on real traces, end to end on a local Spark session."""

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from locality.errors import TraceError
from locality.store import ConfigStore
from locality.topology import Topology
from pipelines.counting import count_trace_exact, sketch_trace
from pipelines.evaluate import evaluate_trace
from pipelines.offline import run
from pipelines.params import OfflineParams
from pipelines.trace import TraceSpec, read_trace
from tests.conftest import trace_keys, trace_path

GEO = trace_keys("geotweets")
FLIGHTS = trace_keys("flights")


def geo_params(store, **kw):
    spec = TraceSpec(str(trace_path("geotweets")), GEO)
    return OfflineParams(trace=spec, topology=Topology.uniform(GEO, 6), store=str(store), **kw)


@pytest.fixture(scope="module")
def geo_run(spark, tmp_path_factory):
    store = tmp_path_factory.mktemp("geo-store")
    return store, run(spark, geo_params(store, replay=True))


def test_geotweets_published_with_report_beside_hash(geo_run):
    store, result = geo_run
    report = result.report
    assert result.publish.version == 1 and result.publish.created
    in_sample = report["in_sample"]
    assert in_sample["method"] == "replay" and in_sample["tuples"] == 116_846
    assert in_sample["locality"] >= 0.66 and in_sample["hash_locality"] < 0.18
    assert all(v <= 1.03 + 1e-9 for v in in_sample["imbalance"].values())
    assert report["counting"]["dropped"] == {"null key": 0, "empty key": 0, "invalid weight": 0}
    stored = ConfigStore(store).get()
    assert {p.name for p in stored.path.iterdir()} >= {
        "configuration",
        "manifest.json",
        "report.json",
        "report.txt",
        "load.png",
    }
    assert (stored.path / "load.png").read_bytes().startswith(b"\x89PNG")
    assert json.loads((stored.path / "report.json").read_text())["in_sample"]["locality"] == in_sample["locality"]
    assert "locality" in (stored.path / "report.txt").read_text()
    table = pq.read_table(stored.path / "configuration" / "tables" / "01.parquet")
    assert table.num_rows == in_sample["table_entries"]["hashtag"]


def test_estimate_from_counts_matches_replay_when_sketch_covers_all(spark, tmp_path, geo_run):
    _, replayed = geo_run
    estimated = run(spark, geo_params(tmp_path, graph_stats=False)).report["in_sample"]
    assert estimated["method"] == "counts"
    assert estimated["locality"] == pytest.approx(replayed.report["in_sample"]["locality"], abs=1e-9)
    assert estimated["imbalance"] == pytest.approx(replayed.report["in_sample"]["imbalance"])


def test_rerun_is_idempotent(spark, geo_run):
    store, first = geo_run
    again = run(spark, geo_params(store, replay=True))
    assert (again.publish.version, again.publish.created) == (1, False)
    assert ConfigStore(store).versions() == [1]
    assert again.config.tables == first.config.tables


def test_failure_during_publish_keeps_previous_current(spark, tmp_path, monkeypatch):
    store = ConfigStore(tmp_path)
    run(spark, geo_params(tmp_path, graph_stats=False))

    def killed(self, version):
        raise KeyboardInterrupt("killed after the tables were written, before CURRENT moved")

    monkeypatch.setattr(ConfigStore, "_point_current", killed)
    with pytest.raises(KeyboardInterrupt):
        run(spark, geo_params(tmp_path, graph_stats=False, alpha=1.1))
    monkeypatch.undo()
    assert store.current_version() == 1
    assert store.get().manifest["fingerprint"] == store.get(1).manifest["fingerprint"]
    assert len(store.get().config.tables["hashtag"]) > 0  # the previous version is whole and readable


def test_flights_build_on_one_month_evaluate_on_the_next(spark, tmp_path):
    path = str(trace_path("flights"))
    january = TraceSpec(path, FLIGHTS, ts="ts", start="2013-01-01", end="2013-02-01")
    params = OfflineParams(trace=january, topology=Topology.uniform(FLIGHTS, 6), store=str(tmp_path), graph_stats=False)
    result = run(spark, params)
    february = read_trace(spark, TraceSpec(path, FLIGHTS, ts="ts", start="2013-02-01", end="2013-03-01"))
    report = evaluate_trace(february, result.config, FLIGHTS)
    assert 0.15 < report.hash.locality < 0.19
    assert report.optimized.locality > 2 * report.hash.locality
    assert report.optimized.tuples == february.count()


def test_exact_and_sketch_counts_agree_on_real_data(spark):
    df = read_trace(spark, TraceSpec(str(trace_path("flights")), FLIGHTS))
    sketched = sketch_trace(df.repartition(8), FLIGHTS, capacity=20_000)
    exact = count_trace_exact(df, FLIGHTS, top_pairs=20_000, top_keys=20_000)
    assert sketched.rows == exact.rows == 334_264 and sketched.total_weight == exact.total_weight
    bound = sketched.error_bound["tailnum->dest"]
    assert bound <= sketched.total_weight / 20_000
    merged = exact.pair_counts[0].merge(sketched.pair_counts[0], on=["key0", "key1"], suffixes=("_exact", "_sketch"))
    top = exact.pair_counts[0].nlargest(1000, "weight")
    # every one of the true top 1000 pairs is in the sketch, each count within the bound
    assert len(top.merge(sketched.pair_counts[0], on=["key0", "key1"])) == 1000
    diff = merged["weight_sketch"] - merged["weight_exact"]
    assert (diff >= -1e-9).all() and (diff <= bound + 1e-9).all()
    for op in FLIGHTS:
        loads = exact.key_loads[op].merge(sketched.key_loads[op], on="key", suffixes=("_exact", "_sketch"))
        np.testing.assert_allclose(loads["weight_sketch"], loads["weight_exact"])  # few keys: exact


def test_csv_json_and_glob_inputs_with_dropped_rows(spark, tmp_path):
    frame = pd.DataFrame(
        {"user": ["a", "a", "b", None, "c", ""], "tag": ["x", "x", "y", "y", None, "z"], "n": [1, 2, 1, 1, 1, 1]}
    )
    frame.to_csv(tmp_path / "part1.csv", index=False)
    frame.to_json(tmp_path / "part1.jsonl", orient="records", lines=True)
    # Spark's CSV reader reads an empty field as null; JSON keeps "" (an empty key)
    expected = {"part1.csv": {"null key": 3, "empty key": 0}, "*.jsonl": {"null key": 2, "empty key": 1}}
    for name, dropped in expected.items():
        spec = TraceSpec(str(tmp_path / name), ["user", "tag"], weight="n")
        counts = sketch_trace(read_trace(spark, spec), ["user", "tag"], weight="n")
        assert counts.rows == 6
        assert counts.dropped == {**dropped, "invalid weight": 0}
        pairs = counts.pair_counts[0].set_index(["key0", "key1"])["weight"]
        assert pairs[("a", "x")] == 3 and pairs[("b", "y")] == 1 and len(pairs) == 2


@pytest.mark.parametrize(
    "spec, message",
    [
        (TraceSpec("/nonexistent/trace.parquet", GEO), "no trace file at '/nonexistent/trace.parquet'"),
        (TraceSpec(str(trace_path("geotweets")), ["location", "tag"]), r"has no column 'tag'; columns present: \["),
        (TraceSpec(str(trace_path("geotweets")), ["location", "lat"]), "key column 'lat' has type double"),
        (TraceSpec(str(trace_path("geotweets")), GEO, weight="city"), "weight column 'city' has type string"),
    ],
)
def test_bad_traces_are_named(spark, spec, message):
    with pytest.raises(TraceError, match=message):
        read_trace(spark, spec)


def test_empty_and_unreadable_traces(spark, tmp_path):
    empty = TraceSpec(str(trace_path("flights")), FLIGHTS, ts="ts", start="2020-01-01")
    with pytest.raises(TraceError, match="the trace is empty: 0 rows read"):
        sketch_trace(read_trace(spark, empty), FLIGHTS)
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(TraceError, match="cannot read the trace at .*broken.parquet"):
        sketch_trace(read_trace(spark, TraceSpec(str(tmp_path / "broken.parquet"), GEO)), GEO)
