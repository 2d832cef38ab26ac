"""The Flink switch's down time and heap against the state's size, from runs of ``bench_flink_switch.py --json``.

One point per run and share: the switch's time from the stop request until the job runs again (stop,
rewrite, restart), beside the plain stop-with-savepoint + restart of the same job in the same run (and,
in the runs that made one, a plain restart on the version switched to, its tables loaded); their ratio,
against the goal of 1.5x; and the TaskManager's heap peak during each. The state's size is the
bytes the rewrite read and wrote (every real key's serialized key and count). Series by the job's state
backend and the rewrite (the savepoint's key groups read and written directly; before, Flink's State
Processor API, in a named backend).

Usage::

    PYTHONPATH=. python benchmarks/plot_flink_switch.py benchmarks/results_flink_switch_sizes.json [RUN.json ...]
        [--plot docs/flink_switch_sizes.png]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from matplotlib import colormaps
from matplotlib.ticker import NullFormatter, ScalarFormatter

from locality.plots import figure_png, new_figure

REPO = Path(__file__).resolve().parents[1]
MARKERS = {0.01: "v", 0.1: "o", 0.5: "s"}
#: One colour per series: tab10's (matplotlib's C0-C9), then their light twins, before any repeats.
PALETTE = colormaps["tab20"].colors[::2] + colormaps["tab20"].colors[1::2]


def points(runs: list[dict]) -> dict[str, list[dict]]:
    """Each run's rows by series (``job backend, rewrite``), with the state's size in MB and the switch's down
    time over the plain restart's (``ratio``) and, where the run made one, over the plain restart on the new
    version's (``ratio_after``)."""
    series: dict[str, list[dict]] = {}
    for run in runs:
        name = f"{run['state_backend']} job, {run['rewrite']}"
        for row in run["rows"]:
            down = row["switch"]["running"]
            point = {**row, "mb": row["switch"]["rewritten_bytes"] / 1e6, "ratio": down / row["baseline"]["running"]}
            if "after" in row:  # runs since 2026-12-03 also restart once on the version switched to
                point["ratio_after"] = down / row["after"]["running"]
            series.setdefault(name, []).append(point)
    return series


def plot(runs: list[dict], path: Path) -> None:
    fig = new_figure((15, 5.6))
    down, ratio, heap = fig.subplots(1, 3)
    measures = ((down, lambda part: part["running"]), (heap, lambda part: part["heap_peak"] / 2**20))
    for index, (name, rows) in enumerate(sorted(points(runs).items())):
        colour = PALETTE[index % len(PALETTE)]
        rows = sorted(rows, key=lambda r: r["mb"])
        for row in rows:
            ratio.scatter(row["mb"], row["ratio"], color=colour, marker=MARKERS.get(row["share"], "o"))
            if "ratio_after" in row:
                ratio.scatter(row["mb"], row["ratio_after"], color=colour, marker="x")
        tenth = [r for r in rows if r["share"] == 0.1]
        ratio.plot([r["mb"] for r in tenth], [r["ratio"] for r in tenth], color=colour, lw=0.8)
        for ax, measure in measures:
            for row in rows:
                marker = MARKERS.get(row["share"], "o")
                ax.scatter(row["mb"], measure(row["switch"]), color=colour, marker=marker)
                ax.scatter(row["mb"], measure(row["baseline"]), color=colour, marker=marker, facecolors="none")
                if "after" in row:
                    ax.scatter(row["mb"], measure(row["after"]), color=colour, marker="x")
            tenth = [r for r in rows if r["share"] == 0.1]  # the line joins the sizes at 10% moved
            ax.plot([r["mb"] for r in tenth], [measure(r["switch"]) for r in tenth], color=colour, label=name, lw=0.8)
    for share, marker in MARKERS.items():
        down.scatter([], [], color="grey", marker=marker, label=f"{share:.0%} of the keys moved")
    down.scatter([], [], color="grey", facecolors="none", label="plain restart, same run")
    down.scatter([], [], color="grey", marker="x", label="plain restart on the new version")
    ratio.axhline(1.5, color="grey", ls="--", lw=0.8, label="goal: 1.5x")
    ratio.scatter([], [], color="grey", marker="x", label="over a plain restart on the new version")
    ratio.legend(fontsize=7)
    labels = ((down, "stop request -> job running again (s)"), (ratio, "switch / plain restart"),
              (heap, "TaskManager heap peak (MiB)"))  # fmt: skip
    for ax, label in labels:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("keyed state rewritten (MB)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    # below the panels: with a series per build the legend would hide the points
    fig.legend(*down.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=7, frameon=False)
    down.set_title("switch (filled) vs plain restart (open)", fontsize=9)
    ratio.set_title("down time of the switch over the plain restart's", fontsize=9)
    heap.set_title("memory during the switch (filled) and the restart (open)", fontsize=9)
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    path.write_bytes(figure_png(fig))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="JSON of bench_flink_switch.py --json (or a list of them)")
    parser.add_argument("--plot", type=Path, default=REPO / "docs" / "flink_switch_sizes.png")
    args = parser.parse_args(argv)
    runs = []
    for path in args.runs:  # a run per file, or a list of runs (benchmarks/results_flink_switch_sizes.json)
        doc = json.loads(path.read_text())
        runs += doc if isinstance(doc, list) else [doc]
    plot(runs, args.plot)
    print(f"plot in {args.plot}")


if __name__ == "__main__":
    main()
