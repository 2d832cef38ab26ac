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
