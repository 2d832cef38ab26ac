"""Re-partitioning only the keys a window moved: the rest stays where the version in force has it."""

import numpy as np
import pandas as pd

from locality.graph import build_key_graph
from locality.incremental import changed_keys, repartition_changed
from locality.topology import Topology

OPS = ["region", "tag"]


def groups(moved_tags=(), n_groups=4, tags=50, seed=0, rows=()):
    """Regions r{g}_* and tags t{g}_* in planted groups; tags in ``moved_tags`` now travel with group (g + 1).

    ``rows`` adds (region, tag, weight) pairs.
    """
    rng = np.random.default_rng(seed)
    rows = list(rows)
    for g in range(n_groups):
        for t in range(tags):
            home = (g + 1) % n_groups if (g, t) in moved_tags else g
            for r in rng.choice(3, 2, replace=False):
                rows.append((f"r{home}_{r}", f"t{g}_{t}", float(rng.integers(1, 6))))
    return build_key_graph(OPS, [pd.DataFrame(rows, columns=["key0", "key1", "weight"])])


def group_of(graph, **servers):
    """The server of each key's group (its planted one), or the one ``servers`` gives the key."""
    return np.concatenate(
        [[servers[k] if k in servers else int(str(k)[1:].split("_")[0]) for k in graph.keys[op]] for op in OPS]
    )


def test_only_the_moved_keys_change_servers():
    topology = Topology.uniform(OPS, 4)
    moved = {(0, 1), (0, 2), (2, 7)}
    graph = groups(moved)
    held = group_of(graph)  # the version in force: every group on its own server
    part = repartition_changed(graph, topology, held, alpha=1.1)
    assert part is not None and part.n_cuts >= 1
    tags = graph.operator_slice("tag")
    for g, t in moved:  # each moved tag follows its regions to the next group's server
        assert part.server_of_vertex[tags.start + graph.keys["tag"].get_loc(f"t{g}_{t}")] == (g + 1) % 4
    changed = np.flatnonzero(part.server_of_vertex != held)
    assert changed.size == len(moved)
    assert part.locality == 1.0


def test_nothing_changed_means_no_metis_and_a_scattered_start_is_partitioned_again():
    topology = Topology.uniform(OPS, 4)
    graph = groups()
    held = group_of(graph)
    same = repartition_changed(graph, topology, held, alpha=1.1)
    assert same.n_cuts == 0 and (same.server_of_vertex == held).all()
    scattered = np.random.default_rng(1).integers(0, 4, graph.n_vertices)  # most keys' edges lead elsewhere
    cut = graph.edge_weight[scattered[graph.src] != scattered[graph.dst]].sum() / graph.edge_weight.sum()
    assert cut > 0.6
    again = repartition_changed(graph, topology, scattered, alpha=1.1)
    # the few settled keys mark their servers, the changed rest (most of the graph) is cut anew
    assert again.locality > 0.85


def test_a_key_no_other_server_draws_more_stays_though_none_holds_a_majority(monkeypatch):
    """A light key spread evenly over three servers, a third on its own: the last partition's choice, not re-cut."""
    topology = Topology.uniform(OPS, 4)
    graph = groups(rows=[("r0_0", "spread", 2.0), ("r1_0", "spread", 2.0), ("r2_0", "spread", 2.0)])
    held = group_of(graph, spread=0)
    same = repartition_changed(graph, topology, held, alpha=1.1)
    assert same.n_cuts == 0 and (same.server_of_vertex == held).all()
    # keys weighed a few at a time (memory flat in the graph's size): the same answer
    graph = groups({(1, 3), (3, 9)})
    held = group_of(graph)
    whole = repartition_changed(graph, topology, held, alpha=1.1)
    monkeypatch.setattr("locality.placement._CONNECTION_CELLS", 7)
    chunked = repartition_changed(graph, topology, held, alpha=1.1)
    assert whole.n_cuts >= 1 and (chunked.server_of_vertex == whole.server_of_vertex).all()


def test_the_undecided_neighbours_of_an_outdrawn_key_are_re_cut_with_it():
    """A tag that moved to the next group's regions frees an undecided region beside it, not one elsewhere."""
    beside = [("rx", "t0_1", 1.0), ("rx", "t1_0", 1.0), ("rx", "t2_0", 1.0)]  # a third on each of 0, 1, 2
    elsewhere = [("ry", "t1_1", 1.0), ("ry", "t2_1", 1.0), ("ry", "t3_1", 1.0)]
    graph = groups({(0, 1)}, rows=beside + elsewhere)
    held = group_of(graph, rx=0, ry=1)
    vertex = {(op, key): graph.operator_slice(op).start + i for op in OPS for i, key in enumerate(graph.keys[op])}
    changed = set(changed_keys(graph, held, 4).tolist())
    assert changed == {vertex["tag", "t0_1"], vertex["region", "rx"]}
