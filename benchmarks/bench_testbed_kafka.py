"""What the Kafka Streams sketcher costs the application's throughput on the testbed (issue 40: at most 5%).

The application is ``TwoStageCountsApp`` (count by location, re-key by hashtag through its table, count by
hashtag; ``jvm/examples/locality-kafka-streams-examples``) with its ``KeyPairSketcher`` between the two stages.
The testbed's machine is shared and noisy (2 cores; the same job's throughput varied 2x between runs, two
identical jobs at once differed by up to 52%, each JIT-compiled on its own), so the application is not measured
beside a second one without the sketcher: within one running application the sketcher works in every other phase
of ``--sketch-phase`` seconds of wall-clock time, aligned on the epoch, the even phases
(``TwoStageCountsApp --sketch-phases``, ``PhasedSketcher``), and passes the records untouched in the others, the
method of the Flink sketcher's measurement (``bench_testbed.py --experiment sketch``). The cost is one minus the
median, over the phases with the sketcher, of their throughput over the mean of the two phases without it around
them; each phase's first and last second are left out.

Layout: a testbed of ``--servers + 1`` servers with files of their own (``Testbed(private_files=True)``, links of
``--rate`` Mbit/s): server 0 runs the Kafka broker (``testbed.kafka.TestbedBroker``), servers 1 to n one
instance each, ``--server`` s0 to s(n-1) of the tables' topology (one instance of each operator per server). Each
instance's store (the tables, learned on the tweets with Kafka's hash as ``locality optimize --hash kafka`` learns
them), sketch store, state and throughput log are directories of its own server's files (what the sketcher costs to
compute, not where it writes). The input topic is filled once, before the runs, with the tweets replayed
``--replays`` times, keyed by location and partitioned by its table; every run is a fresh application id that
reads it from the start, as fast as it can: the instances run CPU-bound. A run in which an input partition had no
record left when the instances stopped (their committed offsets at its end) is recorded but left out of the
summary, and said so: raise ``--replays``.

Per run (each of ``--sketch-budgets``, ``--repeat`` times; ``--sketch-updates-per-second``, 2147483647 sketching
every record): the instances start with ``--sketches``, ``--sketch-phases`` and ``--throughput-log``; once each
runs its tasks and ``--warmup`` seconds more, the ``--sketch-phases`` next whole phases are measured. Each
instance's throughput log (``<epoch ms> <records the second stage counted>``, replaced every 200 ms) is read from
inside its server every 200 ms; a phase's throughput is, summed over the instances, the records between an
instance's first report after the phase's first second and its last before the phase's last, over the time
between them. The instances are stopped, the run's topics deleted and its files removed.

Run as root, after ``make jvm``, on a quiet machine::

    .venv/bin/python benchmarks/bench_testbed_kafka.py --sketch-budgets 1000 10000 2147483647 --repeat 3

A row per budget on stdout; results in ``--out`` (JSON, with the command's parameters), each phase's ratio in
``--plot``; progress on stderr. ``--replot FILE [FILE ...]`` summarizes and plots results files again (their runs
together), with no runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402

from locality.routing import RoutingConfiguration  # noqa: E402
from locality.store import ConfigStore  # noqa: E402
from locality.topology import Topology  # noqa: E402
from testbed import Testbed  # noqa: E402
from testbed.jvm import classpath, java  # noqa: E402
from testbed.kafka import JVM_OPTIONS, TestbedBroker, stop_process  # noqa: E402
from testbed.measure import (  # noqa: E402
    DEFAULT_BUDGET,
    EVERY_RECORD,
    budget_label,
    first_phase_without,
    phase_rates,
    phase_ratios,
)
from tests.conftest import read_trace  # noqa: E402
from tests.jvm.conftest import KAFKA_EXAMPLES  # noqa: E402
from tests.kafka.conftest import tweet_values  # noqa: E402
from tests.kafka.streams_apps import APP, expected_tasks, learned_on, tasks_reported  # noqa: E402

logger = logging.getLogger("bench_testbed_kafka")

OPERATORS = ["location", "hashtag"]
INPUT = "bench-sketch-tweets"
#: Each instance's folder, in its own server's files: store, sketches, state, throughput log.
FILES = "/tmp/locality-bench-kafka"
STORE, SKETCHES, STATE, THROUGHPUT = (f"{FILES}/{name}" for name in ("store", "sketches", "state", "throughput.txt"))
#: What starts the line of metrics an instance prints when it stops (``TwoStageCountsApp.METRICS_LINE``).
METRICS_LINE = "locality metrics "
#: How often the throughput logs are read (the instances write theirs every 200 ms).
REPORT_SECONDS = 0.2
#: Bounds (seconds): filling the input, the instances' start until each runs its tasks, their stop, a call into a
#: server.
FILL_TIMEOUT = 1800.0
READY_TIMEOUT = 240.0
STOP_TIMEOUT = 60.0
CALL_TIMEOUT = 60.0


def tables_locality(config: RoutingConfiguration, trace) -> float:
    """The share of the trace's records whose two operators' instances the tables put on one server."""
    servers = {
        op: np.asarray(config.topology.placement[op])[config.route_many(op, trace[op].to_numpy(dtype=object))]
        for op in OPERATORS
    }
    return float(np.mean(servers[OPERATORS[0]] == servers[OPERATORS[1]]))


def fill_input(bootstrap: str, trace, partitions: np.ndarray, replays: int) -> int:
    """The tweets ``replays`` times into :data:`INPUT`, keyed by location, each in its table's partition (run inside a
    server that reaches the broker); the records written."""
    records = list(zip([key.encode() for key in trace["location"]], [v.encode() for v in tweet_values(trace)],
                       partitions.tolist()))  # fmt: skip
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000, "log_level": 3})
    deadline = time.monotonic() + FILL_TIMEOUT
    for replay in range(replays):
        for key, value, partition in records:
            try:
                producer.produce(INPUT, key=key, value=value, partition=partition)
            except BufferError:  # the local queue is full: let the broker take some, once
                if time.monotonic() > deadline:
                    raise TimeoutError(f"filling {INPUT} took more than {FILL_TIMEOUT:.0f} s") from None
                producer.poll(1.0)
                producer.produce(INPUT, key=key, value=value, partition=partition)
        producer.poll(0)
        if replay % 10 == 9:
            logger.info("  %d of %d replays produced", replay + 1, replays)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    if left:
        raise RuntimeError(f"{left:,} records of {INPUT} were not acknowledged within {FILL_TIMEOUT:.0f} s")
    return replays * len(records)


class Layout:
    """Server 0 runs the broker, servers 1 to n the instances of the topology's servers s0 to s(n-1)."""

    def __init__(self, bed: Testbed, topology: Topology) -> None:
        self.bed = bed
        self.broker, *instances = bed.servers
        self.instances = dict(zip(topology.servers, instances))

    def publish(self, config: RoutingConfiguration) -> None:
        """The tables as the current version of each instance's own store."""
        for server in self.instances.values():
            self.bed.call_in(server, lambda: ConfigStore(STORE).publish(config, fingerprint="tweets-kafka"))

    def reports(self) -> dict[str, tuple[float, int] | None]:
        """Each instance's last throughput report, ``(seconds since the epoch, records)``; None before its first."""
        return {
            name: self.bed.call_in(server, _read_report, timeout=CALL_TIMEOUT)
            for name, server in self.instances.items()
        }

    def clean(self) -> None:
        """Remove a run's sketches, state and throughput logs from the instances' servers."""
        for server in self.instances.values():
            self.bed.run(server, ["rm", "-rf", SKETCHES, STATE, THROUGHPUT])


