"""The online step from the version in force (``incremental``) beside today's full re-partition.

Two measures, each mode timed in the same run (CPU seconds of the step,
``reconfigure``, with wall-clock beside):

- ``--trace``: the online job's loop every ``--every`` (default 30 minutes)
  over ``--days`` of a dataset card, in the library: the window's counts are
  blended into the statistics (the job's decay, 0.85 per week, spread over
  the runs of a week; min weight 0.1, limited to the sketch capacity, as the
  job's ``statistics/``), the step reconfigures from the
  version in force, :func:`~locality.reconfiguration.decide` publishes or not
  (min gain 0.1, max imbalance 1.10: the job's defaults), and the rows until
  the next run are routed by the version then in force (next-window
  locality, judged on data the step did not see). A third schedule runs
  the incremental step and a full one every ``--full-every`` (default a
  day). The schedules share the statistics; each keeps its own version in
  force. The first configuration is the offline job's on the ``--warmup``
  before the span. ``--seeds`` runs the loop once per METIS seed: a
  schedule's locality follows its path (what each run published), and the
  spread over seeds is how far two schedules lie apart by chance.
- ``--edges``: one step on a generated power-law key graph of that many edges
  (``bench_partition.py``'s) after a window that changed a small part of it
  (``--change``: that share of the pairs redrawn, and another such share
  re-weighted), from the configuration the unchanged graph was given: time,
  graph locality and the state the plan moves. One fresh process per size.

    .venv/bin/python benchmarks/bench_online_incremental.py --seeds 0,2,3 \
        --trace ira_troll_hashtags --start 2016-09-12
    .venv/bin/python benchmarks/bench_online_incremental.py --seeds 0,2,3 \
        --trace nycflights13_tailnum_dest --start 2013-06-03
    .venv/bin/python benchmarks/bench_online_incremental.py --edges 1000000,10000000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_partition import OPS, power_law_pairs  # noqa: E402

from locality.counts import blend, count_keys  # noqa: E402
from locality.datasets.catalog import load  # noqa: E402
from locality.defaults import (  # noqa: E402
    DEFAULT_ALPHA,
    DEFAULT_CAPACITY,
    DEFAULT_DECAY,
    DEFAULT_MAX_IMBALANCE,
    DEFAULT_MIN_BLENDED_WEIGHT,
)
from locality.evaluation import estimate_from_counts, evaluate  # noqa: E402
from locality.graph import build_key_graph  # noqa: E402
from locality.optimizer import make_fallbacks, optimize  # noqa: E402
from locality.reconfiguration import decide, reconfigure  # noqa: E402
from locality.topology import Topology  # noqa: E402

MODES = {"full": False, "incremental": True}


def timed_step(incremental: bool, *args, **kwargs):
    """``reconfigure`` with its CPU and wall-clock seconds."""
    started, cpu = time.perf_counter(), time.process_time()
    step = reconfigure(*args, incremental=incremental, **kwargs)
    return step, time.process_time() - cpu, time.perf_counter() - started


def trace_loop(
    name: str,
    start: str,
    days: float,
    every: str,
    warmup: str,
    servers: int,
    alpha: float,
    full_every: str = "1D",
    seed: int = 0,
) -> list[dict]:
    """The online job's loop over ``days`` from ``start`` with METIS's ``seed``; one row per run and mode."""
    card = load(name)
    keys = list(card.keys)
    frame = card.frame.dropna(subset=keys).sort_values("ts", kind="stable")
    first = pd.Timestamp(start, tz="UTC")
    step_length = pd.Timedelta(every)
    decay = DEFAULT_DECAY ** (step_length / pd.Timedelta("7D"))
    topology = Topology.uniform(keys, servers)
    fallbacks = make_fallbacks(topology)
    history = count_keys(frame[(frame.ts >= first - pd.Timedelta(warmup)) & (frame.ts < first)][keys], keys)
    first_config = optimize(history.graph(), topology, fallbacks, alpha=alpha, seed=seed).config
    schedules = {**MODES, f"incremental, full every {full_every}": None}  # None: full every full_period-th run
    full_period = max(1, round(pd.Timedelta(full_every) / step_length))
    in_force = dict.fromkeys(schedules, first_config)
    rows = []
    ticks = pd.date_range(first, first + pd.Timedelta(days=days), freq=step_length, inclusive="left")
    for i, tick in enumerate(ticks):
        window = frame[(frame.ts >= tick - step_length) & (frame.ts < tick)][keys]
        following = frame[(frame.ts >= tick) & (frame.ts < tick + step_length)][keys]
        if len(window):
            counts = count_keys(window, keys)
            history = blend(
                [history, counts],
                windows=None,
                decay=decay,
                min_weight=DEFAULT_MIN_BLENDED_WEIGHT,
                limit=DEFAULT_CAPACITY,
            )
            graph = history.graph()
            state = {op: counts.key_load(op) for op in keys}
        for mode, incremental in schedules.items():
            if incremental is None:
                incremental = i % full_period != 0
            row = {"trace": name, "seed": seed, "tick": i, "mode": mode, "edges": graph.n_edges if len(window) else 0}
            if len(window):
                current = in_force[mode]
                step, cpu, wall = timed_step(
                    incremental, graph, topology, current, fallbacks, alpha=alpha, state=state, seed=seed
                )
                verdict = decide(
                    estimate_from_counts(current, counts, len(window)).optimized,
                    estimate_from_counts(step.config, counts, len(window)).optimized,
                    step.plan,
                    alpha=alpha,
                    max_imbalance=DEFAULT_MAX_IMBALANCE,
                )
                row.update(cpu=cpu, wall=wall, published=verdict.publish)
                row["moved"] = step.plan.cost_share if verdict.publish else 0.0
                if verdict.publish:
                    in_force[mode] = step.config
            if len(following):
                report = evaluate(following, in_force[mode])
                row.update(tuples=len(following), local=report.optimized.locality * len(following))
                row["hash local"] = report.hash.locality * len(following)
            rows.append(row)
        if i % 48 == 0:
            print(f"{name}, seed {seed}: run {i + 1} of {len(ticks)} ({tick})", file=sys.stderr, flush=True)
    return rows


def trace_summary(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    out = []
    for (name, seed, mode), group in frame.groupby(["trace", "seed", "mode"], sort=False):
        ran = group.dropna(subset=["cpu"])
        line = {"trace": name, "seed": seed, "mode": mode, "runs": len(ran), "mean edges": round(ran["edges"].mean())}
        line["next-window locality"] = round(group["local"].sum() / group["tuples"].sum(), 4)
        line["hash"] = round(group["hash local"].sum() / group["tuples"].sum(), 4)
        line["cpu s / run (median, p90)"] = f"{ran['cpu'].median():.3f}, {ran['cpu'].quantile(0.9):.3f}"
        line["wall s / run (median)"] = round(ran["wall"].median(), 3)
        line["published"] = int(ran["published"].sum())
        line["state moved / run"] = round(ran["moved"].mean(), 4)
        out.append(line)
    table = pd.DataFrame(out)
    for index, line in table.iterrows():
        # Run by run (the schedules run the same ticks on the same statistics): the full step's CPU over this one's.
        ran = frame[(frame.trace == line["trace"]) & (frame.seed == line["seed"])].dropna(subset=["cpu"])
        full = ran[ran["mode"] == "full"]["cpu"].to_numpy()
        ratio = full / ran[ran["mode"] == line["mode"]]["cpu"].to_numpy()
        table.loc[index, "full / this cpu (median, p10-p90)"] = (
            f"{np.median(ratio):.1f} ({np.quantile(ratio, 0.1):.1f}-{np.quantile(ratio, 0.9):.1f})"
        )
    return table


def changed_pairs(m: int, change: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pairs of a graph of ``m`` edges, and the same after a window that redrew and re-weighted ``change`` each."""
    before = power_law_pairs(m)
    rng = np.random.default_rng(7)
    after = before.copy()
    n = int(change * m)
    redrawn = rng.choice(m, size=n, replace=False)
    fresh = power_law_pairs(max(n, 10), seed=11).sample(n=n, random_state=3)
    after.loc[redrawn, ["key0", "key1"]] = fresh[["key0", "key1"]].to_numpy() * np.array([7, 3])  # other ids
    reweighted = rng.choice(m, size=n, replace=False)
    after.loc[reweighted, "weight"] = np.minimum(rng.zipf(2.0, size=n), 1000).astype(float)
    return before, after


