"""The key graph as Spark DataFrames in GraphFrames' schema, and its statistics.

Vertices: ``id`` (long), ``operator``, ``key`` (as a string), ``key_type``
(``string`` / ``long``), ``weight``; edges: ``src``, ``dst``, ``weight``.
When the GraphFrames JVM classes are on the classpath (the embedded session
loads the jars the set-up fetched, :mod:`pipelines.jars`; under ``spark-submit``,
``--jars`` or ``--packages io.graphframes:graphframes-spark4_2.13:...``), the
statistics can come from a ``GraphFrame`` of these DataFrames (degrees,
connected components); scipy computes the same statistics from the driver's
arrays, so a cluster without the jar runs the job all the same. Which one runs
is :mod:`pipelines.graph_backend`'s choice: ``auto`` keeps the driver below the
measured crossover, where GraphFrames is only slower.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from locality.defaults import DEFAULT_GRAPH_STATS_BACKEND
from locality.graph import KeyGraph
from pipelines.graph_backend import choose_backend

__all__ = [
    "key_graph_frames",
    "graph_statistics",
    "graphframes_available",
    "driver_degrees_components",
    "graphframe_degrees_components",
]

logger = logging.getLogger(__name__)


def key_graph_frames(spark, graph: KeyGraph):
    """``(vertices, edges)`` Spark DataFrames of ``graph`` in GraphFrames' schema."""
    table = graph.vertex_table()
    is_int = table["key"].map(lambda k: isinstance(k, (int, np.integer)))
    vertices_pd = pd.DataFrame(
        {
            "id": table["id"],
            "operator": table["operator"].astype(str),
            "key": table["key"].astype(str),
            "key_type": np.where(is_int, "long", "string"),
            "weight": table["weight"].astype(float),
        }
    )
    schema_v = "id long, operator string, key string, key_type string, weight double"
    schema_e = "src long, dst long, weight double"
    vertices = spark.createDataFrame(vertices_pd, schema_v)
    edges = spark.createDataFrame(graph.edge_table(), schema_e)
    return vertices, edges


def graphframes_available(spark) -> bool:
    """True when the GraphFrames JVM classes are on the session's classpath."""
    try:
        jvm = spark.sparkContext._jvm
        jvm.java.lang.Class.forName(
            "org.graphframes.GraphFramePythonAPI", False, jvm.Thread.currentThread().getContextClassLoader()
        )
        return True
    except Exception:  # Py4JJavaError wrapping ClassNotFoundException, or no JVM access (Spark Connect)
        return False


