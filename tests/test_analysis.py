"""The notebooks' sweeps on tiny traces whose answers are known exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from locality import analysis
from locality.errors import InvalidParameterError, TraceError
from locality.imbalance import theta
from locality.optimizer import LocalityOptimizer
from locality.rebalance._base import instance_loads
from locality.replay import replay_trace
from locality.topology import Topology

# Two clusters that never mix: {eu: a, b} and {us: c, d}; 2 servers keep every hop local.
CLUSTERS = pd.DataFrame({"region": ["eu", "eu", "us", "us"] * 50, "tag": ["a", "b", "c", "d"] * 50})


def test_rank_frequency_counts_and_shares_heaviest_first():
    trace = pd.DataFrame({"k": ["x", "y", "x", "z", "x", "y"], "v": ["p", "p", "p", "q", "p", "q"]})
    single = analysis.rank_frequency(trace, "k")
    assert single["count"].tolist() == [3, 2, 1] and single["rank"].tolist() == [1, 2, 3]
    assert single["share"].tolist() == pytest.approx([0.5, 1 / 3, 1 / 6])
    pairs = analysis.rank_frequency(trace, ["k", "v"])
    assert pairs["count"].tolist() == [3, 1, 1, 1]


def test_pair_concentration_and_pairs_to_cover():
    # pair weights 6, 3, 1 over 10 tuples
    trace = pd.DataFrame({"a": ["x"] * 6 + ["y"] * 3 + ["z"], "b": ["p"] * 6 + ["q"] * 3 + ["r"]})
    curve = analysis.pair_concentration(trace, ["a", "b"])
    assert curve["top_n"].tolist() == [1, 2, 3]
    assert curve["share"].tolist() == pytest.approx([0.6, 0.9, 1.0])
    assert analysis.pairs_to_cover(trace, ["a", "b"], shares=(0.5, 0.6, 0.8, 1.0)) == {0.5: 1, 0.6: 1, 0.8: 2, 1.0: 3}


def test_split_trace_keeps_order_or_draws_seeded_halves():
    trace = pd.DataFrame({"i": range(10)})
    first, second = analysis.split_trace(trace, 0.3)
    assert first["i"].tolist() == [0, 1, 2] and second["i"].tolist() == list(range(3, 10))
    a, b = analysis.split_trace(trace, 0.5, shuffle=True, seed=1)
    again, _ = analysis.split_trace(trace, 0.5, shuffle=True, seed=1)
    assert a["i"].tolist() == again["i"].tolist() != [0, 1, 2, 3, 4]
    assert sorted(a["i"].tolist() + b["i"].tolist()) == list(range(10))


def test_load_trace_checks_columns_drops_empty_keys_and_filters_time(tmp_path):
    ts = pd.to_datetime(["2016-01-01", "2016-01-02", "2016-01-03", "2016-01-04"], utc=True).astype("M8[us, UTC]")
    frame = pd.DataFrame({"ts": ts, "u": ["a", None, "b", "c"], "h": ["x", "y", "", "z"]})
    path = tmp_path / "t.parquet"
    frame.to_parquet(path, index=False)
    loaded = analysis.load_trace(path, ["u", "h"], ts="ts", start="2016-01-01", end="2016-01-04")
    assert loaded["u"].tolist() == ["a"]  # null user, empty hashtag and 2016-01-04 dropped
    assert analysis.load_trace(path, ["u", "h"], ts="ts")["u"].tolist() == ["a", "c"]
    frame.to_csv(tmp_path / "t.csv", index=False)
    assert analysis.load_trace(tmp_path / "t.csv", ["u", "h"])["u"].tolist() == ["a", "c"]
    with pytest.raises(TraceError, match="'hashtag'"):
        analysis.load_trace(path, ["u", "hashtag"])
    with pytest.raises(TraceError, match="'u' .* must be a timestamp"):
        analysis.load_trace(path, ["h"], ts="u")
    with pytest.raises(TraceError, match="no trace at"):
        analysis.load_trace(tmp_path / "missing.parquet", ["u", "h"])


def test_server_sweep_finds_the_clusters_and_hash_is_measured_beside():
    sweep = analysis.server_sweep(CLUSTERS, CLUSTERS, ["region", "tag"], [2], alpha=1.1)
    row = sweep.iloc[0]
    assert row["in_sample"] == 1.0 and row["next_window"] == 1.0
    opt = LocalityOptimizer(Topology.uniform(["region", "tag"], 2), alpha=1.1).fit(CLUSTERS)
    assert row["hash_locality"] == opt.report_.hash.locality
    assert row["entries"] == sum(opt.config_.table_sizes().values())
    assert row["parquet_bytes"] > 0 and row["json_bytes"] > 0


def test_top_pairs_sweep_reports_the_pairs_kept_and_their_share():
    sweep = analysis.top_pairs_sweep(CLUSTERS, CLUSTERS, ["region", "tag"], 2, [1, None], alpha=1.1)
    assert sweep["top_pairs"].tolist() == [1, 4]
    assert sweep["pair_share"].tolist() == pytest.approx([0.25, 1.0])
    assert sweep["in_sample"].iloc[-1] == 1.0


def test_table_cost_counts_every_entry():
    opt = LocalityOptimizer(Topology.uniform(["region", "tag"], 2), alpha=1.1).fit(CLUSTERS)
    cost = analysis.table_cost(opt.config_)
    sizes = opt.config_.table_sizes()
    assert cost.loc[["region", "tag"], "entries"].tolist() == [sizes["region"], sizes["tag"]]
    assert cost.loc["total"].tolist() == cost.loc[["region", "tag"]].sum().tolist()


def test_balance_stages_repair_meets_alpha():
    rng = np.random.default_rng(0)
    trace = pd.DataFrame({"a": rng.integers(0, 60, 5000), "b": rng.integers(0, 300, 5000)})
    opt = LocalityOptimizer(Topology.uniform(["a", "b"], 4), alpha=1.05).fit(trace)
    stages = analysis.balance_stages(opt, trace)
    assert list(stages.index) == ["a", "b"]
    assert (stages["repaired"] <= 1.05 + 1e-9).all()
    assert stages["repaired"].tolist() == pytest.approx(stages["next_window"].tolist())  # same trace
    assert stages["hash"].tolist() == pytest.approx(list(opt.report_.hash.imbalance.values()))
    with pytest.raises(AttributeError, match="fitted"):
        analysis.balance_stages(LocalityOptimizer(Topology.uniform(["a", "b"], 4)))


def test_interval_costs_counts_each_key_per_window():
    days = ["2013-01-01 10:00", "2013-01-02 00:00", "2013-01-09 00:00", "2013-01-10 00:00", "2013-01-20 00:00"]
    ts = pd.to_datetime(days, utc=True)
    trace = pd.DataFrame({"ts": ts, "k": ["x", "y", "x", "x", "y"]})
    keys, costs, starts = analysis.interval_costs(trace, "k", period="7D")
    assert keys.tolist() == ["x", "y"]
    assert costs.tolist() == [[1, 1], [2, 0], [0, 1]]
    assert [str(s.date()) for s in starts] == ["2013-01-01", "2013-01-08", "2013-01-15"]


def test_rebalance_chain_reaches_theta_and_judges_the_next_interval():
    rng = np.random.default_rng(3)
    costs = rng.pareto(1.5, size=(5, 400)) + 1
    fallback = rng.integers(0, 4, 400)
    chain = analysis.rebalance_chain(costs, fallback, 4, method="minmig", theta_max=0.1)
    assert chain["interval"].tolist() == [0, 1, 2, 3]
    assert (chain["theta_after"][chain["feasible"]] <= 0.1 + 1e-9).all()
    assert chain["hash_theta_next"].tolist() == pytest.approx(
        [theta(instance_loads(costs[i + 1], fallback, 4)) for i in range(4)]
    )
    sweep = analysis.rebalance_sweep(costs, fallback, 4, methods=["minmig"], theta_values=[0.1], warmup=1)
    assert sweep.loc[0, "migration_cost"] == pytest.approx(chain["migration_cost"].iloc[1:].mean())
    assert sweep.loc[0, "table_cap"] == -1


def test_replay_summary_counts_reconfigurations_and_means():
    ts = pd.date_range("2020-01-01", periods=4 * 7 * 24, freq="h", tz="UTC")
    rng = np.random.default_rng(0)
    trace = pd.DataFrame({"ts": ts, "a": rng.integers(0, 20, len(ts)), "b": rng.integers(0, 50, len(ts))})
    topo = Topology.uniform(["a", "b"], 2)
    online = replay_trace(trace, topo, period="7D", mode="online")
    hashed = replay_trace(trace, topo, period="7D", mode="hash")
    table = analysis.replay_summary({"online": online, "hash": hashed})
    assert table.loc["online", "windows"] == 3 and table.loc["online", "reconfigurations"] == 2
    assert table.loc["hash", "reconfigurations"] == 0 and table.loc["hash", "migration_cost"] == 0
    assert table.loc["online", "locality"] == pytest.approx(online.mean_locality)
    assert table.loc["online", "hash_worst_imbalance"] == pytest.approx(hashed.mean_worst_imbalance())


def test_pair_drift_shares_of_pairs_seen_before_skipping_empty_windows():
    # 2020: (a,x) x2, (b,y) x2; 2021: (a,x), (c,z) x3; 2022: nothing; 2023: (b,y) x2, (c,z) x2
    years = ["2020"] * 4 + ["2021"] * 4 + ["2023"] * 4
    trace = pd.DataFrame(
        {
            "ts": pd.to_datetime([f"{y}-06-01" for y in years], utc=True),
            "k": list("aabb" + "accc" + "bbcc"),
            "v": list("xxyy" + "xzzz" + "yyzz"),
        }
    )
    drift = analysis.pair_drift(trace, ["k", "v"], period="YS")
    assert drift["start"].str[:4].tolist() == ["2020", "2021", "2023"]
    assert drift["tuples"].tolist() == [4, 4, 4] and drift["distinct"].tolist() == [2, 2, 2]
    assert drift["seen_previous"].iloc[1:].tolist() == pytest.approx([0.25, 0.5])  # 2023's previous is 2021
    assert drift["seen_before"].iloc[1:].tolist() == pytest.approx([0.25, 1.0])
    assert drift["overlap_previous"].iloc[1:].tolist() == pytest.approx([0.25, 0.5])
    assert drift.iloc[0][["seen_previous", "seen_before", "overlap_previous"]].isna().all()
    assert analysis.pair_drift(trace, "k", period="YS")["seen_before"].iloc[2] == 1.0
    with pytest.raises(TraceError, match="has no column 'when'"):
        analysis.pair_drift(trace, "k", ts="when")


def test_replay_server_sweep_learns_on_earlier_windows_and_judges_the_next():
    minutes = pd.to_timedelta(range(len(CLUSTERS)), unit="min")
    weeks = [CLUSTERS.assign(ts=pd.Timestamp(f"2020-01-{day}", tz="UTC") + minutes) for day in (6, 13, 20)]
    timed = pd.concat(weeks, ignore_index=True)
    sweep = analysis.replay_server_sweep(timed, ["region", "tag"], [2], period="7D", alpha=1.1).iloc[0]
    online = replay_trace(timed, Topology.uniform(["region", "tag"], 2), period="7D", history=None, alpha=1.1)
    assert sweep["windows"] == len(online.windows) - 1 == 2
    assert sweep["next_window"] == online.mean_locality == 1.0  # the clusters never change
    assert sweep["in_sample"] == 1.0 and sweep["hash_locality"] == online.mean_hash_locality


def test_sketch_capacity_sweep_counts_the_pairs_a_sketch_keeps():
    sweep = analysis.sketch_capacity_sweep(CLUSTERS, CLUSTERS, ["region", "tag"], [2], [1, 2, None], alpha=1.1)
    assert sweep["capacity"].tolist() == [1, 2, 4] and sweep["exact"].tolist() == [False, False, True]
    assert sweep["pairs"].tolist() == [1, 2, 4]
    assert sweep["pair_share"].tolist() == pytest.approx([0.25, 0.5, 1.0])  # every pair carries 50 of 200
    assert sweep["in_sample"].iloc[-1] == 1.0
    with pytest.raises(InvalidParameterError, match="'capacities' parameter of sketch_capacity_sweep"):
        analysis.sketch_capacity_sweep(CLUSTERS, CLUSTERS, ["region", "tag"], [2], [0])
