"""The core paper's throughput experiments on emulated servers: bytes between servers, padding, locality, servers.

Caneill, El Rheddane, Leroy, De Palma, "Locality-aware routing in stateful streaming applications"
(Middleware 2016), Section 4: an application of two stateful operators (count per first key,
count per second key) on n servers, one instance of each per server, routed by hash or by
locality-aware tables; throughput vs the number of servers (Figure 7), vs the share of local
pairs (Figure 8) and vs the tuple padding (Figure 9). Here each server is a network namespace
whose link is shaped to ``--rate`` Mbit/s both ways (``testbed/``), a Flink TaskManager with one
slot runs in each and a JobManager in one more; the job (``jvm/examples/locality-flink-bench``) replays a
trace at full speed, partitioned by the first operator's routing (so the one hop between servers
is the one the tables decide), keyed by Flink's hash or by the tables of ``locality optimize
--hash flink`` (locality-flink's ``RoutingKeySelector`` reads the store).

Experiments (``--experiment``, several allowed):

- ``bytes``: a bounded replay of the tweets at several paddings; the bytes the TaskManagers'
  servers sent, less an idle run's (the idle cluster's heartbeats over as long, and the same job
  on no records), beside ``(1 - locality) x records x mean record size``, the locality from
  ``locality evaluate`` on the same records and tables, and beside ``locality evaluate --weight``
  with each record's size as its weight (its network weight: the bytes of exactly the records
  that cross);
- ``padding``: steady throughput vs padding, tweets, tables learned on the tweets (in-sample);
- ``locality``: steady throughput at ``--padding`` vs the share of local pairs of the paper's
  synthetic keys (0, 50, 80, 100%), tables learned on each trace;
- ``servers``: steady throughput at ``--padding`` on 2 to 6 servers, synthetic keys with 60%
  local pairs (the paper's Figure 7 setting);
- ``sketch``: what the job's ``KeyPairSketcher`` (issue 40) costs: the tweets at ``--padding``, hash and
  tables, one run per routing, repeat and each of ``--sketch-budgets``, the sketcher (publishing every
  10 s) working in every other phase of ``--sketch-phase`` seconds (:func:`testbed.replay.run_phased`);
  the cost is one minus the median, over the phases with it, of their throughput over the mean of the
  two phases without it around them; plot in ``--plot-sketch``;
- ``switch``: Figure 13, an online switch (``testbed/switch.py``) on servers that share only the
  network (``Testbed(private_files=True)``): server 0 runs the JobManager, 1-6 the TaskManagers, 7 an
  S3 server (the Versity gateway: :func:`testbed.s3server.object_store`) holding the trace, the store
  and every savepoint, 8 a gateway, neither JobManager nor TaskManager, that runs the online job and
  ``locality switch flink``. The job starts on a store version with no entries (hash routing),
  replaying the tweets ``--switch-passes`` times at ``--padding``; ``locality reconfigure`` publishes
  tables while it runs, ``locality switch flink`` stops it with a savepoint in the bucket, rewrites
  the state there by the migration plan (a job on the cluster) and restarts it on them; throughput at
  the sink before and after (``--warmup``, ``--duration``), the time series, the downtime, and every
  key's final count in both operators read from a last savepoint beside its number of records. One
  row per repeat; plot in ``--plot-switch``. With ``--switch-online sketches`` the loop runs with no
  trace (issue 40, item 5): version 1 is published without one, the job sketches what it routes
  (``ReplayJob --sketches``, every ``--sketch-interval`` s, on both versions) and ``locality reconfigure
  --sketches`` learns version 2 from the sketches of the job's first intervals.

Hash and tables run interleaved in the same cluster, ``--repeat`` times each; a run's figures say
what bounded it (a link at >= 90% of its rate, or a busy machine). Results go to ``--out`` (JSON)
and ``docs/testbed.png``; progress on stderr. Root only.

    .venv/bin/python benchmarks/bench_testbed.py --experiment bytes padding locality servers --repeat 3
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import logging
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from locality.datasets.catalog import load  # noqa: E402
from testbed import Testbed  # noqa: E402
from testbed.flink import FlinkCluster, flink_home_of  # noqa: E402
from testbed.measure import DEFAULT_BUDGET, EVERY_RECORD, budget_label, phase_ratios  # noqa: E402
from testbed.replay import Routing, Sketching, idle_rates, job_overhead, run_bounded, run_phased, run_steady  # noqa: E402
from testbed.s3server import object_store  # noqa: E402
from testbed.switch import SwitchSetup, run_switch  # noqa: E402
from testbed.workload import (  # noqa: E402
    evaluate_locality,
    flink_record_bytes,
    learn_tables,
    paired_keys,
    write_replay_trace,
)
from tests.flink.conftest import ensure_flink_env  # noqa: E402

logger = logging.getLogger("bench_testbed")

TWEETS = "geotweets_hashtags_2015"
PADDINGS = [0, 1024, 2048, 4096, 8192, 12288, 20480]
LOCAL_SHARES = [0.0, 0.5, 0.8, 1.0]
SERVERS = [2, 3, 4, 5, 6]
SYNTHETIC_ROWS = 100_000
ROUTINGS = ("hash", "tables")
BYTES_AT_LEAST = 30e6
#: The switch experiment's servers (``Bench.switch_cluster``): which one runs what.
SWITCH_SERVERS = {"jobmanager": 0, "taskmanagers": [1, 2, 3, 4, 5, 6], "object_store": 7, "gateway": 8}
BUCKET = "locality"
#: A TaskManager's process memory in the sketch experiment: heap enough for the sketches (42.5 MB for three full
#: sketches of 100,000 counters, up to three intervals of them while the store writes) without a GC in every second.
SKETCH_TASKMANAGER_MEMORY = "2048m"


class Workload:
    """A replay trace on disk, its tables for ``servers`` servers, and what ``locality evaluate`` says of them."""

    def __init__(self, frame: pd.DataFrame, keys: list[str], servers: int, directory: Path) -> None:
        self.frame, self.keys = frame, keys
        self.tsv, parquet = write_replay_trace(frame, keys, directory)
        self.store = learn_tables(parquet, keys, servers, directory / "store")
        self.figures = evaluate_locality(parquet, keys, self.store)

    def routing(self, name: str) -> Routing:
        return Routing(name, self.store)

    def locality(self, name: str) -> float:
        return self.figures["locality" if name == "tables" else "hash_locality"]


def tweets(servers: int, directory: Path) -> Workload:
    trace = load(TWEETS)
    return Workload(trace.frame, list(trace.keys), servers, directory)


def synthetic(servers: int, share: float, directory: Path) -> Workload:
    return Workload(paired_keys(SYNTHETIC_ROWS, servers, share, seed=0), ["a", "b"], servers, directory)


class Bench:
    """Clusters of ``n`` TaskManagers (a testbed of ``n + 1`` servers), started when first asked for."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.home = flink_home_of(ensure_flink_env().root)
        self.results: dict[str, list[dict]] = {}
        self.tweets_6: Workload | None = None

    def tweets(self) -> Workload:
        """The tweets with tables for 6 servers (learned once, shared by the experiments)."""
        if self.tweets_6 is None:
            self.tweets_6 = tweets(6, self.work / "tweets-6")
        return self.tweets_6

    @contextlib.contextmanager
    def cluster(self, taskmanagers: int, **options):
        """A testbed of ``taskmanagers + 1`` servers and the Flink cluster on it (``options``: the cluster's),
        torn down on exit."""
        with Testbed(taskmanagers + 1, rate_mbit=self.args.rate) as bed:
            workdir = self.work / f"cluster-{taskmanagers}"
            yield bed, FlinkCluster(bed, bed.servers[0], bed.servers[1:], workdir, self.home, **options).start()

    @contextlib.contextmanager
    def switch_cluster(self, taskmanagers: int):
        """Servers sharing only the network: a JobManager, TaskManagers, an object store and a gateway.

        Yields the testbed, the Flink cluster (configured for the object store), the gateway, the S3 server and
        the server it runs in.
        """
        with Testbed(taskmanagers + 3, rate_mbit=self.args.rate, private_files=True) as bed:
            jobmanager, *others = bed.servers
            workers, store_server, gateway = others[:taskmanagers], others[taskmanagers], others[taskmanagers + 1]
            with (
                object_store(bed, store_server, self.work / "s3.log", buckets=(BUCKET,)) as s3,
                mock.patch.dict(os.environ, s3.env),  # for the library, called in the gateway
            ):
                workdir = self.work / f"cluster-{taskmanagers}-switch"
                flink = FlinkCluster(bed, jobmanager, workers, workdir, self.home, s3_env=s3.env).start()
                yield bed, flink, gateway, s3, store_server

    def record(self, experiment: str, row: dict) -> None:
        self.results.setdefault(experiment, []).append(row)
        logger.warning("%s %s", experiment, json.dumps(row, default=float))

    def steady(self, bed, flink, workload: Workload, experiment: str, **fields) -> None:
        """Hash and tables interleaved, ``--repeat`` times, at ``--padding`` unless ``fields`` set one."""
        for repeat in range(self.args.repeat):
            for name in ROUTINGS:
                self.record(experiment, self.steady_run(bed, flink, workload, name, repeat=repeat, **fields))

    def steady_run(self, bed, flink, workload: Workload, name: str, **fields) -> dict:
        """One steady run routed by ``name``."""
        padding = fields.pop("padding", self.args.padding)
        run = run_steady(
            bed,
            flink,
            workload.tsv,
            workload.routing(name),
            padding=padding,
            warmup=self.args.warmup,
            duration=self.args.duration,
        )
        return {
            **fields,
            "padding": padding,
            "routing": name,
            "locality": workload.locality(name),
            "throughput": run.throughput,
            "bound": run.bound,
            "max_link_use": max(run.link_use),
            "link_use": run.link_use,
            "testbed_cpu_cores": run.testbed_cpu_cores,
            "machine_busy": run.machine_busy,
        }

    # -- experiments ------------------------------------------------------------------------
    def bytes(self) -> None:
        workload = self.tweets()
        with self.cluster(6) as (bed, flink):
            idle = idle_rates(bed, 10)
            overhead = {name: job_overhead(bed, flink, workload.routing(name), idle=idle) for name in ROUTINGS}
            for padding in (0, 1024, 4096):
                sizes = flink_record_bytes(workload.frame[workload.keys[0]], workload.frame[workload.keys[1]], padding)
                # Enough passes for the tables to move >= 30 MB: the job's fixed cost varies by ~0.1 MB.
                least = (1 - workload.locality("tables")) * sizes.sum()
                passes = max(1, math.ceil(BYTES_AT_LEAST / least))
                # The same records weighted by their size: evaluate's network weight is the bytes that cross.
                weighted = self.work / f"tweets-bytes-{padding}.parquet"
                workload.frame[workload.keys].assign(record_bytes=sizes).to_parquet(weighted, index=False)
                by_bytes = evaluate_locality(weighted, workload.keys, workload.store, weight="record_bytes")
                for name in ROUTINGS:
                    run = run_bounded(
                        bed,
                        flink,
                        workload.tsv,
                        workload.routing(name),
                        padding=padding,
                        passes=passes,
                        idle=idle,
                        overhead=overhead[name],
                    )
                    predicted = (1 - workload.locality(name)) * run.records * sizes.mean()
                    crossing = by_bytes["network_weight" if name == "tables" else "hash_network_weight"] * passes
                    measured = sum(run.sent_payload[1:])
                    self.record(
                        "bytes",
                        {
                            "padding": padding,
                            "routing": name,
                            "records": run.records,
                            "passes": passes,
                            "locality": workload.locality(name),
                            "record_bytes": float(sizes.mean()),
                            "predicted": predicted,
                            "measured": measured,
                            "error": measured / predicted - 1,
                            "predicted_by_bytes": crossing,
                            "error_by_bytes": measured / crossing - 1,
                            "seconds": run.seconds,
                        },
                    )

    def padding(self) -> None:
        workload = self.tweets()
        with self.cluster(6) as (bed, flink):
            for padding in self.args.paddings:
                self.steady(bed, flink, workload, "padding", padding=padding)

    def locality(self) -> None:
        workloads = {s: synthetic(6, s, self.work / f"paired-6-{s}") for s in self.args.shares}
        with self.cluster(6) as (bed, flink):
            for share, workload in workloads.items():
                self.steady(bed, flink, workload, "locality", local_share=share)

    def servers(self) -> None:
        for n in self.args.servers:
            workload = synthetic(n, 0.6, self.work / f"paired-{n}-0.6")
            with self.cluster(n) as (bed, flink):
                self.steady(bed, flink, workload, "servers", servers=n)

    def sketch(self) -> None:
        """What the job's ``KeyPairSketcher`` costs: the same job with and without it, alternating by phases.

        The sketcher publishes every 10 s (``ReplayJob``'s default interval; capacity 100,000) into a directory store
        the TaskManagers share here (what it costs to compute, not where it writes).
        """
        workload = self.tweets()
        store = self.work / "sketches"
        with self.cluster(6, taskmanager_memory=SKETCH_TASKMANAGER_MEMORY) as (bed, flink):
            for repeat in range(self.args.repeat):
                for name in ROUTINGS:
                    for budget in self.args.sketch_budgets:
                        phases = run_phased(
                            bed,
                            flink,
                            workload.tsv,
                            workload.routing(name),
                            Sketching(store, budget),
                            padding=self.args.padding,
                            warmup=self.args.warmup,
                            phase_seconds=self.args.sketch_phase,
                            phases=self.args.sketch_phases,
                        )
                        self.record(
                            "sketch",
                            {
                                "repeat": repeat,
                                "routing": name,
                                "padding": self.args.padding,
                                "budget": budget,
                                "phase_seconds": self.args.sketch_phase,
                                "phases": [dataclasses.asdict(p) for p in phases],
                                "ratios": phase_ratios(phases),
                            },
                        )

    def switch(self) -> None:
        trace = load(TWEETS)
        keys = list(trace.keys)
        tsv, parquet = write_replay_trace(trace.frame, keys, self.work / "switch")
        taskmanagers = len(SWITCH_SERVERS["taskmanagers"])
        with self.switch_cluster(taskmanagers) as (bed, flink, gateway, s3, store_server):
            for path in (tsv, parquet):  # the trace lives in the bucket only
                put_in_bucket(bed, store_server, s3, f"switch/{path.name}", path.read_bytes())
            for repeat in range(self.args.repeat):
                # A fresh store each repeat: version 1 hash routing, version 2 the online job's.
                prefix = f"s3://{BUCKET}/switch-{repeat}"
                setup = SwitchSetup(bed, flink, gateway, s3, f"s3://{BUCKET}/switch/{tsv.name}", f"{prefix}/store",
                                    f"{prefix}/savepoints")  # fmt: skip
                online = ["--keys", ",".join(keys), "--store", setup.store]
                trace_uri = f"s3a://{BUCKET}/switch/{parquet.name}"
                sketch_interval = None
                if self.args.switch_online == "sketches":
                    setup.publish_hash(keys, taskmanagers)
                    sketch_interval = self.args.sketch_interval
                    publish = functools.partial(setup.reconfigure_from_sketches, time.time(), taskmanagers)
                else:
                    setup.locality(
                        "optimize", trace_uri, "--servers", taskmanagers, "--hash", "flink", "--max-entries", 0,
                        *online,
                    )  # fmt: skip
                    publish = functools.partial(setup.locality, "reconfigure", trace_uri, *online)
                load_average = os.getloadavg()[0]
                run = run_switch(
                    setup,
                    publish=publish,
                    frame=trace.frame,
                    keys=keys,
                    padding=self.args.padding,
                    passes=self.args.switch_passes,
                    warmup=self.args.warmup,
                    duration=self.args.duration,
                    sketch_interval=sketch_interval,
                )
                self.record("switch", switch_row(run, repeat, self.args.padding, load_average))
                if not run.counts.exact:
                    raise RuntimeError(f"records lost or counted twice across the switch: {run.counts}")


