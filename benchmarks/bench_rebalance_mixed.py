"""Benchmark of the mixed hash + routing-table rebalancers against Fang et al. (HPDC 2017).

Three targets, each printed as a table (results recorded in results_rebalance_mixed.md):

(a) migration: Mixed reaches theta_max moving at most a third of MinTable's state (paper, Fig. 9: MinTable
    moves 3x more), over K x N_D x w;
(b) speed: Mixed plans in under 1 s at K = 10**6, N_D = 40, theta_max = 0.02 (paper, Fig. 9a), beside
    baselines timed in the same run (the hash-only imbalance check and the Simple LPT greedy);
(c) compact: Mixed on the compact representation at R = 8 plans at least 5x faster than on the full key
    space with a load-estimation error of at most 1% (paper, Fig. 11: 10x, <= 1%).

Every rebalancer runs a chain: the plan for interval i is the current assignment of interval i + 1; the
first ``--warmup`` intervals are left out of the averages. Everything is seeded.

    python benchmarks/bench_rebalance_mixed.py                 # all three, the recorded settings
    python benchmarks/bench_rebalance_mixed.py --section b     # one target
    python benchmarks/bench_rebalance_mixed.py --quick         # small sizes, a smoke run
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable, Sequence

import numpy as np

from locality.datasets.skew import SkewWorkload, skew_workload
from locality.imbalance import theta
from locality.rebalance import rebalance
from locality.rebalance._base import instance_loads
from locality.rebalance.compact import compress, mixed_compact


def chain(workload: SkewWorkload, method: str, args: argparse.Namespace, theta_max: float) -> list[dict]:
    """Run ``method`` over every interval, each plan becoming the next current assignment."""
    rows, current = [], None
    for i in range(workload.n_intervals):
        p = workload.problem(i, current, theta_max=theta_max, table_cap=args.cap)
        options = {"beta": args.beta} if method in ("minmig", "mixed", "mixed_bf") else {}
        started = time.perf_counter()
        r = rebalance(p, method, **options)
        wall = time.perf_counter() - started
        rows.append(
            {
                "interval": i,
                "theta_before": r.theta_before,
                "theta_after": r.theta_after,
                "reached": r.theta_after <= theta_max,
                "migration": r.migration_cost,
                "floor": migration_floor(p),
                "table": r.table_size,
                "seconds": wall,
                "problem": p,
            }
        )
        current = r.assignment
    return rows[args.warmup :]


def migration_floor(p) -> float:
    """Least state any plan must move when state = cost (w = 1): each instance's load above L_max.

    Only a bound for w = 1; with w > 1 a key's state is not its cost."""
    loads = instance_loads(p.loads, p.current, p.n_instances)
    over = np.clip(loads - (1 + p.theta_max) * loads.mean(), 0, None).sum()
    return float(over / p.state_sizes.sum())


def mean_of(rows: list[dict], key: str) -> float:
    return float(np.mean([row[key] for row in rows]))


