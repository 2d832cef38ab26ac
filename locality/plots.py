"""Plots a person reads at a glance; the hash baseline is always drawn beside the result.

Every figure is a :class:`matplotlib.figure.Figure` on its own Agg canvas
(matplotlib's object API), never a ``pyplot`` figure: ``pyplot`` keeps global
state (a figure manager, a backend chosen once per process, a REPL display
hook), none of which a job needs. An object-API figure is freed when dropped,
renders to PNG anywhere, and a notebook shows it inline with ``display(fig)``
(after ``%matplotlib inline``). matplotlib is imported inside the functions,
so importing locality never loads it.

matplotlib still reads ``sys.modules["IPython"]`` once, when it makes its
first canvas: do not draw while another thread may be importing IPython (the
offline job draws after its graph-statistics thread is done, see
``pipelines/offline.py``).

References
----------
.. [1] matplotlib, "Embedding in a web application server (Flask)":
   https://matplotlib.org/stable/gallery/user_interfaces/web_application_server_sgskip.html
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from locality.evaluation import EvaluationReport

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["new_figure", "instance_load_figure", "locality_figure", "figure_png"]


def new_figure(figsize: tuple[float, float]) -> Figure:
    """An empty figure on its own Agg canvas (no pyplot, no global state): add axes with ``fig.subplots``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def instance_load_figure(
    report: EvaluationReport, shares: Mapping[str, Sequence[float]] | None = None, alpha: float | None = None
) -> Figure:
    """Per-instance load relative to the fair share, hash vs optimized, one panel per operator.

    Parameters
    ----------
    report : EvaluationReport
    shares : mapping of operator -> fair shares (sum 1), optional
        Default: equal shares.
    alpha : float, optional
        Draws the balance bound as a dashed line.
    """
    ops = list(report.optimized.instance_loads)
    fig = new_figure((5.5 * len(ops), 3.6))
    axes = fig.subplots(1, len(ops), squeeze=False)
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
    if ax is None:
        ax = new_figure((6.5, 3.8)).subplots()
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


def figure_png(fig: Figure, dpi: int = 110) -> bytes:
    """The figure as PNG bytes, rendered by the Agg canvas."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
