"""Keys per second of the fallback hashes: ``instance_of`` in a loop vs. ``instances_of``.

Keys: distinct hashtag-like strings (3 to 30 characters, a few non-ASCII) and
uniform int64 values, both seeded. Every run also checks that both paths agree.

Usage::

    python benchmarks/bench_hashing.py [--strings 200000] [--ints 1000000] [--instances 48] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from locality.hashing import ENGINES, FallbackHash, make_fallback

ALPHABET = list("abcdefghijklmnopqrstuvwxyz0123456789_") + ["é", "ü", "ñ", "中", "🔥"]
WEIGHTS = np.array([1.0] * 37 + [0.02] * 5)


def hashtags(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` distinct strings ``#...`` of 3 to 30 characters."""
    seen: dict[str, None] = {}
    p = WEIGHTS / WEIGHTS.sum()
    while len(seen) < n:
        for length in rng.integers(2, 30, size=n - len(seen), endpoint=True):
            seen["#" + "".join(rng.choice(ALPHABET, size=length, p=p))] = None
    return list(seen)


def best_of(repeat: int, fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """Shortest wall time of ``repeat`` calls of ``fn(*args)``, and the result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn(*args)
        best = min(best, time.perf_counter() - start)
    return best, result


def scalar_loop(fb: FallbackHash, keys: list[Any]) -> list[int]:
    return [fb.instance_of(k) for k in keys]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strings", type=int, default=200_000)
    parser.add_argument("--ints", type=int, default=1_000_000)
    parser.add_argument("--instances", type=int, default=48)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    strings = hashtags(args.strings, rng)
    ints = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, size=args.ints, dtype=np.int64)
    inputs = [
        ("str list", strings, strings),
        ("str arrow", strings, pa.array(strings)),
        ("int64 numpy", ints.tolist(), ints),
    ]
    header = f"{'engine':<7} {'keys':<12} {'n':>9} {'scalar keys/s':>14} {'vector keys/s':>14} {'speedup':>8}"
    print(header)
    print("-" * len(header))
    for engine in ENGINES:
        fb = make_fallback(engine, args.instances)
        scalar: dict[int, tuple[float, list[int]]] = {}  # one scalar run per key list
        for name, as_list, batch in inputs:
            if id(as_list) not in scalar:
                seconds, result = best_of(1, scalar_loop, fb, as_list)
                scalar[id(as_list)] = (len(as_list) / seconds, result)
            scalar_rate, expected = scalar[id(as_list)]
            seconds, result = best_of(args.repeat, fb.instances_of, batch)
            if result.tolist() != expected:
                raise SystemExit(f"{engine}: vectorized and scalar results differ on {name}")
            rate = len(as_list) / seconds
            row = f"{engine:<7} {name:<12} {len(as_list):>9} {scalar_rate:>14,.0f} {rate:>14,.0f}"
            print(f"{row} {rate / scalar_rate:>7.1f}x")


if __name__ == "__main__":
    main()
