"""A Flink job over the tweet trace switches table versions twice mid-stream, each time from one command.

A standalone Flink cluster (the ``apache-flink`` wheel's distribution: one JobManager,
one TaskManager of 6 slots, on loopback) runs ``TwoStageJob`` (location -> hashtag,
counting records per real key in each operator's ``MapState``) on version 1 of a store,
replaying the whole trace at a fixed rate from a source a savepoint resumes. The versions
are what an online job publishes: version 1 learned on the first third of the trace,
versions 2 and 3 reconfigured from the one before on the second and last thirds (each
moves thousands of keys). While the job runs, ``locality switch flink`` (a subprocess, as a
user runs it) first tries a switch with a wrong ``--from``, which the rewrite refuses and
which restarts the job on version 1 from the untouched savepoint; then switches 1 -> 2 and
2 -> 3. Every switch stops the job with a savepoint, rewrites the savepoint on the cluster
(``locality-flink-state``'s ``RewriteSavepoint``) and restarts the job from it.

Checked: every record of the trace is output once, by the version it was routed with, on the
subtask that version names; each real key's count runs 1..n across all four jobs (so nothing
was lost or counted twice, and a moved key's count went on where it was, on its new
subtask); every key's final count is its number of records; in each rewritten savepoint every
key's state is under the new version's routing key, on its subtask, with the state it had,
the moved keys are those of the migration plan, and the command's counts are the savepoint's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locality.counts import count_keys
from locality.engines.flink_rest import FlinkRest
from locality.optimizer import make_fallbacks, optimize
from locality.reconfiguration import reconfigure
from locality.router import load_snapshot
from locality.store import ConfigStore
from locality.topology import Topology
from tests.conftest import REPO
from tests.jvm.conftest import FLINK_JVM_OPTIONS, JVM, TWEET_MAX_PARALLELISM, run_java
from tests.jvm.flink_cluster import LocalFlinkCluster

OPERATORS = ["location", "hashtag"]
JOB = "io.locality.flink.job.TwoStageJob"
SPECS = [f"{op}=count-per-{op}" for op in OPERATORS]
#: Records per second the trace is replayed at: its 116,846 records take about 47 s of running.
RATE = 2500
#: Share of the trace processed before each switch: the refused ones, 1 -> 2, 2 -> 3.
SWITCH_AT = (0.15, 0.35, 0.65)
WAIT = 300.0


def built_jar(module: str, classifier: str) -> Path:
    found = sorted((JVM / module / "target").glob(f"{module}-*-{classifier}.jar"))
    if not found:
        pytest.fail(f"{module} is not built: run `make test` or `mvn -f {JVM}/pom.xml install`", pytrace=False)
    return found[-1]


@pytest.fixture(scope="module")
def versions(geotweets, tmp_path_factory):
    """A store with versions 1-3 as an online job publishes them, and the trace as JSON lines."""
    work = tmp_path_factory.mktemp("flink-switch")
    topology = Topology.uniform(OPERATORS, 6)
    fallbacks = make_fallbacks(topology, "flink", max_parallelism=TWEET_MAX_PARALLELISM)
    thirds = np.array_split(np.arange(len(geotweets)), 3)
    store = ConfigStore(work / "store")
    config = optimize(count_keys(geotweets.iloc[thirds[0]], OPERATORS).graph(), topology, fallbacks).config
    store.publish(config, fingerprint="tweets-third-1")
    for version, rows in ((2, thirds[1]), (3, thirds[2])):
        step = reconfigure(count_keys(geotweets.iloc[rows], OPERATORS).graph(), topology, config, fallbacks)
        step.plan.from_version, step.plan.to_version = version - 1, version
        plan = step.plan.to_dict(step.config)
        store.publish(step.config, fingerprint=f"tweets-third-{version}", artifacts={"migration_plan.json": plan})
        config = step.config
    records = work / "records.jsonl"
    geotweets[["seq", *OPERATORS]].to_json(records, orient="records", lines=True, force_ascii=False)
    return store, records, work


def processed(rest: FlinkRest, jobs: list[str]) -> int:
    """Records that reached the sink, over every job of the run (Flink's metrics, refreshed every second)."""
    total = 0
    for job in jobs:
        total += sum(v["metrics"]["read-records"] for v in rest.job(job)["vertices"] if "output" in v["name"])
    return total


def wait_for(rest: FlinkRest, jobs: list[str], records: int) -> None:
    deadline = time.monotonic() + WAIT
    while processed(rest, jobs) < records:
        assert time.monotonic() < deadline, f"fewer than {records} records processed in {WAIT:g} s"
        time.sleep(0.5)


def running_job(rest: FlinkRest) -> str:
    running = [job["id"] for job in rest.jobs() if job["status"] == "RUNNING"]
    assert len(running) == 1, rest.jobs()
    return running[0]


def switch(url: str, job: str, store: Path, job_args: list[str], savepoints: Path, *options: str, specs=SPECS):
    """``locality switch flink`` as a user runs it; the finished process."""
    command = [sys.executable, "-m", "locality.cli", "switch", "flink", "--rest", url, "--job", job,
               "--store", str(store), *options, "--savepoint-dir", savepoints.as_uri(),
               "--jar", str(built_jar("locality-flink", "job")), "--entry-class", JOB, "--json"]  # fmt: skip
    for spec in specs:
        command += ["--operator", spec]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([*command, "--", *job_args], capture_output=True, text=True, timeout=3 * WAIT, env=env)


@pytest.fixture(scope="module")
def run(versions, flink_distribution, tmp_path_factory):
    """The whole run: the job on version 1, two refused switches, 1 -> 2, 2 -> 3, to the end of the trace."""
    store, records, work = versions
    total = sum(1 for _ in open(records))
    out, savepoints = work / "out", work / "savepoints"
    job_args = ["--store", str(store.root), "--version", "{version}", "--input", str(records), "--mode", "tables",
                "--output", str(out), "--rate", str(RATE)]  # fmt: skip
    settings = {"metrics.fetcher.update-interval": 1000}
    with LocalFlinkCluster(flink_distribution, tmp_path_factory.mktemp("cluster"), settings=settings) as cluster:
        rest = FlinkRest(cluster.url)
        jar = rest.upload_jar(built_jar("locality-flink", "job"))
        first = rest.run_jar(jar, JOB, [a.replace("{version}", "1") for a in job_args])
        rest.wait_until_running(first, timeout=WAIT)
        jobs = [first]
        wait_for(rest, jobs, int(SWITCH_AT[0] * total))
        # a wrong --from: refused before anything stops
        wrong_from = switch(cluster.url, first, store.root, job_args, savepoints, "--from", "2", "--to", "3")
        untouched = running_job(rest)
        # a state name the job does not have: the rewrite fails and the job restarts on version 1
        wrong_state = switch(cluster.url, first, store.root, job_args, savepoints, "--to", "2",
                             specs=[SPECS[0], SPECS[1] + ",state=counts"])  # fmt: skip
        jobs.append(running_job(rest))
        switches = []
        for new, share in zip((2, 3), SWITCH_AT[1:]):
            wait_for(rest, jobs, int(share * total))
            done = switch(cluster.url, jobs[-1], store.root, job_args, savepoints, "--to", str(new))
            assert done.returncode == 0, done.stderr[-4000:]
            switches.append(json.loads(done.stdout))
            jobs.append(switches[-1]["new_job"])
        assert rest.wait_for_end(jobs[-1], timeout=WAIT) == "FINISHED", rest.failure(jobs[-1])
    parts = [p for p in out.rglob("*") if p.is_file()]
    lines = pd.concat([pd.read_json(p, lines=True, dtype={op: str for op in OPERATORS}) for p in parts])
    return {"wrong_from": wrong_from, "untouched": untouched, "wrong_state": wrong_state, "jobs": jobs,
            "switches": switches, "lines": lines, "parts": parts, "total": total, "savepoints": savepoints,
            "store": store}  # fmt: skip


@pytest.fixture(scope="module")
def savepoint_state(run, tmp_path_factory):
    """Every real key's state in the savepoint and the rewritten savepoint of both switches (ReadRealKeyState)."""
    states = {}
    for done in run["switches"]:
        for path in (done["savepoint"], done["rewritten"]):
            listing = tmp_path_factory.mktemp("state") / "state.jsonl"
            args = ["--savepoint", path, "--output", listing]
            for spec in SPECS:
                args += ["--operator", spec]
            # each module's own classes ahead of the installed sibling jars its classpath.txt names
            modules = ["locality-core", "locality-flink", "locality-flink-state"]
            read = run_java(modules, "io.locality.flink.state.ReadRealKeyState", *args, jvm_options=FLINK_JVM_OPTIONS)
            assert read.returncode == 0, read.stderr[-4000:]
            states[path] = pd.read_json(listing, lines=True, dtype={"key": str, "routing_key": str})
    return states


def test_a_wrong_from_version_is_refused_before_the_job_stops(run):
    refused = run["wrong_from"]
    assert refused.returncode == 2, refused.stderr[-4000:]
    assert f"job {run['jobs'][0]} runs version 1 (locality.version), not --from 2" in refused.stderr
    assert refused.stdout == "" and "stopping" not in refused.stderr
    assert run["untouched"] == run["jobs"][0]  # the same job went on running


def test_a_failed_rewrite_restarts_the_job_on_its_version(run):
    failed = run["wrong_state"]
    assert failed.returncode == 2, failed.stderr[-4000:]
    assert "operator 'count-per-hashtag' has no keyed state 'counts'" in failed.stderr
    assert f"job restarted on version 1 from file:{run['savepoints']}/savepoint-" in failed.stderr
    assert failed.stdout == "" and run["jobs"][1] in failed.stderr
    # it left nothing behind: the only rewritten savepoints are the two switches'
    rewritten = {p.as_uri().removeprefix("file://") for p in run["savepoints"].glob("savepoint-*-v*")}
    assert rewritten == {s["rewritten"].removeprefix("file:") for s in run["switches"]}


def test_every_record_is_output_once_and_no_file_is_left_half_written(run):
    lines = run["lines"]
    assert len(lines) == run["total"]
    assert sorted(lines["seq"]) == list(range(run["total"]))
    assert not [p for p in run["parts"] if p.name.startswith(".")]


def test_each_version_routed_a_part_of_the_stream_on_the_subtasks_it_names(run):
    lines, store = run["lines"], run["store"]
    by_version = lines.groupby("version")
    assert set(by_version.groups) == {1, 2, 3}
    for version, routed in by_version:
        assert len(routed) > 0.1 * run["total"], (version, len(routed))
        config = store.get(version).config
        for op in OPERATORS:
            expected = config.route_many(op, routed[op].to_numpy(dtype=object))
            assert (routed[f"{op}_subtask"].to_numpy() == expected).all(), (version, op)


def test_every_key_counts_each_of_its_records_once_across_the_switches(run, geotweets):
    lines = run["lines"]
    for op in OPERATORS:
        counts = lines.groupby(op)[f"{op}_count"]
        assert (counts.max() == geotweets[op].value_counts().reindex(counts.max().index)).all()
        assert (counts.max() == counts.size()).all() and (counts.nunique() == counts.size()).all()
        assert (counts.min() == 1).all()


def test_moved_keys_go_on_counting_on_their_new_subtask(run):
    """A key the plan moves, seen before and after a switch: its first record after it counts on from its state."""
    lines = run["lines"]
    for done in run["switches"]:
        old, new = done["from_version"], done["to_version"]
        plan = load_snapshot(run["store"], new).plan_from(load_snapshot(run["store"], old))
        for op in OPERATORS:
            moves = plan.moves_of(op).set_index("key")
            seen = lines[lines[op].isin(moves.index)]
            before = seen[seen["version"] == old].groupby(op)[f"{op}_count"].max()
            after = seen[seen["version"] == new].groupby(op)[f"{op}_count"].min()
            both = before.index.intersection(after.index)
            assert len(both) > (20 if op == "location" else 500), (op, len(both))
            assert (after[both] == before[both] + 1).all()
            subtasks = seen[seen["version"] == new].groupby(op)[f"{op}_subtask"].first()[both]
            assert (subtasks == moves.loc[both, "target"]).all()
            assert (subtasks != moves.loc[both, "source"]).all()


def test_the_rewritten_savepoint_holds_every_key_on_the_new_versions_subtask(run, savepoint_state):
    store = run["store"]
    for done in run["switches"]:
        old, new = done["from_version"], done["to_version"]
        before, after = savepoint_state[done["savepoint"]], savepoint_state[done["rewritten"]]
        plan = load_snapshot(store, new).plan_from(load_snapshot(store, old))
        for op in OPERATORS:
            was = before[before["operator"] == op].set_index("key")
            now = after[after["operator"] == op].set_index("key")
            assert len(was) > 0 and sorted(was.index) == sorted(now.index)
            assert (now.loc[was.index, "state"] == was["state"]).all()  # each key keeps its state
            assert (was["subtask"] == store.get(old).config.route_many(op, was.index.to_numpy(dtype=object))).all()
            assert (now["subtask"] == store.get(new).config.route_many(op, now.index.to_numpy(dtype=object))).all()
            moved = was.index[was["subtask"].to_numpy() != now.loc[was.index, "subtask"].to_numpy()]
            assert set(moved) == set(plan.moves_of(op)["key"]) & set(was.index)
            counts = done["operators"][op]
            assert counts["entries"] == len(was) and counts["moved"] == len(moved) > 0
            assert 0 < counts["moved_bytes"] < counts["bytes"]
            assert done["plan_moved_keys"][op] == len(plan.moves_of(op))


def test_the_switch_reports_its_phases(run):
    for done in run["switches"]:
        phases = done["phases"]
        assert set(phases) == {"stop", "rewrite", "restart", "down"}
        assert 0 < phases["stop"] < phases["down"] and phases["down"] >= phases["stop"] + phases["rewrite"]
        assert done["running_at"] > done["stopped_at"]
        print(f"switch {done['from_version']} -> {done['to_version']}: " + ", ".join(
            f"{k} {v:.1f} s" for k, v in phases.items()) + f"; moved {done['operators']}")  # fmt: skip
