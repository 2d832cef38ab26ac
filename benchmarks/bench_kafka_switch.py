"""What a version switch costs a running Kafka Streams job, beside a full restart of the same job (issue 25).

A real broker (Kafka 4.4, KRaft, loopback) and ``TwoStageCountsApp --follow-schedule`` on N
servers (one JVM each) count the tweet trace's second half (location -> hashtag), produced at a
steady rate with event times = the time each record is due, so a switch point is a wall-clock
instant. Three versions are scheduled ahead, ``--gap`` seconds apart; each moves keys holding a
share (``--shares``, default 1%, 10%, 50%) of each operator's state at its point, drawn at random
(seed 0) from the version in force before it. Later in the same run the job is stopped and started
again (same store, same state directories): the restart baseline.

Per event, from the instances' switch logs and the output topic (broker append times):

- ``switch done after``: from the switch point until the last task of both stages was through it
  (markers in and sent on, keys handed over, every state received: no record held any more);
- ``back to normal after``: from the event until the last output record slower than the threshold
  (twice the median latency before the first switch, at least +1 s) was written, up to the next event;
  a control row measures the same where nothing happens (the machine's own noise);
- records held (switches) or records slower than the threshold, and the longest hold / latency;
- keys and bytes of state moved (key + serialized count, as sent through the handover topic) and the
  share of the state they were.

Run (after ``make jvm``)::

    .venv/bin/python benchmarks/bench_kafka_switch.py [--servers 6] [--rate 300] [--gap 30]

Progress goes to stderr; the figures to stdout.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from locality.routing import RoutingConfiguration, RoutingTable  # noqa: E402
from locality.store import ConfigStore  # noqa: E402
from tests.conftest import read_trace, tables_from_first_half  # noqa: E402
from tests.kafka.conftest import running_broker, tweet_values  # noqa: E402
from tests.kafka.streams_apps import (  # noqa: E402
    expected_tasks,
    read_switch_events,
    start_instances,
    stop_instances,
    wait_until_each_runs_its_tasks,
)

INPUT, OUTPUT, APP_ID = "bench-input", "bench-output", "locality-bench-switch"
INPUT_PARTITIONS = 4


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def moved_version(config: RoutingConfiguration, prefix: pd.DataFrame, share: float, seed: int) -> tuple:
    """``config`` with keys holding ``share`` of each operator's state in ``prefix`` sent to another instance.

    Keys are drawn in a random order (``seed``) and taken while they fit under the share. Returns the
    new configuration and, per operator, the share of the state its moved keys hold.
    """
    rng = np.random.default_rng(seed)
    tables, shares = {}, {}
    for op, table in config.tables.items():
        state = prefix[op].value_counts()
        target, taken, moves = share * state.sum(), 0, {}
        keys = state.index.to_numpy(dtype=object)[rng.permutation(len(state))]
        now = table.route_many(keys)
        n = table.fallback.n_instances
        for key, instance in zip(keys, now):
            if taken + state[key] <= target:
                moves[key] = int((instance + rng.integers(1, n)) % n)
                taken += state[key]
            if taken >= 0.95 * target:
                break
        entries = pd.concat([table.entries[~table.entries.index.isin(list(moves))], pd.Series(moves, dtype="int64")])
        tables[op] = RoutingTable(op, table.fallback, entries)
        shares[op] = taken / state.sum()
    return RoutingConfiguration(config.topology, tables, dict(config.parameters)), shares


def produce(bootstrap: str, records: pd.DataFrame, start_ms: int, rate: float, done: threading.Event) -> None:
    """Each record at its point (start + i / rate), stamped with it; keyed by location."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, (key, value) in enumerate(zip(records["location"], tweet_values(records))):
        due = start_ms + int(i * 1000 / rate)
        pause = due / 1000 - time.time()
        if pause > 0:
            time.sleep(pause)
        producer.produce(INPUT, key=key, value=value, timestamp=due)
        producer.poll(0)
    producer.flush(120)
    done.set()