def _read_report(path: str = THROUGHPUT) -> tuple[float, int] | None:
    try:
        millis, records = Path(path).read_text().split()
    except FileNotFoundError:
        return None
    return int(millis) / 1000, int(records)


def start_instances(layout: Layout, work: Path, run: str, options: dict) -> dict[str, subprocess.Popen]:
    """One ``TwoStageCountsApp`` per topology server, inside its testbed server, with ``options``; its console in
    ``WORK/RUN.SERVER.out`` / ``.err`` (host files). The JIT compiles fully (no ``TieredStopAtLevel``): a run is
    measured once its code is hot."""
    command = [java(), *JVM_OPTIONS, "-cp", classpath(KAFKA_EXAMPLES), APP]
    instances = {}
    for name, server in layout.instances.items():
        arguments = [item for option, value in {**options, "server": name}.items() for item in (f"--{option}", value)]
        instances[name] = layout.bed.spawn(
            server, [*command, *arguments], log=work / f"{run}.{name}.err", stdout=work / f"{run}.{name}.out"
        )
    logger.info("  started %s: %s", ", ".join(instances), shlex.join(map(str, arguments)))
    return instances


def fail_if_exited(instances: dict[str, subprocess.Popen], work: Path, run: str) -> None:
    for name, process in instances.items():
        if process.poll() is not None:
            tail = (work / f"{run}.{name}.err").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the instance on {name} exited with {process.returncode}:\n{tail}")


