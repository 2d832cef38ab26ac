"""What a Flink version switch costs, beside a restart of the same job without rewriting (issue 25, item 4).

A standalone Flink cluster on loopback (the ``apache-flink`` wheel's distribution, one
JobManager, one TaskManager of 6 slots: ``tests/jvm/flink_cluster.py``) runs
``TwoStageJob`` (location -> hashtag, a count per real key in each operator's
``MapState``) on the tweet trace replayed at ``--rate`` records per second, keyed by
version 1 (tables learned on the trace's first half, ``--hash flink``, M = 128). For
each share ``s`` of the state to move, the store gets a version that is version 1 with a
seeded random share ``s`` of each operator's keys sent to another subtask; then, in one
run of the job:

1. the job runs until ``--warm`` records are processed (the state to move);
2. **baseline**: stop with a savepoint and restart from it on the same version, without
   rewriting (what any restart of the job costs);
3. after ``--between`` more records, **switch**: ``switch_flink_job`` (what
   ``locality switch flink`` runs) to the version moving share ``s``;
4. after ``--between`` more records, **plain restart on the new version** (``after``): stop with a
   savepoint and restart on the version switched to, without rewriting (what any restart of the job
   costs once it runs on that version's tables: the switch's restart less this is what restoring the
   rewritten files adds);
5. after ``--between`` more records, the job is stopped.

For each restart (the baseline, the switch, the one on the new version) the script measures,
from the stop request: when the restarted job runs (every task restored), when its sink sees
records again, and when it processes ``--rate`` again (at least 90% of it over one second, from Flink's metrics
sampled every 0.2 s: that resolution bounds the figures). *Records held* are those a
source receiving ``--rate`` records per second (a Kafka topic, say) would have queued
between the stop and the first record processed again. *Bytes moved* and the realized
share come from the rewrite's own counters (serialized real key + state of each moved
MapState entry); the rewrite reads each rewritten operator's whole keyed state once and writes
it anew, every entry that keeps its routing key copied as it is, which the *bytes rewritten* column
shows.

**Larger state** (issue 39): ``--keys N`` replays a generated trace instead, of ``N`` records each
with a location and a hashtag of its own (``2 N`` keys with a count each, no key twice;
``--key-bytes B`` pads every key to ``B`` characters, so that a state of a given size needs fewer
records to build), on version 1 = Flink's own hash for every key (no table: a table learned on ``N``
distinct pairs would say nothing); a switch then gives the moved share of keys a table entry on
another subtask. ``--state-backend rocksdb`` keeps the job's state in RocksDB (the savepoint is
Flink's canonical format either way, which the rewrite reads and writes); ``--taskmanager-memory``
sizes the one TaskManager (for a heap job, since 2026-12-04, with no managed memory: all of it that is not
Flink's own goes to the heap), ``--jobmanager-memory`` the JobManager (where the job's main loads the
version's tables). The peak heap of the TaskManager during the switch (sampled from its metrics every
0.2 s) bounds what the rewrite and the restart take, beside the peak during the plain restart.

**Checked after every run**: the job's final savepoint, read back (``ReadRealKeyState``, in the job's own
state backend, once the cluster has stopped), holds every key on the subtask the last version routes it to
(the moved keys among them); with ``--keys``, every key's count is exactly 1 and the keys are as many as the
records the three jobs' sinks saw (none lost, none counted twice across the restart and the switch). A run
that fails the check raises.

Usage::

    PYTHONPATH=. python benchmarks/bench_flink_switch.py [--shares 0.01,0.1,0.5] [--rate 1500]
        [--warm 25000] [--between 20000] [--seed 0] [--json FILE]
        [--keys N --key-bytes 8 --state-backend hashmap|rocksdb --taskmanager-memory 4g
         --jobmanager-memory 3g]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locality.counts import count_keys  # noqa: E402
from locality.datasets.catalog import card  # noqa: E402
from locality.engines.flink_rest import FlinkRest  # noqa: E402
from locality.engines.flink_rewrite import ClusterRewrite, rewriter_jar  # noqa: E402
from locality.engines.flink_switch import FlinkJobLauncher, switch_flink_job  # noqa: E402
from locality.optimizer import make_fallbacks, optimize  # noqa: E402
from locality.routing import RoutingConfiguration, RoutingTable  # noqa: E402
from locality.store import ConfigStore  # noqa: E402
from locality.topology import Topology  # noqa: E402
from testbed.jvm import FLINK_JVM_OPTIONS, run_java  # noqa: E402
from tests.flink.conftest import ensure_flink_env  # noqa: E402
from tests.jvm.flink_cluster import LocalFlinkCluster, flink_home  # noqa: E402

OPERATORS = ["location", "hashtag"]
READ_STATE = "io.locality.flink.state.ReadRealKeyState"
#: How the runs rewrite and carry their routes. Recorded runs before: "key groups, buffered" (the routes in the job
#: graph as plain bytes), "key groups, buffered; routes deflated" (every entry decoded and looked up twice, the routes
#: decoded in the JobManager too), "key groups" (unbuffered reads and writes, every entry decoded twice), before
#: those the State Processor API's, in a named backend.
REWRITE = "key groups, buffered; routes deflated and lazy; unlisted keys told by their bytes"
JOB = "io.locality.flink.job.TwoStageJob"
SPECS = [f"{op}=count-per-{op}" for op in OPERATORS]
WAIT = 300.0
SAMPLE = 0.1


def moved_version(config: RoutingConfiguration, keys: dict[str, np.ndarray], share: float, seed: int):
    """``config`` with a seeded random ``share`` of each operator's keys on another subtask."""
    rng = np.random.default_rng(seed)
    tables = {}
    for op, table in config.tables.items():
        chosen = rng.choice(keys[op], size=max(1, round(share * len(keys[op]))), replace=False)
        p = table.fallback.n_instances
        targets = (config.route_many(op, chosen) + rng.integers(1, p, size=len(chosen))) % p
        entries = table.entries.copy()
        entries = pd.concat([entries.drop(chosen, errors="ignore"), pd.Series(targets, index=chosen)])
        tables[op] = RoutingTable(op, table.fallback, entries)
    return RoutingConfiguration(config.topology, tables, dict(config.parameters))


