import networkx as nx
import numpy as np
import pandas as pd
import pytest

from locality.errors import InvalidParameterError, TraceError
from locality.graph import build_key_graph

OPS = ["region", "hashtag"]


def pairs(rows):
    return pd.DataFrame(rows, columns=["key0", "key1", "weight"])


def test_bipartite_graph_from_pairs_and_loads():
    p = pairs([("Asia", "#java", 5), ("Asia", "#ruby", 3), ("Africa", "#python", 2), ("Asia", "#java", 1)])
    loads = {"region": pd.DataFrame({"key": ["Asia", "Oceania"], "weight": [10.0, 4.0]})}
    g = build_key_graph(OPS, [p], loads, totals={"region": 20, "hashtag": 20})
    vertices = g.vertex_table()
    assert list(vertices.columns) == ["id", "operator", "key", "weight"]
    assert list(g.edge_table().columns) == ["src", "dst", "weight"]
    weight = dict(zip(zip(vertices.operator, vertices.key), vertices.weight))
    # measured loads win; keys without a load weigh what their edges carry (duplicates summed)
    assert weight[("region", "Asia")] == 10 and weight[("region", "Oceania")] == 4
    assert weight[("region", "Africa")] == 2 and weight[("hashtag", "#java")] == 6
    assert g.n_edges == 3 and g.edge_weight.sum() == 11
    # edges go from operator 0 to operator 1
    assert (g.src < g.offsets["hashtag"]).all() and (g.dst >= g.offsets["hashtag"]).all()
    assert g.residual("region") == pytest.approx(20 - 16)


def test_chain_of_three_is_tripartite_and_exports_agree():
    p01 = pairs([("eu", "a", 3), ("us", "b", 2)])
    p12 = pairs([("a", 1, 3), ("b", 2, 1), ("b", 1, 1)])
    g = build_key_graph(["region", "tag", "user"], [p01, p12])
    assert [len(g.keys[op]) for op in g.operators] == [2, 2, 2]
    assert g.keys["user"].tolist() == [1, 2]  # integer keys keep their type
    xadj, adjncy, w = g.to_csr()
    assert xadj[-1] == 2 * g.n_edges and w.sum() == 2 * g.edge_weight.sum()
    nxg = nx.Graph()
    nxg.add_nodes_from(range(g.n_vertices))
    nxg.add_edges_from(zip(g.src.tolist(), g.dst.tolist()))
    assert nxg.number_of_nodes() == 6 and nxg.number_of_edges() == 5
    assert nx.is_connected(nxg)
    # CSR neighbours of vertex "b" (tag) are us, user 2, user 1
    b = g.offsets["tag"] + g.keys["tag"].get_loc("b")
    assert sorted(adjncy[xadj[b] : xadj[b + 1]].tolist()) == sorted(
        [g.keys["region"].get_loc("us"), g.offsets["user"] + 0, g.offsets["user"] + 1]
    )


def test_top_pairs_keeps_heaviest():
    p = pairs([("a", "x", 5), ("a", "y", 1), ("b", "y", 3)])
    g = build_key_graph(OPS, [p], top_pairs=2)
    assert sorted(g.edge_weight.tolist()) == [3, 5]


def test_bad_input():
    with pytest.raises(InvalidParameterError, match="at least two operators"):
        build_key_graph(["a"], [])
    with pytest.raises(InvalidParameterError, match="must hold 1 tables"):
        build_key_graph(OPS, [])
    with pytest.raises(
        TraceError, match=r"has no column 'weight'; the columns present are \['key0', 'key1', 'count'\]"
    ):
        build_key_graph(OPS, [pd.DataFrame({"key0": ["a"], "key1": ["b"], "count": [1]})])
    with pytest.raises(TraceError, match="null keys"):
        build_key_graph(OPS, [pairs([("a", None, 1)])])
    with pytest.raises(TraceError, match="numbers >= 0"):
        build_key_graph(OPS, [pairs([("a", "b", -1)])])
    with pytest.raises(InvalidParameterError, match="not one of"):
        build_key_graph(OPS, [pairs([("a", "b", 1)])], {"user": pd.DataFrame({"key": ["a"], "weight": [1]})})
    assert np.isfinite(build_key_graph(OPS, [pairs([("a", "b", 0)])]).vertex_weight).all()