def wait_until_each_runs_its_tasks(instances, work: Path, run: str, expected: dict[str, list[str]]) -> float:
    """Wait (bounded) until every instance said it runs its server's tasks; the seconds it took."""
    started = time.monotonic()
    reported: dict = {}
    while time.monotonic() < started + READY_TIMEOUT:
        fail_if_exited(instances, work, run)
        reported = {name: tasks_reported(work / f"{run}.{name}.out") for name in instances}
        if reported == expected:
            return time.monotonic() - started
        time.sleep(0.5)
    raise TimeoutError(f"the instances did not settle on their tasks within {READY_TIMEOUT:.0f} s: {reported}")


def stop_instances(instances: dict[str, subprocess.Popen]) -> None:
    """SIGTERM to every instance at once (each closes its tasks, its sketchers publish, it leaves the group), then
    wait for each; SIGKILL past :data:`STOP_TIMEOUT`."""
    for process in instances.values():
        if process.poll() is None:
            process.terminate()
    for process in instances.values():
        stop_process(process, timeout=STOP_TIMEOUT)


def sketcher_metrics(work: Path, run: str, servers) -> dict[str, float]:
    """The sketchers' locality metrics the instances printed as they stopped (``TwoStageCountsApp``'s line
    ``locality metrics [...]``), summed by name over their tasks and versions: ``records-total``, the records the
    sketchers passed in their phases (of the tasks that ended the run where they were), and ``local-records-total``."""
    sums: dict[str, float] = {}
    for name in servers:
        for line in (work / f"{run}.{name}.out").read_text().splitlines():
            if line.startswith(METRICS_LINE):
                for metric in json.loads(line[len(METRICS_LINE) :]):
                    sums[metric["name"]] = sums.get(metric["name"], 0.0) + metric["value"]
    return sums


def delete_topics(broker: TestbedBroker, prefix: str) -> None:
    """Delete every topic whose name starts with ``prefix`` (a run's output and internal topics), from inside the
    broker's server: their records would fill its memory (its files are a tmpfs) over the runs."""
    from confluent_kafka.admin import AdminClient

    def delete() -> list[str]:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
        names = [name for name in admin.list_topics(timeout=30).topics if name.startswith(prefix)]
        for future in admin.delete_topics(names, operation_timeout=30).values() if names else []:
            future.result(timeout=60)
        return names

    logger.info("  deleted topics %s", ", ".join(broker.bed.call_in(broker.server, delete, timeout=120)))