def generated_trace(n: int, seed: int, key_bytes: int = 0) -> pd.DataFrame:
    """``n`` records, each with a location and a hashtag no other record has: ``2 n`` keys of state.

    ``key_bytes`` pads each key with dots to that many characters (a key never gets shorter).
    """
    order = np.random.default_rng(seed).permutation(n)
    return pd.DataFrame(
        {
            "seq": np.arange(n),
            "location": [f"l{i}".ljust(key_bytes, ".") for i in order],
            "hashtag": [f"#t{i}".ljust(key_bytes, ".") for i in order],
        }
    )


def check_final_state(
    savepoint: str, config: RoutingConfiguration, records: int | None, backend: str, work: Path
) -> int:
    """Every real key of ``savepoint`` on the subtask ``config`` routes it to; with ``records`` (a generated
    trace: no key twice), every count 1 and ``records`` keys per operator. The keys checked. Read back in
    the job's own ``backend``, after the cluster has stopped: a heap job's savepoint of 1 GB, read into
    RocksDB, took a RocksDB seek per key and listed 12 MB in 10 minutes (2026-12-04); on the heap the reader
    gets most of the machine's memory instead.

    Raises
    ------
    RuntimeError
        Naming the first check that fails.
    """
    listing = work / "final-state.jsonl"
    args = ["--savepoint", savepoint, "--output", listing, "--state-backend", backend]
    for spec in SPECS:
        args += ["--operator", spec]
    heap = ("-XX:MaxRAMPercentage=75",) if backend == "hashmap" else ()
    read = run_java(["locality-core", "locality-flink", "locality-flink-state"], READ_STATE, *args,
                    jvm_options=FLINK_JVM_OPTIONS + heap, timeout=3600)  # fmt: skip
    if read.returncode != 0:
        raise RuntimeError(f"ReadRealKeyState failed: {read.stderr[-2000:]}")
    checked = 0
    for chunk in pd.read_json(listing, lines=True, dtype={"key": str, "routing_key": str}, chunksize=1_000_000):
        for op, rows in chunk.groupby("operator"):
            wrong = rows[rows["subtask"].to_numpy() != config.route_many(op, rows["key"].to_numpy())]
            if len(wrong):
                raise RuntimeError(f"{len(wrong)} keys of {op} not on their subtask, e.g. {wrong.iloc[0].to_dict()}")
            if records is not None and (rows["state"] != 1).any():
                raise RuntimeError(f"{op} counts a key other than once: {rows[rows['state'] != 1].iloc[0].to_dict()}")
        checked += len(chunk)
    listing.unlink()
    if records is not None and checked != len(OPERATORS) * records:
        raise RuntimeError(f"the final state holds {checked:,} keys; the sinks saw {records:,} records per operator")
    return checked