def one_size(m: int, k: int, alpha: float, change: float) -> list[dict]:
    before, after = changed_pairs(m, change)
    topology = Topology.uniform(OPS, k)
    fallbacks = make_fallbacks(topology)
    old = build_key_graph(OPS, [before])
    current = optimize(old, topology, fallbacks, alpha=alpha).config
    del old, before
    graph = build_key_graph(OPS, [after])
    rows = []
    for mode, incremental in MODES.items():
        for compare in (True, False) if not incremental else (False,):
            step, cpu, wall = timed_step(
                incremental, graph, topology, current, fallbacks, alpha=alpha, compare_unrelabeled=compare
            )
            label = "full (as the job runs it: + unrelabeled cost)" if compare else mode
            result = step.optimization
            rows.append(
                {
                    "edges": m,
                    "parts": k,
                    "change": change,
                    "mode": label,
                    "cpu s": round(cpu, 2),
                    "wall s": round(wall, 2),
                    "metis s": round(result.partition.metis_seconds, 2),
                    "graph locality": round(result.placement.locality, 4),
                    "worst imbalance": round(max(result.placement.imbalance.values()), 3),
                    "state moved": round(step.plan.cost_share, 4),
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", help="dataset cards (comma-separated)")
    parser.add_argument("--start", default="2016-09-12", help="with --trace: the first run (UTC)")
    parser.add_argument("--days", type=float, default=14.0)
    parser.add_argument("--every", default="30min")
    parser.add_argument("--warmup", default="7D", help="with --trace: the offline job's window before --start")
    parser.add_argument("--servers", type=int, default=6)
    parser.add_argument("--full-every", default="1D", help="with --trace: the mixed schedule's full runs")
    parser.add_argument("--seeds", default="0", help="with --trace: METIS seeds, one loop each (comma-separated)")
    parser.add_argument("--edges", help="generated graphs of these sizes (comma-separated)")
    parser.add_argument("--parts", type=int, default=48)
    parser.add_argument("--change", type=float, default=0.02)
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA)
    parser.add_argument("--json", help="also write every run's figures to this file")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_size(args.one, args.parts, args.alpha, args.change)))
        return
    rows = []
    if args.trace:
        for name in args.trace.split(","):
            for seed in [int(x) for x in args.seeds.split(",")]:
                rows += trace_loop(
                    name,
                    args.start,
                    args.days,
                    args.every,
                    args.warmup,
                    args.servers,
                    args.alpha,
                    args.full_every,
                    seed,
                )
        summary = trace_summary(rows)
        print(summary.to_string(index=False))
        if args.seeds != "0":  # path dependence: each seed's decisions lead elsewhere; the spread says how far
            spread = summary.groupby(["trace", "mode"], sort=False)["next-window locality"].agg(["mean", "min", "max"])
            print(spread.round(4).to_string())
    if args.edges:
        for m in [int(x) for x in args.edges.split(",")]:
            command = [sys.executable, __file__, "--one", str(m), "--parts", str(args.parts)]
            command += ["--alpha", str(args.alpha), "--change", str(args.change)]
            out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
            rows += json.loads(out.strip().splitlines()[-1])
            print(pd.DataFrame(rows).to_string(index=False), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
