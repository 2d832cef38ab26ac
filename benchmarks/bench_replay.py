"""Online vs offline vs hash on timed traces, window by window (the paper's Figure 11 on our data).

For each strategy: mean locality over the windows after the first (each
judged with tables built before it), the per-operator next-window imbalance
and the worst operator's, judged per window and per day (mean over days), the
share of state each reconfiguration moves (and what publishing METIS's labels
as they come would have moved), the share of state moved per window in all
(reconfiguration + rebalancing), and the mean per quarter, so that "online
above offline every quarter" can be read off.

    .venv/bin/python benchmarks/bench_replay.py                                   # weekly flights
    .venv/bin/python benchmarks/bench_replay.py --trace ira_troll_hashtags \\
        --start 2015-06-01 --end 2017-08-01 --strategies hash,offline,online-h1,online-d0.85
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

from locality.datasets.catalog import load  # noqa: E402
from locality.rebalance.window import RebalancePolicy  # noqa: E402
from locality.replay import replay_trace  # noqa: E402
from locality.topology import Topology  # noqa: E402


def online(policy: RebalancePolicy) -> dict:
    """The default online replay (all weeks decayed 0.85) with a rebalancing policy."""
    return dict(mode="online", history=None, decay=0.85, rebalance=policy)


def local(**options) -> RebalancePolicy:
    """The locality-aware rebalancer every 6 hours, as benchmarks/RESULTS.md measured it, unless told otherwise."""
    return RebalancePolicy(**{"every": "6h", **options})


STRATEGIES = {
    "hash": dict(mode="hash"),
    "offline": dict(mode="offline"),
    "online-h1": dict(mode="online", history=1),
    "online-h4": dict(mode="online", history=4),
    "online-h8": dict(mode="online", history=8),
    "online-d0.5": dict(mode="online", history=None, decay=0.5),
    "online-d0.85": dict(mode="online", history=None, decay=0.85),
    "online-d0.85-gain0.1": dict(mode="online", history=None, decay=0.85, min_gain=0.1, max_imbalance=1.1),
    "online-d0.85-mixed": dict(mode="online", history=None, decay=0.85, rebalance="mixed"),
    "online-d0.85-mixed-6h": online(RebalancePolicy(method="mixed", every="6h")),
    "online-d0.85-forecast-decay0.5": dict(mode="online", history=None, decay=0.85, forecast="decay:0.5"),
    # the locality-aware rebalancer (issue 11), every 6 hours: each window's load (served + forecast of the
    # rest from the mean rate of the last 2 days) within 1 + theta_max, moves chosen by the locality they
    # lose + the state they move per unit of load relieved
    "online-d0.85-local": online(local()),
    "online-d0.85-local-sw0.1": online(local(state_weight=0.1)),
    "online-d0.85-local-1h-sw0": online(local(every="1h", state_weight=0.0)),
    "online-d0.85-local-1h-sw0.1": online(local(every="1h", state_weight=0.1)),
    "online-d0.85-local-budget1": online(local(options={"max_cost": 1.0})),
    "online-d0.85-local-budget3": online(local(options={"max_cost": 3.0})),
    "online-d0.85-local-split0.25-budget1": online(
        local(split_hot_keys=True, split_share=0.25, options={"max_cost": 1.0})
    ),
    "online-d0.85-local-daily": online(local(every="30min", balance_window="1D", forecast="decay:0.9", history="1D")),
    "online-d0.85-local-split": online(local(split_hot_keys=True)),
    "online-d0.85-local-split0.25": online(local(split_hot_keys=True, split_share=0.25)),
    "online-d0.85-forecast-local": dict(online(local()), forecast="decay:0.5"),
    "online-d0.85-forecast-local-split0.25": dict(
        online(local(split_hot_keys=True, split_share=0.25)), forecast="decay:0.5"
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="nycflights13_tailnum_dest", help="a dataset card's name or a path")
    parser.add_argument("--keys", help="key columns, comma-separated (default: the card's)")
    parser.add_argument("--servers", type=int, default=6)
    parser.add_argument("--period", default="7D")
    parser.add_argument("--start")
    parser.add_argument("--end")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    loaded = load(args.trace, args.keys.split(",") if args.keys else None, ts="ts", start=args.start, end=args.end)
    trace, keys = loaded.frame, loaded.keys
    topology = Topology.uniform(keys, args.servers)
    print(
        f"{loaded.name}: {len(trace):,} rows, keys {keys}, {args.servers} servers, period {args.period}, "
        "alpha 1.03; means over the windows after the first"
    )
    quarters = {}
    for name in args.strategies.split(","):
        started = time.perf_counter()
        result = replay_trace(trace, topology, period=args.period, **STRATEGIES[name])
        frame = result.frame().iloc[1:]
        frame["split"] = [sum(w.split_keys.values()) for w in result.windows[1:]]
        raw = frame["migration_cost_without_relabeling"].dropna()
        imbalance = ", ".join(f"{op} {v:.3f}" for op, v in result.mean_imbalance().items())
        print(
            f"  {name:<22} locality {result.mean_locality:.4f} (hash {result.mean_hash_locality:.4f}); "
            f"imbalance {imbalance}; worst {result.mean_worst_imbalance():.3f}; "
            f"daily worst {result.mean_daily_worst_imbalance():.3f} "
            f"(hash {result.mean_daily_worst_imbalance(hashed=True):.3f}); "
            f"state moved/reconfiguration {frame['migration_cost'].mean():.3f}"
            + (f" (raw METIS labels {raw.mean():.3f})" if len(raw) else "")
            + (f"; rebalancing moved {frame['rebalance_cost'].mean():.3f}" if frame["rebalance_cost"].any() else "")
            + f"; state moved/window {result.mean_state_moved():.3f}"
            + (f"; split keys/window {frame['split'].mean():.1f}" if frame["split"].any() else "")
            + (f"; published {int(frame['published'].sum())}/{len(frame)}" if "gain" in name else "")
            + f"; {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        quarter = pd.to_datetime(frame["start"]).dt.tz_convert(None).dt.to_period("Q")
        quarters[name] = frame.groupby(quarter)["locality"].mean()
    print("\nmean locality per quarter")
    print(pd.DataFrame(quarters).round(4).to_string())
    np.seterr(all="ignore")


if __name__ == "__main__":
    main()
