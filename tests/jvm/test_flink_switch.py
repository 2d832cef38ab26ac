"""A Flink job over the tweet trace switches table versions twice mid-stream, each time from one command.

A standalone Flink cluster (the ``apache-flink`` wheel's distribution with Flink's S3 plugin
installed: one JobManager, one TaskManager of 6 slots, on loopback) runs ``TwoStageJob``
(location -> hashtag, counting records per real key in each operator's ``MapState``) on
version 1 of a store in an S3 bucket (the tests' S3 server), replaying the whole trace at a
fixed rate from a source a savepoint resumes. The versions are what an online job publishes:
version 1 learned on the first third of the trace, versions 2 and 3 reconfigured from the one
before on the second and last thirds (each moves thousands of keys). While the job runs,
``locality switch flink`` (a subprocess, as a user runs it) first tries a switch with a wrong
``--from``, which is refused before anything stops; then a switch naming a state the job lacks,
whose rewrite fails and which restarts the job on version 1 from the untouched savepoint; then the
store's S3 server is killed for 30 s while the job runs, and a switch tried meanwhile exits 75 naming the
store; then switches 1 -> 2 and 2 -> 3. Every switch stops the job with a savepoint in the bucket
(``s3://...``, written by Flink's S3 plugin), rewrites it there on the cluster
(``locality-flink-state``'s ``RewriteSavepoint``, reading the store from the bucket too) and
restarts the job from it.

Checked: every record of the trace is output once, by the version it was routed with, on the
subtask that version names; each real key's count runs 1..n across all four jobs (so nothing
was lost or counted twice, and a moved key's count went on where it was, on its new
subtask); every key's final count is its number of records; in each rewritten savepoint (read
back from the bucket) every key's state is under the new version's routing key, on its subtask,
with the state it had, the moved keys are those of the migration plan, and the command's counts
are the savepoint's; the failed rewrite left nothing in the bucket; during the outage the job went on
counting, the same job, and the switch took no savepoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locality.counts import count_keys
from locality.engines.flink_rest import FlinkRest
from locality.engines.flink_s3 import flink_s3_configuration, write_flink_conf
from locality.optimizer import make_fallbacks, optimize
from locality.reconfiguration import reconfigure
from locality.router import load_snapshot
from locality.store import ConfigStore
from locality.topology import Topology
from testbed.flink import install_s3_plugin
from tests.conftest import REPO
from tests.jvm.conftest import FLINK_EXAMPLES, FLINK_JVM_OPTIONS, JVM, TWEET_MAX_PARALLELISM, run_java
from tests.jvm.flink_cluster import LocalFlinkCluster
from tests.jvm.store_outage import Outage

OPERATORS = ["location", "hashtag"]
JOB = "io.locality.flink.job.TwoStageJob"
SPECS = [f"{op}=count-per-{op}" for op in OPERATORS]
BUCKET = "locality"
#: Records per second the trace is replayed at: its 116,846 records take about 78 s of running.
RATE = 1500
#: Share of the trace processed before each switch: the refused ones, 1 -> 2, 2 -> 3. Between the refused
#: ones and 1 -> 2 the store is out for 30 s (at most 39% of the trace at this rate). The last leaves 27 s
#: of running: the command's checks before its stop (reading both versions from the bucket, the plan) took
#: more than the 16 s that 35% at 2,500/s left, on this machine under load, and found the job finished.
SWITCH_AT = (0.05, 0.5, 0.65)
#: How long the store's S3 server is stopped while the job runs on version 1.
OUTAGE_SECONDS = 30.0
WAIT = 300.0


def built_jar(module: str, classifier: str) -> Path:
    found = sorted((JVM / module / "target").glob(f"{Path(module).name}-*-{classifier}.jar"))
    if not found:
        pytest.fail(f"{module} is not built: run `make test` or `mvn -f {JVM}/pom.xml install`", pytrace=False)
    return found[-1]


@pytest.fixture(scope="module")
def aws(s3_server):
    """The AWS variables of the tests' S3 server, in this process and so in the cluster's and the command's."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in s3_server.env.items():
            patch.setenv(name, value)
        yield s3_server


@pytest.fixture(scope="module")
def distribution(flink_distribution):
    """The tests' Flink distribution with Flink's S3 plugin in its ``plugins/`` (``make flink-s3`` fetched it)."""
    try:
        install_s3_plugin(flink_distribution)
    except FileNotFoundError as error:
        pytest.fail(str(error), pytrace=False)
    return flink_distribution


def in_bucket(what: str) -> str:
    """A fresh prefix of the bucket: each module run has its own store and savepoints."""
    return f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}/{what}"


