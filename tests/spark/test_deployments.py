"""Jobs that respect the deployment in force: a nightly run that relabels, servers added and removed."""

import json

import pandas as pd
import pytest

from locality.cli import ExitCode, main
from locality.counts import count_keys
from locality.migration import MigrationPlan, plan_migration
from locality.store import ConfigStore
from locality.topology import Topology
from pipelines.offline import run
from pipelines.params import OfflineParams
from pipelines.trace import TraceSpec
from tests.conftest import trace_keys, trace_path

KEYS = trace_keys("flights")
WEEKS = ["2013-03-04", "2013-03-11", "2013-03-18"]


def nightly(store, i: int, **kw) -> OfflineParams:
    spec = TraceSpec(str(trace_path("flights")), KEYS, ts="ts", start=WEEKS[i], end=WEEKS[i + 1])
    return OfflineParams(trace=spec, topology=Topology.uniform(KEYS, 6), store=str(store), graph_stats=False, **kw)


def week_loads(flights, i: int) -> dict[str, pd.Series]:
    begin, end = pd.Timestamp(WEEKS[i], tz="UTC"), pd.Timestamp(WEEKS[i + 1], tz="UTC")
    rows = flights[(flights.ts >= begin) & (flights.ts < end)].dropna(subset=KEYS)
    return {op: count_keys(rows[KEYS], KEYS).key_loads[op].set_index("key")["weight"] for op in KEYS}


def test_a_nightly_run_relabels_against_the_version_in_force(spark, tmp_path, flights):
    """The issue's case: on main the nightly of the week of 2013-03-11 moved 95.5% of that week's state from the
    previous week's version, with no plan published; reconfigure --decay 0 moved 43.2% at the same locality."""
    store = ConfigStore(tmp_path / "store")
    run(spark, nightly(store.root, 0))
    second = run(spark, nightly(store.root, 1))
    migration = second.report["migration"]
    assert second.publish.version == 2 and migration["relabeled"]
    assert (migration["from_version"], migration["to_version"]) == (1, 2)
    # the plan is published with the version and moves exactly the keys whose instance changes
    stored = store.get(2)
    plan = MigrationPlan.from_dict(stored.read_json("migration_plan.json"))
    assert (plan.from_version, plan.to_version, plan.moved_keys) == (1, 2, migration["moved_keys"])
    old, new = store.get(1).config, stored.config
    for op in KEYS:
        keys = plan.moves_of(op)["key"].to_numpy(dtype=object)
        assert (old.route_many(op, keys) != new.route_many(op, keys)).all()
    assert "migration from version 1" in (stored.path / "report.txt").read_text()
    # what today's nightly moved: the same week optimized from scratch (an empty store), planned from version 1
    fresh = run(spark, nightly(tmp_path / "fresh", 1))
    fresh_share = plan_migration(old, fresh.config, week_loads(flights, 1)).cost_share
    assert fresh_share > 0.8 and migration["migration_cost_share"] < 0.5 * fresh_share
    assert second.report["in_sample"]["locality"] >= fresh.report["in_sample"]["locality"] - 0.01


def test_reconfigure_adds_then_removes_servers_with_plans_that_move_little(spark, tmp_path, capsys):
    """On main the online job refused any topology change (exit 2)."""
    store = ConfigStore(tmp_path / "store")
    common = ["--keys", ",".join(KEYS), "--ts", "ts", "--store", str(store.root), "--quiet", "--json"]
    window = ["--start", WEEKS[0], "--end", WEEKS[1]]
    trace = str(trace_path("flights"))
    assert main(["optimize", trace, *common, *window, "--servers", "6", "--hash", "ring", "--no-graph-stats"]) == 0
    capsys.readouterr()
    outcomes = []
    for servers in ("7", "5"):
        assert main(["reconfigure", trace, *common, *window, "--servers", servers, "--decay", "0"]) == ExitCode.OK
        outcomes.append(json.loads(capsys.readouterr().out))
    grow, shrink = outcomes
    assert grow["published"] and grow["version"] == 2 and "topology changes (6 -> 7 servers)" in grow["reason"]
    assert "least change" in grow["topology_change"] and grow["migration_cost_share"] < 0.25
    assert shrink["published"] and shrink["version"] == 3 and "7 -> 5 servers" in shrink["reason"]
    assert len(store.get(2).config.topology.servers) == 7 and len(store.get(3).config.topology.servers) == 5
    assert store.get(3).config.tables["dest"].fallback.engine == "ring"  # the hash in force, resized
    doc = store.get(3).read_json("migration_plan.json")
    assert len(doc["from_topology"]["servers"]) == 7 and doc["topology_change"]["rehashed"]
    senders = {(m["operator"], m["instance"]) for m in doc["messages"] if m["send"]}
    assert {("tailnum", 5), ("tailnum", 6), ("dest", 5), ("dest", 6)} <= senders  # the removed servers hand over
    assert not any(m["receive"] for m in doc["messages"] if m["instance"] is not None and m["instance"] >= 5)
    # a rebalancing run cannot change the topology
    rebalance = ["--rebalance", "local", "--window", "1D", "--servers", "6"]
    assert main(["reconfigure", trace, *common, *rebalance]) == 2
    assert "a rebalancing run adjusts the tables in force" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["reconfigure", "replay"])
def test_a_rebalancer_of_no_table_is_refused_naming_those_offered(command, tmp_path, capsys):
    """``ssm`` re-cut key-group ranges, which tables over a hash do not have: it was removed, and is refused as
    any unknown rebalancer is, before Spark, with the rebalancers offered."""
    trace = str(trace_path("flights"))
    args = [command, trace, "--keys", ",".join(KEYS), "--servers", "6", "--rebalance", "ssm", "-q"]
    extra = ["--ts", "ts", "--store", str(tmp_path / "store"), "--window", "1D"] if command == "reconfigure" else []
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err
    assert "must be one of" in err and "'mixed'" in err and "got 'ssm'" in err and "(option --rebalance)" in err
    assert main([command, "--help"]) == 0
    assert "ssm" not in capsys.readouterr().out
