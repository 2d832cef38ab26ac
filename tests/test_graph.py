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


def counted_pairs(trace: pd.DataFrame, operators: list[str]) -> pd.DataFrame:
    """Exact pair counts of a trace's first two key columns, one row per pair."""
    counts = trace.groupby(operators, sort=False).size().reset_index()
    return counts.set_axis(["key0", "key1", "weight"], axis=1)


def assert_same_graph(a, b):
    assert a.operators == b.operators and a.offsets == b.offsets and a.totals == b.totals
    for op in a.operators:
        assert a.keys[op].equals(b.keys[op]) and a.keys[op].dtype == b.keys[op].dtype
    for name in ["vertex_weight", "src", "dst", "edge_weight"]:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_graph_does_not_depend_on_row_order_or_repeated_rows(flights):
    ops = ["tailnum", "dest"]
    counts = counted_pairs(flights, ops)
    g = build_key_graph(ops, [counts])
    # one row per flight (each pair repeated as often as it flew), shuffled: the same graph
    rows = flights[ops].set_axis(["key0", "key1"], axis=1).assign(weight=1).sample(frac=1, random_state=7)
    assert_same_graph(build_key_graph(ops, [rows]), g)
    assert_same_graph(build_key_graph(ops, [counts.sample(frac=1, random_state=8)]), g)
    # each edge carries its pair's count; edges sorted by (src, dst), keys sorted
    assert (np.diff(g.src * g.n_vertices + g.dst) > 0).all()
    assert all(g.keys[op].is_monotonic_increasing for op in ops)
    expected = counts.set_index(["key0", "key1"])["weight"]
    got = pd.Series(
        g.edge_weight,
        index=pd.MultiIndex.from_arrays([g.keys["tailnum"][g.src], g.keys["dest"][g.dst - g.offsets["dest"]]]),
    )
    pd.testing.assert_series_equal(got.sort_index(), expected.sort_index().astype(float), check_names=False)


def test_repeated_pairs_summed_in_row_order_and_top_pairs_ties_keep_the_first(geotweets):
    ops = ["location", "hashtag"]
    rows = geotweets[ops].set_axis(["key0", "key1"], axis=1)
    rows = rows.assign(weight=np.random.default_rng(3).random(len(rows)) * 10)
    g = build_key_graph(ops, [rows])
    # pandas's own group-by sum (compensated, in row order), to the last bit
    summed = rows.groupby(["key0", "key1"])["weight"].sum()
    got = pd.Series(
        g.edge_weight,
        index=pd.MultiIndex.from_arrays([g.keys["location"][g.src], g.keys["hashtag"][g.dst - g.offsets["hashtag"]]]),
    )
    np.testing.assert_array_equal(got.sort_index().to_numpy(), summed.sort_index().to_numpy())
    # among equal weights, top_pairs keeps the pairs that came first, as pandas's nlargest does
    ties = pairs([("c", "z", 1), ("a", "x", 2), ("b", "y", 1), ("a", "y", 1), ("c", "z", 0)])
    kept = build_key_graph(OPS, [ties], top_pairs=2).edge_table()
    assert kept["weight"].tolist() == [2.0, 1.0] and len(kept) == 2
    g = build_key_graph(OPS, [ties], top_pairs=2)
    assert g.keys["region"].tolist() == ["a", "c"] and g.keys["hashtag"].tolist() == ["x", "z"]


def test_csr_lists_each_vertex_neighbours_in_edge_order(flights):
    g = build_key_graph(["tailnum", "dest"], [counted_pairs(flights, ["tailnum", "dest"])])
    xadj, adjncy, weights = g.to_csr()
    assert adjncy.dtype == np.int64 and xadj[-1] == 2 * g.n_edges
    # every vertex's neighbours: first the edges it starts, then those it ends, each in edge order
    heads = np.concatenate([g.src, g.dst])
    order = np.argsort(heads, kind="stable")
    np.testing.assert_array_equal(adjncy, np.concatenate([g.dst, g.src])[order])
    np.testing.assert_array_equal(weights, np.concatenate([g.edge_weight, g.edge_weight])[order])
    np.testing.assert_array_equal(np.diff(xadj), np.bincount(heads, minlength=g.n_vertices))