def bucket_names(s3_server, uri: str) -> set[str]:
    """The names of the objects under ``uri`` (``s3://bucket/prefix``), relative to it."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    pages = s3_server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/")
    return {item["Key"][len(prefix) + 1 :] for page in pages for item in page.get("Contents", [])}


@pytest.fixture(scope="module")
def versions(geotweets, tmp_path_factory, aws):
    """A store in the bucket with versions 1-3 as an online job publishes them, and the trace as JSON lines."""
    work = tmp_path_factory.mktemp("flink-switch")
    topology = Topology.uniform(OPERATORS, 6)
    fallbacks = make_fallbacks(topology, "flink", max_parallelism=TWEET_MAX_PARALLELISM)
    thirds = np.array_split(np.arange(len(geotweets)), 3)
    store = ConfigStore(in_bucket("store"))
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


def running_job(rest: FlinkRest, after: subprocess.CompletedProcess | None = None) -> str:
    """The one running job (``after`` a switch: its messages say why there is none)."""
    running = [job["id"] for job in rest.jobs() if job["status"] == "RUNNING"]
    assert len(running) == 1, (rest.jobs(), after.stderr[-3000:] if after else "")
    return running[0]


def switch(url: str, job: str, store: str, savepoints: str, *options: str, job_args=(), specs=SPECS):
    """``locality switch flink`` as a user runs it; the finished process.

    With ``job_args`` the command restarts the job (its jar, main class and arguments given); without,
    ``options`` say ``--no-restart``.
    """
    command = [sys.executable, "-m", "locality.cli", "switch", "flink", "--rest", url, "--job", job,
               "--store", store, *options, "--savepoint-dir", savepoints, "--json"]  # fmt: skip
    if job_args:
        command += ["--jar", str(built_jar(FLINK_EXAMPLES, "job")), "--entry-class", JOB]
    for spec in specs:
        command += ["--operator", spec]
    if job_args:
        command += ["--", *job_args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(command, capture_output=True, text=True, timeout=3 * WAIT, env=env)


def store_out_while_running(aws, rest: FlinkRest, jobs: list[str], url: str, store: str, savepoints: str, job_args):
    """The store's S3 server killed for :data:`OUTAGE_SECONDS` while the job runs; a switch tried meanwhile.

    Returns the switch's process, the records the job counted from the outage's start to the first fresh
    count after it and when that count came, whether it still ran the same job, and the savepoints in the
    bucket before and after. (The JobManager's metrics of the job stood still while the store was out, the
    job ran on: its rate-limited source could not have made up for a stall, so records counted over the
    outage and a few seconds after are records counted during it.)
    """
    wait_for(rest, jobs, processed(rest, jobs) + 1000)  # the job restarted from its savepoint counts again
    before = bucket_names(aws, savepoints)
    with Outage(aws, "stopped") as outage:
        outage.begin()
        at_start = processed(rest, jobs)
        tried = switch(url, jobs[-1], store, savepoints, "--to", "2", job_args=job_args)
        time.sleep(max(0.0, outage.began + OUTAGE_SECONDS - time.time()))
        same_job = running_job(rest) == jobs[-1]
        outage.end()
    stood_at, deadline = processed(rest, jobs), time.monotonic() + WAIT
    while (counted := processed(rest, jobs)) == stood_at and time.monotonic() < deadline:
        time.sleep(0.2)
    return {"switch": tried, "counted": counted - at_start, "counted_after_s": time.time() - outage.ended,
            "same_job": same_job, "seconds": outage.seconds,
            "savepoints": (before, bucket_names(aws, savepoints))}  # fmt: skip


@pytest.fixture(scope="module")
def run(versions, distribution, tmp_path_factory, aws):
    """The whole run: the job on version 1, two refused switches, 1 -> 2, 2 -> 3, to the
    end of the trace."""
    store, records, work = versions
    total = sum(1 for _ in open(records))
    out, savepoints = work / "out", in_bucket("savepoints")
    job_args = ["--store", store.location, "--version", "{version}", "--input", str(records), "--mode", "tables",
                "--output", str(out), "--rate", str(RATE)]  # fmt: skip
    # Flink's S3 plugin pointed at the store's server: the savepoints go to the bucket. The machine is shared:
    # under load a TaskManager answered a task deployment after Flink's default RPC timeout (10 s).
    settings = {"metrics.fetcher.update-interval": 1000, "pekko.ask.timeout": "60 s", **flink_s3_configuration()}
    with LocalFlinkCluster(distribution, tmp_path_factory.mktemp("cluster"), settings=settings) as cluster:
        rest = FlinkRest(cluster.url)
        jar = rest.upload_jar(built_jar(FLINK_EXAMPLES, "job"))
        first = rest.run_jar(jar, JOB, [a.replace("{version}", "1") for a in job_args])
        rest.wait_until_running(first, timeout=WAIT)
        jobs = [first]
        wait_for(rest, jobs, int(SWITCH_AT[0] * total))
        # a wrong --from: refused before anything stops
        wrong_from = switch(cluster.url, first, store.location, savepoints, "--from", "2", "--to", "3",
                            job_args=job_args)  # fmt: skip
        untouched = running_job(rest)
        # a state name the job does not have: the rewrite fails and the job restarts on version 1
        wrong_state = switch(cluster.url, first, store.location, savepoints, "--to", "2", job_args=job_args,
                             specs=[SPECS[0], SPECS[1] + ",state=counts"])  # fmt: skip
        jobs.append(running_job(rest, wrong_state))
        outage = store_out_while_running(aws, rest, jobs, cluster.url, store.location, savepoints, job_args)
        switches = []
        for new, share in zip((2, 3), SWITCH_AT[1:]):
            wait_for(rest, jobs, int(share * total))
            done = switch(cluster.url, jobs[-1], store.location, savepoints, "--to", str(new), job_args=job_args)
            assert done.returncode == 0, done.stderr[-4000:]
            switches.append(json.loads(done.stdout))
            jobs.append(switches[-1]["new_job"])
        assert rest.wait_for_end(jobs[-1], timeout=WAIT) == "FINISHED", rest.failure(jobs[-1])
    parts = [p for p in out.rglob("*") if p.is_file()]
    lines = pd.concat([pd.read_json(p, lines=True, dtype={op: str for op in OPERATORS}) for p in parts])
    return {"wrong_from": wrong_from, "untouched": untouched, "wrong_state": wrong_state, "jobs": jobs,
            "switches": switches, "lines": lines, "parts": parts, "total": total, "savepoints": savepoints,
            "store": store, "outage": outage}  # fmt: skip


@pytest.fixture(scope="module")
def savepoint_state(run, distribution, tmp_path_factory):
    """Every real key's state in the savepoint and the rewritten savepoint of both switches (ReadRealKeyState).

    The tool reads them from the bucket through Flink's S3 plugin, configured as the cluster is.
    """
    conf = write_flink_conf(tmp_path_factory.mktemp("reader-conf"), flink_s3_configuration())
    env = {"FLINK_CONF_DIR": str(conf), "FLINK_PLUGINS_DIR": str(distribution / "plugins")}
    states = {}
    for done in run["switches"]:
        for path in (done["savepoint"], done["rewritten"]):
            listing = tmp_path_factory.mktemp("state") / "state.jsonl"
            args = ["--savepoint", path, "--output", listing]
            for spec in SPECS:
                args += ["--operator", spec]
            # each module's own classes ahead of the installed sibling jars its classpath.txt names
            modules = ["locality-core", "locality-flink", "locality-flink-state"]
            read = run_java(modules, "io.locality.flink.state.ReadRealKeyState", *args, jvm_options=FLINK_JVM_OPTIONS,
                            env=env)  # fmt: skip
            assert read.returncode == 0, read.stderr[-4000:]
            states[path] = pd.read_json(listing, lines=True, dtype={"key": str, "routing_key": str})
    return states


def test_a_wrong_from_version_is_refused_before_the_job_stops(run):
    refused = run["wrong_from"]
    assert refused.returncode == 2, refused.stderr[-4000:]
    said = f"job {run['jobs'][0]} runs version 1 (locality.version), not the version given, 2 (option --from)"
    assert said in refused.stderr, refused.stderr[-4000:]
    assert json.loads(refused.stdout)["exit_code"] == 2 and "stopping" not in refused.stderr
    assert run["untouched"] == run["jobs"][0]  # the same job went on running


def test_a_failed_rewrite_restarts_the_job_on_its_version(run, aws):
    failed = run["wrong_state"]
    assert failed.returncode == 2, failed.stderr[-4000:]
    assert "operator 'count-per-hashtag' has no keyed state 'counts'" in failed.stderr
    assert f"job restarted on version 1 from {run['savepoints']}/savepoint-" in failed.stderr
    assert json.loads(failed.stdout)["exit_code"] == 2 and run["jobs"][1] in failed.stderr
    # it left nothing behind in the bucket: the only rewritten savepoints are the two switches'
    folders = {name.split("/")[0] for name in bucket_names(aws, run["savepoints"])}
    rewritten = {folder for folder in folders if folder.rsplit("-", 1)[-1].startswith("v")}
    assert rewritten == {s["rewritten"].removeprefix(run["savepoints"] + "/") for s in run["switches"]}


def test_the_job_runs_on_through_a_store_outage_and_a_switch_then_exits_75(run):
    outage, tried = run["outage"], run["outage"]["switch"]
    print(
        f"store stopped {outage['seconds']:.1f} s: the job counted {outage['counted']:,} records from its start to "
        f"{outage['counted_after_s']:.1f} s after it; `locality switch flink` exit {tried.returncode} "
        f"({tried.stderr.strip().splitlines()[-1]})"
    )
    assert outage["seconds"] >= OUTAGE_SECONDS
    assert tried.returncode == 75, tried.stderr[-4000:]
    assert f"the store {run['store'].location} cannot be reached" in tried.stderr and "stopping" not in tried.stderr
    assert json.loads(tried.stdout)["exit_code"] == 75
    # the job never noticed, and went on counting: a stall would leave at most the records after the outage
    assert outage["same_job"] and outage["counted_after_s"] < 10
    assert outage["counted"] >= RATE * (OUTAGE_SECONDS / 4 + outage["counted_after_s"])
    before, after = outage["savepoints"]
    assert after == before  # no savepoint taken


def test_the_savepoints_are_in_the_bucket(run):
    for done in run["switches"]:
        assert done["savepoint"].startswith(run["savepoints"] + "/savepoint-")
        assert done["rewritten"] == f"{done['savepoint']}-v{done['to_version']}"
        assert done["rewrite_where"] == "cluster" and done["rewrite_job"]


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
        # thousands of records each: how many depends on how long each switch took (longer on a loaded machine)
        assert len(routed) > 0.02 * run["total"], (version, len(routed))
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


# -- an application cluster: the switch hands the rewritten savepoint back -------------------------------------
#: Records the application run replays (its first ones), their rate, and the share processed before the switch:
#: the job must still run when the command's checks are done (30 s later at most here, under load).
APPLICATION_RECORDS = 60_000
APPLICATION_RATE = 1500
APPLICATION_SWITCH_AT = 0.25


class ApplicationCluster(LocalFlinkCluster):
    """Flink's application mode on loopback: ``standalone-job.sh`` runs ``job``'s main in the JobManager.

    What a ``FlinkDeployment`` of Flink's Kubernetes Operator runs: one job, its jar on the JobManager's
    classpath (``--jars``), started from ``savepoint`` when given; the REST API serves the job but takes
    no jar. It keeps serving once its job ended (``execution.shutdown-on-application-finish: false``,
    as the operator configures its clusters), until stopped.
    """

    def __init__(self, home: Path, workdir: Path, job: list[str], *, settings: dict, savepoint: str | None = None):
        settings = {**settings, "execution.shutdown-on-application-finish": False}
        super().__init__(home, workdir, settings=settings)
        restore = ["--fromSavepoint", savepoint] if savepoint else []
        # --jars takes every value up to the next option it knows: --job-classname ends it
        self.job = ["--jars", str(built_jar(FLINK_EXAMPLES, "job")), "--job-classname", JOB, *restore, *job]

    def _launch(self, role: str, env: dict) -> None:
        if role != "jobmanager":
            super()._launch(role, env)
            return
        with open(self.workdir / "log" / "standalone-job.out", "wb") as log:
            command = [str(self.home / "bin" / "standalone-job.sh"), "start-foreground", *self.job]
            self._processes.append(
                subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            )

    def job_id(self) -> str:
        """The application's one job."""
        with urllib.request.urlopen(self.url + "/jobs", timeout=10) as response:
            (job,) = json.load(response)["jobs"]
        return job["id"]


