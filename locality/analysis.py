"""The analyses behind ``notebooks/``: key skew, locality sweeps, balance, table cost, drift, rebalancer trade-offs.

Each function takes a trace (a pandas DataFrame with one key column per
stateful operator) or the results of a library call, and returns a small
DataFrame a notebook plots with the ``*_figure`` helpers below. Everything is
computed by the library (:class:`~locality.optimizer.LocalityOptimizer`,
:func:`~locality.replay.replay_trace`, :func:`~locality.rebalance.rebalance`);
this module only loops over parameters and gathers figures.

Figures put the hash baseline beside every locality and imbalance curve and
label their axes with units. Each is a matplotlib object-API figure on its own
Agg canvas (:func:`locality.plots.new_figure`, never ``pyplot``); a notebook
shows it with ``display(fig)``. matplotlib is imported only when a figure is
drawn, so importing this module does not load it.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from locality._validation import check_columns, check_integer, check_interval, check_random_state
from locality.errors import TraceError
from locality.optimizer import LocalityOptimizer
from locality.placement import place_keys
from locality.plots import new_figure
from locality.rebalance import rebalance
from locality.rebalance._base import RebalanceProblem, instance_loads, theta
from locality.replay import ReplayResult, windows_of
from locality.routing import RoutingConfiguration
from locality.topology import Topology

__all__ = [
    "load_trace",
    "split_trace",
    "rank_frequency",
    "pair_concentration",
    "pairs_to_cover",
    "table_cost",
    "server_sweep",
    "top_pairs_sweep",
    "balance_stages",
    "in_sample_by_window",
    "replay_summary",
    "interval_costs",
    "rebalance_chain",
    "rebalance_sweep",
    "rank_frequency_figure",
    "concentration_figure",
    "balance_figure",
    "table_cost_figure",
    "window_figure",
    "migration_figure",
    "period_figure",
    "tradeoff_figure",
]

logger = logging.getLogger(__name__)

HASH_STYLE = {"color": "grey", "linestyle": "--"}
LOCALITY_LABEL = "locality (% of hops on one server)"
IMBALANCE_LABEL = "imbalance (max instance load / mean)"
WORST_LABEL = "worst operator's imbalance\n(max instance load / mean)"


# ---------------------------------------------------------------------- traces
def load_trace(
    path: str | Path,
    keys: Sequence[str],
    *,
    ts: str | None = None,
    order: str | None = None,
    start: str | pd.Timestamp | None = None,
    end: str | pd.Timestamp | None = None,
) -> pd.DataFrame:
    """Read a Parquet (file or directory) or CSV trace: its key columns, in order, within ``[start, end)``.

    Rows with a null or empty key are dropped (and logged). The frame is sorted
    by ``order`` when given, else by ``ts`` when given, else kept in file order.

    Raises
    ------
    TraceError
        The path does not exist, a column is missing, ``ts`` is not a timestamp,
        ``start``/``end`` without ``ts``, or no row is left.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise TraceError(f"no trace at {path} (relative paths start from {Path.cwd()})")
    keys = list(keys)
    columns = list(dict.fromkeys([*keys, *(c for c in (ts, order) if c is not None)]))
    if (start is not None or end is not None) and ts is None:
        raise TraceError("a time range (start/end) needs the timestamp column 'ts'")
    if path.suffix == ".csv":
        present = list(pd.read_csv(path, nrows=0).columns)
        check_columns(present, columns, f"the trace {path}")
        frame = pd.read_csv(path, usecols=columns, parse_dates=[ts] if ts else False)
    else:
        import pyarrow.dataset as ds

        dataset = ds.dataset(path, format="parquet")
        check_columns(dataset.schema.names, columns, f"the trace {path}")
        frame = dataset.to_table(columns=columns).to_pandas()
    if ts is not None and not pd.api.types.is_datetime64_any_dtype(frame[ts]):
        raise TraceError(f"the timestamp column {ts!r} of {path} has type {frame[ts].dtype}; it must be a timestamp")
    if start is not None or end is not None:
        frame = frame[frame[ts].between(*_time_range(frame[ts], start, end), inclusive="left")]
    valid = frame[keys].notna().all(axis=1)
    for key in keys:
        if not pd.api.types.is_numeric_dtype(frame[key].dtype):
            valid &= frame[key].astype(str) != ""
    if (~valid).any():
        logger.info("load_trace: dropped %d rows with a null or empty key", int((~valid).sum()))
    frame = frame[valid]
    sort_by = order if order is not None else ts
    if sort_by is not None:
        frame = frame.sort_values(sort_by, kind="stable")
    if frame.empty:
        raise TraceError(f"the trace {path} has no row with every key of {keys} in the time range")
    return frame.reset_index(drop=True)


