import numpy as np
import pandas as pd
import pytest

from locality.counts import count_keys
from locality.errors import InvalidParameterError
from locality.graph import build_key_graph
from locality.partition import adaptive_cuts, metis_input, partition_key_graph
from locality.placement import place_keys
from locality.topology import Topology

OPS = ["region", "tag"]


def planted_graph(n_groups=6, regions_per_group=5, tags_per_group=60, cross=0.1, seed=1):
    """Regions and tags in planted groups; ``cross`` of the pair weight goes across groups."""
    rng = np.random.default_rng(seed)
    rows = []
    for g in range(n_groups):
        for t in range(tags_per_group):
            tag = f"t{g}_{t}"
            weight = rng.zipf(1.8)
            rows.append((f"r{g}_{rng.integers(regions_per_group)}", tag, float(min(weight, 50))))
            if rng.random() < cross:
                other = (g + 1 + rng.integers(n_groups - 1)) % n_groups
                rows.append((f"r{other}_{rng.integers(regions_per_group)}", tag, 1.0))
    pairs = pd.DataFrame(rows, columns=["key0", "key1", "weight"])
    return build_key_graph(OPS, [pairs])


def per_op_ratio(graph, topology, placement):
    return {
        op: placement.instance_loads[op] / (topology.instance_shares(op) * graph.totals[op]) for op in graph.operators
    }


def test_planted_groups_stay_together_within_alpha():
    graph = planted_graph()
    topo = Topology.uniform(OPS, 6)
    part = partition_key_graph(graph, topo, alpha=1.1, seed=3)
    assert part.feasible and part.locality > 0.8
    placement = place_keys(graph, topo, part.server_of_vertex, alpha=1.1)
    assert placement.balanced
    for ratios in per_op_ratio(graph, topo, placement).values():
        assert ratios.max() <= 1.1 + 1e-9
    assert placement.locality > 0.75


def test_repair_restores_per_operator_balance_metis_leaves_broken():
    # region loads are very uneven while tag loads are even: balancing their sum per server
    # (all METIS can do) leaves the region operator over alpha somewhere.
    rng = np.random.default_rng(7)
    rows = [(f"r{r}", f"t{t}", float(rng.integers(1, 5))) for t in range(400) for r in rng.choice(30, 2, replace=False)]
    pairs = pd.DataFrame(rows, columns=["key0", "key1", "weight"])
    loads = {"region": pd.DataFrame({"key": [f"r{r}" for r in range(30)], "weight": 200.0 / np.arange(1, 31)})}
    graph = build_key_graph(["region", "tag"], [pairs], {"region": loads["region"]})
    topo = Topology.uniform(["region", "tag"], 4)
    part = partition_key_graph(graph, topo, alpha=1.05, seed=0)
    before = place_keys(graph, topo, part.server_of_vertex, alpha=1.05, repair=False)
    after = place_keys(graph, topo, part.server_of_vertex, alpha=1.05)
    assert max(before.imbalance.values()) > 1.05
    assert all(v <= 1.05 + 1e-9 for v in after.imbalance.values())
    assert after.balanced and after.moves > 0


def test_hot_key_is_reported_not_hidden():
    pairs = pd.DataFrame(
        [("big", f"t{i}", 10.0) for i in range(30)] + [(f"r{i}", f"u{i}", 10.0) for i in range(30)],
        columns=["key0", "key1", "weight"],
    )
    graph = build_key_graph(OPS, [pairs])
    topo = Topology.uniform(OPS, 4)
    part = partition_key_graph(graph, topo, alpha=1.03)
    assert not part.feasible
    (hot,) = part.hot_keys
    assert (hot.operator, hot.key, hot.load) == ("region", "big", 300.0)
    assert hot.bound == pytest.approx(1.03 * 600 / 4)
    assert "key 'big' of operator 'region' carries 300 load" in str(hot)
    placement = place_keys(graph, topo, part.server_of_vertex, alpha=1.03, hot_keys=part.hot_keys)
    # the hot key's instance carries it; every other instance of every operator stays within alpha
    ratios = per_op_ratio(graph, topo, placement)
    hot_instance = placement.instance_of_vertex[graph.keys["region"].get_loc("big")]
    others = np.delete(ratios["region"], hot_instance)
    assert others.max() <= 1.03 + 1e-9 and ratios["tag"].max() <= 1.03 + 1e-9


def test_several_instances_per_server_and_capacities():
    graph = planted_graph(n_groups=4, tags_per_group=120)
    topo = Topology.from_counts(OPS, {"a": 3, "b": 2, "c": 1}, capacities={"a": 1.0, "b": 1.0, "c": 2.0})
    part = partition_key_graph(graph, topo, alpha=1.1, seed=1)
    placement = place_keys(graph, topo, part.server_of_vertex, alpha=1.1)
    for op, ratios in per_op_ratio(graph, topo, placement).items():
        assert ratios.max() <= 1.1 + 1e-9, op
    # each key sits on an instance of the server its placement says
    for op in OPS:
        sl = graph.operator_slice(op)
        np.testing.assert_array_equal(
            topo.instance_servers(op)[placement.instance_of_vertex[sl]], placement.server_of_vertex[sl]
        )


def test_same_seed_same_partition():
    graph = planted_graph()
    topo = Topology.uniform(OPS, 6)
    a = partition_key_graph(graph, topo, seed=5).server_of_vertex
    b = partition_key_graph(graph, topo, seed=5).server_of_vertex
    np.testing.assert_array_equal(a, b)


