"""The periodic online reconfiguration job on the weekly flights trace."""

import json

import pytest

from locality.cli import EXIT_OK, main
from locality.migration import MigrationPlan
from locality.store import ConfigStore
from locality.topology import Topology
from pipelines.online import OnlineParams, run
from pipelines.trace import TraceSpec
from tests.conftest import trace_path

KEYS = ["tailnum", "dest"]
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
    args = ["reconfigure", trace, "--keys", "tailnum,dest", "--ts", "ts", "--store", str(tmp_path), "--quiet", "--json"]
    assert main([*args, "--servers", "6", "--window", "7D"]) == EXIT_OK
    outcome = json.loads(capsys.readouterr().out)
    assert outcome["published"] and outcome["version"] == 1 and outcome["rows"] > 1_000
    assert main(["replay", trace, "--keys", "tailnum,dest", "--servers", "6", "--period", "30D", "--json"]) == EXIT_OK
    replayed = json.loads(capsys.readouterr().out)
    assert {"mode", "mean_locality", "mean_hash_locality", "windows"} <= set(replayed)
    window = replayed["windows"][1]
    assert {"start", "end", "tuples", "locality", "hash_locality", "imbalance", "migration_cost"} <= set(window)
    assert replayed["mean_locality"] > 2 * replayed["mean_hash_locality"]
