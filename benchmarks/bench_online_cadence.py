"""The online job run at a rebalancing cadence, end to end, beside the replay of the same policy.

``locality replay --rebalance local --rebalance-every 30min`` measures a
rebalancing policy inside the library; a deployment runs ``locality
reconfigure --rebalance local`` from a scheduler instead, once per tick, and
routes with whatever version the store holds. This script does what that
deployment does, in one Spark session: the offline job builds the tables on a
first week; then, at every tick of the judged weeks, one rebalancing run of
the online job reads the ``--history`` before the tick (its window: the loads
it balances, scaled to ``--horizon``) and publishes into the store when a key
moves or a split changes; the trace's rows until the next tick are routed by
the version then current (:func:`locality.evaluation.replay`: split keys by
their neighbour's server). With ``--balance-window`` each run balances its
week as the replay does (``--balance-since`` the week's start,
``--balance-until`` its end: what each instance served so far, from the
store's ledger, plus the window's loads scaled to the rest of the week);
without it, the window's loads scaled to ``--horizon``. Out come
next-interval locality, the worst operator's imbalance over each judged week
and, mean over days, over each day, and the state the published plans move,
beside hash routing and :func:`locality.replay.replay_trace` with the same
policy, all in the same run.

    .venv/bin/python benchmarks/bench_online_cadence.py --every 30min --split-hot-keys --balance-window  # ~10 min
    .venv/bin/python benchmarks/bench_online_cadence.py --help
"""

from __future__ import annotations

import argparse
import json
import logging
import operator
import shutil
import sys
import tempfile
import time
from functools import reduce
from pathlib import Path

import numpy as np
import pandas as pd
from rich.progress import track

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locality.datasets.catalog import load  # noqa: E402
from locality.evaluation import ReplayTotals, replay  # noqa: E402
from locality.rebalance.options import RebalanceOptions  # noqa: E402
from locality.rebalance.window import RebalancePolicy  # noqa: E402
from locality.replay import replay_trace  # noqa: E402
from locality.routing import RoutingConfiguration  # noqa: E402
from locality.store import ConfigStore  # noqa: E402
from locality.topology import Topology  # noqa: E402


def mean_worst(periods: dict[int, ReplayTotals], config: RoutingConfiguration) -> float:
    """Mean over periods of the worst operator's imbalance (the evaluation's, on each period's totals)."""
    return float(np.mean([max(t.figures(config, {}).imbalance.values()) for t in periods.values() if t.weight > 0]))


def locality(periods: dict[int, ReplayTotals], config: RoutingConfiguration) -> float:
    """Locality of all the periods' rows together."""
    return reduce(operator.add, periods.values()).figures(config, {}).locality


