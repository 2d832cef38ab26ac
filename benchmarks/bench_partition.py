"""METIS time and edge cut on key graphs of 1e4 .. 1e6 edges into 6 and 48 parts, and locality vs hash.

Graphs are random bipartite power-law key graphs like feasibility.md's: left
keys Zipf(1.0) over m/5 ids, right keys Zipf(0.8) over m/2 ids, deduplicated
to m distinct edges, edge weight min(Zipf(2), 1000) (a pair count), vertex
weight its weighted degree (its load). For each size and part count it
prints METIS k-way and recursive bisection (time, cut share, balance of the
summed load), then the whole optimizer (METIS with its adaptive cuts, per-operator
placement and repair, tables): its time, the graph locality it keeps, the
per-operator imbalance, beside hash routing's locality on the same graph.

    .venv/bin/python benchmarks/bench_partition.py                  # 1e4, 1e5, 1e6 edges; 6 and 48 parts
    .venv/bin/python benchmarks/bench_partition.py --edges 10000    # quick
    .venv/bin/python benchmarks/bench_partition.py --edges 10000,100000,1000000 --parts 6,48 --cuts 1,2,4,8
    .venv/bin/python benchmarks/bench_partition.py --memory --edges 100000,1000000,10000000 --parts 48
    .venv/bin/python benchmarks/bench_partition.py --trace ira_troll_hashtags --parts 6,48 --cuts 1,2,4,8

``--memory`` runs each size in a fresh process and prints the generator's peak
RSS apart from the optimizer's (the high-water mark is reset once the graph is
built, so the optimizer's peak includes the graph it holds). ``--trace`` sweeps
the cuts on a dataset card: learned on its first half, judged on the second.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from locality.datasets.synthetic import zipf_weights  # noqa: E402
from locality.graph import build_key_graph  # noqa: E402
from locality.optimizer import make_fallbacks, optimize  # noqa: E402
from locality.partition import partition_key_graph  # noqa: E402
from locality.topology import Topology  # noqa: E402

OPS = ["left", "right"]


def power_law_graph(m: int, seed: int = 1):
    return build_key_graph(OPS, [power_law_pairs(m, seed)])


def power_law_pairs(m: int, seed: int = 1) -> pd.DataFrame:
    """The pair counts of :func:`power_law_graph`: ``m`` distinct (left, right) pairs with their weights."""
    rng = np.random.default_rng(seed)
    n_left, n_right = max(m // 5, 10), max(m // 2, 10)
    p_left, p_right = zipf_weights(n_left, 1.0), zipf_weights(n_right, 0.8)
    codes = np.empty(0, dtype=np.int64)  # distinct pairs as left * n_right + right, in the order first drawn
    while codes.size < m:
        batch = 2 * (m - codes.size) + 1000
        left = rng.choice(n_left, size=batch, p=p_left)
        right = rng.choice(n_right, size=batch, p=p_right)
        drawn = left.astype(np.int64) * n_right + right
        _, first = np.unique(drawn, return_index=True)
        fresh = drawn[np.sort(first)]
        fresh = fresh[~np.isin(fresh, codes)]
        codes = np.concatenate([codes, fresh[: m - codes.size]])
    codes = np.sort(codes)
    edges = np.stack([codes // n_right, codes % n_right], axis=1)
    weights = np.minimum(rng.zipf(2.0, size=m), 1000).astype(float)
    return pd.DataFrame({"key0": edges[:, 0], "key1": edges[:, 1], "weight": weights})


def hash_locality(graph, topology, fallbacks) -> float:
    servers = {
        op: topology.instance_servers(op)[fallbacks[op].instances_of(graph.keys[op].to_numpy(dtype=object))]
        for op in OPS
    }
    vertex_server = np.concatenate([servers[op] for op in OPS])
    same = vertex_server[graph.src] == vertex_server[graph.dst]
    return float(graph.edge_weight[same].sum() / graph.edge_weight.sum())


def summed_balance(graph, parts, k) -> float:
    loads = np.bincount(parts, weights=graph.vertex_weight, minlength=k)
    return float(loads.max() / loads.mean())


def peak_mb() -> float:
    """Peak resident memory of this process so far (run one size per process to read one size's peak)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _vm_hwm_mb() -> float | None:
    """Peak resident memory since the last :func:`_reset_peak` (Linux VmHWM), None where unreadable."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM"))
    except (OSError, StopIteration):
        return None


def _reset_peak() -> bool:
    """Start a new peak-RSS window (Linux: writing 5 to clear_refs resets VmHWM to the current RSS)."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def memory_run(m: int, k: int, alpha: float, n_cuts: int | None) -> dict:
    """One size in this process: the generator's peak, then the optimizer's peak and time on its own.

    The optimizer's peak is measured from a reset high-water mark with the graph
    already held, so it is what a driver holding the graph needs for ``optimize``.
    """
    started = time.perf_counter()
    graph = power_law_graph(m)
    generated = time.perf_counter() - started
    gc.collect()
    row = {"edges": m, "vertices": graph.n_vertices, "parts": k, "generator s": round(generated, 1)}
    row["generator peak MB"] = round(_vm_hwm_mb() or peak_mb())
    row["graph held MB"] = round(psutil.Process().memory_info().rss / 2**20)
    reset = _reset_peak()
    topology = Topology.uniform(OPS, k)
    fallbacks = make_fallbacks(topology)
    started = time.perf_counter()
    result = optimize(graph, topology, fallbacks, alpha=alpha, n_cuts=n_cuts)
    row["optimize s"] = round(time.perf_counter() - started, 1)
    row["metis s"] = round(result.partition.metis_seconds, 1)
    row["ncuts"] = result.partition.n_cuts
    row["optimizer peak MB"] = round(_vm_hwm_mb() if reset else peak_mb())
    row["locality"] = round(result.placement.locality, 4)
    row["hash locality"] = round(hash_locality(graph, topology, fallbacks), 4)
    row["imbalance"] = "/".join(f"{v:.3f}" for v in result.placement.imbalance.values())
    return row


def sweep_cuts(graph, parts: list[int], cuts: list[int]) -> list[dict]:
    """METIS seconds and graph locality for each ``ncuts`` (the cut-quality-per-second trade)."""
    rows = []
    for k in parts:
        topology = Topology.uniform(OPS, k)
        for n_cuts in cuts:
            part = partition_key_graph(graph, topology, n_cuts=n_cuts)
            row = {"edges": graph.n_edges, "parts": k, "ncuts": n_cuts, "metis s": round(part.metis_seconds, 2)}
            row["graph locality"] = round(part.locality, 4)
            rows.append(row)
            print(pd.DataFrame([row]).to_string(index=False, header=len(rows) == 1), flush=True)
    return rows


def sweep_cuts_trace(name: str, parts: list[int], cuts: list[int], alpha: float) -> list[dict]:
    """The same trade on a real card: learned on its first half, next-half locality judged on the second."""
    from locality.analysis import split_trace
    from locality.counts import count_keys
    from locality.datasets import load
    from locality.evaluation import evaluate

    trace = load(name)
    train, test = split_trace(trace.frame, 0.5)
    graph = count_keys(train, trace.keys).graph()
    rows = []
    for k in parts:
        topology = Topology.uniform(trace.keys, k)
        fallbacks = make_fallbacks(topology)
        for n_cuts in cuts:
            part = partition_key_graph(graph, topology, alpha=alpha, n_cuts=n_cuts)
            config = optimize(graph, topology, fallbacks, alpha=alpha, partition=part).config
            row = {"trace": name, "edges": graph.n_edges, "parts": k, "ncuts": n_cuts}
            row["metis s"] = round(part.metis_seconds, 2)
            row["graph locality"] = round(part.locality, 4)
            row["next-half locality"] = round(evaluate(test, config).optimized.locality, 4)
            rows.append(row)
            print(pd.DataFrame([row]).to_string(index=False, header=len(rows) == 1), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", default="10000,100000,1000000")
    parser.add_argument("--parts", default="6,48")
    parser.add_argument("--alpha", type=float, default=1.03)
    parser.add_argument("--cuts", help="instead: METIS time and graph locality for these ncuts (e.g. 1,2,4,8)")
    parser.add_argument(
        "--memory",
        action="store_true",
        help="instead: each size in a fresh process, the optimizer's time and peak RSS apart from the generator's",
    )
    parser.add_argument("--ncuts", type=int, help="with --memory: METIS cuts (default: the optimizer's own)")
    parser.add_argument("--repeat", type=int, default=1, help="with --memory: runs per size (fresh process each)")
    parser.add_argument("--trace", help="with --cuts: a dataset card (e.g. ira_troll_hashtags) instead of --edges")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # m,k: the child process of --memory
    args = parser.parse_args()
    if args.one:
        m, k = (int(x) for x in args.one.split(","))
        print(json.dumps(memory_run(m, k, args.alpha, args.ncuts)))
        return
    rows = []
    if args.cuts and args.trace:
        parts, cuts = [int(k) for k in args.parts.split(",")], [int(c) for c in args.cuts.split(",")]
        for name in args.trace.split(","):
            rows += sweep_cuts_trace(name, parts, cuts, args.alpha)
        print()
        print(pd.DataFrame(rows).to_string(index=False))
        return
    if args.memory:
        for m in [int(x) for x in args.edges.split(",")]:
            for k in [int(x) for x in args.parts.split(",")]:
                for _ in range(args.repeat):
                    command = [sys.executable, __file__, "--one", f"{m},{k}", "--alpha", str(args.alpha)]
                    if args.ncuts is not None:
                        command += ["--ncuts", str(args.ncuts)]
                    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
                    rows.append(json.loads(out.strip().splitlines()[-1]))
                    print(pd.DataFrame(rows[-1:]).to_string(index=False), flush=True)
        print()
        print(pd.DataFrame(rows).to_string(index=False))
        return
    for m in [int(x) for x in args.edges.split(",")]:
        started = time.perf_counter()
        graph = power_law_graph(m)
        build = time.perf_counter() - started
        print(
            f"graph: {m:,} edges, {graph.n_vertices:,} vertices (built in {build:.1f} s; "
            f"process peak {peak_mb():,.0f} MB)",
            flush=True,
        )
        if args.cuts:
            rows += sweep_cuts(graph, [int(k) for k in args.parts.split(",")], [int(c) for c in args.cuts.split(",")])
            continue
        for k in [int(x) for x in args.parts.split(",")]:
            topology = Topology.uniform(OPS, k)
            fallbacks = make_fallbacks(topology)
            lower_bound = graph.vertex_weight.max() / (graph.vertex_weight.sum() / k)
            row = {"edges": m, "vertices": graph.n_vertices, "parts": k, "load LB": round(lower_bound, 3)}
            for name, recursive in (("kway", False), ("rb", True)):
                part = partition_key_graph(graph, topology, alpha=args.alpha, recursive=recursive, n_cuts=1)
                row[f"{name} s"] = round(part.metis_seconds, 3)
                row[f"{name} cut"] = round(part.edge_cut / graph.edge_weight.sum(), 4)
                row[f"{name} balance"] = round(summed_balance(graph, part.server_of_vertex, k), 3)
            started = time.perf_counter()
            result = optimize(graph, topology, fallbacks, alpha=args.alpha)
            row["optimize s"] = round(time.perf_counter() - started, 2)
            row["metis s"] = round(result.partition.metis_seconds, 2)
            row["ncuts"] = result.partition.n_cuts
            row["locality"] = round(result.placement.locality, 4)
            row["hash locality"] = round(hash_locality(graph, topology, fallbacks), 4)
            row["imbalance"] = "/".join(f"{v:.3f}" for v in result.placement.imbalance.values())
            row["hot keys"] = len(result.partition.hot_keys)
            row["peak MB"] = round(peak_mb())
            rows.append(row)
            print(pd.DataFrame([row]).to_string(index=False), flush=True)
    print()
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
