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


def _degrees_and_components(vertices, edges):
    """``(id, degree, component)`` of every vertex, component = smallest id in it.

    The key graph is bounded by the sketch capacity, so one task holds its
    edges: they are coalesced into one partition and a ``mapInArrow`` task
    counts degrees and runs scipy's union-find. (Label propagation with joins
    needs several shuffles per round and took 20-70 s on the tweet trace's
    40k-key graph here; this takes one job.)
    """
    from pyspark.sql import functions as F

    def per_vertex(batches):
        import numpy as np
        import pyarrow as pa
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        tables = [b for b in batches if b.num_rows]
        if not tables:
            return
        src = np.concatenate([b.column("src").to_numpy() for b in tables])
        dst = np.concatenate([b.column("dst").to_numpy() for b in tables])
        ids, index = np.unique(np.concatenate([src, dst]), return_inverse=True)
        n = ids.shape[0]
        graph = coo_matrix((np.ones(src.shape[0]), (index[: src.shape[0]], index[src.shape[0] :])), shape=(n, n))
        _, labels = connected_components(graph, directed=False)
        smallest = np.full(labels.max() + 1, np.iinfo(np.int64).max)
        np.minimum.at(smallest, labels, ids)
        degree = np.bincount(index, minlength=n).astype(np.int32)
        yield pa.RecordBatch.from_arrays(
            [pa.array(ids), pa.array(degree), pa.array(smallest[labels])], names=["id", "degree", "component"]
        )

    linked = edges.select("src", "dst").coalesce(1).mapInArrow(per_vertex, "id long, degree int, component long")
    return vertices.join(linked, "id", "left").select(
        "id",
        "operator",
        "weight",
        F.coalesce("degree", F.lit(0)).alias("degree"),
        F.coalesce("component", "id").alias("component"),
    )


def _graphframe_per_vertex(spark, vertices, edges):
    """The same ``(id, operator, weight, degree, component)`` table from a GraphFrame."""
    import tempfile

    from graphframes import GraphFrame
    from pyspark.sql import functions as F

    if spark.sparkContext.getCheckpointDir() is None:
        spark.sparkContext.setCheckpointDir(tempfile.mkdtemp(prefix="locality-graphframes-"))
    frame = GraphFrame(vertices, edges)
    components = frame.connectedComponents().select("id", "component")
    return (
        vertices.select("id", "operator", "weight")
        .join(frame.degrees, "id", "left")
        .join(components, "id", "left")
        .select("id", "operator", "weight", F.coalesce("degree", F.lit(0)).alias("degree"), "component")
    )


def graph_statistics(spark, vertices, edges) -> dict:
    """Vertex and edge counts, degrees per operator, connected components (count, largest by weight).

    Uses a ``GraphFrame`` when the jar is present, DataFrames otherwise;
    ``engine`` in the result says which.
    """
    from pyspark.sql import functions as F

    if graphframes_available(spark):
        engine, table = "graphframes", _graphframe_per_vertex(spark, vertices, edges)
    else:
        engine, table = "dataframes", _degrees_and_components(vertices, edges)
    table = table.cache()
    try:
        per_op = (
            table.groupBy("operator")
            .agg(
                F.count(F.lit(1)).alias("vertices"),
                F.max("degree").alias("max_degree"),
                F.avg("degree").alias("mean_degree"),
                F.sum("degree").alias("degree_sum"),
            )
            .toPandas()
        )
        sizes = table.groupBy("component").agg(F.count(F.lit(1)).alias("vertices"), F.sum("weight").alias("weight"))
        summary = sizes.agg(
            F.count(F.lit(1)).alias("components"),
            F.max_by("vertices", "weight").alias("largest_vertices"),
            F.max("weight").alias("largest_weight"),
            F.sum("weight").alias("weight"),
        ).collect()[0]
    finally:
        table.unpersist()
    total_weight = float(summary["weight"] or 0.0)
    return {
        "engine": engine,
        "vertices": int(per_op["vertices"].sum()),
        "edges": int(per_op["degree_sum"].sum()) // 2,
        "operators": {
            row.operator: {
                "vertices": int(row.vertices),
                "max_degree": int(row.max_degree),
                "mean_degree": float(row.mean_degree),
            }
            for row in per_op.itertuples(index=False)
        },
        "components": int(summary["components"]),
        "largest_component_vertices": int(summary["largest_vertices"] or 0),
        "largest_component_weight_share": float(summary["largest_weight"] / total_weight) if total_weight else 0.0,
    }
