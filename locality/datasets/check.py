"""The figures of a dataset card: counts, time range, and locality and imbalance beside hash routing.

``locality datasets --check NAME`` prints them; each card pastes that output, so
every figure on a card comes from one command. The locality figures are the
project's headline measurement (the Twitter notebook's): tables learned by
:class:`~locality.optimizer.LocalityOptimizer` on the first half of the trace
(in its order) are judged on the second half, which they did not see, beside
hash routing on the same rows (:func:`locality.analysis.server_sweep`).
"""

from __future__ import annotations

from locality.datasets.catalog import Trace
from locality.defaults import DEFAULT_ALPHA, DEFAULT_CHECK_SERVERS, DEFAULT_HASH, DEFAULT_SEED

__all__ = ["card_figures", "format_figures"]


def card_figures(
    trace: Trace,
    *,
    n_servers: int = DEFAULT_CHECK_SERVERS,
    alpha: float = DEFAULT_ALPHA,
    hash: str = DEFAULT_HASH,
    seed: int = DEFAULT_SEED,
) -> dict:
    """Counts, time range and (with two keys or more) next-half locality and imbalance of ``trace``.

    Parameters
    ----------
    trace : Trace
        From :func:`locality.datasets.load`.
    n_servers : int, default 6
        Servers, one instance of each operator per server.
    alpha : float, default 1.03
        Per-operator balance bound of the optimizer.
    hash : str, default "kafka"
        The engine whose hash routes the keys missing from the tables (and the hash baseline).
    seed : int, default 0

    Returns
    -------
    dict
        ``rows``, ``distinct`` (per key), ``pairs`` (distinct pairs per hop ``"a -> b"``),
        ``weight_total`` (when the trace has a weight), ``first`` / ``last`` (when it has a
        timestamp), and ``routing`` (when it has a hop): ``n_servers``, ``alpha``,
        ``hash``, ``train_rows``, ``test_rows``, ``hash_locality``,
        ``next_locality``, ``in_sample_locality``, ``hash_imbalance``,
        ``next_imbalance`` (worst operator, max instance load / mean) and ``entries``.
    """
    from locality.analysis import server_sweep, split_trace

    frame, keys = trace.frame, trace.keys
    figures: dict = {
        "name": trace.name,
        "source": trace.source,
        "rows": len(frame),
        "distinct": {key: int(frame[key].nunique()) for key in keys},
        "pairs": {f"{a} -> {b}": int(frame.groupby([a, b]).ngroups) for a, b in zip(keys, keys[1:])},
    }
    if trace.weight is not None:
        figures["weight_total"] = float(frame[trace.weight].sum())
    if trace.ts is not None:
        figures["first"], figures["last"] = str(frame[trace.ts].min()), str(frame[trace.ts].max())
    if len(keys) >= 2:
        train, test = split_trace(frame, 0.5)
        sweep = server_sweep(train, test, keys, [n_servers], alpha=alpha, hash=hash, seed=seed).iloc[0]
        figures["routing"] = {
            "n_servers": n_servers,
            "alpha": alpha,
            "hash": hash,
            "train_rows": len(train),
            "test_rows": len(test),
            "hash_locality": float(sweep["hash_locality"]),
            "next_locality": float(sweep["next_window"]),
            "in_sample_locality": float(sweep["in_sample"]),
            "hash_imbalance": float(sweep["hash_imbalance"]),
            "next_imbalance": float(sweep["next_imbalance"]),
            "entries": int(sweep["entries"]),
        }
    return figures


def format_figures(figures: dict) -> str:
    """The figures of :func:`card_figures` as the Markdown list a card pastes."""
    lines = [
        f"- source: `{figures['source']}`",
        f"- rows: {figures['rows']:,}",
        "- distinct keys: " + ", ".join(f"{k} {n:,}" for k, n in figures["distinct"].items()),
    ]
    if figures["pairs"]:
        lines.append("- distinct pairs: " + ", ".join(f"{hop} {n:,}" for hop, n in figures["pairs"].items()))
    if "weight_total" in figures:
        lines.append(f"- total weight: {figures['weight_total']:,.0f}")
    if "first" in figures:
        lines.append(f"- time range: {figures['first']} .. {figures['last']}")
    routing = figures.get("routing")
    if routing:
        lines += [
            f"- routing, {routing['n_servers']} servers, alpha {routing['alpha']}, {routing['hash']} hash; "
            f"tables learned on the first {routing['train_rows']:,} rows, judged on the next {routing['test_rows']:,}:",
            f"  - locality: hash {routing['hash_locality']:.1%}, tables {routing['next_locality']:.1%} "
            f"(in-sample {routing['in_sample_locality']:.1%})",
            f"  - worst imbalance (max instance load / mean): hash {routing['hash_imbalance']:.2f}, "
            f"tables {routing['next_imbalance']:.2f}",
            f"  - table entries: {routing['entries']:,}",
        ]
    return "\n".join(lines)
