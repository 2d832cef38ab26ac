"""Benchmark Gedik's constructions (Scan, Redist, Readj) against consistent and uniform hashing.

Reproduces the setup of Gedik, VLDB J. 2014, Section 5 / Table 1 (seeds-algorithms.md §2.12):
a Zipf(z) key domain of |D| keys, resource functions LLL, max/min ratio (Gedik's alpha) = 1.2 for every
resource, sigma = 0.1, U_APM; the parallelism grows one channel at a time from
N = 1 to the target N, each construction starting from the previous
function, and the figures are those of the last step, averaged over runs.
``--drift`` adds popularity drift between steps (the paper keeps the
distribution fixed): a share of the hottest keys swap frequencies with keys
drawn from the whole domain.

Figures: relative imbalance b = (prod_k r_k / ratio)^(1/3) with r_k = max/min
channel load of resource k (Eq. 11), relative migration m = migrated memory /
(total memory / N) (Eq. 12), explicit table size, tracked keys, planning time.

Run: ``python benchmarks/bench_rebalance_gedik.py`` (add ``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from locality.rebalance import RebalanceProblem  # noqa: E402
from locality.rebalance.hybrid import frequency_threshold, theta_from_ratio, tracked_keys  # noqa: E402
from locality.rebalance.readj import readj  # noqa: E402
from locality.rebalance.redist import redist  # noqa: E402
from locality.rebalance.scan import scan  # noqa: E402
from locality.testing.lossy_counting import SlidingLossyCounter  # noqa: E402

MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """Deterministic 64-bit mixer (never Python's salted ``hash``)."""
    z = (np.asarray(x, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)) & MASK64
    z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & MASK64
    z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & MASK64
    return z ^ (z >> np.uint64(31))


class Ring:
    """Consistent hash: ``replicas`` points per channel at positions fixed by (channel, replica)."""

    def __init__(self, max_channels: int, replicas: int) -> None:
        ch = np.repeat(np.arange(max_channels, dtype=np.uint64), replicas)
        rep = np.tile(np.arange(replicas, dtype=np.uint64), max_channels)
        self.pos = splitmix64((ch << np.uint64(32)) | rep)
        self.owner = ch.astype(np.int64)

    def __call__(self, key_pos: np.ndarray, n: int) -> np.ndarray:
        keep = self.owner < n
        order = np.argsort(self.pos[keep])
        pos, owner = self.pos[keep][order], self.owner[keep][order]
        idx = np.searchsorted(pos, key_pos, side="left") % pos.shape[0]  # next replica clockwise
        return owner[idx]


def zipf(n_keys: int, z: float) -> np.ndarray:
    f = 1.0 / np.arange(1, n_keys + 1, dtype=float) ** z
    return f / f.sum()


def drift_step(f: np.ndarray, share: float, rng: np.random.Generator, top: int = 1000) -> np.ndarray:
    """Swap the frequencies of ``share`` of the ``top`` hottest keys with random keys."""
    if share <= 0:
        return f
    f = f.copy()
    hot = np.argsort(-f, kind="stable")[:top]
    movers = rng.choice(hot, size=max(1, int(share * top)), replace=False)
    others = rng.choice(f.shape[0], size=movers.shape[0], replace=False)
    f[movers], f[others] = f[others].copy(), f[movers].copy()
    return f


BETA = {"C": lambda f: np.ones_like(f), "L": lambda f: f, "Q": lambda f: f * f}


def figures(f: np.ndarray, prev: np.ndarray, new: np.ndarray, n: int, ratio: float, resources: str) -> dict:
    """Paper metrics of the function ``new`` reached from ``prev`` (Eqs. 9-12)."""
    ratios = []
    for letter in resources:
        loads = np.bincount(new, weights=BETA[letter](f), minlength=n)
        ratios.append(loads.max() / loads.min() / ratio if loads.min() > 0 else math.inf)
    beta_s = BETA[resources[0]](f)
    migration = beta_s[new != prev].sum() / (beta_s.sum() / n)
    return {"b": float(np.prod(ratios) ** (1 / len(ratios))), "m": float(migration)}


def run_one(args: argparse.Namespace, seed: int, methods: dict[str, Callable | None]) -> dict[str, dict]:
    rng = np.random.default_rng(seed)
    f = zipf(args.keys, args.skew)[rng.permutation(args.keys)]  # rank -> random key id
    key_pos = splitmix64(np.arange(args.keys, dtype=np.uint64) ^ np.uint64(seed * 0x51ED27 + 1))
    ring = Ring(args.channels, args.replicas)
    state = {name: np.zeros(args.keys, dtype=np.int64) for name in methods}  # N = 1: everything on channel 0
    tracked: dict[str, np.ndarray] = {name: np.empty(0, dtype=np.int64) for name in methods}
    out: dict[str, dict] = {}
    for n in range(2, args.channels + 1):
        f_prev, f = f, drift_step(f, args.drift, rng)
        fallback = ring(key_pos, n)
        theta = theta_from_ratio(args.ratio, n)
        for name, method in methods.items():
            prev = state[name]
            started = time.perf_counter()
            if method is None:  # a plain hash
                new = fallback if name == "consistent hash" else (key_pos % np.uint64(n)).astype(np.int64)
                table, n_tracked = 0, 0
                seconds = time.perf_counter() - started
            else:
                problem = RebalanceProblem(f, f, prev, fallback, n, theta_max=theta)
                result = method(problem, resources=args.resources, sigma=args.sigma, tracked_before=tracked[name])
                new, table, seconds = result.assignment, result.table_size, result.planning_seconds
                tracked[name] = tracked_keys(problem, sigma=args.sigma, resources=args.resources)
                n_tracked = tracked[name].shape[0]
            state[name] = new
            if n == args.channels:
                out[name] = {
                    **figures(f, prev, new, n, args.ratio, args.resources),
                    "table": table,
                    "tracked": n_tracked,
                    "seconds": seconds,
                }
        del f_prev
    return out


def lossy_sizes(args: argparse.Namespace, seed: int) -> dict:
    """Size of the sliding lossy counter and of the frequent set it finds, on a sampled stream."""
    rng = np.random.default_rng(seed)
    f = zipf(args.keys, args.skew)
    theta = theta_from_ratio(args.ratio, args.channels)
    delta = frequency_threshold(args.channels, theta, sigma=args.sigma, resources=args.resources, n_domain=args.keys)
    counter = SlidingLossyCounter(0.1 * delta, args.window)
    started = time.perf_counter()
    for _ in range(0, args.stream, 100_000):
        counter.update_batch(rng.choice(args.keys, size=100_000, p=f))
    seconds = time.perf_counter() - started
    found = counter.frequent_items(delta)
    exact = int(np.count_nonzero(f >= delta))
    return {
        "delta": delta,
        "active": len(counter.active),
        "all": len(counter),
        "found": len(found),
        "exact": exact,
        "seconds": seconds,
    }


PAPER = {  # Fig. 3, LLL, defaults (seeds-algorithms.md §2.13 G1, G2)
    "uniform hash": {"b": 1.55, "m": "> 8"},
    "consistent hash": {"b": 1.75, "m": "best, ~1"},
    "scan": {"b": 1.32, "m": 1.23},
    "redist": {"b": 1.32, "m": 1.23},
    "readj": {"b": 1.2, "m": 1.34},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000, help="domain size |D| (paper: 1e6)")
    parser.add_argument("--channels", type=int, default=10, help="final number of channels N (paper: 10)")
    parser.add_argument(
        "--ratio", type=float, default=1.2, help="bound on max/min channel load, Gedik's alpha (paper: 1.2)"
    )
    parser.add_argument("--skew", type=float, default=1.0, help="Zipf exponent z (paper: 1)")
    parser.add_argument("--sigma", type=float, default=0.1, help="threshold scaler sigma (paper: 0.1)")
    parser.add_argument("--resources", default="LLL", help="resource functions s,c,n (paper Fig. 3 anchor: LLL)")
    parser.add_argument("--replicas", type=int, default=1000, help="consistent-hash replicas per channel")
    parser.add_argument("--runs", type=int, default=5, help="runs to average (paper: 5)")
    parser.add_argument("--drift", type=float, default=0.0, help="share of the 1000 hottest keys swapped per step")
    parser.add_argument("--stream", type=int, default=3_000_000, help="tuples for the lossy-counter measurement")
    parser.add_argument("--window", type=int, default=1_000_000, help="sliding window W in tuples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="small smoke run (|D| = 1e5, 2 runs, short stream)")
    args = parser.parse_args(argv)
    if args.quick:
        args.keys, args.runs, args.stream, args.window = 100_000, 2, 300_000, 100_000

    methods: dict[str, Callable | None] = {
        "uniform hash": None,
        "consistent hash": None,
        "scan": scan,
        "redist": redist,
        "readj": readj,
        # Not in the paper: the balance penalty also sees the load the hash sends from untracked keys.
        "readj (untracked_load)": functools.partial(readj, untracked_load=True),
    }
    runs = [run_one(args, args.seed + r, methods) for r in range(args.runs)]
    print(
        f"# Gedik constructions: |D|={args.keys}, z={args.skew}, N=1->{args.channels}, max/min ratio={args.ratio}, "
        f"sigma={args.sigma}, {args.resources}, U_APM, drift={args.drift}, {args.runs} runs, seed={args.seed}"
    )
    print()
    print("| method | b (ours) | b (paper) | m (ours) | m (paper) | table size | tracked | planning s |")
    print("|---|---|---|---|---|---|---|---|")
    for name in methods:
        rows = [r[name] for r in runs]
        mean = {k: float(np.mean([row[k] for row in rows])) for k in rows[0]}
        paper = PAPER.get(name, {}) if args.resources == "LLL" else {}
        print(
            f"| {name} | {mean['b']:.3f} | {paper.get('b', '-')} | {mean['m']:.3f} | {paper.get('m', '-')} | "
            f"{mean['table']:.1f} | {mean['tracked']:.1f} | {mean['seconds']:.4f} |"
        )
    if args.stream:
        lc = lossy_sizes(args, args.seed)
        print()
        print(
            f"lossy counting (N={args.channels}, delta={lc['delta']:.3g}, epsilon=delta/10, window={args.window}, "
            f"{args.stream} tuples): active counter {lc['active']} keys, all 3 counters {lc['all']}, "
            f"frequent keys found {lc['found']} (exact f >= delta: {lc['exact']}), {lc['seconds']:.1f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