class HeapPeak:
    """The largest heap used by the cluster's TaskManagers while it runs, from their metrics every 0.2 s."""

    def __init__(self, url: str) -> None:
        self.url, self.peak, self._stop = url, 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _get(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=10) as answer:
            return json.load(answer)

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            try:
                for tm in self._get("/taskmanagers")["taskmanagers"]:
                    metric = self._get(f"/taskmanagers/{tm['id']}/metrics?get=Status.JVM.Memory.Heap.Used")
                    self.peak = max([self.peak, *(int(float(m["value"])) for m in metric)])
            except (OSError, ValueError, KeyError):
                continue  # a TaskManager between jobs may answer nothing: the next sample counts

    def __enter__(self) -> HeapPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(15)


def sink_records(rest: FlinkRest, job: str) -> int:
    return sum(v["metrics"]["read-records"] for v in rest.job(job)["vertices"] if "discard" in v["name"])


def wait_processed(rest: FlinkRest, jobs: list[str], records: int, rate: int) -> None:
    """Until the jobs' sinks saw ``records``: bounded by the time the replay takes at ``rate``, plus ``WAIT``."""
    bound = WAIT + records / rate
    deadline = time.monotonic() + bound
    while sum(sink_records(rest, j) for j in jobs) < records:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {records} records processed in {bound:g} s")
        time.sleep(0.5)


def back_to_normal(rest: FlinkRest, job: str, rate: int, stopped: float) -> dict[str, float]:
    """Seconds from the stop request until the new job's sink sees records, then ``rate`` (90%) over 1 s."""
    samples: list[tuple[float, int]] = []
    first = None
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        now, count = time.time(), sink_records(rest, job)
        samples.append((now, count))
        if count > 0 and first is None:
            first = now - stopped
        second_ago = [c for t, c in samples if t <= now - 1.0]
        if first is not None and second_ago and count - second_ago[-1] >= 0.9 * rate:
            return {"first_record": first, "normal": now - stopped}
        time.sleep(SAMPLE)
    raise RuntimeError(f"job {job} did not reach {0.9 * rate:.0f} records/s within {WAIT:g} s")


def measure(rest: FlinkRest, job: str, rate: int, stopped: float, running_at: float, phases: dict) -> dict:
    figures = back_to_normal(rest, job, rate, stopped)
    return {
        "running": running_at - stopped,
        **figures,
        "held": rate * figures["first_record"],
        **{f"{k}_phase": v for k, v in phases.items()},
    }


