"""The notebooks' look at a key graph: its components, its hubs and its degree distribution, from either backend.

The problem: the notebooks describe the key graph the job partitions, and
where the GraphFrames jar is present they should read the same ``GraphFrame``
the job builds (:func:`pipelines.graph_frames.key_graph_frames`) and show the
same figures as the driver path. Both backends give each vertex a degree and a
component label (:func:`~pipelines.graph_frames.graphframe_degrees_components`,
:func:`~pipelines.graph_frames.driver_degrees_components`); one pandas
summary turns them into the tables below, so the figures cannot differ by
how they are summed, and :meth:`GraphAnalysis.same_figures` compares two runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from locality._validation import check_integer
from locality.defaults import DEFAULT_GRAPH_STATS_BACKEND
from locality.graph import KeyGraph
from pipelines.graph_backend import check_backend, choose_backend
from pipelines.graph_frames import (
    driver_degrees_components,
    graphframe_degrees_components,
    graphframes_available,
    key_graph_frames,
)

__all__ = ["GraphAnalysis", "analyze_graph"]


@dataclass(frozen=True)
class GraphAnalysis:
    """A key graph's components, hubs and degree distribution, and the backend that computed them.

    ``components``: one row per component, heaviest load first (``keys``,
    ``load_share``; ``operator`` columns count its keys per operator);
    ``hubs``: per operator, the ``top`` keys of highest degree (``operator``,
    ``key``, ``degree``, ``load``; ties by key id); ``degrees``: per operator,
    how many keys have each degree (``operator``, ``degree``, ``keys``).
    """

    backend: str
    backend_reason: str
    components: pd.DataFrame
    hubs: pd.DataFrame
    degrees: pd.DataFrame

    def same_figures(self, other: GraphAnalysis) -> bool:
        """True when ``other`` (say, the other backend's) has the same three tables, floats to 1e-9."""
        pairs = zip((self.components, self.hubs, self.degrees), (other.components, other.hubs, other.degrees))
        try:
            for mine, theirs in pairs:
                pd.testing.assert_frame_equal(mine, theirs, check_exact=False, rtol=1e-9)
        except AssertionError:
            return False
        return True


def analyze_graph(spark, graph: KeyGraph, backend: str = DEFAULT_GRAPH_STATS_BACKEND, top: int = 10) -> GraphAnalysis:
    """Components, hubs and degree distribution of ``graph``, computed where ``backend`` says.

    Parameters
    ----------
    spark : SparkSession
    graph : KeyGraph
    backend : {"auto", "graphframes", "driver"}, default "auto"
        As the job's ``graph_stats_backend`` (:func:`pipelines.graph_backend.choose_backend`):
        "graphframes" reads a ``GraphFrame`` of :func:`~pipelines.graph_frames.key_graph_frames`.
    top : int, default 10
        Hubs listed per operator.

    Raises
    ------
    InvalidParameterError
        ``backend`` is not one of the three, or is "graphframes" without the jar; ``top`` < 1.
    """
    jar = graphframes_available(spark)
    check_backend(backend, jar, "backend", "analyze_graph")
    check_integer(top, "top", "analyze_graph", lower=1)
    ran, why = choose_backend(backend, graph.n_edges, jar)
    if ran == "graphframes":
        frame = graphframe_degrees_components(*key_graph_frames(spark, graph)).select("id", "degree", "component")
        table = frame.toPandas().sort_values("id")
        degree, labels = table["degree"].to_numpy(), table["component"].to_numpy()
    else:
        degree, labels = driver_degrees_components(graph)
    return GraphAnalysis(ran, why, *_summarize(graph, degree, labels, top))


def _summarize(graph: KeyGraph, degree: np.ndarray, labels: np.ndarray, top: int):
    """The three tables from each vertex's degree and component label, by vertex id.

    Any labels do: components are renumbered by their smallest vertex id (the
    order labels first appear in), which also orders components of equal load.
    """
    vertices = graph.vertex_table()[["id", "operator", "key", "weight"]].sort_values("id", kind="stable")
    vertices = vertices.assign(degree=np.asarray(degree, dtype=np.int64), component=pd.factorize(labels)[0])
    total = vertices["weight"].sum()
    by_component = vertices.pivot_table(index="component", columns="operator", values="id", aggfunc="count")
    components = (
        pd.DataFrame(
            {"keys": vertices.groupby("component").size(), "load_share": vertices.groupby("component")["weight"].sum()}
        )
        .assign(load_share=lambda c: c["load_share"] / total if total > 0 else 0.0)
        .join(by_component.reindex(columns=list(graph.operators)).fillna(0).astype(np.int64))
        .sort_values(["load_share", "keys"], ascending=False, kind="stable")
        .reset_index(drop=True)
    )
    hubs = (
        vertices.sort_values(["operator", "degree", "id"], ascending=[True, False, True], kind="stable")
        .groupby("operator", sort=False)
        .head(top)
        .rename(columns={"weight": "load"})[["operator", "key", "degree", "load"]]
        .reset_index(drop=True)
    )
    degrees = vertices.groupby(["operator", "degree"]).size().rename("keys").reset_index()
    return components, hubs, degrees
