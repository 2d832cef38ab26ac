"""The periodic online reconfiguration job on the weekly flights trace."""

import json

import pandas as pd
import pytest

from locality.cli import ExitCode, main
from locality.errors import InvalidParameterError
from locality.evaluation import evaluate
from locality.migration import MigrationPlan
from locality.rebalance.options import RebalanceOptions
from locality.router import Router
from locality.store import ConfigStore
from locality.topology import Topology
from pipelines.online import run
from pipelines.params import OnlineParams
from pipelines.trace import TraceSpec
from tests.conftest import trace_keys, trace_path

KEYS = trace_keys("flights")
WEEKS = ["2013-03-04", "2013-03-11", "2013-03-18", "2013-03-25"]


def week(i, **kw):
    spec = TraceSpec(str(trace_path("flights")), KEYS, ts="ts", start=WEEKS[i], end=WEEKS[i + 1])
    return OnlineParams(trace=spec, topology=Topology.uniform(KEYS, 6), **kw)


def test_weekly_runs_publish_with_plans_and_reruns_are_idempotent(spark, tmp_path):
    store = ConfigStore(tmp_path)
    first = run(spark, week(0, store=str(tmp_path)))
    assert first["published"] and first["version"] == 1 and first["previous_version"] is None
    second = run(spark, week(1, store=str(tmp_path)))
    fields = {
        "published",
        "version",
        "previous_version",
        "locality_before",
        "locality_after",
        "migration_cost",
        "moved_keys",
        "reason",
    }
    assert fields <= set(second)
    assert second["published"] and (second["version"], second["previous_version"]) == (2, 1)
    assert second["locality_after"] > second["locality_before"] and second["moved_keys"] > 0
    # the plan is stored with the version it leads to, with every instance's message
    stored = store.get(2)
    plan = stored.read_json("migration_plan.json")
    assert (plan["from_version"], plan["to_version"]) == (1, 2)
    assert plan["moved_keys"] == second["moved_keys"] and plan["migration_cost"] == pytest.approx(
        second["migration_cost"]
    )
    assert len(plan["messages"]) == 1 + 2 * 6 and plan["order"] == KEYS
    moves = MigrationPlan.from_dict(plan).moves
    old, new = store.get(1).config, stored.config
    for op in KEYS:
        keys = moves[moves["operator"] == op]["key"].to_numpy(dtype=object)
        assert (old.route_many(op, keys) != new.route_many(op, keys)).all()
    # relabeling moved less than raw METIS labels would have
    assert second["migration_cost_share"] < second["migration_cost_share_without_relabeling"]
    again = run(spark, week(1, store=str(tmp_path)))
    assert again["rerun"] and again["version"] == 2 and store.versions() == [1, 2]
    assert statistics_blended(tmp_path)


def statistics_blended(root):
    latest = (root / "statistics" / "LATEST").read_text().strip()
    return (root / "statistics" / latest / "counts.json").is_file()


def test_keeps_the_version_when_the_gain_does_not_pay(spark, tmp_path):
    run(spark, week(0, store=str(tmp_path)))
    outcome = run(spark, week(1, store=str(tmp_path), min_gain=1e9, max_imbalance=1.5))
    assert not outcome["published"] and outcome["version"] == 1
    assert "does not pay" in outcome["reason"]
    assert ConfigStore(tmp_path).versions() == [1]


def test_failure_while_publishing_keeps_previous_current(spark, tmp_path, monkeypatch):
    run(spark, week(0, store=str(tmp_path)))

    def killed(self, version):
        raise OSError("killed between the rename and the pointer")

    monkeypatch.setattr(ConfigStore, "_point_current", killed)
    with pytest.raises(OSError):
        run(spark, week(1, store=str(tmp_path)))
    monkeypatch.undo()
    store = ConfigStore(tmp_path)
    assert store.current_version() == 1 and store.get().config.table_sizes()["tailnum"] > 0
    # no decision was recorded for the failed run: rerunning it publishes
    assert run(spark, week(1, store=str(tmp_path)))["published"]


def test_reconfigure_and_replay_cli_json(spark, tmp_path, capsys):
    trace = str(trace_path("flights"))
    args = ["reconfigure", trace, "--keys", ",".join(KEYS), "--ts", "ts", "--store", str(tmp_path), "--quiet", "--json"]
    assert main([*args, "--servers", "6", "--window", "7D"]) == ExitCode.OK
    outcome = json.loads(capsys.readouterr().out)
    assert outcome["published"] and outcome["version"] == 1 and outcome["rows"] > 1_000
    assert (
        main(["replay", trace, "--keys", ",".join(KEYS), "--servers", "6", "--period", "30D", "--json"]) == ExitCode.OK
    )
    replayed = json.loads(capsys.readouterr().out)
    assert {"mode", "mean_locality", "mean_hash_locality", "windows"} <= set(replayed)
    window = replayed["windows"][1]
    assert {"start", "end", "tuples", "locality", "hash_locality", "imbalance", "migration_cost"} <= set(window)
    assert replayed["mean_locality"] > 2 * replayed["mean_hash_locality"]