def _time_range(ts: pd.Series, start, end) -> tuple[pd.Timestamp, pd.Timestamp]:
    tz = ts.dt.tz

    def stamp(value, default):
        if value is None:
            return default
        value = pd.Timestamp(value)
        if tz is not None and value.tzinfo is None:
            value = value.tz_localize(tz)
        return value

    return stamp(start, ts.min()), stamp(end, ts.max() + pd.Timedelta(1, "us"))


def split_trace(
    trace: pd.DataFrame, fraction: float = 0.5, *, shuffle: bool = False, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The first ``fraction`` of the rows and the rest (rows drawn at random with ``shuffle``, seeded)."""
    fraction = check_interval(fraction, "fraction", "split_trace", lower=0.0, upper=1.0, closed="neither")
    rows = np.arange(len(trace))
    if shuffle:
        rows = check_random_state(seed, "seed", "split_trace").permutation(rows)
    cut = int(round(fraction * len(trace)))
    return trace.iloc[np.sort(rows[:cut])], trace.iloc[np.sort(rows[cut:])]


# ---------------------------------------------------------------------- skew
def rank_frequency(trace: pd.DataFrame, columns: str | Sequence[str]) -> pd.DataFrame:
    """Tuples per distinct key (or key combination), heaviest first: ``rank`` (from 1), ``count``, ``share``."""
    columns = [columns] if isinstance(columns, str) else list(columns)
    check_columns(list(trace.columns), columns, "the trace")
    counts = trace.groupby(columns, sort=False, observed=True).size().sort_values(ascending=False, kind="stable")
    values = counts.to_numpy(dtype=np.int64)
    return pd.DataFrame(
        {"rank": np.arange(1, len(values) + 1), "count": values, "share": values / max(values.sum(), 1)}
    )


def pair_concentration(trace: pd.DataFrame, keys: Sequence[str], points: int = 40) -> pd.DataFrame:
    """Share of tuples covered by the ``top_n`` heaviest key pairs, at ``points`` log-spaced ``top_n``.

    Returns columns ``top_n`` and ``share`` (0 to 1), ending at every distinct pair (share 1).
    """
    ranked = rank_frequency(trace, keys)
    cumulative = np.cumsum(ranked["count"].to_numpy()) / ranked["count"].sum()
    top = np.unique(np.geomspace(1, len(ranked), num=max(points, 2)).round().astype(np.int64))
    return pd.DataFrame({"top_n": top, "share": cumulative[top - 1]})


def pairs_to_cover(trace: pd.DataFrame, keys: Sequence[str], shares: Sequence[float] = (0.5, 0.8, 0.9)) -> dict:
    """Fewest key pairs that cover each share of the tuples (``{share: n_pairs}``)."""
    ranked = rank_frequency(trace, keys)
    cumulative = np.cumsum(ranked["count"].to_numpy()) / ranked["count"].sum()
    return {s: int(np.searchsorted(cumulative, s - 1e-12) + 1) for s in shares}


# ---------------------------------------------------------------------- tables
def table_cost(config: RoutingConfiguration) -> pd.DataFrame:
    """Entries and bytes of each operator's routing table, as :meth:`RoutingConfiguration.write` stores it.

    Columns ``entries``, ``parquet_bytes`` (the operator's ``tables/NN.parquet``)
    and ``json_bytes`` (its ``[key, instance]`` list in the JSON document), one
    row per operator plus a ``total`` row.
    """
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        config.write(tmp)
        files = json.loads((Path(tmp) / "header.json").read_text())["table_files"]
        for op in config.topology.operators:
            entries = config.tables[op].entries
            listed = [[k.item() if hasattr(k, "item") else k, int(v)] for k, v in entries.items()]
            rows[op] = {
                "entries": len(entries),
                "parquet_bytes": (Path(tmp) / files[op]).stat().st_size,
                "json_bytes": len(json.dumps(listed).encode()),
            }
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.loc["total"] = frame.sum()
    return frame.astype(np.int64)


# ---------------------------------------------------------------------- sweeps
def _worst(imbalance: Mapping[str, float]) -> float:
    return float(max(imbalance.values()))


def server_sweep(
    train: pd.DataFrame,
    test: pd.DataFrame,
    keys: Sequence[str],
    servers: Sequence[int],
    *,
    alpha: float = 1.03,
    fallback: str = "kafka",
    top_pairs: int | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Locality, balance and table cost against the number of servers (one instance of each operator per server).

    Tables are built on ``train`` and judged on ``train`` (in-sample) and on
    ``test`` (the next window, which they did not see), each beside hash
    routing on the same rows.

    Returns
    -------
    DataFrame
        One row per server count: ``n_servers``, ``hash_locality`` (on
        ``test``), ``in_sample``, ``next_window``, ``hash_imbalance``,
        ``in_sample_imbalance``, ``next_imbalance`` (worst operator),
        ``entries_<op>``, ``entries``, ``parquet_bytes``, ``json_bytes``, ``fit_seconds``.
    """
    rows = []
    for n in servers:
        n = check_integer(n, "servers", "server_sweep", lower=1)
        started = time.perf_counter()
        opt = LocalityOptimizer(
            Topology.uniform(list(keys), n), alpha=alpha, fallback=fallback, top_pairs=top_pairs, seed=seed
        ).fit(train)
        seconds = time.perf_counter() - started
        rows.append({"n_servers": n, **_fit_figures(opt, test), "fit_seconds": seconds})
    return pd.DataFrame(rows)


def _fit_figures(opt: LocalityOptimizer, test: pd.DataFrame) -> dict:
    inside, nxt = opt.report_, opt.evaluate(test)
    cost = table_cost(opt.config_)
    return {
        "hash_locality": nxt.hash.locality,
        "hash_locality_in_sample": inside.hash.locality,
        "in_sample": inside.optimized.locality,
        "next_window": nxt.optimized.locality,
        "hash_imbalance": _worst(nxt.hash.imbalance),
        "in_sample_imbalance": _worst(inside.optimized.imbalance),
        "next_imbalance": _worst(nxt.optimized.imbalance),
        **{f"entries_{op}": int(cost.loc[op, "entries"]) for op in opt.topology.operators},
        "entries": int(cost.loc["total", "entries"]),
        "parquet_bytes": int(cost.loc["total", "parquet_bytes"]),
        "json_bytes": int(cost.loc["total", "json_bytes"]),
    }


def top_pairs_sweep(
    train: pd.DataFrame,
    test: pd.DataFrame,
    keys: Sequence[str],
    n_servers: int,
    top_pairs: Sequence[int | None],
    *,
    alpha: float = 1.03,
    fallback: str = "kafka",
    seed: int = 0,
) -> pd.DataFrame:
    """Locality against the number of key pairs kept in the graph (the paper's Figure 12).

    ``None`` in ``top_pairs`` keeps every pair. Returns the columns of
    :func:`server_sweep` plus ``top_pairs`` (pairs kept per hop, ``None``
    replaced by the number of distinct pairs) and ``pair_share`` (share of the
    training tuples those pairs cover, mean over hops).
    """
    keys = list(keys)
    hops = [rank_frequency(train, [a, b])["count"].to_numpy() for a, b in zip(keys, keys[1:])]
    most = max(len(h) for h in hops)
    rows = []
    for kept in top_pairs:
        if kept is not None:
            check_integer(kept, "top_pairs", "top_pairs_sweep", lower=1)
        n_kept = most if kept is None else min(int(kept), most)
        share = float(np.mean([h[:n_kept].sum() / h.sum() for h in hops]))
        opt = LocalityOptimizer(
            Topology.uniform(keys, n_servers), alpha=alpha, fallback=fallback, top_pairs=kept, seed=seed
        ).fit(train)
        rows.append({"top_pairs": n_kept, "pair_share": share, **_fit_figures(opt, test)})
    return pd.DataFrame(rows).drop_duplicates("top_pairs", keep="last").reset_index(drop=True)


def balance_stages(optimizer: LocalityOptimizer, test: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per-operator imbalance at each step of a fitted optimizer, beside hash routing.

    Columns: ``hash`` (in-sample, no table), ``metis_only`` (METIS's servers,
    keys on the least-loaded instance of their server, before the
    per-operator repair), ``repaired`` (the published tables, in-sample),
    ``next_window`` (on ``test``) and ``hash_next_window``; ``alpha`` is the bound.
    """
    if not hasattr(optimizer, "config_"):
        raise AttributeError("balance_stages needs a fitted LocalityOptimizer; call fit(trace) first")
    raw = place_keys(
        optimizer.graph_,
        optimizer.topology,
        optimizer.partition_.server_of_vertex,
        alpha=optimizer.alpha,
        preferred=optimizer.optimization_.preferred,
        hot_keys=optimizer.partition_.hot_keys,
        repair=False,
    )
    frame = pd.DataFrame(
        {
            "hash": optimizer.report_.hash.imbalance,
            "metis_only": raw.imbalance,
            "repaired": optimizer.report_.optimized.imbalance,
        }
    )
    if test is not None:
        nxt = optimizer.evaluate(test)
        frame["next_window"] = pd.Series(nxt.optimized.imbalance)
        frame["hash_next_window"] = pd.Series(nxt.hash.imbalance)
    frame["alpha"] = optimizer.alpha
    return frame


# ---------------------------------------------------------------------- drift
def in_sample_by_window(
    trace: pd.DataFrame,
    topology: Topology,
    *,
    ts: str = "ts",
    period: str = "7D",
    alpha: float = 1.03,
    fallback: str = "kafka",
    seed: int = 0,
) -> pd.DataFrame:
    """Tables built on each window and judged on that same window: the upper bound of the online curve.

    Windows are those of :func:`~locality.replay.replay_trace` (from the first
    day of the trace). Columns ``start``, ``tuples``, ``locality``,
    ``hash_locality``, ``worst_imbalance``, ``hash_worst_imbalance``.
    """
    ops = list(topology.operators)
    frame = trace.dropna(subset=ops).sort_values(ts, kind="stable")
    rows = []
    for start, end in windows_of(frame[ts], period):
        window = frame[(frame[ts] >= start) & (frame[ts] < end)]
        if window.empty:
            continue
        report = LocalityOptimizer(topology, alpha=alpha, fallback=fallback, seed=seed).fit(window[ops]).report_
        rows.append(
            {
                "start": str(start),
                "tuples": len(window),
                "locality": report.optimized.locality,
                "hash_locality": report.hash.locality,
                "worst_imbalance": _worst(report.optimized.imbalance),
                "hash_worst_imbalance": _worst(report.hash.imbalance),
            }
        )
    return pd.DataFrame(rows)


def replay_summary(results: Mapping[str, ReplayResult]) -> pd.DataFrame:
    """One row per strategy: means over the windows after the first (those judged on unseen data).

    Columns ``windows``, ``locality``, ``hash_locality``, ``worst_imbalance``,
    ``hash_worst_imbalance``, ``reconfigurations`` (tables published after the
    first), ``migration_cost`` (mean share of state moved per reconfiguration),
    ``migration_cost_raw`` (the same with METIS's part numbers as they come),
    ``rebalance_cost`` (mean share of state a skew rebalancer moved per window),
    ``table_entries`` (mean over windows, all operators).
    """
    rows = {}
    for name, result in results.items():
        frame = result.frame().iloc[1:]
        ops = list(result.windows[0].imbalance) if result.windows else []
        republished = frame[frame["published"]].iloc[1:] if result.mode == "online" else frame.iloc[:0]
        rows[name] = {
            "windows": len(frame),
            "locality": result.mean_locality,
            "hash_locality": result.mean_hash_locality,
            "worst_imbalance": result.mean_worst_imbalance() if len(frame) else float("nan"),
            "hash_worst_imbalance": float(frame[[f"hash_imbalance_{op}" for op in ops]].max(axis=1).mean()),
            "reconfigurations": len(republished),
            "migration_cost": float(republished["migration_cost"].mean()) if len(republished) else 0.0,
            "migration_cost_raw": float(republished["migration_cost_without_relabeling"].astype(float).mean())
            if len(republished)
            else 0.0,
            "rebalance_cost": float(frame["rebalance_cost"].mean()) if len(frame) else 0.0,
            "table_entries": float(np.mean([sum(w.table_entries.values()) for w in result.windows[1:]]))
            if len(frame)
            else 0.0,
        }
    return pd.DataFrame.from_dict(rows, orient="index")


# ---------------------------------------------------------------------- rebalancers
def interval_costs(
    trace: pd.DataFrame, key: str, *, ts: str = "ts", period: str = "7D"
) -> tuple[np.ndarray, np.ndarray, list[pd.Timestamp]]:
    """Tuples of every key of ``key`` in each window: ``(keys, costs, starts)``, ``costs`` of shape ``(windows, K)``.

    Windows are those of :func:`~locality.replay.replay_trace`; keys are sorted.
    """
    check_columns(list(trace.columns), [key, ts], "the trace")
    frame = trace[[key, ts]].dropna()
    bounds = windows_of(frame[ts], period)
    starts = [a for a, _ in bounds]
    index = ((frame[ts] - starts[0]) // pd.Timedelta(period)).to_numpy(dtype=np.int64)
    table = frame.assign(window=index).groupby(["window", key], observed=True).size().unstack(fill_value=0)
    table = table.reindex(range(len(starts)), fill_value=0).sort_index(axis=1)
    return table.columns.to_numpy(dtype=object), table.to_numpy(dtype=float), starts


def rebalance_chain(
    costs: np.ndarray,
    fallback: np.ndarray,
    n_instances: int,
    *,
    method: str = "mixed",
    theta_max: float = 0.08,
    table_cap: int | None = None,
    state_sizes: np.ndarray | None = None,
    **options,
) -> pd.DataFrame:
    """Run a skew rebalancer interval after interval, each plan becoming the next interval's assignment.

    Interval ``i``'s statistics (``costs[i]``, ``state_sizes[i]``, default the
    costs) pose the problem; the plan is judged on interval ``i`` (``theta_after``,
    what the rebalancer aimed at) and on interval ``i + 1`` (``theta_next``,
    what the instances then see), beside the fallback hash (``hash_theta_next``).

    Returns
    -------
    DataFrame
        One row per interval but the last: ``interval``, ``theta_before``,
        ``theta_after``, ``theta_next``, ``hash_theta_next``, ``migration_cost``
        (share of state moved), ``table_size``, ``moved_keys``, ``feasible``, ``seconds``.
    """
    costs = np.asarray(costs, dtype=float)
    fallback = np.asarray(fallback, dtype=np.int64)
    states = costs if state_sizes is None else np.asarray(state_sizes, dtype=float)
    current, rows = fallback, []
    for i in range(costs.shape[0] - 1):
        problem = RebalanceProblem(costs[i], states[i], current, fallback, n_instances, theta_max, table_cap)
        started = time.perf_counter()
        result = rebalance(problem, method, **options)
        seconds = time.perf_counter() - started
        current = result.assignment
        rows.append(
            {
                "interval": i,
                "theta_before": result.theta_before,
                "theta_after": result.theta_after,
                "theta_next": theta(instance_loads(costs[i + 1], current, n_instances)),
                "hash_theta_next": theta(instance_loads(costs[i + 1], fallback, n_instances)),
                "migration_cost": result.migration_cost,
                "table_size": result.table_size,
                "moved_keys": int(result.moved.shape[0]),
                "feasible": result.feasible,
                "seconds": seconds,
            }
        )
    return pd.DataFrame(rows)


def rebalance_sweep(
    costs: np.ndarray,
    fallback: np.ndarray,
    n_instances: int,
    *,
    methods: Sequence[str],
    theta_values: Sequence[float],
    table_caps: Sequence[int | None] = (None,),
    warmup: int = 1,
    state_sizes: np.ndarray | None = None,
    **options,
) -> pd.DataFrame:
    """Means of :func:`rebalance_chain` over intervals (after ``warmup``) for every method, theta_max and table cap.

    Columns ``method``, ``theta_max``, ``table_cap`` (-1 for none), ``migration_cost``,
    ``table_size``, ``theta_after``, ``theta_next``, ``hash_theta_next``,
    ``feasible`` (share of intervals), ``seconds`` (mean planning time).
    """
    rows = []
    for method in methods:
        for theta_max in theta_values:
            for cap in table_caps:
                chain = rebalance_chain(
                    costs,
                    fallback,
                    n_instances,
                    method=method,
                    theta_max=theta_max,
                    table_cap=cap,
                    state_sizes=state_sizes,
                    **options,
                ).iloc[warmup:]
                rows.append(
                    {
                        "method": method,
                        "theta_max": float(theta_max),
                        "table_cap": -1 if cap is None else int(cap),
                        **chain[
                            ["migration_cost", "table_size", "theta_after", "theta_next", "hash_theta_next", "seconds"]
                        ].mean(),
                        "feasible": float(chain["feasible"].mean()),
                    }
                )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- figures
def rank_frequency_figure(curves: Mapping[str, pd.DataFrame], *, title: str):
    """Log-log rank/frequency curves (the output of :func:`rank_frequency`), one per key or key pair."""
    fig = new_figure((6.5, 4))
    ax = fig.subplots()
    for name, frame in curves.items():
        ax.loglog(frame["rank"], frame["count"], label=f"{name} ({len(frame):,} distinct)")
    ax.set_xlabel("rank (log)")
    ax.set_ylabel("tuples (log)")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


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
    results: Mapping[str, ReplayResult], *, title: str, in_sample: pd.DataFrame | None = None, alpha: float = 1.03
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


def period_figure(summary: pd.DataFrame, *, title: str, alpha: float = 1.03):
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
