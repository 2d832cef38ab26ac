"""What limits next-week balance on a timed trace: the hot-key floor, and what knowing the future would buy.

Three bounds, each beside what the replay measures without foresight:

- the *hot-key floor*: per window (and per day), the heaviest key's load over
  its operator's fair share; no routing that keeps a key whole does better
  (mean over windows of ``max(1, top / fair)``, worst operator);
- *oracle reconfiguration*: the online replay (decay 0.85) whose reconfiguration
  balances the coming week's actual key loads (edges still from the past):
  the imbalance left is drift the weekly tables cannot follow even with a
  perfect forecast, and the state it moves;
- *oracle MinMig*: from hash routing, MinMig (theta_max 0.1 / 0.2) on the
  coming week's actual loads with each key's state its previous week's load:
  the least state any plan must move for that balance when it knows which
  keys will be heavy (locality ignored);
- *co-location*: next window's imbalance of each operator when its keys are
  placed on the last window's loads, by the optimizer (METIS and placement,
  in-sample within alpha) or by LPT (heaviest first onto the least loaded,
  locality ignored): the keys that burst together are the keys that travel
  together, which locality puts on one server;
- *oracle within the week*: the online replay with the ``local`` rebalancer
  every hour (theta_max 0.1 / 0.15 / 0.2, publishing when the gain pays),
  whose forecast is each key's actual load over the rest of the week: what
  balance, locality and state the rebalancer reaches when its forecasts are
  perfect, the frontier that any forecast can only approach;
- *balance alone*: the same hourly rebalancer over hash routing (no locality
  tables, ``mode="hash"``), on its own forecasts and on perfect ones: the state
  balance costs when locality is not asked for at all.

    .venv/bin/python benchmarks/bench_balance_limits.py           # IRA tweets, 2015-06-01 .. 2017-08-01
    .venv/bin/python benchmarks/bench_balance_limits.py --skip-within-week   # the first three (a few minutes)
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import locality.replay  # noqa: E402
from locality.counts import count_keys  # noqa: E402
from locality.datasets.catalog import load  # noqa: E402
from locality.evaluation import evaluate  # noqa: E402
from locality.forecast import forecast_counts  # noqa: E402
from locality.optimizer import make_fallbacks, optimize  # noqa: E402
from locality.rebalance import RebalanceProblem, rebalance  # noqa: E402
from locality.rebalance.window import RebalancePolicy, WindowRouter  # noqa: E402
from locality.topology import Topology  # noqa: E402


def floor(frame: pd.DataFrame, keys: list[str], slot: pd.Series, n: int) -> float:
    """Mean over slots of the worst operator's ``max(1, heaviest key / fair share)``."""
    worst = None
    for key in keys:
        counts = frame.groupby([slot, frame[key]]).size()
        ratio = (counts.groupby(level=0).max() / (counts.groupby(level=0).sum() / n)).clip(lower=1.0)
        worst = ratio if worst is None else np.maximum(worst, ratio)
    return float(worst.mean())


def oracle_replay(frame: pd.DataFrame, topology: Topology, period: str):
    """The online replay whose reconfiguration balances the coming window's actual loads."""
    windows = locality.replay.windows_of(frame["ts"], period)
    actual = [count_keys(frame[(frame.ts >= a) & (frame.ts < b)], list(topology.operators)) for a, b in windows]

    def next_window(counts, past, method, **params):
        return forecast_counts(counts, [actual[len(past)]], "last")

    # The replay takes its forecast by name (a user has no oracle): the bound swaps in the coming window's counts.
    with mock.patch.object(locality.replay, "forecast_counts", next_window):
        return locality.replay.replay_trace(frame, topology, period=period, history=None, decay=0.85, forecast="last")


class _ForesightRouter(WindowRouter):
    """A window router whose rebalancer knows each key's actual load over the rest of the window."""

    def _rates(self, i: int, now: pd.Timestamp) -> np.ndarray:
        o = self.operators[i]
        rest = np.bincount(o.codes[self.consumed :], minlength=len(o.keys)).astype(float)
        return rest / ((self.end - now) / pd.Timedelta(self.policy.every))


def within_week(frame: pd.DataFrame, topology: Topology, period: str, theta_max: float, mode: str, foresight: bool):
    """The replay in ``mode`` rebalanced hourly by ``local``, on its forecasts or on the rest of the window's loads."""
    policy = RebalancePolicy(method="local", every="1h", theta_max=theta_max)
    router = _ForesightRouter if foresight else WindowRouter
    with mock.patch.object(locality.replay, "WindowRouter", router):
        return locality.replay.replay_trace(
            frame,
            topology,
            period=period,
            mode=mode,
            history=None,
            decay=0.85,
            rebalance=policy,
            min_gain=0.1,
            max_imbalance=100.0,
        )