def add(periods: dict[int, ReplayTotals], period: int, totals: ReplayTotals) -> None:
    periods[period] = periods[period] + totals if period in periods else totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="ira_troll_hashtags", help="a dataset card with a timestamp column")
    parser.add_argument("--start", default="2016-09-05", help="first day of the week the offline job learns (UTC)")
    parser.add_argument("--weeks", type=int, default=2, help="weeks judged after it")
    parser.add_argument("--servers", type=int, default=6)
    parser.add_argument("--every", default="30min", help="the scheduler's tick: one rebalancing run each")
    parser.add_argument("--history", default="2D", help="each run's window: this much trace before the tick")
    parser.add_argument("--horizon", default="1D", help="the online job's --horizon (without --balance-window)")
    parser.add_argument(
        "--balance-window", action="store_true", help="each run balances its week: --balance-since/--balance-until"
    )
    parser.add_argument("--theta-max", type=float, default=0.05)
    parser.add_argument("--state-weight", type=float, default=3.0)
    parser.add_argument("--split-hot-keys", action="store_true")
    parser.add_argument("--split-share", type=float, default=0.05)
    parser.add_argument("--split-merge", default="downstream", choices=["fold", "downstream"])
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    from pipelines.offline import run as run_offline
    from pipelines.online import run as run_online
    from pipelines.params import OfflineParams, OnlineParams
    from pipelines.session import build_session
    from pipelines.trace import TraceSpec

    first = pd.Timestamp(args.start, tz="UTC")
    judged = first + pd.Timedelta("7D")
    end = judged + args.weeks * pd.Timedelta("7D")
    every, history = pd.Timedelta(args.every), pd.Timedelta(args.history)
    trace = load(args.trace, ts="ts", start=min(first, judged - history), end=end)
    keys, frame = list(trace.keys), trace.frame
    topology = Topology.uniform(keys, args.servers)
    work = Path(tempfile.mkdtemp(prefix="bench-cadence-"))  # removed at the end: the store grows a version per run
    path = work / "trace.parquet"
    frame[[*keys, "ts"]].to_parquet(path, index=False)
    store = work / "store"

    spark = build_session("bench-cadence", master="local[2]")
    spark.conf.set("spark.sql.shuffle.partitions", "4")

    def spec(since: pd.Timestamp, until: pd.Timestamp) -> TraceSpec:
        return TraceSpec(str(path), keys, ts="ts", start=since.isoformat(), end=until.isoformat(), format="parquet")

    run_offline(spark, OfflineParams(trace=spec(first, judged), topology=topology, store=str(store), graph_stats=False))
    rebalance = dict(
        rebalance=RebalanceOptions(
            "local",
            theta_max=args.theta_max,
            state_weight=args.state_weight,
            split_hot_keys=args.split_hot_keys,
            split_share=args.split_share if args.split_hot_keys else None,
            split_merge=args.split_merge,
        )
    )
    config = ConfigStore(store).get().config  # the version in force, read again only when a run publishes
    ticks = pd.date_range(judged, end, freq=every, inclusive="left")
    days: dict[int, ReplayTotals] = {}
    hashed: dict[int, ReplayTotals] = {}
    weeks: dict[int, ReplayTotals] = {}
    hashed_weeks: dict[int, ReplayTotals] = {}
    moved, published, seconds = 0.0, 0, []
    for tick in track(ticks, description="rebalancing runs", transient=True):
        week = int((tick - judged) // pd.Timedelta("7D"))
        if args.balance_window:
            since = judged + week * pd.Timedelta("7D")
            window = dict(balance_since=since.isoformat(), balance_until=(since + pd.Timedelta("7D")).isoformat())
        else:
            window = dict(horizon=args.horizon)
        started = time.perf_counter()
        params = OnlineParams(trace=spec(tick - history, tick), store=str(store), **rebalance, **window)
        outcome = run_online(spark, params)
        seconds.append(time.perf_counter() - started)
        if outcome["published"]:
            published += 1
            moved += outcome["migration_cost"]
            config = ConfigStore(store).get().config
        rows = frame[(frame["ts"] >= tick) & (frame["ts"] < tick + every)]
        if rows.empty:
            continue
        optimized, by_hash = replay(rows[keys], config)
        day = int((tick - judged) // pd.Timedelta("1D"))
        add(days, day, optimized)
        add(hashed, day, by_hash)
        add(weeks, week, optimized)
        add(hashed_weeks, week, by_hash)
    spark.stop()
    shutil.rmtree(work)

    policy = RebalancePolicy(
        method="local",
        every=args.every,
        history=max(args.history, args.every, key=pd.Timedelta),
        theta_max=args.theta_max,
        state_weight=args.state_weight,
        split_hot_keys=args.split_hot_keys,
        split_share=args.split_share if args.split_hot_keys else None,
        split_merge=args.split_merge,
    )
    inside = frame[(frame["ts"] >= first) & (frame["ts"] < end)]
    library = replay_trace(inside, topology, ts="ts", period="7D", mode="offline", rebalance=policy)
    judged_weeks = library.windows[1:]
    judged_tuples = sum(w.tuples for w in judged_weeks)

    figures = {
        "trace": args.trace,
        "judged": [str(judged.date()), str(end.date())],
        "tuples": judged_tuples,
        "options": vars(args),
        "deployed": {
            "locality": locality(days, config),
            "worst": mean_worst(weeks, config),
            "daily_worst": mean_worst(days, config),
            "runs": len(ticks),
            "published": published,
            "state_moved_per_week": moved / (judged_tuples * len(keys)),
            "seconds_per_run_median": float(np.median(seconds)),
        },
        "hash": {
            "locality": locality(hashed, config),
            "worst": mean_worst(hashed_weeks, config),
            "daily_worst": mean_worst(hashed, config),
        },
        "replay": {
            "locality": float(np.average([w.locality for w in judged_weeks], weights=[w.tuples for w in judged_weeks])),
            "worst": float(np.mean([w.worst_imbalance for w in judged_weeks])),
            "daily_worst": library.mean_daily_worst_imbalance(),
            "state_moved_per_week": library.mean_state_moved(),
        },
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
