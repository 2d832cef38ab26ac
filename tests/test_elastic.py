"""Servers added and removed: tables for the new topology and a plan that moves little state."""

import doctest

import numpy as np
import pandas as pd
import pytest

import locality.elastic as elastic_module
from locality.counts import count_keys
from locality.evaluation import estimate_from_counts
from locality.migration import MigrationPlan, plan_migration
from locality.optimizer import make_fallbacks, optimize
from locality.reconfiguration import graph_state_sizes, reconfigure
from locality.router import Router
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore
from locality.topology import Topology
from tests.conftest import read_trace, trace_keys

WEEKS = {
    "flights": pd.Timestamp("2013-03-04", tz="UTC"),
    "ira": pd.Timestamp("2016-10-03", tz="UTC"),
}


def test_doctests():
    assert doctest.testmod(elastic_module).failed == 0


@pytest.fixture(scope="module", params=["flights", "ira"])
def week(request):
    keys = trace_keys(request.param)
    trace = read_trace(request.param)
    start = WEEKS[request.param]
    rows = trace[(trace.ts >= start) & (trace.ts < start + pd.Timedelta("7D"))][keys].dropna()
    return keys, count_keys(rows.astype(str), keys)


def locality(config, counts) -> float:
    return estimate_from_counts(config, counts, int(counts.total_weight)).optimized.locality


def test_adding_a_server_moves_about_what_a_ring_moves_at_the_locality_of_a_full_optimization(week):
    """6 -> 7 servers on the statistics the tables were built from: the issue's goal is at most 1.5x the state a
    consistent-hash ring moves (each instance hands about 1/7 of its keys to the new one), at locality within 2
    points of a full re-optimization. On main the online job refused the change, and `locality optimize` moved
    83% (flights) to 98% (IRA) of the state."""
    keys, counts = week
    graph = counts.graph()
    six, seven = Topology.uniform(keys, 6), Topology.uniform(keys, 7)
    current = optimize(graph, six, make_fallbacks(six, "ring")).config
    fallbacks = make_fallbacks(seven, "ring")
    step = reconfigure(graph, seven, current, fallbacks)
    sizes = graph_state_sizes(graph)
    ring = plan_migration(current.hash_only(), RoutingConfiguration.hash_routing(seven, fallbacks), sizes)
    full = optimize(graph, seven, fallbacks).config
    assert step.config.topology == seven and "least change" in step.topology_change
    assert step.plan.cost_share <= 1.5 * ring.cost_share, (step.plan.cost_share, ring.cost_share)
    assert locality(step.config, counts) >= locality(full, counts) - 0.02
    assert plan_migration(current, full, sizes).cost_share > 3 * step.plan.cost_share
    # the new server takes its fair share, about a seventh of each operator's load
    figures = estimate_from_counts(step.config, counts, int(counts.total_weight)).optimized
    for op in keys:
        assert figures.instance_loads[op][6] / sum(figures.instance_loads[op]) == pytest.approx(1 / 7, abs=0.01)
        assert figures.imbalance[op] <= 1.03 + 1e-6
    # the plan is every key whose instance changes, from the old topology's instance to the new one's
    plan = step.plan
    assert plan.from_topology == six and plan.rehashed
    for op in keys:
        names = graph.keys[op].to_numpy(dtype=object)
        before, after = current.route_many(op, names), step.config.route_many(op, names)
        assert set(plan.moves_of(op)["key"]) == set(names[before != after])
    assert plan.cost == pytest.approx(sum(float(sizes[op].reindex(plan.moves_of(op)["key"]).sum()) for op in keys))