def run_share(rest, launcher, rewriter, store, share, version, args, savepoints, work) -> tuple[dict, str, int | None]:
    """One job run: warm up, a restart without rewriting (baseline), a switch to ``version``, a restart on it.
    Its figures, its final savepoint and the records its jobs' sinks saw (with ``--keys``)."""
    job = rest.run_jar(launcher.jar_id, JOB, launcher.args_for(1))
    rest.wait_until_running(job, timeout=WAIT)
    jobs = [job]
    wait_processed(rest, jobs, args.warm, args.rate)
    job, baseline = plain_restart(rest, launcher, job, 1, args.rate, savepoints)
    jobs.append(job)
    wait_processed(rest, jobs, args.warm + args.between, args.rate)
    with HeapPeak(rest.url) as switch_heap:
        result = switch_flink_job(rest, job, store=store.root, to_version=version, savepoint_dir=savepoints,
                                  operators=SPECS, launcher=launcher, rewrite=rewriter, timeout=WAIT)  # fmt: skip
        switched = measure(rest, result.new_job, args.rate, result.stopped_at, result.running_at, result.phases)
    switched["heap_peak"] = switch_heap.peak
    counts = result.operators
    switched["moved_bytes"] = sum(c["moved_bytes"] for c in counts.values())
    switched["rewritten_bytes"] = sum(c["bytes"] for c in counts.values())
    switched["moved_keys"] = sum(c["moved"] for c in counts.values())
    switched["keys"] = sum(c["entries"] for c in counts.values())
    jobs.append(result.new_job)
    wait_processed(rest, jobs, args.warm + 2 * args.between, args.rate)
    job, after = plain_restart(rest, launcher, result.new_job, version, args.rate, savepoints)
    jobs.append(job)
    wait_processed(rest, jobs, args.warm + 3 * args.between, args.rate)
    final = rest.stop_with_savepoint(job, savepoints, timeout=WAIT)
    processed = sum(sink_records(rest, j) for j in jobs) if args.keys else None
    row = {"share": share, "version": version, "baseline": baseline, "switch": switched, "after": after}
    return row, final, processed


def plain_restart(rest, launcher, job: str, version: int, rate: int, savepoints: str) -> tuple[str, dict]:
    """Stop ``job`` with a savepoint and restart it from that savepoint on ``version``, nothing rewritten:
    the new job and its figures."""
    with HeapPeak(rest.url) as heap:
        stopped, mark = time.time(), time.monotonic()
        savepoint = rest.stop_with_savepoint(job, savepoints, timeout=WAIT)
        stop = time.monotonic() - mark
        job = rest.run_jar(launcher.jar_id, JOB, launcher.args_for(version), savepoint=savepoint)
        rest.wait_until_running(job, timeout=WAIT)
        figures = measure(rest, job, rate, stopped, time.time(), {"stop": stop})
    return job, {**figures, "heap_peak": heap.peak}