def colocation(frame: pd.DataFrame, topology: Topology, period: str) -> dict[str, tuple[float, float]]:
    """Per operator, next window's mean imbalance when placed on the last window's loads: optimizer, LPT."""
    window = ((frame["ts"] - frame["ts"].min().floor("D")) // pd.Timedelta(period)).to_numpy()
    ops, fallbacks = list(topology.operators), make_fallbacks(topology, "kafka")
    figures = {op: ([], []) for op in ops}
    for w in np.unique(window)[1:]:
        before, after = frame[window == w - 1], frame[window == w]
        placed = evaluate(after, optimize(count_keys(before, ops).graph(), topology, fallbacks).config).optimized
        for op in ops:
            n, loads = topology.n_instances(op), before[op].value_counts()
            hashed = fallbacks[op].instances_of(loads.index.to_numpy(dtype=object))
            # LPT exactly: the Simple rebalancer with theta_max 0 (keys unseen last window keep their hash)
            lpt = rebalance(RebalanceProblem(loads.to_numpy(dtype=float), loads, hashed, hashed, n, 0.0), "simple")
            instance = pd.Series(lpt.assignment, index=loads.index)
            nxt = after[op].value_counts()
            fallback = fallbacks[op].instances_of(nxt.index.to_numpy(dtype=object))
            placed_next = instance.reindex(nxt.index).to_numpy()
            placed_next = np.where(np.isnan(placed_next), fallback, placed_next).astype(np.int64)
            spread = np.bincount(placed_next, weights=nxt.to_numpy(dtype=float), minlength=n)
            figures[op][0].append(placed.imbalance[op])
            figures[op][1].append(spread.max() / spread.mean())
    return {op: (float(np.mean(a)), float(np.mean(b))) for op, (a, b) in figures.items()}


def oracle_minmig(frame: pd.DataFrame, topology: Topology, period: str, theta_max: float) -> tuple[float, float]:
    """Mean worst imbalance and state moved (share of a window's state) of MinMig knowing each window's loads."""
    window = ((frame["ts"] - frame["ts"].min().floor("D")) // pd.Timedelta(period)).to_numpy()
    fallbacks = make_fallbacks(topology, "kafka")
    worst, moved = [], []
    previous = {op: pd.Series(dtype=float) for op in topology.operators}
    for w in np.unique(window):
        rows = frame[window == w]
        figures = []
        for op in topology.operators:
            loads = rows[op].value_counts().astype(float)
            keys = loads.index.to_numpy(dtype=object)
            state = previous[op].reindex(loads.index).fillna(0.0).to_numpy() + 1e-9  # new keys move for free
            hashed = fallbacks[op].instances_of(keys)
            problem = RebalanceProblem(loads.to_numpy(), state, hashed, hashed, topology.n_instances(op), theta_max)
            result = rebalance(problem, "minmig")
            figures.append((result.imbalance_after, float(state[result.moved].sum()), float(loads.sum())))
            previous[op] = loads
        if w > 0:
            worst.append(max(f[0] for f in figures))
            moved.append(sum(f[1] for f in figures) / sum(f[2] for f in figures))
    return float(np.mean(worst)), float(np.mean(moved))


#: The two runs of the rebalancer without locality tables: on its own forecasts (what a deployment gets)
#: and on perfect ones.
BALANCE_ALONE = (("its forecasts", False), ("perfect forecasts", True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="ira_troll_hashtags", help="a dataset card's name or a path")
    parser.add_argument("--keys", help="key columns, comma-separated (default: the card's)")
    parser.add_argument("--start", default="2015-06-01")
    parser.add_argument("--end", default="2017-08-01")
    parser.add_argument("--period", default="7D")
    parser.add_argument("--servers", type=int, default=6)
    parser.add_argument("--skip-within-week", action="store_true", help="skip the hourly runs (1-4 minutes each)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    loaded = load(args.trace, args.keys.split(",") if args.keys else None, ts="ts", start=args.start, end=args.end)
    frame, keys = loaded.frame.reset_index(drop=True), loaded.keys
    topology = Topology.uniform(keys, args.servers)
    first = frame["ts"].min().floor("D")
    print(f"{loaded.name}: {len(frame):,} rows, keys {keys}, {args.servers} servers, period {args.period}")
    week = (frame["ts"] - first) // pd.Timedelta(args.period)
    day = (frame["ts"] - first) // pd.Timedelta("1D")
    per_window, per_day = floor(frame, keys, week, args.servers), floor(frame, keys, day, args.servers)
    print(f"  hot-key floor: per window {per_window:.3f}, per day {per_day:.3f}")
    result = oracle_replay(frame, topology, args.period)
    print(
        f"  oracle reconfiguration (balances next window's actual loads): locality {result.mean_locality:.4f}, "
        f"worst imbalance {result.mean_worst_imbalance():.3f}, per day {result.mean_daily_worst_imbalance():.3f}, "
        f"state moved/window {result.mean_state_moved():.3f}"
    )
    for theta_max in (0.1, 0.2):
        worst, moved = oracle_minmig(frame, topology, args.period, theta_max)
        print(f"  oracle MinMig from hash, theta_max {theta_max}: worst imbalance {worst:.3f}, state moved {moved:.3f}")
    for op, (placed, lpt) in colocation(frame, topology, args.period).items():
        print(
            f"  next window's imbalance of {op!r} placed on the last window's loads: "
            f"optimizer {placed:.3f}, LPT {lpt:.3f}"
        )
    if args.skip_within_week:
        return
    runs = [("oracle within the week (online, local hourly, perfect forecasts)", "online", True)]
    runs += [(f"balance alone (hash, local hourly, {kind})", "hash", foresight) for kind, foresight in BALANCE_ALONE]
    for label, mode, foresight in runs:
        for theta_max in (0.1, 0.15, 0.2):
            result = within_week(frame, topology, args.period, theta_max, mode, foresight)
            print(
                f"  {label}, theta_max {theta_max}: locality {result.mean_locality:.4f}, "
                f"worst imbalance {result.mean_worst_imbalance():.3f}, "
                f"per day {result.mean_daily_worst_imbalance():.3f}, "
                f"state moved/window {result.mean_state_moved():.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
