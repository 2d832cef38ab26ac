"""Re-partitioning only the keys a window moved: the rest stays where the version in force has it."""

import numpy as np
import pandas as pd

from locality.graph import build_key_graph
from locality.incremental import repartition_changed
from locality.topology import Topology

OPS = ["region", "tag"]


def groups(moved_tags=(), n_groups=4, tags=50, seed=0):
    """Regions r{g}_* and tags t{g}_* in planted groups; tags in ``moved_tags`` now travel with group (g + 1)."""
    rng = np.random.default_rng(seed)
    rows = []
    for g in range(n_groups):
        for t in range(tags):
            home = (g + 1) % n_groups if (g, t) in moved_tags else g
            for r in rng.choice(3, 2, replace=False):
                rows.append((f"r{home}_{r}", f"t{g}_{t}", float(rng.integers(1, 6))))
    return build_key_graph(OPS, [pd.DataFrame(rows, columns=["key0", "key1", "weight"])])


def group_of(graph):
    return np.concatenate([[int(str(k)[1:].split("_")[0]) for k in graph.keys[op]] for op in OPS])


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