def put_in_bucket(bed: Testbed, server, s3, key: str, data: bytes) -> None:
    """Upload ``data`` from the host through the object store's ``server`` (the host reaches no server's address)."""
    bed.call_in(server, lambda: s3.client().put_object(Bucket=BUCKET, Key=key, Body=data), timeout=120)


def switch_row(run, repeat: int, padding: int, load_average: float) -> dict:
    """One repeat of the switch experiment, as recorded (times relative to the stop request)."""
    stopped = run.events["stop requested"]
    return {
        "repeat": repeat,
        "padding": padding,
        "servers": SWITCH_SERVERS,
        "before": run.before.throughput,
        "after": run.after.throughput,
        "ratio": run.after.throughput / run.before.throughput,
        "bound": [run.before.bound, run.after.bound],
        "max_link_use": [max(run.before.link_use), max(run.after.link_use)],
        "machine_busy": [run.before.machine_busy, run.after.machine_busy],
        "testbed_cpu_cores": [run.before.testbed_cpu_cores, run.after.testbed_cpu_cores],
        "load_average_at_start": load_average,
        "locality": [run.reconfigure["locality_before"], run.reconfigure["locality_after"]],
        "moved_keys": run.reconfigure["moved_keys"],
        "online_from": "sketches" if "sketches" in run.reconfigure else "trace",
        "sketches": run.reconfigure.get("sketches"),
        "state_moved": run.switch["operators"],
        "phases": run.switch["phases"],
        "savepoints": [run.switch["savepoint"], run.switch["rewritten"]],
        "sink_pause": sink_pause(run.series, stopped),
        "records": run.counts.expected_records,
        "sink_records": run.counts.sink_records,
        "keys_checked": run.counts.keys,
        "wrong_keys": run.counts.wrong_keys,
        "lost": run.counts.lost,
        "duplicated": run.counts.duplicated,
        "events": run.events,
        "windows": run.windows,
        "series": [(round(t - stopped, 3), n) for t, n in run.series],
    }


