"""Locality on the real tweet trace (location -> hashtag, 6 servers x 1 instance, alpha 1.03), beside hash.

Prints: in-sample and next-half locality (build on the first half by
``seq``, evaluate on the second) with per-operator imbalance, for the
variants tried to beat plain METIS (recursive bisection vs k-way, 1 vs 8
cuts, with and without refinement after the balance repair), over several
seeds; then the locality of tables built from Space-Saving sketches of
several capacities (bytes of the serialized pair sketch) against exact counts.

    .venv/bin/python benchmarks/bench_locality_tweets.py
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

import locality.placement  # noqa: E402
from locality.datasets.catalog import card, load  # noqa: E402
from locality.optimizer import LocalityOptimizer  # noqa: E402
from locality.sketch import SpaceSaving  # noqa: E402
from locality.topology import Topology  # noqa: E402

TRACE = card("geotweets_hashtags_2015")
KEYS = TRACE.keys


def fit(trace, topology, seed, recursive=False, n_cuts=8, refine=True, capacity=None):
    import locality.partition as partition

    original = partition.partition_key_graph

    def with_cuts(*args, **kw):
        return original(*args, **{**kw, "n_cuts": n_cuts})

    with mock.patch("locality.optimizer.partition_key_graph", with_cuts):
        rounds = locality.placement._REFINE_ROUNDS if refine else 0
        with mock.patch.object(locality.placement, "_REFINE_ROUNDS", rounds):
            return LocalityOptimizer(topology, seed=seed, recursive=recursive, capacity=capacity).fit(trace)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=TRACE.name, help="a dataset card's name or a trace's path")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    trace = load(args.trace, KEYS).frame
    half = len(trace) // 2
    first, second = trace.iloc[:half], trace.iloc[half:]
    topology = Topology.uniform(KEYS, 6)
    variants = {
        "METIS recursive bisection, 1 cut, no refinement (pymetis default)": dict(
            recursive=True, n_cuts=1, refine=False
        ),
        "k-way, 1 cut, no refinement": dict(n_cuts=1, refine=False),
        "k-way, 8 cuts, no refinement": dict(refine=False),
        "k-way, 8 cuts + refinement (default)": dict(),
    }
    rows = []
    for name, kw in variants.items():
        for seed in range(args.seeds):
            whole = fit(trace, topology, seed, **kw).report_
            model = fit(first, topology, seed, **kw)
            nxt = model.evaluate(second)
            rows.append(
                {
                    "variant": name,
                    "seed": seed,
                    "in-sample": whole.optimized.locality,
                    "in-sample imbalance": max(whole.optimized.imbalance.values()),
                    "next-half": nxt.optimized.locality,
                    "next-half imbalance": max(nxt.optimized.imbalance.values()),
                    "hash": nxt.hash.locality,
                }
            )
    frame = pd.DataFrame(rows)
    print(f"tweet trace, {len(trace):,} rows, 6 servers, alpha 1.03; mean (min..max) over seeds 0..{args.seeds - 1}")
    for name, group in frame.groupby("variant", sort=False):
        cells = [
            f"{c} {group[c].mean():.4f} ({group[c].min():.4f}..{group[c].max():.4f})"
            for c in ("in-sample", "in-sample imbalance", "next-half", "next-half imbalance", "hash")
        ]
        print(f"  {name}: " + "; ".join(cells))

    exact = fit(trace, topology, 0).report_.optimized.locality
    exact_next = fit(first, topology, 0).evaluate(second).optimized.locality
    print(
        f"\nsketched pair counts vs exact (exact: in-sample {exact:.4f}, next-half {exact_next:.4f}; "
        f"{trace.groupby(KEYS).ngroups:,} distinct pairs)"
    )
    for capacity in (10_000, 20_000, 40_000, 1 << 16):
        sketch = SpaceSaving(capacity, arity=2)
        sketch.update_batch([trace[k].to_numpy(dtype=object) for k in KEYS])
        size = len(sketch.to_bytes())
        in_sample = fit(trace, topology, 0, capacity=capacity).report_.optimized.locality
        nxt = fit(first, topology, 0, capacity=capacity).evaluate(second).optimized.locality
        print(
            f"  capacity {capacity:>6,} ({size / 2**20:.1f} MB serialized): in-sample {in_sample:.4f} "
            f"({in_sample / exact:.1%} of exact), next-half {nxt:.4f} ({nxt / exact_next:.1%} of exact)"
        )
    np.seterr(all="ignore")


if __name__ == "__main__":
    main()