def read_output(bootstrap: str, partitions: int, expected: int, timeout: float) -> pd.DataFrame:
    """seq and append time (ms) of every output record; waits until ``expected`` came or ``timeout``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-read", "enable.auto.commit": False})
    rows: list[tuple[int, int]] = []
    try:
        consumer.assign([TopicPartition(OUTPUT, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(rows) < expected and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=1.0):
                if not message.error():
                    rows.append((json.loads(message.value())["seq"], message.timestamp()[1]))
    finally:
        consumer.close()
    if len(rows) < expected:
        log(f"only {len(rows):,} of {expected:,} records reached the output within {timeout:.0f} s")
    return pd.DataFrame(rows, columns=["seq", "appended"]).drop_duplicates("seq")


def back_to_normal(latency: pd.DataFrame, start: int, end: int, threshold: float) -> tuple[float, int, float]:
    """Within output appended in [start, end): seconds from start to the last record slower than threshold,
    how many were, and the largest latency (s)."""
    window = latency[(latency["appended"] >= start) & (latency["appended"] < end)]
    slow = window[window["latency"] > threshold]
    after = (slow["appended"].max() - start) / 1000 if len(slow) else 0.0
    return after, len(slow), float(window["latency"].max()) if len(window) else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", type=int, default=6)
    parser.add_argument("--rate", type=float, default=300.0, help="records per second")
    parser.add_argument("--gap", type=float, default=30.0, help="seconds between the events")
    parser.add_argument("--shares", default="0.01,0.1,0.5", help="share of the state each switch moves")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs) for a look")
    args = parser.parse_args()
    shares = [float(s) for s in args.shares.split(",")]

    trace = read_trace("geotweets")
    v1, _, second = tables_from_first_half(trace, ["location", "hashtag"], "kafka", n_servers=args.servers)
    records = second.reset_index(drop=True)
    n = len(records)
    duration = n / args.rate
    events_at = [args.gap * (k + 1) for k in range(len(shares) + 1)]  # switches, then the restart
    if events_at[-1] + args.gap > duration:
        parser.error(f"{n:,} records at {args.rate:g}/s last {duration:.0f} s: too short for the events; lower --rate")
    work = Path(tempfile.mkdtemp(prefix="bench-kafka-switch-"))
    try:
        with running_broker() as broker:
            log(f"broker on {broker.bootstrap}; work directory {work}")
            broker.create_topic(INPUT, INPUT_PARTITIONS)
            broker.create_topic(OUTPUT, args.servers, {"message.timestamp.type": "LogAppendTime"})
            store = ConfigStore(work / "store")
            store.publish(v1, fingerprint="v1")
            start_ms = int(time.time() * 1000) + 120_000  # the stream starts once the instances run (< 2 min)
            versions, planned, points = {1: v1}, {}, []
            for k, share in enumerate(shares):
                point = start_ms + int(events_at[k] * 1000)
                prefix = records.iloc[: int(events_at[k] * args.rate)]
                versions[k + 2], planned[point] = moved_version(versions[k + 1], prefix, share, seed=k)
                store.publish(versions[k + 2], fingerprint=f"v{k + 2}", in_force_from=point)
                points.append(point)
            store.seal(start_ms + int(duration * 1000) + 3_600_000)
            topology = v1.topology
            options = {"bootstrap-servers": broker.bootstrap, "store": store.root, "input": INPUT, "output": OUTPUT}
            options |= {"application-id": APP_ID, "follow-schedule": True}
            expected = expected_tasks(topology, first_subtopology=1)
            instances = start_instances(topology.servers, work, switch_log=True, **options)
            restart_ms = start_ms + int(events_at[-1] * 1000)
            try:
                settled = wait_until_each_runs_its_tasks(instances, work, expected, anywhere=INPUT_PARTITIONS)
                log(
                    f"{args.servers} instances ran their tasks after {settled:.0f} s; stream starts in "
                    f"{(start_ms / 1000 - time.time()):.0f} s, {n:,} records at {args.rate:g}/s"
                )
                done = threading.Event()
                threading.Thread(
                    target=produce, args=(broker.bootstrap, records, start_ms, args.rate, done), daemon=True
                ).start()
                time.sleep(max(0.0, restart_ms / 1000 - time.time()))
                log("restart: stopping every instance")
                stopped_at = int(time.time() * 1000)
                stop_instances(instances)
                instances = start_instances(topology.servers, work, run=".restart", switch_log=True, **options)
                resettled = wait_until_each_runs_its_tasks(
                    instances, work, expected, anywhere=INPUT_PARTITIONS, run=".restart"
                )
                log(f"restarted: the instances ran their tasks {resettled:.0f} s after the stop began")
                done.wait(timeout=duration + 600)
                output = read_output(broker.bootstrap, args.servers, n, timeout=600)
            finally:
                stop_instances(instances)
        events = read_switch_events(work, topology.servers)
        report(args, records, start_ms, points, planned, restart_ms, stopped_at, events, output)
    finally:
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def report(args, records, start_ms, points, planned, restart_ms, stopped_at, events, output) -> None:
    """Print the figures of each switch and of the restart."""
    due = pd.Series(start_ms + (np.arange(len(records)) * 1000 / args.rate).astype(np.int64), index=records["seq"])
    latency = output.assign(latency=(output["appended"] - due[output["seq"]].to_numpy()) / 1000)
    steady = latency[latency["appended"] < points[0]]["latency"]
    threshold = max(2 * steady.median(), steady.median() + 1.0)
    print(
        f"Kafka Streams switch cost: {args.servers} instances, {len(records):,} records at {args.rate:g}/s, "
        f"{len(output):,} reached the output; latency before the first switch: median {steady.median():.2f} s, "
        f"p99 {steady.quantile(0.99):.2f} s; 'slow' = over {threshold:.2f} s"
    )
    print(
        "| event | state moved (location / hashtag) | keys moved | bytes moved | switch done after | "
        "records held | held median / max | back to normal after | slow records | max latency |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    quiet = start_ms + 5_000  # a control: the same measures where nothing happens, up to the first switch
    after, slow, worst = back_to_normal(latency, quiet, points[0], threshold)
    print(
        f"| none (control: {(points[0] - quiet) / 1000:.0f} s before switch 1) | | | | | | | {after:.1f} s | "
        f"{slow:,} | {worst:.1f} s |"
    )
    ends = [*points[1:], stopped_at, 2**62]
    for k, point in enumerate(points):
        mine = events[events["switch"] == point] if "switch" in events else events.iloc[:0]
        sent = mine[mine["event"] == "state_sent"]
        held = mine[mine["event"] == "released"]["held_ms"]
        through = mine[mine["event"] == "switched"]
        done_after = (through["at"].max() - point) / 1000 if len(through) == 2 * args.servers else float("nan")
        after, slow, worst = back_to_normal(latency, point, ends[k], threshold)
        shares = planned[point]
        print(
            f"| switch {k + 1} | {shares['location']:.1%} / {shares['hashtag']:.1%} | {len(sent):,} | "
            f"{int(sent['bytes'].sum()):,} | {done_after:.1f} s | {len(held):,} | "
            f"{held.median() if len(held) else 0:.0f} / {held.max() if len(held) else 0:,.0f} ms | "
            f"{after:.1f} s | {slow:,} | {worst:.1f} s |"
        )
    after, slow, worst = back_to_normal(latency, stopped_at, 2**62, threshold)
    print(f"| restart (baseline) | none (state stays local) | 0 | 0 | | | | {after:.1f} s | {slow:,} | {worst:.1f} s |")


if __name__ == "__main__":
    main()
