"""The key graph as Spark DataFrames in GraphFrames' schema, and its statistics.

Vertices: ``id`` (long), ``operator``, ``key`` (as a string), ``key_type``
(``string`` / ``long``), ``weight``; edges: ``src``, ``dst``, ``weight``.
When the GraphFrames JVM classes are on the classpath (``--jars`` or
``--packages io.graphframes:graphframes-spark4_2.13:...``), the statistics come
from a ``GraphFrame`` (degrees, connected components); otherwise the same
statistics are computed with plain DataFrame operations, so the job never
needs the jar (it cannot be downloaded on offline machines).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from locality.graph import KeyGraph

__all__ = ["key_graph_frames", "graph_statistics", "graphframes_available"]

logger = logging.getLogger(__name__)

#: Label propagation stops here even if labels still change (very long chains of keys).
MAX_COMPONENT_ROUNDS = 60


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
        jvm.java.lang.Class.forName("org.graphframes.GraphFramePythonAPI", False, jvm.Thread.currentThread().getContextClassLoader())
        return True
    except Exception:  # Py4JJavaError wrapping ClassNotFoundException, or no JVM access (Spark Connect)
        return False


def _components_dataframes(vertices, edges):
    """Connected components with DataFrame joins: ``(id, component)`` and whether it converged.

    Min-label propagation with pointer jumping: each round every vertex takes
    the smallest label among itself and its neighbours, then the label of its
    label (labels are vertex ids), which halves distances to the minimum, so
    rounds grow with the log of the diameter, not the diameter.
    """
    from pyspark.sql import functions as F

    both = edges.select("src", "dst").union(edges.select(F.col("dst").alias("src"), F.col("src").alias("dst")))
    labels = vertices.select("id", F.col("id").alias("component")).localCheckpoint()
    for _ in range(MAX_COMPONENT_ROUNDS):
        offers = both.join(labels, both.src == labels.id).select(F.col("dst").alias("id"), "component")
        spread = labels.union(offers).groupBy("id").agg(F.min("component").alias("component"))
        parent = spread.select(F.col("id").alias("pid"), F.col("component").alias("grand"))
        jumped = (
            spread.join(parent, spread.component == parent.pid, "left")
            .select("id", F.least("component", F.coalesce("grand", "component")).alias("component"))
            .localCheckpoint()
        )
        changed = jumped.join(labels.withColumnRenamed("component", "old"), "id").filter("component < old").count()
        labels = jumped
        if changed == 0:
            return labels, True
    logger.warning("connected components did not converge in %d rounds", MAX_COMPONENT_ROUNDS)
    return labels, False


def graph_statistics(spark, vertices, edges) -> dict:
    """Vertex and edge counts, degrees per operator, connected components (count, largest by weight).

    Uses a ``GraphFrame`` when the jar is present, DataFrames otherwise;
    ``engine`` in the result says which.
    """
    from pyspark.sql import functions as F

    engine = "dataframes"
    converged = True
    if graphframes_available(spark):
        from graphframes import GraphFrame

        frame = GraphFrame(vertices, edges)
        degrees = frame.degrees
        checkpoint = spark.sparkContext.getCheckpointDir()
        if checkpoint is None:
            import tempfile

            spark.sparkContext.setCheckpointDir(tempfile.mkdtemp(prefix="locality-gf-"))
        components = frame.connectedComponents().select("id", "component")
        engine = "graphframes"
    else:
        ends = edges.select(F.explode(F.array("src", "dst")).alias("id"))
        degrees = ends.groupBy("id").agg(F.count(F.lit(1)).cast("int").alias("degree"))
        components, converged = _components_dataframes(vertices, edges)

    with_degree = vertices.join(degrees, "id", "left").fillna({"degree": 0})
    per_op = (
        with_degree.groupBy("operator")
        .agg(
            F.count(F.lit(1)).alias("vertices"),
            F.max("degree").alias("max_degree"),
            F.avg("degree").alias("mean_degree"),
            F.sum("weight").alias("weight"),
        )
        .toPandas()
    )
    sizes = (
        components.join(vertices.select("id", "weight"), "id")
        .groupBy("component")
        .agg(F.count(F.lit(1)).alias("vertices"), F.sum("weight").alias("weight"))
        .orderBy(F.desc("weight"))
        .toPandas()
    )
    total_weight = float(sizes["weight"].sum()) if len(sizes) else 0.0
    return {
        "engine": engine,
        "vertices": int(per_op["vertices"].sum()) if len(per_op) else 0,
        "edges": int(edges.count()),
        "operators": {
            row.operator: {
                "vertices": int(row.vertices),
                "max_degree": int(row.max_degree),
                "mean_degree": float(row.mean_degree),
            }
            for row in per_op.itertuples(index=False)
        },
        "components": int(len(sizes)),
        "components_converged": converged,
        "largest_component_vertices": int(sizes["vertices"].iloc[0]) if len(sizes) else 0,
        "largest_component_weight_share": float(sizes["weight"].iloc[0] / total_weight) if total_weight else 0.0,
    }
