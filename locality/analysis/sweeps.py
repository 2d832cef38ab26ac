"""Sweeps: what locality-aware routing reaches on a trace as one parameter varies, beside hash routing.

Each function loops a library call over a parameter (servers, pairs kept, sketch capacity,
windows, rebalancer settings) and gathers its figures in a small DataFrame:
:class:`~locality.optimizer.LocalityOptimizer` for the tables,
:func:`~locality.replay.replay_trace` results for drift, and
:func:`~locality.rebalance.rebalance` for the skew rebalancers. Nothing is
computed here that the library does not compute.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from locality._validation import check_integer
from locality.analysis.traces import rank_frequency
from locality.defaults import DEFAULT_ALPHA, DEFAULT_HASH, DEFAULT_PERIOD, DEFAULT_SEED, DEFAULT_THETA_MAX, DEFAULT_TS
from locality.graph import KeyGraph
from locality.imbalance import theta
from locality.optimizer import LocalityOptimizer
from locality.placement import place_keys
from locality.rebalance import rebalance
from locality.rebalance._base import RebalanceProblem, instance_loads
from locality.replay import ReplayResult, replay_trace, windows_of
from locality.routing import RoutingConfiguration
from locality.topology import Topology

__all__ = [
    "table_cost",
    "server_sweep",
    "replay_server_sweep",
    "top_pairs_sweep",
    "sketch_capacity_sweep",
    "balance_stages",
    "in_sample_by_window",
    "replay_summary",
    "rebalance_chain",
    "rebalance_sweep",
]


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
    alpha: float = DEFAULT_ALPHA,
    hash: str = DEFAULT_HASH,
    top_pairs: int | None = None,
    seed: int = DEFAULT_SEED,
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
            Topology.uniform(list(keys), n), alpha=alpha, hash=hash, top_pairs=top_pairs, seed=seed
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


def replay_server_sweep(
    trace: pd.DataFrame,
    keys: Sequence[str],
    servers: Sequence[int],
    *,
    ts: str = DEFAULT_TS,
    period: str = DEFAULT_PERIOD,
    history: int | None = None,
    decay: float | None = None,
    alpha: float = DEFAULT_ALPHA,
    hash: str = DEFAULT_HASH,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """:func:`server_sweep` on a timed trace: every window judged with tables learned on the windows before it.

    For each server count, :func:`~locality.replay.replay_trace` walks the
    windows online (tables from the last ``history`` windows, default all of
    them, weighed by ``decay`` if given) and :func:`in_sample_by_window` builds
    tables on each window and judges them on that same window (the upper
    bound). Means are over the windows after the first (those judged on data
    the tables did not see), hash routing on the same windows beside them.

    Returns
    -------
    DataFrame
        One row per server count: ``n_servers``, ``windows``,
        ``hash_locality``, ``in_sample``, ``next_window``, ``hash_imbalance``,
        ``in_sample_imbalance``, ``next_imbalance`` (means of the worst
        operator's imbalance), ``entries`` (mean table entries, all operators)
        and ``migration_cost`` (mean share of state moved per reconfiguration).
    """
    keys = list(keys)
    rows = []
    for n in servers:
        n = check_integer(n, "servers", "replay_server_sweep", lower=1)
        topology = Topology.uniform(keys, n)
        options = {"ts": ts, "period": period, "alpha": alpha, "hash": hash, "seed": seed}
        online = replay_trace(trace, topology, mode="online", history=history, decay=decay, **options)
        inside = in_sample_by_window(trace, topology, **options)
        judged = inside[inside["start"].isin([w.start for w in online.windows[1:]])]
        summary = replay_summary({"online": online}).loc["online"]
        rows.append(
            {
                "n_servers": n,
                "windows": int(summary["windows"]),
                "hash_locality": summary["hash_locality"],
                "in_sample": float(judged["locality"].mean()),
                "next_window": summary["locality"],
                "hash_imbalance": summary["hash_worst_imbalance"],
                "in_sample_imbalance": float(judged["worst_imbalance"].mean()),
                "next_imbalance": summary["worst_imbalance"],
                "entries": summary["table_entries"],
                "migration_cost": summary["migration_cost"],
            }
        )
    return pd.DataFrame(rows)


def top_pairs_sweep(
    train: pd.DataFrame,
    test: pd.DataFrame,
    keys: Sequence[str],
    n_servers: int,
    top_pairs: Sequence[int | None],
    *,
    alpha: float = DEFAULT_ALPHA,
    hash: str = DEFAULT_HASH,
    seed: int = DEFAULT_SEED,
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
            Topology.uniform(keys, n_servers), alpha=alpha, hash=hash, top_pairs=kept, seed=seed
        ).fit(train)
        rows.append({"top_pairs": n_kept, "pair_share": share, **_fit_figures(opt, test)})
    return pd.DataFrame(rows).drop_duplicates("top_pairs", keep="last").reset_index(drop=True)


def sketch_capacity_sweep(
    train: pd.DataFrame,
    test: pd.DataFrame,
    keys: Sequence[str],
    servers: Sequence[int],
    capacities: Sequence[int | None],
    *,
    alpha: float = DEFAULT_ALPHA,
    hash: str = DEFAULT_HASH,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Locality against the Space-Saving sketch's capacity, per server count (the paper's Figure 12).

    The tables learn from what a sketch of each capacity keeps of ``train``
    (its heaviest pairs and keys, with estimated counts: what the online
    protocol's bounded memory sees), not from exact counts; ``None`` counts
    exactly. Each is judged on ``train`` (in-sample) and on ``test``.

    Returns
    -------
    DataFrame
        The columns of :func:`server_sweep`, plus ``capacity`` (``None``
        replaced by the most distinct pairs of a hop: what an exact sketch
        needs), ``exact``, ``pairs`` (pairs in the graph, all hops) and
        ``pair_share`` (exact share of the training tuples those pairs carry,
        mean over hops).
    """
    keys = list(keys)
    exact_pairs = [train.groupby([a, b], sort=False, observed=True).size() for a, b in zip(keys, keys[1:])]
    most = max(len(p) for p in exact_pairs)
    rows = []
    for n in servers:
        n = check_integer(n, "servers", "sketch_capacity_sweep", lower=1)
        for capacity in capacities:
            if capacity is not None:
                check_integer(capacity, "capacities", "sketch_capacity_sweep", lower=1)
            opt = LocalityOptimizer(
                Topology.uniform(keys, n), alpha=alpha, hash=hash, capacity=capacity, seed=seed
            ).fit(train)
            rows.append(
                {
                    "n_servers": n,
                    "capacity": most if capacity is None else int(capacity),
                    "exact": capacity is None,
                    "pairs": opt.graph_.n_edges,
                    "pair_share": _kept_share(opt.graph_, exact_pairs),
                    **_fit_figures(opt, test),
                }
            )
    return pd.DataFrame(rows)


def _kept_share(graph: KeyGraph, exact_pairs: Sequence[pd.Series]) -> float:
    """Exact share of the tuples of each hop that travel on a pair of ``graph``, mean over hops."""
    shares = []
    for (a, b), exact in zip(zip(graph.operators, graph.operators[1:]), exact_pairs):
        src, dst = graph.operator_slice(a), graph.operator_slice(b)
        hop = (graph.src >= src.start) & (graph.src < src.stop) & (graph.dst >= dst.start) & (graph.dst < dst.stop)
        kept = pd.MultiIndex.from_arrays(
            [graph.keys[a][graph.src[hop] - src.start], graph.keys[b][graph.dst[hop] - dst.start]]
        )
        shares.append(float(exact[exact.index.isin(kept)].sum() / exact.sum()))
    return float(np.mean(shares))


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
    ts: str = DEFAULT_TS,
    period: str = DEFAULT_PERIOD,
    alpha: float = DEFAULT_ALPHA,
    hash: str = DEFAULT_HASH,
    seed: int = DEFAULT_SEED,
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
        report = LocalityOptimizer(topology, alpha=alpha, hash=hash, seed=seed).fit(window[ops]).report_
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
def rebalance_chain(
    costs: np.ndarray,
    fallback: np.ndarray,
    n_instances: int,
    *,
    method: str = "mixed",
    theta_max: float = DEFAULT_THETA_MAX,
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