def test_bad_parameters():
    graph = planted_graph(n_groups=2)
    topo = Topology.uniform(OPS, 2)
    with pytest.raises(
        InvalidParameterError, match="the 'alpha' parameter of partition_key_graph must be a float >= 1.0; got 0.9"
    ):
        partition_key_graph(graph, topo, alpha=0.9)
    with pytest.raises(InvalidParameterError, match="'n_cuts'"):
        partition_key_graph(graph, topo, n_cuts=0)


def test_cuts_adapt_to_the_graph_size_unless_given():
    assert adaptive_cuts(10_000) == 8 and adaptive_cuts(250_000) == 8  # the cards' graphs keep 8 cuts
    assert adaptive_cuts(500_000) == 4 and adaptive_cuts(1_000_000) == 2 and adaptive_cuts(10_000_000) == 1
    sizes = [10, 1_000, 50_000, 300_000, 1_000_000, 2_000_000, 10_000_000]
    assert all(adaptive_cuts(a) >= adaptive_cuts(b) for a, b in zip(sizes, sizes[1:]))
    pairs = pd.DataFrame({"key0": ["a", "a", "b", "b"], "key1": ["x", "y", "z", "w"], "weight": [10, 9, 10, 9]})
    small = build_key_graph(["k1", "k2"], [pairs])
    topology = Topology.uniform(["k1", "k2"], 2)
    # a larger graph, partitioned for real: 400,000 distinct pairs get 5 cuts instead of 8
    rng = np.random.default_rng(0)
    codes = rng.choice(10**6 * 1000, size=420_000, replace=False)[:400_000]
    large = build_key_graph(["k1", "k2"], [pd.DataFrame({"key0": codes // 1000, "key1": codes % 1000, "weight": 1})])
    assert large.n_edges == 400_000
    assert partition_key_graph(small, topology, alpha=1.5).n_cuts == 8  # 4 edges: the most cuts (the default)
    assert partition_key_graph(large, topology, alpha=1.5).n_cuts == 5
    assert partition_key_graph(small, topology, alpha=1.5, n_cuts=3).n_cuts == 3  # an explicit count is kept
    assert partition_key_graph(large, topology, alpha=1.5, n_cuts=1).n_cuts == 1


def _read_metis_graph(path):
    """Parse METIS's graph format back: header, then per vertex its weight and (1-based neighbour, weight) pairs."""
    lines = path.read_text().splitlines()
    n, m, fmt = lines[0].split()
    assert fmt == "011" and len(lines) == int(n) + 1
    xadj, adjncy, vweights, eweights = [0], [], [], []
    for line in lines[1:]:
        tokens = [int(t) for t in line.split()]
        vweights.append(tokens[0])
        adjncy += [t - 1 for t in tokens[1::2]]
        eweights += tokens[2::2]
        xadj.append(len(adjncy))
    assert len(adjncy) == 2 * int(m)
    return np.array(xadj), np.array(adjncy), np.array(vweights), np.array(eweights)


def test_metis_input_is_what_partition_key_graph_runs_and_its_file_reads_back(tmp_path):
    """gpmetis partitions the file bench_metis_floor.py writes: it must hold exactly METIS's input."""
    graph = planted_graph(n_groups=4, tags_per_group=40)
    topo = Topology.uniform(OPS, 4)
    given = metis_input(graph, topo, alpha=1.1, seed=3, n_cuts=2)
    np.testing.assert_array_equal(
        given.run(), partition_key_graph(graph, topo, alpha=1.1, seed=3, n_cuts=2).server_of_vertex
    )
    args = given.write(tmp_path / "planted")
    assert args == ["-ptype=kway", "-ufactor=100", "-seed=3", "-ncuts=2", str(tmp_path / "planted.graph"), "4"]
    assert not (tmp_path / "planted.tpwgts").exists()  # equal parts: gpmetis's default
    for read, written in zip(
        _read_metis_graph(tmp_path / "planted.graph"), (given.xadj, given.adjncy, given.vweights, given.eweights)
    ):
        np.testing.assert_array_equal(read, written)
    # an isolated key (a load without pairs) is a line holding its weight alone
    loads = {"region": pd.DataFrame({"key": ["alone"], "weight": [5.0]})}
    lonely = build_key_graph(OPS, [pd.DataFrame({"key0": ["a"], "key1": ["x"], "weight": [2.0]})], loads)
    uneven = Topology(["s0", "s1"], OPS, {op: ["s0", "s1"] for op in OPS}, capacities={"s0": 1.0, "s1": 3.0})
    small = metis_input(lonely, uneven, alpha=1.03, recursive=True)
    args = small.write(tmp_path / "lonely")
    assert args[0] == "-ptype=rb" and args[-3] == f"-tpwgts={tmp_path / 'lonely.tpwgts'}"
    assert (tmp_path / "lonely.tpwgts").read_text() == "0 = 0.25\n1 = 0.75\n"
    for read, written in zip(
        _read_metis_graph(tmp_path / "lonely.graph"), (small.xadj, small.adjncy, small.vweights, small.eweights)
    ):
        np.testing.assert_array_equal(read, written)


def test_metis_complaints_are_one_log_line_not_the_terminals(capfd, caplog):
    # More parts than keys: METIS prints two lines per empty bisection with printf, on descriptor 1.
    pairs = pd.DataFrame({"a": [f"a{i}" for i in range(10)], "b": [f"b{i % 3}" for i in range(10)]})
    graph = count_keys(pairs, ["a", "b"]).graph()
    with caplog.at_level("WARNING", logger="locality.partition"):
        partition = partition_key_graph(graph, Topology.uniform(["a", "b"], 64))
    out, _ = capfd.readouterr()
    assert out == ""  # nothing on stdout, also not later from C's buffer
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("METIS printed")]
    assert len(said) == 1 and "13 vertices into 64 parts" in said[0] and "too many parts" in said[0], said
    assert len(partition.server_of_vertex) == 13