def input_left(broker: TestbedBroker, application: str) -> list[int]:
    """Per partition of :data:`INPUT`, the records ``application`` had not consumed when it stopped (its committed
    offsets, which Kafka Streams commits as it closes, to the partitions' ends); read from inside the broker's
    server."""
    from confluent_kafka import Consumer, TopicPartition

    def left() -> list[int]:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": application, "log_level": 3})
        try:
            partitions = sorted(consumer.list_topics(INPUT, timeout=30).topics[INPUT].partitions)
            committed = consumer.committed([TopicPartition(INPUT, p) for p in partitions], timeout=30)
            ends = [consumer.get_watermark_offsets(TopicPartition(INPUT, p), timeout=30)[1] for p in partitions]
        finally:
            consumer.close()
        return [end - max(c.offset, 0) for c, end in zip(committed, ends)]

    return broker.bed.call_in(broker.server, left, timeout=120)


@dataclass(frozen=True)
class Bench:
    """The broker and the instances' servers, the input topic filled: runs of the application on them, their consoles
    in the host folder ``work``."""

    args: argparse.Namespace
    broker: TestbedBroker
    layout: Layout
    topology: Topology
    work: Path

    def run(self, budget: int, run: str) -> dict:
        """One application run with ``budget``, its phases measured; a row of the results."""
        args, application = self.args, f"locality-bench-sketch-{run}"
        self.broker.create_topic(f"{application}-output", self.topology.n_instances(OPERATORS[1]))
        options = {
            "bootstrap-servers": self.broker.bootstrap,
            "store": STORE,
            "input": INPUT,
            "output": f"{application}-output",
            "application-id": application,
            "state-dir": STATE,
            "throughput-log": THROUGHPUT,
            "sketches": SKETCHES,
            "sketch-interval": args.sketch_interval,
            "sketch-capacity": args.sketch_capacity,
            "sketch-updates-per-second": budget,
            "sketch-phases": args.sketch_phase,
        }
        load_before = os.getloadavg()[0]
        reports: dict[str, list[tuple[float, int]]] = {name: [] for name in self.layout.instances}
        seconds = args.sketch_phase
        instances = start_instances(self.layout, self.work, run, options)
        try:
            settled = wait_until_each_runs_its_tasks(instances, self.work, run, expected_tasks(self.topology))
            logger.info("  each instance runs its tasks after %.0f s; warming up %.0f s", settled, args.warmup)
            time.sleep(args.warmup)
            first = first_phase_without(time.time(), seconds)
            end = (first + args.sketch_phases) * seconds
            logger.info("  measuring %d phases of %d s, until %s", args.sketch_phases, seconds, time.ctime(end))
            while time.time() < end + 1:  # bounded: the phases' end, and the reports of the last one
                fail_if_exited(instances, self.work, run)
                for name, report in self.layout.reports().items():
                    if report is not None:
                        reports[name].append(report)
                time.sleep(REPORT_SECONDS)
            stop_instances(instances)
            left = input_left(self.broker, application)
        finally:
            stop_instances(instances)
            self.clean(application)
        if min(left) <= 0:
            logger.error(
                "  an input partition ran out before the instances stopped (records left per partition: %s): they were "
                "not CPU-bound to the end of the measurement, which the summary leaves out; raise --replays",
                left,
            )
        phases = phase_rates(reports, first, args.sketch_phases, seconds)
        metrics = sketcher_metrics(self.work, run, self.layout.instances)
        return {
            "budget": budget,
            "run": run,
            "settled_s": settled,
            "counted": sum(series[-1][1] for series in reports.values() if series),
            "input_left": left,
            "input_ran_out": min(left) <= 0,
            "sketched_records": metrics.get("records-total", 0.0),
            "sketched_local_share": metrics.get("local-records-total", 0.0) / max(metrics.get("records-total", 0), 1),
            "load_average": [load_before, os.getloadavg()[0]],
            "phases": [dataclasses.asdict(p) for p in phases],
            "ratios": phase_ratios(phases),
        }

    def clean(self, application: str) -> None:
        """Delete the run's topics, remove its files; a failure is logged (the testbed's teardown removes all)."""
        try:
            delete_topics(self.broker, application)
            self.layout.clean()
        except Exception as error:  # not to hide what ended the run
            logger.warning("  cleaning after %s failed: %s", application, error)