def test_newest_files_window_and_state_column(spark, tmp_path):
    import os

    import pandas as pd

    from pipelines.online import _state_sizes
    from pipelines.trace import read_trace

    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    old = pd.DataFrame({"user": ["a", "b"] * 50, "tag": ["x", "y"] * 50, "bytes": [10] * 100})
    new = pd.DataFrame({"user": ["a", "c", "d"] * 40, "tag": ["y", "z", "w"] * 40, "bytes": [1, 1000, 5] * 40})
    old.to_parquet(trace_dir / "part-0.parquet")
    new.to_parquet(trace_dir / "part-1.parquet")
    os.utime(trace_dir / "part-0.parquet", (1_000_000, 1_000_000))  # part-1 is the newest
    spec = TraceSpec(str(trace_dir), ["user", "tag"], newest=1)
    outcome = run(
        spark, OnlineParams(trace=spec, store=str(tmp_path / "store"), topology=Topology.uniform(["user", "tag"], 2))
    )
    assert outcome["published"] and outcome["rows"] == len(new)  # only the newest file was read
    # --state COL: a key's state is the sum of the column over the window
    both = pd.concat([old, new])
    whole = TraceSpec(str(trace_dir), ["user", "tag"], state="bytes")
    sizes = _state_sizes(read_trace(spark, whole), ["user", "tag"], "bytes")
    expected = {key: both.groupby(key)["bytes"].sum().astype(float).to_dict() for key in ("user", "tag")}
    for key in ("user", "tag"):
        assert sizes[key].to_dict() == expected[key]
    # and the job uses them: every move of the plan carries its key's summed bytes
    second = run(spark, OnlineParams(trace=whole, store=str(tmp_path / "store"), min_gain=0.0, max_imbalance=1.03))
    assert second["published"] and second["moved_keys"] > 0
    plan = ConfigStore(tmp_path / "store").get(second["version"]).read_json("migration_plan.json")
    assert all(state == expected[op][key] for op, key, _, _, state in plan["moves"])


