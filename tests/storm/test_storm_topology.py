"""A real Storm topology (``LocalCluster``, 3 workers) follows the tweet tables and measures their locality.

The topology is the one a Storm user keys by two fields: a spout emits the
tweet records, a bolt counts them by ``location``, a bolt counts them by
``hashtag`` (6 tasks each). It runs twice on a fresh ``LocalCluster``
(``KeyedChainTopology``, in ``jvm/examples`` on locality-storm's drop-in jar):

1. with Storm's own ``fieldsGrouping`` on both hops, as the job runs today.
   Where Storm ran each bolt task (worker ``host:port``, from Nimbus, by
   ``StormPlacement``) is the topology a user hands ``locality optimize
   --topology``: the tables are learned for it from the first half of the
   trace with Storm's fallback (``--hash storm``) and published in a store;
2. with ``LocalityGrouping`` on that store, on both hops, pinned to that
   version while a newer one (hash routing alone) is the store's current.

Both runs emit the same records: the second half of the trace, plus one
record of each first-half key the second half lacks, so that every table key
is routed. Locality is measured on the second half only: the share of tuples
whose two bolt tasks ran in one worker, each task reporting its own worker.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from locality.counts import count_keys
from locality.evaluation import evaluate
from locality.hashing import StormFieldsGrouping
from locality.optimizer import make_fallbacks, optimize
from locality.routing import RoutingConfiguration
from locality.store import ConfigStore
from locality.topology import Topology
from tests.conftest import trace_keys
from tests.jvm.conftest import STORM_EXAMPLES, run_java

OPERATORS = trace_keys("geotweets")  # location -> hashtag
WORKERS, TASKS = 3, 6


def emitted_records(geotweets: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(first half, second half, the records the spout emits: second half + one per key only the first half has)."""
    half = len(geotweets) // 2
    first, second = geotweets.iloc[:half], geotweets.iloc[half:]
    cover = [first[~first[op].isin(second[op])].drop_duplicates(op) for op in OPERATORS]
    records = pd.concat([second, *cover]).drop_duplicates("seq")
    return first, second, records[["seq", *OPERATORS]].reset_index(drop=True)


def run_topology(records_file, out, tmp, *store_version) -> tuple[pd.DataFrame, dict, str]:
    """Run the topology on a fresh LocalCluster (on a store's version, if given); one row per tuple the last bolt
    logged, Storm's placement, and the run's log (the workers' log goes to stdout)."""
    args = [records_file, out, WORKERS, TASKS, *OPERATORS, *store_version]
    done = run_java(
        [STORM_EXAMPLES],
        "io.locality.storm.KeyedChainTopology",
        *args,
        timeout=400,
        jvm_options=(f"-Djava.io.tmpdir={tmp}",),  # LocalCluster's ZooKeeper and worker folders
    )
    assert done.returncode == 0, f"the Storm topology failed:\n{done.stderr[-5000:]}"
    routes = pd.concat(pd.read_json(p, lines=True, dtype={op: str for op in OPERATORS}) for p in out.glob("routes/*"))
    placement = json.loads((out / "placement.json").read_text())
    return routes.sort_values("seq").reset_index(drop=True), placement, done.stdout + done.stderr


@pytest.fixture(scope="module")
def storm_runs(geotweets, tmp_path_factory):
    """Both runs: the records, the configuration learned for Storm's placement, its store, each run's results."""
    work = tmp_path_factory.mktemp("storm")
    first, second, records = emitted_records(geotweets)
    records_file = work / "records.jsonl"
    records.to_json(records_file, orient="records", lines=True, force_ascii=False)
    (work / "tmp").mkdir()

    fields = run_topology(records_file, work / "fields", work / "tmp")
    # the topology file a user writes from what Storm did, read as `locality optimize --topology` reads it
    topology = Topology.from_dict(fields[1])
    counts = count_keys(first, OPERATORS)
    config = optimize(counts.graph(), topology, make_fallbacks(topology, "storm")).config
    store = ConfigStore(work / "store")
    learned = store.publish(config, fingerprint="storm-tweets-first-half")
    store.publish(config.hash_only(), fingerprint="storm-hash-only")  # a newer version the topology must not follow

    routed = run_topology(records_file, work / "routed", work / "tmp", store.root, learned.version)
    return {"records": records, "second": second, "config": config, "store": store, "fields": fields, "routed": routed}


def colocated(placement: dict) -> set[frozenset]:
    """The bolt tasks ``(operator, task index)`` that share a worker, one set per worker."""
    workers: dict[str, set] = {}
    for op, servers in placement["placement"].items():
        for task, server in enumerate(servers):
            workers.setdefault(server, set()).add((op, task))
    return {frozenset(tasks) for tasks in workers.values()}


