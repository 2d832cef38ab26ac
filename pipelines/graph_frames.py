"""The key graph as Spark DataFrames in GraphFrames' schema, and its statistics.

Vertices: ``id`` (long), ``operator``, ``key`` (as a string), ``key_type``
(``string`` / ``long``), ``weight``; edges: ``src``, ``dst``, ``weight``.
When the GraphFrames JVM classes are on the classpath (the embedded session
loads the jars the set-up fetched, :mod:`pipelines.jars`; under ``spark-submit``,
``--jars`` or ``--packages io.graphframes:graphframes-spark4_2.13:...``), the
statistics come from a ``GraphFrame`` of these DataFrames (degrees, connected
components); otherwise scipy computes the same statistics from the driver's
arrays, so a cluster without the jar runs the job all the same.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from locality._validation import check_option
from locality.errors import InvalidParameterError
from locality.graph import KeyGraph

__all__ = ["key_graph_frames", "graph_statistics", "graphframes_available"]

logger = logging.getLogger(__name__)

#: Where the statistics are computed: a GraphFrame (the jar is on the classpath) or scipy on the driver.
ENGINES = ("graphframes", "driver")


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


def _summarize_on_driver(graph: KeyGraph) -> list[dict]:
    """Per-operator degree statistics and component sizes of ``graph``'s arrays: ``(kind, name, a, b, c)`` rows.

    The key graph is bounded by the sketch capacity and already on the driver:
    scipy's union-find takes milliseconds there. (Shipping it to the JVM and
    back to run the same code in one Spark task cost 1-2 s on the critical
    path of a 3 s job, issue 12; label propagation with joins took 20-70 s on
    the tweet trace's 40k-key graph.)
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = graph.n_vertices
    degree = np.bincount(np.concatenate([graph.src, graph.dst]), minlength=n)
    adjacency = coo_matrix((np.ones(graph.src.shape[0]), (graph.src, graph.dst)), shape=(n, n))
    _, labels = connected_components(adjacency, directed=False)
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
    """The same ``(kind, name, a, b, c)`` rows from a GraphFrame's degrees and connected components.

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
    table = (
        vertices.select("id", "operator", "weight")
        .join(frame.degrees, "id", "left")
        .join(frame.connectedComponents(algorithm="graphx").select("id", "component"), "id", "left")
        .select("operator", "weight", F.coalesce("degree", F.lit(0)).alias("degree"), "component")
    ).cache()
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


def graph_statistics(spark, graph: KeyGraph, engine: str | None = None) -> dict:
    """Vertex and edge counts, degrees per operator, connected components (count, largest by weight).

    With the GraphFrames jar on the classpath, a ``GraphFrame`` of
    :func:`key_graph_frames` computes them; without it, scipy on the driver's
    arrays does (the same figures); ``engine`` in the result says which.

    Parameters
    ----------
    spark : SparkSession
    graph : KeyGraph
    engine : {"graphframes", "driver"}, optional
        Force one engine (benchmarks compare them in one session); default:
        GraphFrames when its classes are on the session's classpath.

    Raises
    ------
    InvalidParameterError
        ``engine`` is not one of the two, or is "graphframes" without the jar.
    """
    available = graphframes_available(spark)
    if engine is None:
        engine = "graphframes" if available else "driver"
    check_option(engine, "engine", "graph_statistics", ENGINES)
    if engine == "graphframes" and not available:
        raise InvalidParameterError(
            "the 'engine' parameter of graph_statistics is 'graphframes', but the session has no GraphFrames "
            "classes on its classpath (spark.jars, or --jars / --packages under spark-submit)"
        )
    if engine == "graphframes":
        rows = _summarize_graphframe(*key_graph_frames(spark, graph))
    else:
        if not available:
            logger.info("graph statistics on the driver: no GraphFrames classes on the session's classpath")
        rows = _summarize_on_driver(graph)
    ops = {r["name"]: r for r in rows if r["kind"] == "operator"}
    (components,) = [r for r in rows if r["kind"] == "components"]
    return {
        "engine": engine,
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