@pytest.fixture(scope="module")
def application_run(versions, distribution, tmp_path_factory):
    """The job in an application cluster on version 1, switched with ``--no-restart --rewrite local``, then
    redeployed from the handed-back savepoint on version 2, as the deployment would."""
    store, records, work = versions
    head = work / "application-records.jsonl"
    with open(records) as lines, open(head, "w") as out:
        out.writelines(line for _, line in zip(range(APPLICATION_RECORDS), lines))
    output, savepoints = work / "application-out", in_bucket("application-savepoints")
    job_args = ["--store", store.location, "--version", "{version}", "--input", str(head), "--mode", "tables",
                "--output", str(output), "--rate", str(APPLICATION_RATE)]  # fmt: skip
    settings = {"metrics.fetcher.update-interval": 1000, "pekko.ask.timeout": "60 s", **flink_s3_configuration()}
    first_job = [a.replace("{version}", "1") for a in job_args]
    with ApplicationCluster(distribution, tmp_path_factory.mktemp("app-1"), first_job, settings=settings) as first:
        rest = FlinkRest(first.url)
        job = first.job_id()
        rest.wait_until_running(job, timeout=WAIT)
        wait_for(rest, [job], int(APPLICATION_SWITCH_AT * APPLICATION_RECORDS))
        done = switch(first.url, job, store.location, savepoints, "--to", "2", "--no-restart", "--rewrite", "local",
                      "--flink-home", str(distribution))  # fmt: skip
        assert done.returncode == 0, done.stderr[-4000:]
        switched = json.loads(done.stdout)
        ended = rest.job(job)["state"]
    second_job = [a.replace("{version}", "2") for a in job_args]
    restart = switched["rewritten"]
    with ApplicationCluster(distribution, tmp_path_factory.mktemp("app-2"), second_job, settings=settings,
                            savepoint=restart) as second:  # fmt: skip
        rest = FlinkRest(second.url)
        job = second.job_id()
        final = rest.wait_for_end(job, timeout=WAIT)
        failure = rest.failure(job) if final != "FINISHED" else ""
    parts = [p for p in output.rglob("*") if p.is_file()]
    lines = pd.concat([pd.read_json(p, lines=True, dtype={op: str for op in OPERATORS}) for p in parts])
    return {"switch": switched, "stderr": done.stderr, "ended": ended, "final": final, "failure": failure,
            "lines": lines, "savepoints": savepoints, "store": store}  # fmt: skip


