"""Which estimator predicts each key's next-window load best (locality.forecast), on the timed traces.

Two horizons, one per use:

- weekly: the next week's load of every key from the weeks before (what the
  reconfiguration balances: its METIS vertex weights and placement bounds);
- intra-day: the next ``--horizon`` (default 4 hours) of every key from the
  last ``--memory`` intervals of ``--every`` (default 48 of 30 minutes), sampled
  every ``--sample`` intervals (what the rebalancer balances between
  reconfigurations; ``--every 1h --horizon 84h --memory 168``: the rest of a
  week, on average, from the last seven days).

The error is the weighted absolute percentage error (WAPE, ``sum |f - a| /
sum a`` over the keys of either side) of the forecast scaled to the actual
total: balance only depends on how the load splits between keys, not on its
level (which follows the time of day and the week's volume). It is averaged
over the windows judged and the operators; 0 is perfect, 2 is the worst
(every forecast key idle, every busy key unforeseen).

    .venv/bin/python benchmarks/bench_forecast.py                 # IRA tweets (user, hashtag) and weekly flights
    .venv/bin/python benchmarks/bench_forecast.py --traces ira --every 1h --horizon 84h --memory 168 --sample 12
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locality.datasets.catalog import load  # noqa: E402
from locality.forecast import forecast_matrix  # noqa: E402

# short name: (dataset card, time range); the card names the file and the key columns
TRACES = {
    "ira": ("ira_troll_hashtags", "2015-06-01", "2017-08-01"),
    "flights": ("nycflights13_tailnum_dest", None, None),
}
WEEKLY = {
    "last": ("last", {}),
    "decay 0.3": ("decay", {"decay": 0.3}),
    "decay 0.5": ("decay", {"decay": 0.5}),
    "decay 0.7": ("decay", {"decay": 0.7}),
    "decay 0.85 (the blended history's)": ("decay", {"decay": 0.85}),
    "mean of 4": ("mean", {"windows": 4}),
    "median of 4": ("percentile", {"windows": 4, "q": 50.0}),
    "p75 of 4": ("percentile", {"windows": 4, "q": 75.0}),
    "max of 4": ("max", {"windows": 4}),
}
INTRADAY = {
    "last": ("last", {}),
    "decay 0.5": ("decay", {"decay": 0.5}),
    "decay 0.8": ("decay", {"decay": 0.8}),
    "decay 0.9": ("decay", {"decay": 0.9}),
    "decay 0.95": ("decay", {"decay": 0.95}),
    "mean of 8": ("mean", {"windows": 8}),
    "mean of 48": ("mean", {"windows": 48}),
    "mean of all (--memory)": ("mean", {}),
    "median of 8": ("percentile", {"windows": 8, "q": 50.0}),
}


def wape(forecast: np.ndarray, actual: np.ndarray) -> float:
    """WAPE of ``forecast`` scaled to ``actual``'s total (2.0 when nothing is forecast)."""
    total = forecast.sum()
    if total <= 0:
        return 2.0
    return float(np.abs(forecast * (actual.sum() / total) - actual).sum() / actual.sum())


def counts_by(frame: pd.DataFrame, key: str, slot: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(slot, key code, count) of every (slot, key) with tuples, sorted by slot; and the number of keys."""
    codes, uniques = pd.factorize(frame[key])
    grouped = pd.DataFrame({"s": slot, "k": codes}).groupby(["s", "k"]).size()
    return (
        grouped.index.get_level_values(0).to_numpy(),
        grouped.index.get_level_values(1).to_numpy(),
        grouped.to_numpy(dtype=float),
        len(uniques),
    )


def dense(slots, keys, counts, lo: int, hi: int, universe: np.ndarray) -> np.ndarray:
    """Counts of slots ``[lo, hi)`` over ``universe`` (sorted key codes), slots x keys."""
    a, b = np.searchsorted(slots, [lo, hi])
    out = np.zeros((hi - lo, universe.shape[0]))
    out[slots[a:b] - lo, np.searchsorted(universe, keys[a:b])] = counts[a:b]
    return out


def weekly(frame: pd.DataFrame, keys: list[str], first: pd.Timestamp, memory: int = 8) -> dict[str, float]:
    week = ((frame["ts"] - first) // pd.Timedelta("7D")).to_numpy()
    errors = {name: [] for name in WEEKLY}
    for key in keys:
        slots, codes, counts, _ = counts_by(frame, key, week)
        for t in range(2, int(week.max()) + 1):
            lo = max(0, t - memory)
            a, b = np.searchsorted(slots, [lo, t + 1])
            universe = np.unique(codes[a:b])
            block = dense(slots, codes, counts, lo, t + 1, universe)
            if block[-1].sum() == 0:
                continue
            for name, (method, params) in WEEKLY.items():
                errors[name].append(wape(forecast_matrix(block[:-1], method, **params), block[-1]))
    return {name: float(np.mean(v)) for name, v in errors.items()}


def intraday(frame, keys, first, every: str, horizon: str, sample: int, memory: int = 48) -> dict[str, float]:
    slot = ((frame["ts"] - first) // pd.Timedelta(every)).to_numpy()
    ahead = int(pd.Timedelta(horizon) // pd.Timedelta(every))
    errors = {name: [] for name in INTRADAY}
    for key in keys:
        slots, codes, counts, _ = counts_by(frame, key, slot)
        for t in range(memory, int(slot.max()) + 1 - ahead, sample):
            a, b = np.searchsorted(slots, [t - memory, t + ahead])
            universe = np.unique(codes[a:b])
            block = dense(slots, codes, counts, t - memory, t + ahead, universe)
            actual = block[memory:].sum(axis=0)
            if actual.sum() == 0:
                continue
            for name, (method, params) in INTRADAY.items():
                errors[name].append(wape(forecast_matrix(block[:memory], method, **params), actual))
    return {name: float(np.mean(v)) for name, v in errors.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="ira,flights")
    parser.add_argument("--every", default="30min")
    parser.add_argument("--horizon", default="4h")
    parser.add_argument("--sample", type=int, default=6, help="judge every SAMPLE-th interval")
    parser.add_argument("--memory", type=int, default=48, help="intervals the intra-day forecasts read")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    for name in args.traces.split(","):
        card, start, end = TRACES[name]
        loaded = load(card, ts="ts", start=start, end=end)
        frame, keys = loaded.frame, loaded.keys
        first = frame["ts"].min().floor("D")
        print(
            f"{name}: {len(frame):,} rows, keys {keys}; "
            "WAPE of the forecast scaled to the actual total (0 = perfect, 2 = worst)"
        )
        week = weekly(frame, keys, first)
        print("  next week from the weeks before:")
        for est, err in sorted(week.items(), key=lambda kv: kv[1]):
            print(f"    {est:<36} {err:.3f}")
        day = intraday(frame, keys, first, args.every, args.horizon, args.sample, args.memory)
        print(
            f"  next {args.horizon} from the last {args.memory} intervals of {args.every} "
            f"(every {args.sample}th boundary):"
        )
        for est, err in sorted(day.items(), key=lambda kv: kv[1]):
            print(f"    {est:<36} {err:.3f}")


if __name__ == "__main__":
    main()
