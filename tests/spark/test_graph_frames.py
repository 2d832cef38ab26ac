"""The key graph's statistics: from a real GraphFrame in the offline job, and on the driver without the jar.

Both are checked against networkx on the same graph: the tweet trace's key graph
(40,658 keys in 115 components, so component counts and the heaviest one's
share are not trivial).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import networkx as nx
import pytest

from locality.cli import ExitCode
from locality.errors import InvalidParameterError
from locality.graph import KeyGraph
from locality.store import ConfigStore
from pipelines.counting import sketch_trace
from pipelines.graph_frames import graph_statistics, graphframes_available, key_graph_frames
from pipelines.jars import JARS_ENV, spark_jars, spark_jars_dir
from pipelines.trace import TraceSpec, read_trace
from tests.conftest import REPO, trace_keys, trace_path

GEO = trace_keys("geotweets")


@pytest.fixture(scope="module")
def geo_graph(spark) -> KeyGraph:
    """The tweet trace's key graph as the offline job builds it by default (capacity 100k covers every key)."""
    return sketch_trace(read_trace(spark, TraceSpec(str(trace_path("geotweets")), GEO)), GEO, capacity=100_000).graph()


def to_networkx(graph: KeyGraph) -> nx.Graph:
    """``graph`` as an undirected networkx graph: ``operator`` and ``weight`` on nodes, ``weight`` on edges."""
    g = nx.Graph()
    vertices = graph.vertex_table()
    g.add_nodes_from(
        (int(v.id), {"operator": v.operator, "weight": float(v.weight)}) for v in vertices.itertuples(index=False)
    )
    g.add_weighted_edges_from(zip(graph.src.tolist(), graph.dst.tolist(), graph.edge_weight.tolist()))
    return g


def assert_statistics_equal_networkx(stats: dict, graph: KeyGraph) -> None:
    """Every figure of ``stats`` equals networkx's on ``graph``."""
    g = to_networkx(graph)
    components = list(nx.connected_components(g))
    load = {v: w for v, w in g.nodes(data="weight")}
    heaviest = max(components, key=lambda c: sum(load[v] for v in c))
    assert stats["vertices"] == g.number_of_nodes() and stats["edges"] == g.number_of_edges()
    assert stats["components"] == len(components) == 115
    assert stats["largest_component_vertices"] == len(heaviest)
    assert stats["largest_component_weight_share"] == pytest.approx(sum(load[v] for v in heaviest) / sum(load.values()))
    assert set(stats["operators"]) == set(GEO)
    for op in GEO:
        degrees = [d for v, d in g.degree() if g.nodes[v]["operator"] == op]
        figures = stats["operators"][op]
        assert figures["vertices"] == len(degrees)
        assert figures["max_degree"] == max(degrees)
        assert figures["mean_degree"] == pytest.approx(sum(degrees) / len(degrees))


def test_offline_job_statistics_come_from_a_graphframe(geo_graph, tmp_path):
    """``locality optimize`` in its own process: its embedded session loads the jars the set-up fetched."""
    if not spark_jars():
        pytest.skip(
            f"no GraphFrames jars in {spark_jars_dir()} (${JARS_ENV}): `make graphframes` fetches them with Maven "
            "(when it cannot, its log is graphframes-fetch.log there)"
        )
    store = tmp_path / "store"
    args = ["optimize", str(trace_path("geotweets")), "--keys", ",".join(GEO), "--servers", "6"]
    done = subprocess.run(
        [sys.executable, "-m", "locality.cli", *args, "--store", str(store), "--json", "-q"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert done.returncode == ExitCode.OK, done.stderr
    stats = json.loads(done.stdout)["graph_statistics"]
    assert stats["engine"] == "graphframes"
    assert_statistics_equal_networkx(stats, geo_graph)
    assert "of the load; via graphframes)" in (ConfigStore(store).get().path / "report.txt").read_text()


def test_without_the_jar_the_driver_computes_the_same_statistics(spark, geo_graph, caplog):
    """The tests' shared session has no GraphFrames jar: a cluster without it gets the same figures."""
    assert not graphframes_available(spark)
    vertices, edges = key_graph_frames(spark, geo_graph)  # what a GraphFrame would be built from
    assert vertices.columns[0] == "id" and edges.columns[:2] == ["src", "dst"]
    assert vertices.count() == geo_graph.n_vertices and edges.count() == geo_graph.n_edges
    with caplog.at_level(logging.INFO, logger="pipelines.graph_frames"):
        stats = graph_statistics(spark, geo_graph)
    assert stats["engine"] == "driver"
    assert [r.getMessage() for r in caplog.records if "on the driver" in r.getMessage()] == [
        "graph statistics on the driver: no GraphFrames classes on the session's classpath"
    ]
    assert_statistics_equal_networkx(stats, geo_graph)
    with pytest.raises(InvalidParameterError, match="'graphframes', but the session has no GraphFrames classes"):
        graph_statistics(spark, geo_graph, engine="graphframes")


def test_the_jar_directory_is_named_by_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(JARS_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert spark_jars_dir() == tmp_path / "cache" / "locality" / "jars"
    assert spark_jars() == []  # no directory yet: no jars, the driver path
    monkeypatch.setenv(JARS_ENV, str(tmp_path / "jars"))
    (tmp_path / "jars").mkdir()
    for name in ("graphframes-spark4_2.13-0.12.3.jar", "graphframes-graphx-spark4_2.13-0.12.3.jar", "fetch.log"):
        (tmp_path / "jars" / name).write_bytes(b"")
    assert spark_jars() == [
        str(tmp_path / "jars" / "graphframes-graphx-spark4_2.13-0.12.3.jar"),
        str(tmp_path / "jars" / "graphframes-spark4_2.13-0.12.3.jar"),
    ]
