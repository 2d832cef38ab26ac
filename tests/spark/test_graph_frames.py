"""The key graph's statistics: from a real GraphFrame in the offline job, on the driver, and auto's choice.

Both backends are checked against networkx on the same graph: the tweet trace's
key graph (40,658 keys in 115 components, so component counts and the heaviest
one's share are not trivial). The GraphFrames jar is the one the set-up put in
``$LOCALITY_SPARK_JARS`` (fetched by Maven, or copied from ``../shared/jars``
where Maven serves none), else the one in ``../shared/jars``
(``$LOCALITY_SHARED_JARS``) itself: the test skips only where neither has one.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from locality.cli import ExitCode, main
from locality.errors import InvalidParameterError
from locality.graph import KeyGraph
from locality.store import ConfigStore
from locality.topology import Topology
from pipelines import graph_backend
from pipelines.counting import sketch_trace
from pipelines.graph_analysis import analyze_graph
from pipelines.graph_backend import choose_backend
from pipelines.graph_frames import graph_statistics, graphframes_available, key_graph_frames
from pipelines.jars import GRAPHFRAMES_JARS, JARS_ENV, spark_jars, spark_jars_dir
from pipelines.params import OfflineParams
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


def shared_jars_dir() -> Path:
    """Jars built from source on the project's machines: ``$LOCALITY_SHARED_JARS``, else ../shared/jars."""
    return Path(os.environ.get("LOCALITY_SHARED_JARS") or REPO.parent / "shared" / "jars")


def graphframes_jars_dir() -> Path:
    """A folder holding a GraphFrames jar: the set-up's, else ../shared/jars; skips (saying where it looked) if none."""
    if spark_jars(GRAPHFRAMES_JARS):
        return spark_jars_dir()
    if list(shared_jars_dir().glob(GRAPHFRAMES_JARS)):
        return shared_jars_dir()
    pytest.skip(
        f"no GraphFrames jar anywhere: none in {spark_jars_dir()} (${JARS_ENV}; `make graphframes` fetches it with "
        f"Maven, its log is graphframes-fetch.log there) nor in {shared_jars_dir()} ($LOCALITY_SHARED_JARS)"
    )


