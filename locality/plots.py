"""Plots a person reads at a glance; the hash baseline is always drawn beside the result.

matplotlib is imported inside each function, so importing locality never
loads it; the backend is left to the caller (inline in notebooks, Agg headless).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

import numpy as np

from locality.evaluation import EvaluationReport

__all__ = ["instance_load_figure", "locality_figure", "figure_png"]


def _pyplot():
    # The backend is the caller's: inline in a notebook, a window on a desktop, Agg on a headless
    # server (matplotlib falls back to it on its own when no display is available).
    import matplotlib.pyplot as plt

    return plt


def instance_load_figure(
    report: EvaluationReport, shares: Mapping[str, Sequence[float]] | None = None, alpha: float | None = None
):
    """Per-instance load relative to the fair share, hash vs optimized, one panel per operator.

    Parameters
    ----------
    report : EvaluationReport
    shares : mapping of operator -> fair shares (sum 1), optional
        Default: equal shares.
    alpha : float, optional
        Draws the balance bound as a dashed line.
    """
    plt = _pyplot()
    ops = list(report.optimized.instance_loads)
    fig, axes = plt.subplots(1, len(ops), figsize=(5.5 * len(ops), 3.6), squeeze=False)
    for ax, op in zip(axes[0], ops):
        opt = np.asarray(report.optimized.instance_loads[op])
        hsh = np.asarray(report.hash.instance_loads[op])
        share = np.asarray(shares[op]) if shares else np.full(opt.shape[0], 1.0 / opt.shape[0])
        fair = share * opt.sum()
        x = np.arange(opt.shape[0])
        ax.bar(x - 0.2, hsh / fair, width=0.4, label=f"hash (max {report.hash.imbalance[op]:.2f})", color="#9e9e9e")
        ax.bar(
            x + 0.2,
            opt / fair,
            width=0.4,
            label=f"optimized (max {report.optimized.imbalance[op]:.2f})",
            color="#1f77b4",
        )
        ax.axhline(1.0, color="black", linewidth=0.8)
        if alpha:
            ax.axhline(alpha, color="#d62728", linestyle="--", linewidth=1, label=f"alpha {alpha:g}")
        ax.set_title(f"operator {op!r}")
        ax.set_xlabel("instance")
        ax.set_ylabel("load / fair share")
        ax.set_xticks(x)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(
        f"Per-instance load: locality {report.optimized.locality:.1%} (hash {report.hash.locality:.1%})", fontsize=11
    )
    fig.tight_layout()
    return fig


def locality_figure(
    x: Sequence,
    series: Mapping[str, Sequence[float]],
    *,
    hash_locality: Sequence[float],
    xlabel: str,
    title: str,
    ax=None,
):
    """Locality (%) against ``x`` for several configurations, with hash routing as a dashed grey line."""
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.8))
    for name, values in series.items():
        ax.plot(x, 100 * np.asarray(values, dtype=float), marker="o", label=name)
    ax.plot(x, 100 * np.asarray(hash_locality, dtype=float), linestyle="--", color="grey", marker=".", label="hash")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("locality (% of hops on one server)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def figure_png(fig, dpi: int = 110) -> bytes:
    """The figure as PNG bytes (and the figure closed)."""
    plt = _pyplot()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    return buffer.getvalue()