def sink_pause(series: list[tuple[float, int]], stopped: float) -> float:
    """Seconds the sink's count stood still at the switch: the longest time between two rises ending after the stop."""
    rises = [t for (t, n), (_, previous) in zip(series[1:], series) if n > previous]
    return max((b - a for a, b in zip(rises, rises[1:]) if b > stopped), default=0.0)


def summarize_switch(rows: list[dict]) -> dict:
    """Medians over the repeats of the switch experiment, and each repeat's ratio."""
    return {
        "before": statistics.median(r["before"] for r in rows),
        "after": statistics.median(r["after"] for r in rows),
        "ratio": statistics.median(r["ratio"] for r in rows),
        "ratios_by_repeat": [r["ratio"] for r in rows],
        "down": statistics.median(r["phases"]["down"] for r in rows),
        "sink_pause": statistics.median(r["sink_pause"] for r in rows),
        "lost": sum(r["lost"] for r in rows),
        "duplicated": sum(r["duplicated"] for r in rows),
    }


def plot_switch(rows: list[dict], path: Path, rate: float) -> None:
    """Figure 13's shape: records/s at the sink over time, every repeat aligned on its stop request."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(8, 3.8))
    for row in rows:
        times = [t for t, _ in row["series"]]
        counts = [n for _, n in row["series"]]
        # records/s over 1 s steps (4 samples): the sink reports every 200 ms
        step = 4
        rates = [(counts[i + step] - counts[i]) / (times[i + step] - times[i]) / 1e3 for i in range(len(counts) - step)]
        ax.plot(times[step:], rates, linewidth=0.9, label=f"repeat {row['repeat']}: x{row['ratio']:.2f}")
        stopped = row["events"]["stop requested"]
        for name, color in (("reconfigure started", "tab:grey"), ("version 2 published", "tab:green")):
            ax.axvline(row["events"][name] - stopped, color=color, linewidth=0.6, linestyle=":")
    for name, (start, end) in rows[0]["windows"].items():
        stopped = rows[0]["events"]["stop requested"]
        ax.axvspan(start - stopped, end - stopped, color="tab:blue", alpha=0.07)
        ax.text((start + end) / 2 - stopped, 1.0, f"{name}\n(repeat 0)", ha="center", fontsize=7, color="tab:blue")
    median = statistics.median(r["phases"]["down"] for r in rows)
    ax.axvspan(0, median, color="tab:red", alpha=0.12, label=f"switch: stop, rewrite, restart ({median:.0f} s)")
    ax.axvline(0, color="tab:red", linewidth=0.8)
    ax.set(xlabel="seconds from the stop request (dotted: online job started, version 2 published)",
           ylabel="k records/s at the sink")  # fmt: skip
    ax.set_title(
        f"online switch from hash routing to the tables: tweets, 6 servers, {rate:g} Mbit/s, "
        f"padding {rows[0]['padding']} B",
        fontsize=10,
    )
    ax.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def summarize(results: dict[str, list[dict]], key: str) -> list[dict]:
    """Median and spread of each (x, routing), and the tables / hash ratio of the medians."""
    rows: dict[tuple, list[float]] = {}
    for row in results:
        rows.setdefault((row[key], row["routing"]), []).append(row["throughput"])
    summary = []
    for x in sorted({x for x, _ in rows}):
        hash_runs, table_runs = rows.get((x, "hash"), []), rows.get((x, "tables"), [])
        if hash_runs and table_runs:
            summary.append(
                {
                    key: x,
                    "hash": statistics.median(hash_runs),
                    "hash_range": [min(hash_runs), max(hash_runs)],
                    "tables": statistics.median(table_runs),
                    "tables_range": [min(table_runs), max(table_runs)],
                    "ratio": statistics.median(table_runs) / statistics.median(hash_runs),
                    "ratios_by_repeat": [t / h for t, h in zip(table_runs, hash_runs)],
                }
            )
    return summary


def summarize_sketch(rows: list[dict]) -> dict[str, dict]:
    """Per routing and budget: the median of every run's phase ratios (with the sketcher over without), its
    quartiles, and the cost (one minus the median)."""
    summary = {}
    for name in ROUTINGS:
        mine = [r for r in rows if r["routing"] == name]
        for budget in dict.fromkeys(r["budget"] for r in mine):
            ratios = [q for r in mine if r["budget"] == budget for q in r["ratios"]]
            quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            summary[f"{name} {budget}"] = {
                "routing": name,
                "budget": budget,
                "ratio": statistics.median(ratios),
                "quartiles": [quartiles[0], quartiles[2]],
                "phases": len(ratios),
                "cost": 1 - statistics.median(ratios),
                "without": statistics.median(
                    p["throughput"]
                    for r in mine
                    if r["budget"] == budget
                    for p in r["phases"]
                    if not p["sketching"] and p["throughput"] is not None
                ),
            }
    return summary


def plot_sketch(rows: list[dict], path: Path) -> None:
    """Every phase's throughput with the sketcher over the phases without around it, per routing and budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = list(dict.fromkeys(r["budget"] for r in rows))
    figure, ax = plt.subplots(figsize=(7, 3.6))
    for offset, name in ((-0.12, "hash"), (0.12, "tables")):
        for i, budget in enumerate(budgets):
            ratios = [q for r in rows if r["routing"] == name and r["budget"] == budget for q in r["ratios"]]
            ax.scatter([i + offset] * len(ratios), ratios, s=14, alpha=0.6, color="C0" if name == "hash" else "C1",
                       label=name if i == 0 else None)  # fmt: skip
            if ratios:
                ax.hlines(statistics.median(ratios), i + offset - 0.1, i + offset + 0.1, color="black")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.axhline(0.95, color="red", linewidth=0.8, linestyle="--", label="5% cost")
    ax.set_xticks(range(len(budgets)), [f"budget {budget_label(b)}" for b in budgets])
    ax.set_ylabel("records/s with / without")
    ax.set_title("The Flink sketcher's cost: each phase with it over the two without around it", fontsize=10)
    ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def plot(results: dict[str, list[dict]], path: Path, rate: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(k, x) for k, x in (("padding", "padding"), ("locality", "local_share"), ("servers", "servers"))]
    panels = [(k, x) for k, x in panels if k in results]
    count = len(panels) + ("bytes" in results)
    figure, axes = plt.subplots(1, count, figsize=(4.6 * count, 3.8), squeeze=False)
    axes = list(axes[0])
    if "bytes" in results:
        ax = axes.pop(0)
        for name, marker in (("hash", "o"), ("tables", "s")):
            rows = [r for r in results["bytes"] if r["routing"] == name]
            ax.scatter(
                [r["predicted"] / 1e6 for r in rows], [r["measured"] / 1e6 for r in rows], marker=marker, label=name
            )
        top = max(r["measured"] for r in results["bytes"]) / 1e6 * 1.05
        ax.plot([0, top], [0, top], color="grey", linewidth=0.8, label="measured = predicted")
        ax.set(xlabel="predicted MB: (1 - locality) x records x size", ylabel="MB sent between servers")
        ax.set_title("bytes between servers (tweets, 6 servers)", fontsize=10)
        ax.legend(fontsize=8)
    labels = {"padding": "padding (bytes)", "local_share": "share of local pairs", "servers": "servers"}
    for (experiment, key), ax in zip(panels, axes):
        summary = summarize(results[experiment], key)
        xs = [row[key] for row in summary]
        for name in ("hash", "tables"):
            medians = [row[name] / 1e3 for row in summary]
            low = [m - row[f"{name}_range"][0] / 1e3 for m, row in zip(medians, summary)]
            high = [row[f"{name}_range"][1] / 1e3 - m for m, row in zip(medians, summary)]
            ax.errorbar(xs, medians, yerr=[low, high], marker="o", capsize=3, label=name)
        if experiment == "padding":
            ax.set_xscale("symlog", linthresh=1024)
        ax.set(xlabel=labels[key], ylabel="k records/s at the sink")
        ax.set_yscale("log")
        ax.set_title(f"throughput vs {labels[key]}", fontsize=10)
        ax.legend(fontsize=8)
    figure.suptitle(f"Flink on emulated servers, links {rate:g} Mbit/s (median, min-max of repeats)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


EXPERIMENTS = {"bytes": None, "padding": "padding", "locality": "local_share", "servers": "servers", "sketch": None}


def report(results: dict[str, list[dict]]) -> None:
    """The summary lines of every experiment in ``results`` (on stdout)."""
    for row in results.get("switch", []):
        print(
            f"switch {row['repeat']}: before {row['before']:,.0f}/s ({row['bound'][0]}), after {row['after']:,.0f}/s "
            f"({row['bound'][1]}): x{row['ratio']:.2f}; locality {row['locality'][0]:.1%} -> {row['locality'][1]:.1%}, "
            f"{row['moved_keys']:,} keys moved; down {row['phases']['down']:.1f} s (stop {row['phases']['stop']:.1f}, "
            f"rewrite {row['phases']['rewrite']:.1f}, restart {row['phases']['restart']:.1f}), sink still "
            f"{row['sink_pause']:.1f} s; {row['sink_records']:,} of {row['records']:,} records at the sink, "
            f"keys checked {row['keys_checked']}, wrong {row['wrong_keys']}, lost {row['lost']}, "
            f"duplicated {row['duplicated']}"
        )
    if results.get("switch"):
        summary = summarize_switch(results["switch"])
        spread = ", ".join(f"{r:.2f}" for r in summary["ratios_by_repeat"])
        print(
            f"switch: median before {summary['before']:,.0f}/s, after {summary['after']:,.0f}/s, after/before "
            f"{summary['ratio']:.2f} (repeats {spread}); down {summary['down']:.1f} s; lost {summary['lost']}, "
            f"duplicated {summary['duplicated']}"
        )
    for experiment, key in EXPERIMENTS.items():
        if key is None or experiment not in results:
            continue
        print(f"{experiment}:")
        for row in summarize(results[experiment], key):
            spread = ", ".join(f"{r:.2f}" for r in row["ratios_by_repeat"])
            print(
                f"  {row[key]!s:>8}  hash {row['hash']:>10,.0f}/s  tables {row['tables']:>10,.0f}/s  "
                f"tables/hash {row['ratio']:.2f} (repeats {spread})"
            )
    for name, row in summarize_sketch(results.get("sketch", [])).items():
        low, high = row["quartiles"]
        print(
            f"sketch: {name:>12} without {row['without']:>10,.0f}/s  with / without {row['ratio']:.3f} "
            f"(quartiles {low:.3f}-{high:.3f} over {row['phases']} phases)"
        )
    for row in results.get("bytes", []):
        print(
            f"bytes: padding {row['padding']:>5} {row['routing']:>6} x{row['passes']}: measured "
            f"{row['measured'] / 1e6:9.2f} MB, predicted {row['predicted'] / 1e6:9.2f} MB ({row['error']:+.1%}), "
            f"locality {row['locality']:.1%}; evaluate's network weight in bytes {row['predicted_by_bytes'] / 1e6:9.2f}"
            f" MB ({row['error_by_bytes']:+.1%})"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", nargs="+", choices=[*EXPERIMENTS, "switch"], default=[])
    parser.add_argument(
        "--switch-passes", type=int, default=12, help="replays of the trace in a switch run (before, switch, after)"
    )
    parser.add_argument(
        "--switch-online",
        choices=["trace", "sketches"],
        default="trace",
        help="what the switch's online job reads: the trace in the bucket, or the job's own sketches (no trace)",
    )
    parser.add_argument(
        "--sketch-budgets",
        type=int,
        nargs="+",
        default=[DEFAULT_BUDGET],
        help=f"the sketch experiment's budgets of sketch updates a second per subtask (default the sketchers', "
        f"{DEFAULT_BUDGET}; {EVERY_RECORD}: every record)",
    )
    parser.add_argument("--sketch-interval", type=int, default=5, help="seconds each of the job's sketches covers")
    parser.add_argument("--sketch-phase", type=int, default=10, help="seconds of each phase of the sketch experiment")
    parser.add_argument("--sketch-phases", type=int, default=12, help="phases measured per sketch run")
    parser.add_argument("--rate", type=float, default=40.0, help="Mbit/s of every server's link, each way")
    parser.add_argument("--padding", type=int, default=4096, help="padding of the locality and servers runs")
    parser.add_argument("--paddings", type=int, nargs="+", default=PADDINGS, help="paddings of the padding runs")
    parser.add_argument("--shares", type=float, nargs="+", default=LOCAL_SHARES, help="shares of local pairs")
    parser.add_argument("--servers", type=int, nargs="+", default=SERVERS, help="servers of the servers runs")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results_testbed.json")
    parser.add_argument("--plot", type=Path, default=REPO / "docs" / "testbed.png")
    parser.add_argument("--plot-switch", type=Path, default=REPO / "docs" / "testbed_switch.png")
    parser.add_argument("--plot-sketch", type=Path, default=REPO / "docs" / "testbed_sketch.png")
    parser.add_argument(
        "--replot",
        type=Path,
        nargs="+",
        help="no runs: summarize and plot these result files (the runs of an experiment in several files together)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", stream=sys.stderr)
    if bool(args.experiment) == bool(args.replot):
        parser.error("give --experiment (runs) or --replot (recorded results), one of the two")
    started = time.monotonic()
    if args.replot:
        results: dict = {}
        for path in args.replot:
            recorded = json.loads(path.read_text())
            for experiment, rows in recorded["experiments"].items():
                results.setdefault(experiment, []).extend(rows)
            rate = recorded["parameters"]["rate"]
    else:
        with tempfile.TemporaryDirectory(prefix="bench-testbed-") as work:
            bench = Bench(args, Path(work))
            for experiment in args.experiment:
                getattr(bench, experiment)()
        results, rate = bench.results, args.rate
        summaries = {e: summarize(results[e], k) for e, k in EXPERIMENTS.items() if k is not None and e in results}
        if "switch" in results:
            summaries["switch"] = summarize_switch(results["switch"])
        if "sketch" in results:
            summaries["sketch"] = summarize_sketch(results["sketch"])
        parameters = {
            k: v for k, v in vars(args).items() if k not in ("out", "plot", "plot_switch", "plot_sketch", "replot")
        }
        recorded = {"parameters": parameters, "experiments": results, "summary": summaries}
        args.out.write_text(json.dumps(recorded, indent=1, default=float) + "\n")
    plots = []
    if set(results) - {"switch", "sketch"}:
        plot(results, args.plot, rate)
        plots.append(args.plot)
    if "switch" in results:
        plot_switch(results["switch"], args.plot_switch, rate)
        plots.append(args.plot_switch)
    if "sketch" in results:
        plot_sketch(results["sketch"], args.plot_sketch)
        plots.append(args.plot_sketch)
    report(results)
    print(f"({time.monotonic() - started:.0f} s; plots in {', '.join(map(str, plots))})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