def print_table(title: str, header: Sequence[str], lines: list[Sequence[object]]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for line in lines:
        print("| " + " | ".join(str(x) for x in line) + " |")


def timed(fn: Callable[[], object], repeat: int = 1) -> float:
    best = np.inf
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return float(best)


def section_a(args: argparse.Namespace) -> None:
    lines = []
    for k in args.keys:
        for n in args.instances:
            for w in args.windows:
                workload = skew_workload(
                    k, args.intervals + args.warmup, n, zipf=args.zipf, fluctuation=args.fluctuation,
                    window=w, seed=args.seed,
                )  # fmt: skip
                methods = ["mixed", "mintable"] + (["mixed_bf"] if k <= args.bf_max_keys else [])
                res = {m: chain(workload, m, args, args.theta) for m in methods}
                mix, tab = res["mixed"], res["mintable"]
                ratio = mean_of(tab, "migration") / max(mean_of(mix, "migration"), 1e-12)
                hot = any(np.any(r["problem"].loads > (1 + args.theta) * r["problem"].loads.sum() / n) for r in mix)
                bf = res.get("mixed_bf")
                lines.append(
                    [
                        f"{k:.0e}",
                        n,
                        w,
                        f"{mean_of(mix, 'theta_before'):.2f}",
                        f"{100 * mean_of(mix, 'reached'):.0f}% / {100 * mean_of(tab, 'reached'):.0f}%",
                        f"{100 * mean_of(mix, 'migration'):.2f}",
                        f"{100 * mean_of(mix, 'floor'):.2f}" if w == 1 else "-",
                        f"{100 * mean_of(tab, 'migration'):.2f}",
                        f"**{ratio:.1f}x**",
                        f"{100 * mean_of(bf, 'migration'):.2f}" if bf else "-",
                        f"{mean_of(mix, 'table'):.0f} / {mean_of(tab, 'table'):.0f}",
                        f"{mean_of(mix, 'seconds'):.3f} / {mean_of(tab, 'seconds'):.3f}",
                        "yes" if hot else "no",
                    ]
                )
                print(f"  (a) K={k} N_D={n} w={w} done", flush=True)
    print_table(
        f"(a) migration, theta_max={args.theta}, A_max={args.cap}, z={args.zipf}, f={args.fluctuation}, "
        f"beta={args.beta}; mean over {args.intervals} intervals after {args.warmup} warm-up",
        [
            "K",
            "N_D",
            "w",
            "theta before",
            "reached Mixed / MinTable",
            "Mixed migr. %",
            "floor (w=1) %",
            "MinTable migr. %",
            "MinTable / Mixed",
            "MixedBF migr. %",
            "table Mixed / MinTable",
            "plan s Mixed / MinTable",
            "hot key",
        ],
        lines,
    )


def section_b(args: argparse.Namespace) -> None:
    k, n, th = args.speed_keys, args.speed_instances, args.speed_theta
    workload = skew_workload(
        k, args.intervals + args.warmup, n, zipf=args.zipf, fluctuation=args.fluctuation, window=1, seed=args.seed
    )
    rows = chain(workload, "mixed", args, th)
    samples = {"hash-only check": [], "Simple (LPT)": [], "MinTable": [], "Mixed": []}
    for row in rows:
        p = row["problem"]
        samples["hash-only check"].append(
            timed(lambda p=p: theta(instance_loads(p.loads, p.fallback, p.n_instances)), repeat=3)
        )
        samples["Simple (LPT)"].append(timed(lambda p=p: rebalance(p, "simple")))
        samples["MinTable"].append(timed(lambda p=p: rebalance(p, "mintable")))
        samples["Mixed"].append(row["seconds"])
    mixed_mean = float(np.mean(samples["Mixed"]))
    lines = [
        [name, f"{np.mean(v):.3f}", f"{np.median(v):.3f}", f"{np.max(v):.3f}", f"{mixed_mean / np.mean(v):.2f}"]
        for name, v in samples.items()
    ]
    print_table(
        f"(b) planning time, K={k:.0e}, N_D={n}, theta_max={th}, A_max={args.cap}, w=1; "
        f"{len(rows)} intervals after {args.warmup} warm-up; Mixed reached theta_max in "
        f"{100 * mean_of(rows, 'reached'):.0f}% (table {mean_of(rows, 'table'):.0f})",
        ["planner", "mean s", "median s", "max s", "Mixed time / this"],
        lines,
    )


def section_c(args: argparse.Namespace) -> None:
    for setting in args.compact_settings:
        n, th = setting.split(":")
        compact_once(args, args.compact_keys, int(n), float(th))


def compact_once(args: argparse.Namespace, k: int, n: int, th: float) -> None:
    workload = skew_workload(
        k, args.intervals + args.warmup, n, zipf=args.zipf, fluctuation=args.fluctuation, window=1, seed=args.seed
    )
    rows = chain(workload, "mixed", args, th)
    variants = [(r, "mean") for r in args.degrees] + [(8, "representative")]
    stats = {v: {"build": [], "plan": [], "error": [], "reached": [], "groups": [], "migration": []} for v in variants}
    full = [row["seconds"] for row in rows]
    simple_times = []
    for row in rows:
        p = row["problem"]
        simple_times.append(timed(lambda p=p: rebalance(p, "simple")))
        for degree, values in variants:
            rep = compress(p, degree, values=values)
            started = time.perf_counter()
            out = mixed_compact(p, degree, beta=args.beta, representation=rep)
            s = stats[(degree, values)]
            s["plan"].append(time.perf_counter() - started)
            s["build"].append(rep.build_seconds)
            s["error"].append(out.load_error)
            s["reached"].append(out.result.theta_after <= th)
            s["groups"].append(out.n_groups)
            s["migration"].append(out.result.migration_cost)
    full_mean = float(np.mean(full))
    lines = [
        [
            "full key space",
            f"{k}",
            f"{full_mean:.3f}",
            "-",
            "1.0x",
            "0",
            f"{100 * mean_of(rows, 'reached'):.0f}%",
            f"{100 * mean_of(rows, 'migration'):.2f}",
        ]
    ]
    for (degree, values), s in stats.items():
        plan = float(np.mean(s["plan"]))
        lines.append(
            [
                f"R={degree} ({values})",
                f"{np.mean(s['groups']):.0f}",
                f"{plan:.3f}",
                f"{np.mean(s['build']):.3f}",
                f"**{full_mean / plan:.1f}x** ({full_mean / (plan + np.mean(s['build'])):.2f}x with build)",
                f"{100 * np.mean(s['error']):.3f} (max {100 * np.max(s['error']):.3f})",
                f"{100 * np.mean(s['reached']):.0f}%",
                f"{100 * np.mean(s['migration']):.2f}",
            ]
        )
    print_table(
        f"(c) compact representation, K={k:.0e}, N_D={n}, theta_max={th}, A_max={args.cap}, w=1; "
        f"{len(rows)} intervals after {args.warmup} warm-up; Simple (LPT) baseline {np.mean(simple_times):.3f} s",
        ["planner", "keys / groups", "plan s", "build s", "speed-up vs full", "load error %", "reached", "migr. %"],
        lines,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--section", nargs="+", choices=["a", "b", "c"], default=["a", "b", "c"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--intervals", type=int, default=10, help="measured intervals per chain")
    parser.add_argument("--warmup", type=int, default=2, help="intervals run first and left out")
    parser.add_argument("--zipf", type=float, default=0.85)
    parser.add_argument("--fluctuation", type=float, default=1.0)
    parser.add_argument("--theta", type=float, default=0.08, help="theta_max of (a)")
    parser.add_argument("--beta", type=float, default=1.5)
    parser.add_argument("--cap", type=int, default=3000, help="A_max")
    parser.add_argument("--keys", type=float, nargs="+", default=[1e4, 1e5, 1e6])
    parser.add_argument("--instances", type=int, nargs="+", default=[5, 15, 40])
    parser.add_argument("--windows", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--bf-max-keys", type=float, default=1e4, help="run MixedBF in (a) up to this K")
    parser.add_argument("--speed-keys", type=float, default=1e6)
    parser.add_argument("--speed-instances", type=int, default=40)
    parser.add_argument("--speed-theta", type=float, default=0.02)
    parser.add_argument("--compact-keys", type=float, default=1e6)
    parser.add_argument(
        "--compact-settings", nargs="+", default=["20:0.08", "40:0.02"], help="N_D:theta_max pairs of (c)"
    )
    parser.add_argument("--degrees", type=int, nargs="+", default=[1, 8, 64, 256])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run in seconds")
    args = parser.parse_args(argv)
    if args.quick:
        args.keys, args.instances, args.windows = [1e4], [5, 15], [1, 5]
        args.intervals, args.warmup = 4, 1
        args.speed_keys = args.compact_keys = 1e5
    args.keys = [int(k) for k in args.keys]
    args.speed_keys, args.compact_keys, args.bf_max_keys = (
        int(args.speed_keys),
        int(args.compact_keys),
        int(args.bf_max_keys),
    )
    print(f"# bench_rebalance_mixed, {time.strftime('%Y-%m-%d %H:%M')}, Python {platform.python_version()}, "
          f"numpy {np.__version__}, {platform.machine()}")  # fmt: skip
    for name in args.section:
        {"a": section_a, "b": section_b, "c": section_c}[name](args)


if __name__ == "__main__":
    main()