def optimize_with_the_jar(tmp_path: Path, backend: str) -> tuple[dict, str]:
    """``locality optimize`` on the tweets in its own process, its session loading the jar: its report."""
    store = tmp_path / "store"
    args = ["optimize", str(trace_path("geotweets")), "--keys", ",".join(GEO), "--servers", "6"]
    done = subprocess.run(
        [sys.executable, "-m", "locality.cli", *args, "--graph-stats-backend", backend, "--store", str(store)]
        + ["--json", "-q"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env={**os.environ, JARS_ENV: str(graphframes_jars_dir())},
    )
    assert done.returncode == ExitCode.OK, done.stderr
    return json.loads(done.stdout), (ConfigStore(store).get().path / "report.txt").read_text()


def test_offline_job_statistics_come_from_a_graphframe(geo_graph, tmp_path):
    """Asked for, GraphFrames computes every statistic, and each equals networkx's."""
    report, text = optimize_with_the_jar(tmp_path, "graphframes")
    stats = report["graph_statistics"]
    assert (stats["backend"], stats["backend_reason"]) == ("graphframes", "asked for (graphframes)")
    assert_statistics_equal_networkx(stats, geo_graph)
    assert "of the load; via graphframes)" in text
    assert "graph statistics via graphframes: asked for (graphframes)" in text


def test_auto_keeps_the_driver_below_the_crossover_even_with_the_jar(geo_graph, tmp_path):
    """With the jar on the classpath, ``auto`` runs the driver on a graph below the measured crossover, and says why."""
    assert graph_backend.GRAPHFRAMES_FROM_EDGES is None or geo_graph.n_edges < graph_backend.GRAPHFRAMES_FROM_EDGES
    report, text = optimize_with_the_jar(tmp_path, "auto")
    stats = report["graph_statistics"]
    why = choose_backend("auto", geo_graph.n_edges, jar=True)[1]
    assert why.startswith(f"auto: {geo_graph.n_edges:,} edges")
    assert (stats["backend"], stats["backend_reason"]) == ("driver", why)
    assert_statistics_equal_networkx(stats, geo_graph)
    assert f"graph statistics via driver: {why}" in text


def test_auto_picks_by_size_from_the_crossover(monkeypatch):
    """``auto``: the driver without the jar, below the crossover or with none measured; GraphFrames from it."""
    monkeypatch.setattr(graph_backend, "GRAPHFRAMES_FROM_EDGES", None)
    assert choose_backend("auto", 10**9, jar=True)[0] == "driver"
    monkeypatch.setattr(graph_backend, "GRAPHFRAMES_FROM_EDGES", 1000)
    assert choose_backend("auto", 999, jar=True) == ("driver", "auto: 999 edges, below the 1,000-edge crossover")
    assert choose_backend("auto", 1000, jar=True) == (
        "graphframes",
        "auto: 1,000 edges, at or above the 1,000-edge crossover",
    )
    assert choose_backend("auto", 10**9, jar=False) == (
        "driver",
        "auto: no GraphFrames classes on the session's classpath",
    )
    assert choose_backend("driver", 10**9, jar=True) == ("driver", "asked for (driver)")
    with pytest.raises(InvalidParameterError, match=r"'backend' parameter of graph_statistics must be one of"):
        choose_backend("scipy", 10, jar=True)


def test_without_the_jar_the_driver_computes_the_same_statistics(spark, geo_graph, caplog):
    """The tests' shared session has no GraphFrames jar: a cluster without it gets the same figures."""
    assert not graphframes_available(spark)
    vertices, edges = key_graph_frames(spark, geo_graph)  # what a GraphFrame would be built from
    assert vertices.columns[0] == "id" and edges.columns[:2] == ["src", "dst"]
    assert vertices.count() == geo_graph.n_vertices and edges.count() == geo_graph.n_edges
    with caplog.at_level(logging.INFO, logger="pipelines.graph_frames"):
        stats = graph_statistics(spark, geo_graph)
    assert stats["backend"] == "driver"
    assert [r.getMessage() for r in caplog.records if "graph statistics via" in r.getMessage()] == [
        "graph statistics via driver: auto: no GraphFrames classes on the session's classpath"
    ]
    assert_statistics_equal_networkx(stats, geo_graph)
    with pytest.raises(InvalidParameterError, match="'graphframes', but the session has no GraphFrames classes"):
        graph_statistics(spark, geo_graph, backend="graphframes")


def test_the_backend_is_checked_where_it_comes_in(spark, tmp_path, capsys):
    """A wrong value, or GraphFrames without its jar, is refused naming the parameter, before the trace is read."""
    spec = TraceSpec(str(trace_path("geotweets")), GEO)
    with pytest.raises(InvalidParameterError, match=r"'graph_stats_backend' parameter of the offline job must be"):
        OfflineParams(trace=spec, topology=Topology.uniform(GEO, 6), store=str(tmp_path), graph_stats_backend="gpu")
    args = ["optimize", str(trace_path("geotweets")), "--keys", ",".join(GEO), "--servers", "6"]
    code = main([*args, "--store", str(tmp_path / "store"), "-q", "--graph-stats-backend", "graphframes"])
    assert code == ExitCode.BAD_INPUT
    assert "the 'graph_stats_backend' parameter of the offline job is 'graphframes', but" in capsys.readouterr().err


def test_the_notebooks_graph_analysis_equals_networkx(spark, geo_graph):
    """Components, hubs and degree distribution (the notebooks' section on the graph), on the driver here."""
    from collections import Counter

    analysis = analyze_graph(spark, geo_graph, top=3)
    assert (analysis.backend, analysis.backend_reason) == (
        "driver",
        "auto: no GraphFrames classes on the session's classpath",
    )
    g = to_networkx(geo_graph)
    load = dict(g.nodes(data="weight"))
    components = sorted(nx.connected_components(g), key=lambda c: -sum(load[v] for v in c))
    assert len(analysis.components) == len(components) == 115
    assert analysis.components["keys"].iloc[0] == len(components[0])
    assert analysis.components[list(GEO)].sum(axis=1).tolist() == analysis.components["keys"].tolist()
    assert analysis.components["load_share"].sum() == pytest.approx(1.0)
    for op in GEO:
        degrees = [d for v, d in g.degree() if g.nodes[v]["operator"] == op]
        mine = analysis.degrees[analysis.degrees["operator"] == op]
        assert dict(zip(mine["degree"], mine["keys"])) == Counter(degrees)
        assert analysis.hubs.loc[analysis.hubs["operator"] == op, "degree"].tolist() == sorted(degrees)[::-1][:3]
    assert analysis.same_figures(analyze_graph(spark, geo_graph, backend="driver", top=3))
    assert not analysis.same_figures(analyze_graph(spark, geo_graph, top=4))
    with pytest.raises(InvalidParameterError, match="'top' parameter of analyze_graph"):
        analyze_graph(spark, geo_graph, top=0)
    with pytest.raises(InvalidParameterError, match="'backend' parameter of analyze_graph is 'graphframes', but"):
        analyze_graph(spark, geo_graph, backend="graphframes")


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
