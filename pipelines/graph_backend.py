"""Where the key graph's statistics are computed: a GraphFrame, the driver, or ``auto``'s choice by the graph's size.

The problem: with the GraphFrames jar on the classpath, computing the statistics
with a ``GraphFrame`` gave the same figures as scipy on the driver, but far
slower on the tweets' key graph, and the offline job waits for them beside METIS
(``benchmarks/RESULTS.md``, "Graph statistics"). A user who installed the jar
got a slower job for nothing. ``auto`` therefore runs GraphFrames only from the
graph size at which it measured faster than the driver
(``benchmarks/bench_graph_backends.py``): below it, or where no size
measured made it faster, the driver computes them.

The name: ``backend``, as networkx calls the implementation an algorithm
dispatches to with the same results; ``engine`` already names the stream
engine whose hash the tables fall back to (``--hash``). The command line's
``--graph-stats-backend``, the offline job's ``graph_stats_backend`` and the
report's ``graph_statistics.backend`` are the same choice.
"""

from __future__ import annotations

from locality._validation import check_option
from locality.errors import InvalidParameterError

__all__ = ["BACKENDS", "GRAPHFRAMES_FROM_EDGES", "MEASURED_UP_TO_EDGES", "check_backend", "choose_backend"]

#: ``auto`` picks by size; ``graphframes`` needs the jar; ``driver`` is scipy on the driver's arrays.
BACKENDS = ("auto", "graphframes", "driver")
#: The smallest edge count at which GraphFrames' statistics were faster than the driver's (medians, one run,
#: ``benchmarks/bench_graph_backends.py``); None: at no size measured, up to :data:`MEASURED_UP_TO_EDGES`
#: (2026-11-27, ``local[2]``, the jobs' 2g heap: 400x slower at 1e5 edges, out of heap at 1e6, unfinished
#: after 5 minutes at 1e7, where the driver took 0.05, 0.17 and 2.6 s).
GRAPHFRAMES_FROM_EDGES: int | None = None
#: The largest key graph the crossover benchmark ran both backends on.
MEASURED_UP_TO_EDGES = 10_000_000


def check_backend(backend: str, jar: bool, name: str = "backend", owner: str = "graph_statistics") -> str:
    """Return ``backend`` if it is one of :data:`BACKENDS` and can run: "graphframes" needs the jar.

    ``jar`` says whether the session has GraphFrames' classes on its classpath;
    ``name`` and ``owner`` are the parameter and its owner the message names
    (the offline job checks ``graph_stats_backend`` before it reads the trace).
    """
    check_option(backend, name, owner, BACKENDS)
    if backend == "graphframes" and not jar:
        raise InvalidParameterError(
            f"the {name!r} parameter of {owner} is 'graphframes', but the session has no GraphFrames classes on "
            "its classpath (spark.jars, or --jars / --packages under spark-submit)"
        )
    return backend


def choose_backend(backend: str, n_edges: int, jar: bool) -> tuple[str, str]:
    """The backend that runs for the choice ``backend`` on a graph of ``n_edges`` edges, and why.

    Parameters
    ----------
    backend : {"auto", "graphframes", "driver"}
    n_edges : int
        The key graph's edge count.
    jar : bool
        Whether the session has GraphFrames' classes on its classpath.

    Returns
    -------
    (str, str)
        ``"graphframes"`` or ``"driver"``, and a sentence for the report.

    Raises
    ------
    InvalidParameterError
        ``backend`` is not one of :data:`BACKENDS`, or is "graphframes" without the jar.
    """
    check_backend(backend, jar)
    if backend != "auto":
        return backend, f"asked for ({backend})"
    if not jar:
        return "driver", "auto: no GraphFrames classes on the session's classpath"
    if GRAPHFRAMES_FROM_EDGES is None:
        return "driver", (
            f"auto: {n_edges:,} edges; the driver was faster than GraphFrames at every size measured, up to "
            f"{MEASURED_UP_TO_EDGES:,} edges (benchmarks/RESULTS.md, issue 37)"
        )
    if n_edges < GRAPHFRAMES_FROM_EDGES:
        return "driver", f"auto: {n_edges:,} edges, below the {GRAPHFRAMES_FROM_EDGES:,}-edge crossover"
    return "graphframes", f"auto: {n_edges:,} edges, at or above the {GRAPHFRAMES_FROM_EDGES:,}-edge crossover"
