import numpy as np
import pandas as pd
import pytest

from locality.counts import count_keys
from locality.evaluation import Evaluation
from locality.migration import MigrationPlan
from locality.optimizer import make_fallbacks, optimize
from locality.reconfiguration import decide, reconfigure
from locality.topology import Topology

OPS = ["region", "tag"]


def trace(seed, shift):
    """Tags follow regions in groups; ``shift`` rotates which region each group of tags follows."""
    rng = np.random.default_rng(seed)
    tags = rng.integers(0, 300, 6000)
    regions = (tags // 25 + shift) % 12
    noise = rng.random(6000) < 0.1
    regions[noise] = rng.integers(0, 12, noise.sum())
    return pd.DataFrame({"region": [f"r{r}" for r in regions], "tag": [f"t{t}" for t in tags]})


def test_relabeling_moves_less_than_raw_labels_and_plan_matches_routes():
    topo = Topology.uniform(OPS, 4)
    fallbacks = make_fallbacks(topo)
    first = optimize(count_keys(trace(0, 0), OPS).graph(), topo, fallbacks, alpha=1.05).config
    graph = count_keys(trace(1, 1), OPS).graph()
    step = reconfigure(graph, topo, first, fallbacks, alpha=1.05)
    assert step.unrelabeled_cost is not None and step.plan.cost_share < step.unrelabeled_cost
    # every move is a key whose route changes, and every changed route is a move
    for op in OPS:
        keys = graph.keys[op].to_numpy(dtype=object)
        changed = set(keys[first.route_many(op, keys) != step.config.route_many(op, keys)])
        moves = step.plan.moves_of(op)
        assert set(moves["key"]) == changed
        assert (moves["source"].to_numpy() == first.route_many(op, moves["key"].to_numpy(dtype=object))).all()
    messages = step.plan.messages(step.config)
    assert messages[0].operator is None and messages[0].router_for == "region"
    sent = sum(len(k) for m in messages for k in m.send.values())
    received = sum(len(k) for m in messages for k in m.receive.values())
    assert sent == received == step.plan.moved_keys


def figures(locality, imbalance, weight=1000.0):
    return Evaluation(10, weight, locality, {"region->tag": locality}, imbalance, {}, {}, {}, 0.0)


def plan(cost, moved=10):
    moves = pd.DataFrame(
        {"operator": ["tag"] * moved, "key": range(moved), "source": 0, "target": 1, "state": cost / max(moved, 1)}
    )
    return MigrationPlan(OPS, moves, 10_000.0)


def test_decide():
    balanced = {"region": 1.02, "tag": 1.01}
    assert decide(None, figures(0.5, balanced), None, alpha=1.03).publish
    pays = decide(figures(0.3, balanced), figures(0.5, balanced), plan(100), alpha=1.03, min_gain=1.0)
    assert pays.publish and pays.payback == pytest.approx(0.2 * 1000 / 100) and "pays" in pays.reason
    costly = decide(figures(0.3, balanced), figures(0.5, balanced), plan(1000), alpha=1.03, min_gain=1.0)
    assert not costly.publish and "does not pay" in costly.reason
    broken = decide(figures(0.5, {"region": 1.3, "tag": 1.0}), figures(0.45, balanced), plan(1e6), alpha=1.03)
    assert broken.publish and "operator 'region' at 1.300" in broken.reason
    tolerated = decide(
        figures(0.5, {"region": 1.08, "tag": 1.0}), figures(0.45, balanced), plan(1e6), alpha=1.03, max_imbalance=1.1
    )
    assert not tolerated.publish
    same = decide(figures(0.5, balanced), figures(0.5, balanced), plan(0, moved=0), alpha=1.03)
    assert not same.publish and "as the current ones" in same.reason


def test_an_incremental_step_starts_from_the_version_in_force(flights):
    """Weekly flights: from the tables in force, as much next-week locality as a new METIS partition, far less moved."""
    from locality.counts import blend
    from locality.evaluation import evaluate
    from tests.conftest import trace_keys

    keys = trace_keys("flights")
    weeks = pd.date_range("2013-03-04", periods=7, freq="7D", tz="UTC")
    week = [flights[(flights.ts >= a) & (flights.ts < b)].dropna(subset=keys)[keys] for a, b in zip(weeks, weeks[1:])]
    topo = Topology.uniform(keys, 6)
    fallbacks = make_fallbacks(topo)
    history = [count_keys(week[0], keys)]
    in_force = dict.fromkeys((False, True), optimize(history[0].graph(), topo, fallbacks).config)
    local, moved = {False: [], True: []}, {False: [], True: []}
    for i in range(1, 5):
        history.append(count_keys(week[i], keys))
        graph = blend(history, windows=None, decay=0.85).graph()
        for incremental in (False, True):
            step = reconfigure(graph, topo, in_force[incremental], fallbacks, incremental=incremental)
            assert step.optimization.placement.balanced
            assert (step.unrelabeled_cost is None) == incremental
            assert (step.config.parameters.get("start") == "in force") == incremental
            moved[incremental].append(step.plan.cost_share)
            in_force[incremental] = step.config
            local[incremental].append(evaluate(week[i + 1], step.config).optimized.locality)
    assert np.mean(local[True]) >= np.mean(local[False]) - 0.01, local
    assert np.mean(moved[True]) < 0.5 * np.mean(moved[False]), moved
    # on another topology the step is the topology change's (least change or re-optimization), not a refinement
    grown = Topology.uniform(keys, 7)
    step = reconfigure(graph, grown, in_force[True], make_fallbacks(grown), incremental=True)
    assert step.topology_change is not None and step.unrelabeled_cost is not None
