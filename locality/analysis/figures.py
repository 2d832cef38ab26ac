"""Figures of the analyses: each the output of a sweep or a statistic, hash routing always beside it.

Every figure labels its axes with units and draws the hash baseline beside
each locality and imbalance curve. Each is a matplotlib object-API figure on
its own Agg canvas (:func:`locality.plots.new_figure`, never ``pyplot``: no
global figure manager or backend), which a notebook shows with
``display(fig)``; matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
import pandas as pd

from locality.defaults import DEFAULT_ALPHA
from locality.plots import locality_figure, new_figure
from locality.replay import ReplayResult

__all__ = [
    "rank_frequency_figure",
    "concentration_figure",
    "balance_figure",
    "server_sweep_figure",
    "capacity_figure",
    "drift_figure",
    "table_cost_figure",
    "window_figure",
    "migration_figure",
    "period_figure",
    "tradeoff_figure",
    "degree_figure",
]

HASH_STYLE = {"color": "grey", "linestyle": "--"}
LOCALITY_LABEL = "locality (% of hops on one server)"
IMBALANCE_LABEL = "imbalance (max instance load / mean)"
WORST_LABEL = "worst operator's imbalance\n(max instance load / mean)"
_CHAIN_COLORS = ["#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


# ---------------------------------------------------------------------- figures
def rank_frequency_figure(curves: Mapping[str, pd.DataFrame], *, title: str):
    """Log-log rank/frequency curves (the output of :func:`rank_frequency`), one per key or key pair."""
    fig = new_figure((6.5, 4))
    ax = fig.subplots()
    for name, frame in curves.items():
        ax.loglog(frame["rank"], frame["count"], label=f"{name} ({len(frame):,} distinct)")
    return _finished(fig, ax, "rank (log)", "tuples (log)", title)


def concentration_figure(curves: Mapping[str, pd.DataFrame], *, title: str):
    """Share of tuples covered by the top-N pairs (the output of :func:`pair_concentration`)."""
    fig = new_figure((6.5, 4))
    ax = fig.subplots()
    for name, frame in curves.items():
        ax.semilogx(frame["top_n"], 100 * frame["share"], marker=".", label=name)
    ax.set_xlabel("top-N key pairs kept (log)")
    ax.set_ylabel("tuples covered (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def balance_figure(stages: pd.DataFrame, *, title: str):
    """Grouped bars per operator: hash, METIS only, repaired, next window (the output of :func:`balance_stages`)."""
    columns = [
        ("hash", "hash (in-sample)", "#9e9e9e"),
        ("metis_only", "METIS only (before repair)", "#ff7f0e"),
        ("repaired", "after repair (in-sample)", "#1f77b4"),
        ("hash_next_window", "hash (next window)", "#cfcfcf"),
        ("next_window", "tables on the next window", "#2ca02c"),
    ]
    columns = [c for c in columns if c[0] in stages.columns]
    fig = new_figure((max(7.0, 2.8 * len(stages)), 4.2))
    ax = fig.subplots()
    x = np.arange(len(stages))
    width = 0.8 / len(columns)
    for i, (col, label, color) in enumerate(columns):
        bars = ax.bar(x + (i - (len(columns) - 1) / 2) * width, stages[col], width, label=label, color=color)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.axhline(
        float(stages["alpha"].iloc[0]), color="#d62728", linestyle=":", label=f"alpha {stages['alpha'].iloc[0]:g}"
    )
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x, [str(op) for op in stages.index])
    ax.set_xlabel("operator")
    ax.set_ylabel(IMBALANCE_LABEL)
    ax.set_ylim(0.9, max(1.1, float(stages[[c[0] for c in columns]].to_numpy().max()) * 1.2))
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    fig.tight_layout()
    return fig


def server_sweep_figure(
    sweeps: Mapping[str, pd.DataFrame],
    *,
    title: str,
    alpha: float = DEFAULT_ALPHA,
    in_sample: str = "in-sample",
    next_window: str = "next window",
):
    """Locality per chain, then worst imbalance, against the number of servers, hash beside each.

    ``sweeps`` maps a chain's name to the output of :func:`server_sweep` or
    :func:`replay_server_sweep`; ``in_sample`` and ``next_window`` label their
    two curves (e.g. "next year (tables from earlier years)").
    """
    fig = new_figure((4.6 * (len(sweeps) + 1), 4.2))
    axes = fig.subplots(1, len(sweeps) + 1)
    for ax, (name, sweep) in zip(axes, sweeps.items()):
        locality_figure(
            sweep["n_servers"],
            {in_sample: sweep["in_sample"], next_window: sweep["next_window"]},
            hash_locality=sweep["hash_locality"],
            xlabel="number of servers",
            title=f"{name}: locality",
            ax=ax,
        )
    worst = axes[-1]
    for color, (name, sweep) in zip(itertools.cycle(_CHAIN_COLORS), sweeps.items()):  # not the locality colours
        label = f"{name}: {next_window}"
        worst.plot(sweep["n_servers"], sweep["next_imbalance"], marker="o", color=color, label=label)
        style = {**HASH_STYLE, "color": color}
        worst.plot(sweep["n_servers"], sweep["hash_imbalance"], **style, marker=".", label=f"{name}: hash")
    worst.axhline(alpha, color="#d62728", linestyle=":", label=f"alpha {alpha:g}")
    worst.set_xlabel("number of servers")
    worst.set_ylabel(WORST_LABEL)
    worst.set_ylim(bottom=0.9)
    worst.set_title("worst imbalance")
    worst.grid(alpha=0.3)
    worst.legend(fontsize=7, loc="upper left")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def capacity_figure(sweeps: Mapping[str, pd.DataFrame], *, title: str):
    """The paper's Figure 12: locality against the sketch's capacity, one line per server count, hash beside.

    ``sweeps`` maps a chain's name to the output of :func:`sketch_capacity_sweep`.
    Top row: on the tuples the tables learned from; bottom row: on the held-out
    tuples. Hash routing on the same tuples is the dashed line of each colour.
    """
    fig = new_figure((5.5 * len(sweeps), 7.5))
    axes = np.asarray(fig.subplots(2, len(sweeps), sharex="col", squeeze=False))
    panels = (
        ("in_sample", "hash_locality_in_sample", "tuples learned from"),
        ("next_window", "hash_locality", "held-out tuples"),
    )
    for col, (name, sweep) in enumerate(sweeps.items()):
        for row, (column, hash_column, judged) in enumerate(panels):
            ax = axes[row, col]
            for n, rows in sweep.groupby("n_servers", sort=True):
                (line,) = ax.semilogx(rows["capacity"], 100 * rows[column], marker="o", label=f"{n} servers")
                ax.semilogx(rows["capacity"], 100 * rows[hash_column], **{**HASH_STYLE, "color": line.get_color()})
            ax.plot([], [], **HASH_STYLE, label="hash (dashed, same colour)")
            ax.set_ylim(0, 100)
            ax.set_ylabel(LOCALITY_LABEL)
            ax.set_title(f"{name}: judged on the {judged}")
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7, ncol=2)
        axes[-1, col].set_xlabel("sketch capacity (pairs and keys counted, log); last point: exact counts")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def drift_figure(drifts: Mapping[str, pd.DataFrame], *, title: str):
    """How much of each window's traffic travels on keys or pairs seen before (outputs of :func:`pair_drift`).

    (a) share of the window's tuples whose key (pair) appeared in an earlier
    window: what tables learned on the past can place at all; (b) overlap of
    the window's key shares with the previous window's: how much of the
    traffic is spread over the keys as it was.
    """
    fig = new_figure((11, 4))
    left, right = fig.subplots(1, 2, sharex=True)
    for name, drift in drifts.items():
        x = pd.to_datetime(drift["start"], utc=True)
        left.plot(x, 100 * drift["seen_before"], marker="o", markersize=3, label=name)
        right.plot(x, 100 * drift["overlap_previous"], marker="o", markersize=3, label=name)
    left.set_ylabel("tuples on a key seen before (%)")
    left.set_title("(a) known to tables learned on every earlier window")
    right.set_ylabel("overlap with the previous window (%)")
    right.set_title("(b) traffic spread over the keys as in the previous window")
    for ax in (left, right):
        ax.set_ylim(0, 100)
        ax.set_xlabel("window start (UTC date)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def table_cost_figure(sweeps: Mapping[str, pd.DataFrame], *, title: str):
    """Table entries and stored bytes against the number of servers (outputs of :func:`server_sweep`)."""
    fig = new_figure((11, 4))
    left, right = fig.subplots(1, 2)
    for name, sweep in sweeps.items():
        prefix = f"{name}: " if name else ""
        for col in [c for c in sweep.columns if c.startswith("entries_")]:
            left.plot(sweep["n_servers"], sweep[col], marker="o", label=f"{prefix}{col[len('entries_') :]}")
        right.plot(sweep["n_servers"], sweep["parquet_bytes"] / 1e3, marker="o", label=f"{prefix}Parquet")
        right.plot(sweep["n_servers"], sweep["json_bytes"] / 1e3, marker="s", linestyle=":", label=f"{prefix}JSON")
    for ax in (left, right):
        ax.axhline(0, **HASH_STYLE, label="hash (no table)")
        ax.set_xlabel("number of servers")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    left.set_ylabel("table entries (keys)")
    left.set_title("entries per operator")
    right.set_ylabel("stored table size (kB)")
    right.set_title("bytes, all operators")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def _window_x(result: ReplayResult) -> pd.DatetimeIndex:
    return pd.to_datetime([w.start for w in result.windows], utc=True)


def window_figure(
    results: Mapping[str, ReplayResult],
    *,
    title: str,
    in_sample: pd.DataFrame | None = None,
    alpha: float = DEFAULT_ALPHA,
):
    """The paper's Figure 11 a/b: locality and worst imbalance per window, hash baseline beside each strategy."""
    fig = new_figure((11, 6.5))
    top, bottom = fig.subplots(2, 1, sharex=True)
    first = next(iter(results.values()))
    x = _window_x(first)
    top.plot(x, 100 * first.frame()["hash_locality"], **HASH_STYLE, marker=".", label="hash")
    bottom.plot(
        x,
        first.frame().filter(like="hash_imbalance_").max(axis=1),
        **HASH_STYLE,
        marker=".",
        label="hash",
    )
    for name, result in results.items():
        if result.mode == "hash":
            continue
        frame = result.frame()
        top.plot(_window_x(result)[1:], 100 * frame["locality"].iloc[1:], marker="o", markersize=3, label=name)
        worst = frame.filter(regex="^imbalance_").max(axis=1)
        bottom.plot(_window_x(result)[1:], worst.iloc[1:], marker="o", markersize=3, label=name)
    if in_sample is not None and len(in_sample):
        xs = pd.to_datetime(in_sample["start"], utc=True)
        top.plot(xs, 100 * in_sample["locality"], color="black", linestyle=":", label="in-sample (upper bound)")
    bottom.axhline(alpha, color="#d62728", linestyle=":", label=f"alpha {alpha:g}")
    top.set_ylabel(LOCALITY_LABEL)
    top.set_ylim(0, 100)
    top.set_title("(a) locality on each window, tables built before it")
    bottom.set_ylabel(WORST_LABEL)
    bottom.set_xlabel("window start (UTC date)")
    bottom.set_title("(b) worst per-operator imbalance on each window")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=3)
    fig.suptitle(title)
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def migration_figure(results: Mapping[str, ReplayResult], *, title: str):
    """Share of state moved by each reconfiguration, with and without relabeling METIS's parts."""
    fig = new_figure((11, 3.8))
    ax = fig.subplots()
    for name, result in results.items():
        if result.mode != "online":
            continue
        frame = result.frame().iloc[2:]  # the first tables move nothing: they replace hash routing
        x = pd.to_datetime(frame["start"], utc=True)
        (line,) = ax.plot(x, 100 * frame["migration_cost"], marker="o", markersize=3, label=f"{name}")
        raw = frame["migration_cost_without_relabeling"].astype(float)
        if raw.notna().any():
            ax.plot(x, 100 * raw, linestyle=":", color=line.get_color(), label=f"{name}, raw METIS labels")
    ax.axhline(0, **HASH_STYLE, label="hash / offline (never move state)")
    ax.set_xlabel("reconfiguration (window start, UTC date)")
    ax.set_ylabel("state moved (% of the window's state)")
    ax.set_ylim(bottom=-2)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def period_figure(summary: pd.DataFrame, *, title: str, alpha: float = DEFAULT_ALPHA):
    """Mean locality and worst imbalance per reconfiguration period and strategy, hash beside each.

    ``summary`` has a ``period`` and a ``strategy`` column and the columns of :func:`replay_summary`.
    """
    fig = new_figure((11, 4))
    left, right = fig.subplots(1, 2)
    periods = list(dict.fromkeys(summary["period"]))
    strategies = list(dict.fromkeys(summary["strategy"]))
    x = np.arange(len(periods))
    width = 0.8 / (len(strategies) + 1)
    first = summary.drop_duplicates("period").set_index("period").loc[periods]
    for ax, col, hash_col, scale in (
        (left, "locality", "hash_locality", 100),
        (right, "worst_imbalance", "hash_worst_imbalance", 1),
    ):
        offset = -(len(strategies)) / 2 * width
        ax.bar(x + offset, scale * first[hash_col], width, color="#9e9e9e", label="hash")
        for i, name in enumerate(strategies):
            rows = summary[summary["strategy"] == name].set_index("period").reindex(periods)
            bars = ax.bar(x + offset + (i + 1) * width, scale * rows[col], width, label=name)
            ax.bar_label(bars, fmt="%.1f" if scale == 100 else "%.2f", fontsize=7)
        ax.set_xticks(x, periods)
        ax.set_xlabel("reconfiguration period (window length)")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7)
    left.set_ylabel(LOCALITY_LABEL)
    left.set_title("mean locality on the next window")
    right.axhline(alpha, color="#d62728", linestyle=":", label=f"alpha {alpha:g}")
    right.set_ylabel(WORST_LABEL)
    right.set_ylim(bottom=0.9)
    right.set_title("mean worst imbalance on the next window")
    right.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def tradeoff_figure(by_theta: pd.DataFrame, by_cap: pd.DataFrame, *, title: str):
    """The rebalancers' trade-offs (outputs of :func:`rebalance_sweep`).

    (a) state moved per interval against ``theta_max``; (b) the balance the
    plans keep on the next interval against ``theta_max``; (c) table size
    against state moved as the table cap varies. Hash routing (no table, no
    migration, its own theta) is drawn on each panel.
    """
    fig = new_figure((15, 4.3))
    a, b, c = fig.subplots(1, 3)
    hash_theta = float(by_theta["hash_theta_next"].mean())
    for (method, cap), rows in by_theta.groupby(["method", "table_cap"], sort=False):
        label = method if cap < 0 else f"{method} (table cap {cap})"
        a.plot(rows["theta_max"], 100 * rows["migration_cost"], marker="o", label=label)
        b.plot(rows["theta_max"], rows["theta_next"], marker="o", label=label)
    a.axvline(hash_theta, **HASH_STYLE, label=f"hash: theta {hash_theta:.2f}, moves nothing")
    a.set_xlabel("theta_max (tolerated |load - mean| / mean)")
    a.set_ylabel("state moved per interval (% of state)")
    a.set_title("(a) migration cost vs theta_max")
    lim = [float(by_theta["theta_max"].min()), float(by_theta["theta_max"].max())]
    b.plot(lim, lim, color="black", linewidth=0.8, label="theta = theta_max")
    b.axhline(hash_theta, **HASH_STYLE, label="hash")
    b.set_xlabel("theta_max (tolerated |load - mean| / mean)")
    b.set_ylabel("theta on the next interval (|load - mean| / mean)")
    b.set_title("(b) balance kept on the next interval")
    first_method = by_cap["method"].iloc[0]
    for method, rows in by_cap.groupby("method", sort=False):
        rows = rows.sort_values("migration_cost")
        c.plot(100 * rows["migration_cost"], rows["table_size"], marker="o", label=method)
        if method == first_method:
            for _, row in rows.iterrows():
                cap = "none" if row["table_cap"] < 0 else int(row["table_cap"])
                c.annotate(f"cap {cap}", (100 * row["migration_cost"], row["table_size"]), fontsize=6)
    cap_theta = float(by_cap["theta_max"].iloc[0])
    single = by_theta[np.isclose(by_theta["theta_max"], cap_theta) & ~by_theta["method"].isin(by_cap["method"])]
    scale = max(float(by_cap["table_size"].max()), 1.0)
    for _, row in single.iterrows():
        if row["table_size"] > 20 * scale:  # Simple rebuilds the whole table: off this scale
            c.plot(
                [],
                [],
                marker="D",
                linestyle="none",
                label=f"{row['method']}: {row['table_size']:,.0f} entries (off scale)",
            )
            continue
        c.plot(100 * row["migration_cost"], row["table_size"], marker="D", linestyle="none", label=row["method"])
    c.plot([0], [0], marker="s", color="grey", linestyle="none", label=f"hash (theta {hash_theta:.2f})")
    c.set_xlabel("state moved per interval (% of state)")
    c.set_ylabel("routing table size (entries)")
    c.set_title(f"(c) table size vs migration (theta_max {cap_theta:g})")
    for ax in (a, b, c):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def degree_figure(degrees: pd.DataFrame, *, title: str):
    """Log-log degree distribution of the key graph, one curve per operator: how many keys have each degree.

    ``degrees`` has ``operator``, ``degree`` and ``keys`` columns
    (``pipelines.graph_analysis.analyze_graph``'s ``degrees``); isolated keys
    (degree 0) cannot sit on a log axis and are counted in the legend.
    """
    fig = new_figure((6.5, 4))
    ax = fig.subplots()
    for operator, frame in degrees.groupby("operator", sort=False):
        linked = frame[frame["degree"] > 0]
        isolated = int(frame.loc[frame["degree"] == 0, "keys"].sum())
        label = f"{operator} ({int(frame['keys'].sum()):,} keys" + (f", {isolated:,} isolated)" if isolated else ")")
        ax.loglog(linked["degree"], linked["keys"], marker=".", linestyle="none", label=label)
    return _finished(fig, ax, "degree: keys of the neighbouring operators it travels with (log)", "keys (log)", title)


def _finished(fig, ax, xlabel: str, ylabel: str, title: str):
    """``fig`` with ``ax``'s labels, title, log grid and legend set, laid out: a log-log figure's last lines."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