def summarize(rows: list[dict]) -> dict[str, dict]:
    """Per budget: the median of every run's phase ratios (with the sketcher over without), its quartiles, the cost
    (one minus the median) and the median throughput of the phases without and with the sketcher."""
    summary = {}
    for budget in dict.fromkeys(r["budget"] for r in rows):
        mine = [r for r in rows if r["budget"] == budget and not r["input_ran_out"]]
        ratios = [q for r in mine for q in r["ratios"]]
        if not ratios:
            continue
        quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        phases = [p for r in mine for p in r["phases"] if p["throughput"] is not None]
        summary[str(budget)] = {
            "budget": budget,
            "ratio": statistics.median(ratios),
            "quartiles": [quartiles[0], quartiles[2]],
            "phases": len(ratios),
            "runs": len(mine),
            "cost": 1 - statistics.median(ratios),
            "without": statistics.median(p["throughput"] for p in phases if not p["sketching"]),
            "with": statistics.median(p["throughput"] for p in phases if p["sketching"]),
        }
    return summary


def plot(rows: list[dict], path: Path, servers: int) -> None:
    """Every phase's throughput with the sketcher over the phases without around it, per budget and run (those whose
    input ran out left out)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if not r["input_ran_out"]]
    budgets = list(dict.fromkeys(r["budget"] for r in rows))
    figure, ax = plt.subplots(figsize=(7.5, 3.6))
    repeats: dict[int, int] = {}
    for row in rows:
        i = budgets.index(row["budget"])
        k = repeats[i] = repeats.get(i, -1) + 1
        ax.scatter([i - 0.15 + 0.1 * k] * len(row["ratios"]), row["ratios"], s=14, alpha=0.6, color=f"C{k % 10}",
                   label=f"run {k + 1}" if i == 0 else None)  # fmt: skip
    for i, budget in enumerate(budgets):
        ratios = [q for r in rows if r["budget"] == budget for q in r["ratios"]]
        if ratios:
            ax.hlines(statistics.median(ratios), i - 0.3, i + 0.3, color="black")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.axhline(0.95, color="red", linewidth=0.8, linestyle="--", label="5% cost")
    ax.set_xticks(range(len(budgets)), [f"budget {budget_label(b)}" for b in budgets])
    ax.set_ylabel("records/s with / without")
    ax.set_title(
        f"Kafka Streams sketcher, {servers} instances: each phase with it over those without around it", fontsize=10
    )
    ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def report(summary: dict[str, dict]) -> None:
    """A row per budget, on stdout."""
    for row in summary.values():
        low, high = row["quartiles"]
        print(
            f"budget {budget_label(row['budget']):>13}: without {row['without']:>9,.0f}/s, "
            f"with {row['with']:>9,.0f}/s; with / without {row['ratio']:.3f} (quartiles {low:.3f}-{high:.3f} "
            f"over {row['phases']} phases, {row['runs']} run(s)): cost {row['cost']:.1%}"
        )


def measure(args, work: Path) -> tuple[list[dict], dict]:
    """Every run; the rows and what the runs were made of."""
    trace = read_trace("geotweets")
    topology = Topology.uniform(OPERATORS, args.servers)
    config = learned_on(trace, topology)
    facts = {"trace_records": len(trace), "tables_locality": tables_locality(config, trace)}
    partitions = config.route_many(OPERATORS[0], trace[OPERATORS[0]].to_numpy(dtype=object))
    logger.info("tables learned with Kafka's hash: locality %.1f%% on the tweets", 100 * facts["tables_locality"])
    rows = []
    with Testbed(args.servers + 1, rate_mbit=args.rate, private_files=True) as bed:
        layout = Layout(bed, topology)
        layout.publish(config)
        with TestbedBroker(bed, layout.broker, work / "broker.log") as broker:
            broker.create_topic(INPUT, topology.n_instances(OPERATORS[0]), {"retention.ms": "-1"})
            logger.info("filling %s with the tweets x %d (%d records)", INPUT, args.replays, args.replays * len(trace))
            began = time.monotonic()
            records = bed.call_in(
                layout.broker,
                lambda: fill_input(broker.bootstrap, trace, partitions, args.replays),
                timeout=FILL_TIMEOUT,
            )
            held = bed.run(layout.broker, ["du", "-sm", broker.root]).stdout.split()[0]  # in the server's memory
            facts |= {"input_records": records, "fill_s": time.monotonic() - began, "broker_mb": int(held)}
            logger.info("filled in %.0f s; the broker holds %s MB", facts["fill_s"], held)
            bench = Bench(args, broker, layout, topology, work)
            for repeat in range(args.repeat):
                for budget in args.sketch_budgets:
                    run = f"{repeat}-{budget}"
                    logger.info("run %s: budget %s", run, budget_label(budget))
                    row = bench.run(budget, run)
                    rows.append({"repeat": repeat, **row})
                    logger.info(
                        "  with / without per phase: %s; the sketchers passed %.0f of the %d records counted, %.1f%% "
                        "of them local",
                        " ".join(f"{q:.3f}" for q in row["ratios"]) or "(none)",
                        row["sketched_records"],
                        row["counted"],
                        100 * row["sketched_local_share"],
                    )
    return rows, facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=3, help="instance servers (one instance each), 3 or more")
    parser.add_argument("--rate", type=float, default=1000.0, help="Mbit/s of every server's link, each way")
    parser.add_argument(
        "--sketch-budgets",
        type=int,
        nargs="+",
        default=[DEFAULT_BUDGET],
        help=f"budgets of sketch updates a second per task, a run each (default the sketchers', {DEFAULT_BUDGET}; "
        f"{EVERY_RECORD}: every record)",
    )
    parser.add_argument("--sketch-phase", type=int, default=10, help="seconds of each phase")
    parser.add_argument(
        "--sketch-phases", type=int, default=13, help="phases measured per run, from one without the sketcher"
    )
    parser.add_argument("--sketch-interval", type=int, default=10, help="seconds each of the sketches covers")
    parser.add_argument("--sketch-capacity", type=int, default=100_000, help="counters of each sketch")
    parser.add_argument(
        "--warmup", type=float, default=60.0, help="seconds from the instances running their tasks to the phases"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each budget (interleaved)")
    parser.add_argument(
        "--replays", type=int, default=150, help="times the tweets (116,846 records) are replayed into the input"
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results_testbed_kafka_sketch.json")
    parser.add_argument("--plot", type=Path, default=REPO / "docs" / "testbed_kafka_sketch.png")
    parser.add_argument("--replot", type=Path, nargs="+", help="no runs: summarize and plot these results files")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    for name in ("locality", "testbed", "py4j"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if args.servers < 3 or args.sketch_phases < 3:
        parser.error("--servers and --sketch-phases must be 3 or more (a phase with the sketcher needs one without "
                     "on each side)")  # fmt: skip
    started = time.monotonic()
    if args.replot:
        files = [json.loads(path.read_text()) for path in args.replot]
        rows = [row for one in files for row in one["runs"]]
        servers = files[-1]["parameters"]["servers"]
    else:
        with tempfile.TemporaryDirectory(prefix="bench-testbed-kafka-") as work:
            rows, facts = measure(args, Path(work))
        servers = args.servers
        parameters = {k: v for k, v in vars(args).items() if k not in ("out", "plot", "replot")}
        recorded = {"parameters": {**parameters, **facts}, "runs": rows, "summary": summarize(rows)}
        args.out.write_text(json.dumps(recorded, indent=1, default=str) + "\n")
    plot(rows, args.plot, servers)
    for row in rows:
        if row["input_ran_out"]:
            print(f"run {row['run']}: the input ran out (records left per partition {row['input_left']}), left out")
    report(summarize(rows))
    results = ", ".join(map(str, args.replot or [args.out]))
    print(f"({time.monotonic() - started:.0f} s; results in {results}, plot in {args.plot})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