def test_removing_servers_sends_their_keys_where_the_new_tables_say(week):
    keys, counts = week
    graph = counts.graph()
    seven, five = Topology.uniform(keys, 7), Topology.uniform(keys, 5)
    current = optimize(graph, seven, make_fallbacks(seven, "ring")).config
    step = reconfigure(graph, five, current, make_fallbacks(five, "ring"), min_gain=np.inf)  # the least change
    sizes = graph_state_sizes(graph)
    messages = step.plan.messages(step.config)
    for op in keys:
        names = graph.keys[op].to_numpy(dtype=object)
        on_removed = current.route_many(op, names) >= 5
        moves = step.plan.moves_of(op).set_index("key")
        # every key of s5 and s6 moves, to the instance the new tables give it
        assert set(names[on_removed]) <= set(moves.index)
        np.testing.assert_array_equal(
            moves.loc[names[on_removed], "target"].to_numpy(), step.config.route_many(op, names[on_removed])
        )
        # the removed instances send and receive nothing back; the new instances send nothing they did not hold
        gone = [m for m in messages if m.operator == op and m.instance is not None and m.instance >= 5]
        assert len(gone) == 2 and all(not m.receive and m.send for m in gone)
    full = optimize(graph, five, make_fallbacks(five, "ring")).config
    assert step.plan.cost_share < plan_migration(current, full, sizes).cost_share / 1.5


def test_the_reoptimization_is_kept_when_its_locality_pays(week):
    keys, counts = week
    graph = counts.graph()
    six, seven = Topology.uniform(keys, 6), Topology.uniform(keys, 7)
    current = optimize(graph, six, make_fallbacks(six, "ring")).config
    fallbacks = make_fallbacks(seven, "ring")
    eager = reconfigure(graph, seven, current, fallbacks, min_gain=0.0)
    frugal = reconfigure(graph, seven, current, fallbacks, min_gain=np.inf)
    assert eager.topology_change.startswith("re-optimized") and frugal.topology_change.startswith("least change")
    assert eager.plan.cost_share > frugal.plan.cost_share
    assert eager.optimization.placement.locality > frugal.optimization.placement.locality


def two_server_tables(n_servers: int) -> RoutingConfiguration:
    topology = Topology.uniform(["a", "b"], n_servers)
    fallbacks = make_fallbacks(topology, "ring")
    tables = {
        "a": RoutingTable("a", fallbacks["a"], {"x": n_servers - 1, "y": 0}),
        "b": RoutingTable("b", fallbacks["b"], {"u": 1}),
    }
    return RoutingConfiguration(topology, tables)


def test_plans_across_topologies_and_through_the_store(tmp_path):
    """On main plan_migration and Router.plan_from refused two versions of different topologies."""
    old, new = two_server_tables(3), two_server_tables(2)
    known = {"a": pd.Series(1.0, index=[f"k{i}" for i in range(200)] + ["x", "y"])}
    plan = plan_migration(old, new, known)
    moved = plan.moves_of("a").set_index("key")
    assert plan.from_topology == old.topology and plan.rehashed
    assert moved.loc["x", ["source", "target"]].tolist() == [2, 1]  # s2 is gone: its key goes where new says
    assert "y" not in moved.index  # instance 0 on s0 in both
    # a known key moves iff the two rings place it on different instances (the ring of 2 drops instance 2's arcs)
    ring3, ring2 = old.tables["a"].fallback, new.tables["a"].fallback
    names = np.array([f"k{i}" for i in range(200)], dtype=object)
    assert set(moved.index) - {"x"} == set(names[ring3.instances_of(names) != ring2.instances_of(names)])
    assert set(moved["source"][moved.index != "x"]) == {2}  # only the removed instance's keys move
    again = MigrationPlan.from_dict(plan.to_dict(new))
    assert again.from_topology == old.topology and again.rehashed and again.moved_keys == plan.moved_keys
    store = ConfigStore(tmp_path / "store")
    store.publish(old, fingerprint="three servers")
    router = Router(store.root)
    before = router.snapshot()
    store.publish(new, fingerprint="two servers")
    assert router.refresh()
    computed = router.snapshot().plan_from(before)
    assert computed.from_topology == old.topology and computed.rehashed
    assert computed.moves_of("a").set_index("key").loc["x", "target"] == 1
