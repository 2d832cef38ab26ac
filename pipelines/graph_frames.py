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
        jvm.java.lang.Class.forName(
            "org.graphframes.GraphFramePythonAPI", False, jvm.Thread.currentThread().getContextClassLoader()
        )
        return True
    except Exception:  # Py4JJavaError wrapping ClassNotFoundException, or no JVM access (Spark Connect)
        return False


def _summarize_in_one_task(vertices, edges):
    """Per-operator degree statistics and component sizes from one Spark task: ``(kind, name, a, b, c)`` rows.

    The key graph is bounded by the sketch capacity, so one task holds it:
    vertices and edges are unioned into one partition and a ``mapInArrow``
    task counts degrees and runs scipy's union-find. (Label propagation with
    joins needs several shuffles per round and took 20-70 s on the tweet
    trace's 40k-key graph here; this is one job without a shuffle.)
    """
    from pyspark.sql import functions as F

    def summarize(batches):
        import numpy as np
        import pandas as pd
        import pyarrow as pa
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        table = pa.Table.from_batches(list(batches)).to_pandas()
        nodes = table[table["kind"] == 0]
        links = table[table["kind"] == 1]
        ids = nodes["a"].to_numpy()
        index = pd.Index(ids)
        src, dst = index.get_indexer(links["a"]), index.get_indexer(links["b"])
        n = ids.shape[0]
        degree = np.bincount(np.concatenate([src, dst]), minlength=n)
        _, labels = connected_components(coo_matrix((np.ones(src.shape[0]), (src, dst)), shape=(n, n)), directed=False)
        sizes = np.bincount(labels)
        weights = np.bincount(labels, weights=nodes["weight"].to_numpy())
        largest = int(np.argmax(weights)) if n else 0
        rows = [
            (
                "components",
                "",
                float(sizes.shape[0]),
                float(sizes[largest]) if n else 0.0,
                float(weights[largest] / weights.sum()) if n and weights.sum() > 0 else 0.0,
            )
        ]
        for op, group in pd.Series(degree).groupby(nodes["operator"].to_numpy()):
            rows.append(("operator", op, float(group.shape[0]), float(group.max()), float(group.mean())))
        kinds, names, a, b, c = zip(*rows)
        yield pa.RecordBatch.from_arrays(
            [pa.array(kinds), pa.array(names), pa.array(a), pa.array(b), pa.array(c)],
            names=["kind", "name", "a", "b", "c"],
        )

    both = vertices.select(
        F.lit(0).alias("kind"), F.col("id").alias("a"), F.lit(-1).cast("long").alias("b"), "operator", "weight"
    ).unionByName(
        edges.select(
            F.lit(1).alias("kind"),
            F.col("src").alias("a"),
            F.col("dst").alias("b"),
            F.lit(None).cast("string").alias("operator"),
            "weight",
        )
    )
    return both.coalesce(1).mapInArrow(summarize, "kind string, name string, a double, b double, c double").collect()


def _summarize_graphframe(spark, vertices, edges):
    """The same ``(kind, name, a, b, c)`` rows from a GraphFrame's degrees and connected components."""
    import tempfile

    from graphframes import GraphFrame
    from pyspark.sql import functions as F

    if spark.sparkContext.getCheckpointDir() is None:
        spark.sparkContext.setCheckpointDir(tempfile.mkdtemp(prefix="locality-graphframes-"))
    frame = GraphFrame(vertices, edges)
    table = (
        vertices.select("id", "operator", "weight")
        .join(frame.degrees, "id", "left")
        .join(frame.connectedComponents().select("id", "component"), "id", "left")
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


def graph_statistics(spark, vertices, edges) -> dict:
    """Vertex and edge counts, degrees per operator, connected components (count, largest by weight).

    Uses a ``GraphFrame`` when the jar is present, plain DataFrames
    otherwise; ``engine`` in the result says which.
    """
    if graphframes_available(spark):
        engine, rows = "graphframes", _summarize_graphframe(spark, vertices, edges)
    else:
        engine, rows = "dataframes", _summarize_in_one_task(vertices, edges)
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
