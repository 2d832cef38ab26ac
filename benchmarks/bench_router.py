"""Router lookups per second and memory per entry, beside a plain Python dict of the same entries.

For each table size (string keys like hashtags, then int64 keys) the script
publishes one table into a fresh store, opens a :class:`locality.router.Router`
on it, and times, in the same run:

- the baseline: a Python dict of the same entries, ``[d[k] for k in keys]``;
- ``Router.route_many`` on the same keys as a list, as an Arrow array (strings)
  or an int64 numpy array (ints), all of them table keys;
- ``Router.route_many`` on a batch where half the keys have no entry (they
  take the fallback hash, Kafka's murmur2 here), beside the dict with the
  fallback's ``instance_of`` for each key it lacks;
- ``Router.route`` one key at a time, and the dict's ``d[k]`` in the same loop shape.

Times are CPU times of this process (``time.process_time``), the least of
three runs: on shared cores, time spent waiting for a core is not the code's.
Memory per entry is what building the structure allocates divided by the
entries (tracemalloc, which sees Python objects, numpy arrays and pandas'
hash tables; keys included), for the dict and for the router's loaded
snapshot (entries, dict, int64 hash index). Every answer of the router is checked against the dict first.

Usage::

    python benchmarks/bench_router.py [--sizes 100000,1000000] [--instances 48] [--seed 0]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from locality.hashing import make_fallback
from locality.router import Router
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore
from locality.topology import Topology


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """Least CPU time of ``repeat`` calls (the cores are shared: waiting for one is not the code's cost)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        result = fn()
        best = min(best, time.process_time() - start)
    return best, result


def make_keys(kind: str, n: int, rng: np.random.Generator) -> list:
    """``n`` distinct keys: hashtag-like strings (some non-ASCII) or int64 ids."""
    if kind == "int":
        return np.unique(rng.integers(0, 2**62, size=n + n // 100))[:n].tolist()
    ids = rng.permutation(20 * n)[:n]
    return [f"#tag{i}é" if i % 7 == 0 else f"#tag{i}" for i in ids.tolist()]


def allocated(build: Callable[[], Any]) -> tuple[int, Any]:
    """Bytes ``build()`` leaves allocated (tracemalloc), and what it built."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        built = build()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, built
    finally:
        tracemalloc.stop()


def bench(kind: str, n: int, n_instances: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    fallback = make_fallback("kafka", n_instances)
    ops = ["op", "other"]

    def entries() -> tuple[list, list[int]]:
        keys = make_keys(kind, n, np.random.default_rng(seed))
        instances = (fallback.instances_of(keys) + 1 + np.arange(n) % (n_instances - 1)) % n_instances
        return keys, instances.tolist()

    dict_bytes, table = allocated(lambda: dict(zip(*entries())))
    keys = list(table)
    store = ConfigStore(tempfile.mkdtemp(prefix="bench-router-"))
    tables = {"op": RoutingTable("op", fallback, pd.Series(table)), "other": RoutingTable("other", fallback)}
    store.publish(RoutingConfiguration(Topology.uniform(ops, 6, n_instances // 6), tables), fingerprint="bench")
    del tables
    router_bytes, router = allocated(lambda: Router(store.root))

    # fresh key objects, as a job decoding records has: not the very objects the dict holds (which
    # a dict finds by identity, without comparing the strings)
    query = pa.array([keys[i] for i in rng.permutation(n)]).to_pylist()
    column = pa.array(query) if kind == "str" else np.array(query, dtype=np.int64)
    others = make_keys(kind, 2 * n, np.random.default_rng(seed + 1))
    half = query[: n // 2] + [k for k in others if k not in table][: n - n // 2]
    expected = np.array([table[k] for k in query])
    assert (router.route_many("op", query) == expected).all() and (router.route_many("op", column) == expected).all()
    assert [router.route("op", k) for k in query[:1000]] == expected[:1000].tolist()

    t_dict, _ = best_of(3, lambda: np.array([table[k] for k in query]))
    t_list, _ = best_of(3, lambda: router.route_many("op", query))
    t_column, _ = best_of(3, lambda: router.route_many("op", column))
    t_half, _ = best_of(3, lambda: router.route_many("op", half))
    t_dict_half, _ = best_of(1, lambda: [table[k] if k in table else fallback.instance_of(k) for k in half])
    scalar = query[: min(n, 200_000)]
    t_dict_one, _ = best_of(3, lambda: [table[k] for k in scalar])
    t_route_one, _ = best_of(3, lambda: [router.route("op", k) for k in scalar])
    return {
        "dict M/s": n / t_dict / 1e6,
        "route_many list M/s": n / t_list / 1e6,
        "route_many column M/s": n / t_column / 1e6,
        "route_many 50% misses M/s": n / t_half / 1e6,
        "dict + fallback 50% misses M/s": n / t_dict_half / 1e6,
        "route M/s": len(scalar) / t_route_one / 1e6,
        "dict one-by-one M/s": len(scalar) / t_dict_one / 1e6,
        "dict B/entry": dict_bytes / n,
        "router B/entry": router_bytes / n,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--instances", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    header = None
    for n in map(int, args.sizes.split(",")):
        for kind in ("str", "int"):
            row = {"keys": kind, "entries": f"{n:,}", **bench(kind, n, args.instances, args.seed)}
            row["list / dict"] = row["route_many list M/s"] / row["dict M/s"]
            row["column / dict"] = row["route_many column M/s"] / row["dict M/s"]
            if header is None:
                header = list(row)
                print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
            cells = (f"{v:,.2f}" if isinstance(v, float) else v for v in row.values())
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