def test_rebalancing_run_adjusts_the_tables_in_force_without_touching_the_statistics(spark, tmp_path, capsys):
    run(spark, week(0, store=str(tmp_path)))
    latest = (tmp_path / "statistics" / "LATEST").read_text()
    spec = TraceSpec(str(trace_path("flights")), KEYS, ts="ts", start="2013-03-11", end="2013-03-12")
    outcome = run(spark, OnlineParams(trace=spec, store=str(tmp_path), rebalance=RebalanceOptions(theta_max=0.05)))
    assert outcome["published"] and outcome["version"] == 2 and outcome["moved_keys"] > 0
    assert outcome["reason"].startswith("rebalanced: worst imbalance")
    assert max(outcome["imbalance_after"].values()) < max(outcome["imbalance_before"].values())
    assert max(outcome["imbalance_after"].values()) <= 1.05 + 1e-9
    assert (tmp_path / "statistics" / "LATEST").read_text() == latest  # a day must not blend into the history
    plan = ConfigStore(tmp_path).get(2).read_json("migration_plan.json")
    assert plan["moved_keys"] == outcome["moved_keys"] and (plan["from_version"], plan["to_version"]) == (1, 2)
    # the same through the CLI, for the next day; --rebalance with an empty store is refused with exit 2
    args = ["reconfigure", spec.path, "--keys", "tailnum,dest", "--ts", "ts", "--quiet", "--json"]
    day = ["--start", "2013-03-12", "--end", "2013-03-13", "--rebalance", "local"]
    assert main([*args, "--store", str(tmp_path), *day]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["previous_version"] == 2
    assert main([*args, "--store", str(tmp_path / "empty"), "--servers", "6", *day]) == 2
    assert "rebalancing adjusts the tables in force" in capsys.readouterr().err


def ira_week(spark, store, start: str, end: str) -> tuple[str, list[str]]:
    """Publish the tables of one IRA week (6 servers) into ``store``; the trace's path and key columns."""
    path, keys = str(trace_path("ira")), trace_keys("ira")
    week = TraceSpec(path, keys, ts="ts", start=start, end=end)
    run(spark, OnlineParams(trace=week, store=str(store), topology=Topology.uniform(keys, 6)))
    return path, keys


def window_rows(spec: TraceSpec) -> pd.DataFrame:
    """The key columns and ``ts`` of the rows in ``spec``'s time range."""
    frame = pd.read_parquet(spec.path, columns=[*spec.keys, "ts"])
    start, end = pd.Timestamp(spec.start, tz="UTC"), pd.Timestamp(spec.end, tz="UTC")
    return frame[(frame.ts >= start) & (frame.ts < end)]


def test_following_run_brings_new_keys_next_to_their_neighbours(spark, tmp_path, capsys):
    """``--rebalance follow`` every few hours between weekly reconfigurations, on the IRA tweets (new hashtags)."""
    path, keys = ira_week(spark, tmp_path, "2016-10-03", "2016-10-10")
    hours = TraceSpec(path, keys, ts="ts", start="2016-10-10T00:00:00", end="2016-10-10T06:00:00")
    outcome = run(
        spark, OnlineParams(trace=hours, store=str(tmp_path), rebalance=RebalanceOptions("follow"), horizon="1D")
    )
    assert outcome["published"] and outcome["moved_keys"] > 0
    assert outcome["locality_after"] > outcome["locality_before"]
    # following never raises the most loaded instance above the bound or where it was
    for op in keys:
        assert outcome["imbalance_after"][op] <= max(outcome["imbalance_before"][op], 1.08) + 1e-9
    # every move pays for its state: the state it carries (its window load plus its share of the history) is
    # below the hops it makes by the horizon, four times its load of these six hours
    moves = MigrationPlan.from_dict(ConfigStore(tmp_path).get(outcome["version"]).read_json("migration_plan.json"))
    frame = window_rows(hours)
    for op in keys:
        moved = moves.moves_of(op)
        load = frame[op].value_counts().reindex(moved["key"]).to_numpy()
        assert (moved["state"].to_numpy() < 4 * load).all()
    # the CLI: --horizon is taken; a window of unknown length cannot be scaled to it (exit 2, named)
    args = ["reconfigure", path, "--keys", ",".join(keys), "--ts", "ts", "--quiet", "--json", "--store", str(tmp_path)]
    later = ["--start", "2016-10-10T06:00:00", "--end", "2016-10-10T12:00:00", "--rebalance", "follow"]
    assert main([*args, *later, "--horizon", "2D"]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["previous_version"] == outcome["version"]
    assert main([*args, "--rebalance", "follow", "--horizon", "soon"]) == 2
    assert "'horizon' parameter" in capsys.readouterr().err


def test_a_rebalancing_run_splits_hot_keys_and_publishes_their_plans(spark, tmp_path, capsys):
    """``--split-hot-keys`` on a day of IRA tweets after a week's tables: split plans in the store, routed locally."""
    path, keys = ira_week(spark, tmp_path, "2016-09-05", "2016-09-12")
    day = TraceSpec(path, keys, ts="ts", start="2016-09-12", end="2016-09-13")
    split = RebalanceOptions(
        "local", theta_max=0.05, state_weight=3.0, split_hot_keys=True, split_share=0.05, split_merge="downstream"
    )
    outcome = run(spark, OnlineParams(trace=day, store=str(tmp_path), rebalance=split, horizon="1D"))
    assert outcome["published"] and all(outcome["split_keys"][op] > 0 for op in keys)
    config = ConfigStore(tmp_path).get(outcome["version"]).config  # read back from Parquet
    assert config.split_keys() == outcome["split_keys"]
    # the day replayed through the published tables: split keys reach only their parts, and the hops and the
    # hashtags' balance are better than with the week's tables alone
    frame = window_rows(day)
    routes = config.route_rows({op: frame[op].to_numpy(dtype=object) for op in keys})
    for op in keys:
        for key, plan in config.tables[op].splits.items():
            assert set(routes[op][frame[op].to_numpy() == key].tolist()) <= set(plan)
    week_tables = evaluate(frame, ConfigStore(tmp_path).get(1).config).optimized
    split = evaluate(frame, config).optimized
    assert split.locality > week_tables.locality and split.imbalance["hashtag"] < week_tables.imbalance["hashtag"]
    # merged downstream, a split moves no state; the CLI takes the options and refuses them without a
    # locality-aware rebalancer (exit 2, named)
    plan = MigrationPlan.from_dict(ConfigStore(tmp_path).get(outcome["version"]).read_json("migration_plan.json"))
    assert not plan.moves["key"].isin([k for op in keys for k in config.tables[op].splits]).any()
    args = ["reconfigure", path, "--keys", ",".join(keys), "--ts", "ts", "--quiet", "--json", "--store", str(tmp_path)]
    nextday = ["--start", "2016-09-13", "--end", "2016-09-14", "--rebalance", "local", "--split-hot-keys"]
    assert main([*args, *nextday, "--split-share", "0.05", "--horizon", "1D"]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["split_keys"]["hashtag"] > 0
    assert main([*args, *nextday[:4], "--rebalance", "mixed", "--split-hot-keys"]) == 2
    assert "split_hot_keys" in capsys.readouterr().err


def test_weekly_runs_schedule_their_versions_and_routers_by_point_follow(spark, tmp_path, flights):
    """--switch-after: each version is in force from its window's end + the lead, for every router alike."""
    lead = pd.Timedelta("1D")
    first = run(spark, week(0, store=str(tmp_path), switch_after="1D"))
    kept = run(spark, week(1, store=str(tmp_path), switch_after="1D", min_gain=1e9, max_imbalance=1e9))
    third = run(spark, week(2, store=str(tmp_path), switch_after="1D"))
    assert first["published"] and not kept["published"] and third["published"]
    ends = [pd.Timestamp(WEEKS[i], tz="UTC") + lead for i in (1, 2, 3)]
    points = [int(end.timestamp() * 1000) for end in ends]
    assert [first["in_force_from"], kept["in_force_from"], third["in_force_from"]] == points
    schedule = ConfigStore(tmp_path).schedule()
    assert schedule.versions == (1, 2) and schedule.starts == (points[0], points[2])
    assert schedule.sealed_until == points[2]  # the run that kept its version still sealed its week
    # an older window run again later would rewrite the sealed past: refused, nothing published
    with pytest.raises(InvalidParameterError, match="the switch's lead schedules this window's version") as refused:
        run(spark, week(0, store=str(tmp_path), switch_after="1D", min_gain=0.0, seed=1))
    assert refused.value.parameter == "switch_after"
    # routers by point: a record goes by the version in force at its timestamp, whenever it is routed
    horizon = pd.Timestamp(WEEKS[3], tz="UTC") + 2 * lead  # what the next weekly run would seal
    ConfigStore(tmp_path).seal(int(horizon.timestamp() * 1000))
    records = flights[(flights["ts"] >= WEEKS[1]) & (flights["ts"] < horizon)]
    at = (records["ts"].astype("int64") // 1000).to_numpy()  # microseconds -> ms
    with Router(tmp_path) as router:
        routes = router.route_many_at("dest", records["dest"], at)
        old, new = router.at(points[2] - 1), router.at(points[2])
    assert (old.version, new.version) == (1, 2)
    before = at < points[2]
    assert (routes[before] == old.route_many("dest", records["dest"][before])).all()
    assert (routes[~before] == new.route_many("dest", records["dest"][~before])).all()
    assert (
        before.any() and (~before).any() and (routes[~before] != old.route_many("dest", records["dest"][~before])).any()
    )


def test_incremental_runs_start_from_the_version_in_force(spark, tmp_path, capsys):
    """--incremental: the version in force kept where it holds, the rest re-partitioned; it moves less than full."""
    trace = str(trace_path("flights"))
    outcomes = {}
    for flag in ("--full-partition", "--incremental"):
        base = ["reconfigure", trace, "--keys", ",".join(KEYS), "--ts", "ts", "--store", str(tmp_path / flag)]
        base += ["--quiet", "--json", "--servers", "6", "--min-gain", "0", "--max-imbalance", "100"]
        assert main([*base, "--start", WEEKS[0], "--end", WEEKS[1]]) == ExitCode.OK
        capsys.readouterr()
        assert main([*base, flag, "--start", WEEKS[1], "--end", "2013-03-12"]) == ExitCode.OK
        outcomes[flag] = json.loads(capsys.readouterr().out)
        assert outcomes[flag]["published"], outcomes[flag]["reason"]
    full, incremental = outcomes["--full-partition"], outcomes["--incremental"]
    assert "start" not in ConfigStore(tmp_path / "--full-partition").get().config.parameters
    assert ConfigStore(tmp_path / "--incremental").get().config.parameters["start"] == "in force"
    assert full["migration_cost_share_without_relabeling"] is not None
    assert incremental["migration_cost_share_without_relabeling"] is None
    assert incremental["migration_cost_share"] < 0.5 * full["migration_cost_share"]
    assert incremental["locality_after"] >= full["locality_after"] - 0.02
    with pytest.raises(InvalidParameterError, match="incremental in the online job starts a reconfiguration"):
        week(1, store=str(tmp_path), rebalance=RebalanceOptions("local"), incremental=True)