def driver_degrees_components(graph: KeyGraph) -> tuple[np.ndarray, np.ndarray]:
    """Each vertex's degree and connected component label (0, 1, ...), from the driver's arrays with scipy."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = graph.n_vertices
    degree = np.bincount(np.concatenate([graph.src, graph.dst]), minlength=n)
    adjacency = coo_matrix((np.ones(graph.src.shape[0]), (graph.src, graph.dst)), shape=(n, n))
    _, labels = connected_components(adjacency, directed=False)
    return degree, labels


def graphframe_degrees_components(vertices, edges):
    """``id``, ``operator``, ``weight``, ``degree`` (0 when isolated), ``component`` of each vertex, from a GraphFrame.

    Components by GraphFrames' ``graphx`` algorithm (Pregel label propagation
    over its own GraphX): it needs no checkpoint directory, so the job sets none
    on the user's session and leaves nothing on disk, and on the key graphs of
    the shared traces it took 2-5 s where the default two-phase algorithm took
    10-50 s (``local[2]``, 8 shuffle partitions). The key graph is bounded by the
    sketch capacity, so the checkpoints that keep a long lineage in check on huge
    graphs are not needed here.
    """
    from graphframes import GraphFrame
    from pyspark.sql import functions as F

    frame = GraphFrame(vertices, edges)
    return (
        vertices.select("id", "operator", "weight")
        .join(frame.degrees, "id", "left")
        .join(frame.connectedComponents(algorithm="graphx").select("id", "component"), "id", "left")
        .select("id", "operator", "weight", F.coalesce("degree", F.lit(0)).alias("degree"), "component")
    )


def _summarize_on_driver(graph: KeyGraph) -> list[dict]:
    """Per-operator degree statistics and component sizes of ``graph``'s arrays: ``(kind, name, a, b, c)`` rows.

    The key graph is bounded by the sketch capacity and already on the driver:
    scipy's union-find takes milliseconds there. (Shipping it to the JVM and
    back to run the same code in one Spark task cost 1-2 s on the critical
    path of a 3 s job, issue 12; label propagation with joins took 20-70 s on
    the tweet trace's 40k-key graph.)
    """
    n = graph.n_vertices
    degree, labels = driver_degrees_components(graph)
    sizes = np.bincount(labels, minlength=1)
    weights = np.bincount(labels, weights=graph.vertex_weight, minlength=1)
    largest = int(np.argmax(weights)) if n else 0
    rows = [
        {
            "kind": "components",
            "name": "",
            "a": float(sizes.shape[0]) if n else 0.0,
            "b": float(sizes[largest]) if n else 0.0,
            "c": float(weights[largest] / weights.sum()) if n and weights.sum() > 0 else 0.0,
        }
    ]
    for op in graph.operators:
        ops_degree = degree[graph.operator_slice(op)]
        rows.append(
            {
                "kind": "operator",
                "name": op,
                "a": float(ops_degree.shape[0]),
                "b": float(ops_degree.max()) if ops_degree.size else 0.0,
                "c": float(ops_degree.mean()) if ops_degree.size else 0.0,
            }
        )
    return rows


def _summarize_graphframe(vertices, edges):
    """The same ``(kind, name, a, b, c)`` rows from a GraphFrame's degrees and connected components."""
    from pyspark.sql import functions as F

    table = graphframe_degrees_components(vertices, edges).cache()
    try:
        ops = table.groupBy("operator").agg(
            F.lit("operator").alias("kind"),
            F.count(F.lit(1)).cast("double").alias("a"),
            F.max("degree").cast("double").alias("b"),
            F.avg("degree").alias("c"),
        )
        sizes = table.groupBy("component").agg(F.count(F.lit(1)).alias("n"), F.sum("weight").alias("w"))
        components = sizes.agg(
            F.lit("components").alias("kind"),
            F.lit("").alias("operator"),
            F.count(F.lit(1)).cast("double").alias("a"),
            F.max_by("n", "w").cast("double").alias("b"),
            (F.max("w") / F.sum("w")).alias("c"),
        )
        rows = ops.select("kind", F.col("operator").alias("name"), "a", "b", "c").collect()
        return rows + components.select("kind", F.col("operator").alias("name"), "a", "b", "c").collect()
    finally:
        table.unpersist()


def graph_statistics(spark, graph: KeyGraph, backend: str = DEFAULT_GRAPH_STATS_BACKEND) -> dict:
    """Vertex and edge counts, degrees per operator, connected components (count, largest by weight).

    A ``GraphFrame`` of :func:`key_graph_frames` or scipy on the driver's
    arrays computes them (the same figures); ``backend`` in the result says
    which ran and ``backend_reason`` why (:func:`pipelines.graph_backend.choose_backend`).

    Parameters
    ----------
    spark : SparkSession
    graph : KeyGraph
    backend : {"auto", "graphframes", "driver"}, default "auto"
        ``auto``: the driver below the measured crossover or without the jar,
        GraphFrames from it; the others force one (benchmarks compare them).

    Raises
    ------
    InvalidParameterError
        ``backend`` is not one of the three, or is "graphframes" without the jar.
    """
    ran, why = choose_backend(backend, graph.n_edges, graphframes_available(spark))
    logger.info("graph statistics via %s: %s", ran, why)
    if ran == "graphframes":
        rows = _summarize_graphframe(*key_graph_frames(spark, graph))
    else:
        rows = _summarize_on_driver(graph)
    ops = {r["name"]: r for r in rows if r["kind"] == "operator"}
    (components,) = [r for r in rows if r["kind"] == "components"]
    return {
        "backend": ran,
        "backend_reason": why,
        "vertices": int(sum(r["a"] for r in ops.values())),
        "edges": int(round(sum(r["a"] * r["c"] for r in ops.values()) / 2)),
        "operators": {
            name: {"vertices": int(r["a"]), "max_degree": int(r["b"]), "mean_degree": float(r["c"])}
            for name, r in ops.items()
        },
        "components": int(components["a"]),
        "largest_component_vertices": int(components["b"]),
        "largest_component_weight_share": float(components["c"]),
    }