def worker_ports(placement: dict, operator: str) -> np.ndarray:
    """Port of the worker each task of ``operator`` ran in, by task index, as Nimbus reported it."""
    return np.array([int(server.rsplit(":", 1)[1]) for server in placement["placement"][operator]])


@pytest.mark.parametrize("run", ["fields", "routed"])
def test_every_record_reached_both_bolts_once_in_the_worker_nimbus_reports(storm_runs, run):
    routes, placement, _ = storm_runs[run]
    assert routes["seq"].tolist() == sorted(storm_runs["records"]["seq"])
    assert len(placement["servers"]) == WORKERS and placement["operators"] == OPERATORS
    for op in OPERATORS:
        ports = worker_ports(placement, op)
        assert len(ports) == TASKS and np.unique(ports, return_counts=True)[1].tolist() == [TASKS // WORKERS] * WORKERS
        # every task ran in the worker Nimbus placed it in
        assert (routes[f"{op}_worker"].to_numpy() == ports[routes[f"{op}_task"].to_numpy()]).all()
    # the tables are learned for the fields run's placement: Storm put the same tasks together in the redeployed
    # topology (its workers may be named differently: a LocalCluster's supervisor ids are random)
    assert colocated(placement) == colocated(storm_runs["fields"][1])


def test_the_grouping_follows_the_pinned_version(storm_runs):
    log = storm_runs["routed"][2]
    for op in OPERATORS:
        assert f"'{op}' follows version 1 of {storm_runs['store'].root}" in log
    assert "follows version 2" not in log and storm_runs["store"].current_version() == 2


def test_table_keys_on_their_task_every_other_key_where_fields_grouping_puts_it(storm_runs):
    config, fields, routed = storm_runs["config"], storm_runs["fields"][0], storm_runs["routed"][0]
    for op in OPERATORS:
        table = config.tables[op]
        keys = routed[op].to_numpy(dtype=object)
        task, storm_task = routed[f"{op}_task"].to_numpy(), fields[f"{op}_task"].to_numpy()
        in_table = routed[op].isin(table.entries.index).to_numpy()
        # every tuple of a table key on the task its table names, and every table key routed
        assert (task[in_table] == table.entries[keys[in_table]].to_numpy()).all()
        assert set(keys[in_table]) == set(table.entries.index) and len(table.entries) > 100
        # every other tuple on the task Storm's own fieldsGrouping chose for it in the twin run
        assert (task[~in_table] == storm_task[~in_table]).all()
        # which is the fallback the tables were learned with; table keys are the ones it places elsewhere
        assert (storm_task == StormFieldsGrouping(TASKS).instances_of(keys)).all()
        assert (task[in_table] != storm_task[in_table]).all()


@pytest.mark.parametrize("run", ["fields", "routed"])
def test_each_key_counts_one_to_n_on_one_task(storm_runs, run):
    routes = storm_runs[run][0]
    for op in OPERATORS:
        by_key = routes.groupby(op).agg(tasks=(f"{op}_task", "nunique"), top=(f"{op}_count", "max"), n=("seq", "size"))
        assert (by_key["tasks"] == 1).all() and (by_key["top"] == by_key["n"]).all()
        assert routes.groupby([op, f"{op}_count"]).size().max() == 1


def test_measured_locality_is_what_evaluate_says(storm_runs):
    second, config = storm_runs["second"], storm_runs["config"]
    # the tables as published, on the placement Storm chose for the routed run
    report = evaluate(second, RoutingConfiguration(Topology.from_dict(storm_runs["routed"][1]), config.tables))
    same_worker = {}
    for run in ("fields", "routed"):
        routes = storm_runs[run][0]
        window = routes[routes["seq"].isin(second["seq"])]
        same_worker[run] = float((window["location_worker"] == window["hashtag_worker"]).mean())
    print(
        f"Storm LocalCluster, {WORKERS} workers x {TASKS} tasks per bolt, {len(second):,} second-half tuples: "
        f"same-worker share {same_worker['routed']:.4f} with LocalityGrouping "
        f"(evaluate {report.optimized.locality:.4f}), {same_worker['fields']:.4f} with fieldsGrouping "
        f"(evaluate hash {report.hash.locality:.4f})"
    )
    assert abs(same_worker["routed"] - report.optimized.locality) < 0.005
    assert abs(same_worker["fields"] - report.hash.locality) < 0.005
    assert same_worker["routed"] > 1.5 * same_worker["fields"]