def test_an_application_cluster_is_stopped_and_its_savepoint_rewritten_here(application_run, aws):
    switched = application_run["switch"]
    assert application_run["ended"] == "FINISHED"  # stopped with its savepoint, not restarted by the switch
    assert switched["new_job"] is None and switched["running_at"] is None
    assert switched["rewrite_where"] == "local" and switched["rewrite_job"] is None
    assert switched["rewritten"] == f"{switched['savepoint']}-v2"
    assert switched["savepoint"].startswith(application_run["savepoints"] + "/savepoint-")
    assert set(switched["phases"]) == {"stop", "rewrite"}
    assert f"restart it on version 2 from {switched['rewritten']}" in application_run["stderr"]
    names = bucket_names(aws, application_run["savepoints"])
    rewritten = switched["rewritten"].removeprefix(application_run["savepoints"] + "/")
    assert f"{rewritten}/_metadata" in names  # written whole, in the bucket
    for op in OPERATORS:
        counts = switched["operators"][op]
        assert counts["entries"] > 0 and 0 < counts["moved"] <= switched["plan_moved_keys"][op]
    print("application switch 1 -> 2 (--no-restart --rewrite local): " + ", ".join(
        f"{k} {v:.1f} s" for k, v in switched["phases"].items()) + f"; moved {switched['operators']}")  # fmt: skip