def measure_all(args: argparse.Namespace, trace: pd.DataFrame, work: Path, shares: list[float]) -> list[dict]:
    """Publish version 1 and one version per share into a store in ``work``, start a cluster, run every share."""
    topology = Topology.uniform(OPERATORS, 6)
    fallbacks = make_fallbacks(topology, "flink", max_parallelism=128)
    if args.keys:  # every key where Flink's own keyBy puts it
        v1 = RoutingConfiguration.hash_routing(topology, fallbacks)
    else:
        v1 = optimize(count_keys(trace.iloc[: len(trace) // 2], OPERATORS).graph(), topology, fallbacks).config
    store = ConfigStore(work / "store")
    store.publish(v1, fingerprint="v1")
    keys = {op: trace[op].unique() for op in OPERATORS}
    versions = [store.publish(moved_version(v1, keys, s, args.seed), fingerprint=f"share-{s}").version for s in shares]
    records = work / "records.jsonl"
    trace[["seq", *OPERATORS]].to_json(records, orient="records", lines=True, force_ascii=False)
    job_args = ("--store", str(store.root), "--version", "{version}", "--input", str(records), "--mode", "tables",
                "--rate", str(args.rate))  # fmt: skip
    home = flink_home(ensure_flink_env().root)
    # checkpoint storage in files: a savepoint's keyed state past 5 MB does not fit the JobManager's memory storage
    settings = {"metrics.fetcher.update-interval": 200, "state.backend.type": args.state_backend,
                "execution.checkpointing.dir": (work / "checkpoints").as_uri()}  # fmt: skip
    if args.taskmanager_memory:
        settings["taskmanager.memory.process.size"] = args.taskmanager_memory
    if args.state_backend == "hashmap":  # its state is on the heap: managed memory would only take from it
        settings["taskmanager.memory.managed.fraction"] = 0
    if args.jobmanager_memory:  # the job's main runs there: it loads the version's tables and builds the job graph
        settings["jobmanager.memory.process.size"] = args.jobmanager_memory
    runs = []
    with LocalFlinkCluster(home, work / "cluster", settings=settings) as cluster:
        rest = FlinkRest(cluster.url)
        examples = REPO / "jvm" / "examples" / "locality-flink-examples" / "target"
        jar = sorted(examples.glob("locality-flink-examples-*-job.jar"))[-1]
        launcher = FlinkJobLauncher(rest.upload_jar(jar), JOB, job_args)
        rewriter = ClusterRewrite(rest, rest.upload_jar(rewriter_jar()))
        for share, version in zip(shares, versions):
            print(f"locality: share {share:g} (version {version})", file=sys.stderr)
            runs.append(run_share(rest, launcher, rewriter, store, share, version, args, (work / "sp").as_uri(), work))
    for row, final, processed in runs:
        config = store.get(row["version"]).config
        row["switch"]["checked_keys"] = check_final_state(final, config, processed, args.state_backend, work)
    return [row for row, _, _ in runs]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shares", default="0.01,0.1,0.5", help="shares of each operator's keys to move")
    parser.add_argument("--rate", type=int, default=1500, help="records per second the trace is replayed at")
    parser.add_argument("--warm", type=int, default=25_000, help="records before the baseline restart")
    parser.add_argument("--between", type=int, default=20_000, help="records between restart, switch and end")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--keys", type=int, help="replay a generated trace of this many records, no key twice")
    parser.add_argument("--state-backend", choices=["hashmap", "rocksdb"], default="hashmap")
    parser.add_argument("--key-bytes", type=int, default=0, help="with --keys: pad each key to this many characters")
    parser.add_argument("--taskmanager-memory", help="the TaskManager's process size (Flink's form: 4g)")
    parser.add_argument("--jobmanager-memory", help="the JobManager's process size (Flink's form: 3g)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    shares = [float(s) for s in args.shares.split(",")]
    if args.keys:
        trace = generated_trace(args.keys, args.seed, args.key_bytes)
    else:
        trace = pd.read_parquet(card("geotweets_hashtags_2015").path).sort_values("seq", kind="stable")
    with tempfile.TemporaryDirectory(prefix="bench-flink-switch-") as work:  # store, trace, cluster, savepoints
        rows = measure_all(args, trace, Path(work), shares)
    source = f"{args.keys:,} generated records (keys of {args.key_bytes} B)" if args.keys else "tweet trace"
    print(
        f"Flink switch, standalone cluster on loopback, parallelism 6, {source} at {args.rate:,} records/s, "
        f"state backend {args.state_backend}"
    )
    print(
        "| keys moved (asked) | state moved (bytes) | bytes rewritten | running again | first record | "
        "normal rate | records held | stop / rewrite / restart | heap peak | baseline: running / first / normal / held "
        "| baseline heap peak | restart on the new version: running | keys checked |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        s, b = row["switch"], row["baseline"]
        print(f"| {row['share']:.0%} | {s['moved_bytes']:,} ({s['moved_bytes'] / s['rewritten_bytes']:.1%}; "
              f"{s['moved_keys']:,} of {s['keys']:,} keys) | {s['rewritten_bytes']:,} | {s['running']:.1f} s | "
              f"{s['first_record']:.1f} s | {s['normal']:.1f} s | {s['held']:,.0f} | {s['stop_phase']:.1f} / "
              f"{s['rewrite_phase']:.1f} / {s['restart_phase']:.1f} s | {s['heap_peak'] / 2**20:,.0f} MiB | "
              f"{b['running']:.1f} / {b['first_record']:.1f} / {b['normal']:.1f} s / {b['held']:,.0f} | "
              f"{b['heap_peak'] / 2**20:,.0f} MiB | {row['after']['running']:.1f} s | "
              f"{s['checked_keys']:,} |")  # fmt: skip
    if args.json:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        run = {"rate": args.rate, "keys": args.keys, "key_bytes": args.key_bytes, "state_backend": args.state_backend,
               "rewrite": REWRITE, "commit": commit.stdout.strip() or None, "rows": rows}  # fmt: skip
        Path(args.json).write_text(json.dumps(run, indent=1))


if __name__ == "__main__":
    main()