def test_the_redeployed_application_goes_on_counting_exactly(application_run):
    assert application_run["final"] == "FINISHED", application_run["failure"]
    lines, store = application_run["lines"], application_run["store"]
    assert sorted(lines["seq"]) == list(range(APPLICATION_RECORDS))  # every record once
    by_version = lines.groupby("version")
    assert set(by_version.groups) == {1, 2}
    for version, routed in by_version:
        assert len(routed) > 0.1 * APPLICATION_RECORDS, (version, len(routed))
        config = store.get(version).config
        for op in OPERATORS:
            expected = config.route_many(op, routed[op].to_numpy(dtype=object))
            assert (routed[f"{op}_subtask"].to_numpy() == expected).all(), (version, op)
    for op in OPERATORS:
        counts = lines.groupby(op)[f"{op}_count"]
        assert (counts.min() == 1).all() and (counts.max() == counts.size()).all()
        assert (counts.nunique() == counts.size()).all()
    plan = load_snapshot(store, 2).plan_from(load_snapshot(store, 1))
    for op in OPERATORS:  # a moved key's first count on version 2 goes on from its last on version 1
        moved = lines[lines[op].isin(plan.moves_of(op)["key"])]
        before = moved[moved["version"] == 1].groupby(op)[f"{op}_count"].max()
        after = moved[moved["version"] == 2].groupby(op)[f"{op}_count"].min()
        both = before.index.intersection(after.index)
        assert len(both) > 10, (op, len(both))
        assert (after[both] == before[both] + 1).all()
