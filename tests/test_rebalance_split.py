"""Hot keys: detection and splitting over several instances (associative state)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from locality.errors import InvalidParameterError
from locality.optimizer import LocalityOptimizer
from locality.rebalance import RebalanceProblem, rebalance
from locality.rebalance.split import split_hot_keys, split_locally
from locality.rebalance.window import RebalancePolicy, WindowRouter
from locality.topology import Topology


def water_levels(base: np.ndarray, problem: RebalanceProblem, split: dict[int, list[int]]) -> np.ndarray:
    """Independent model of the split: each hot key, heaviest first, water-fills its instances."""
    per = base.copy()
    for key in sorted(split, key=lambda k: -problem.loads[k]):
        inst = np.asarray(split[key])
        lo, hi = per[inst].min(), per[inst].max() + problem.loads[key]
        for _ in range(200):  # bisection on the level
            mid = 0.5 * (lo + hi)
            if np.maximum(mid - per[inst], 0).sum() >= problem.loads[key]:
                hi = mid
            else:
                lo = mid
        per[inst] = np.maximum(per[inst], hi)
    return per


def hot_problem(seed: int, n: int = 6, n_hot: int = 2) -> RebalanceProblem:
    rng = np.random.default_rng(seed)
    loads = rng.uniform(0.5, 1.5, 60)
    loads[:n_hot] = rng.uniform(0.3, 0.6, n_hot) * loads.sum()  # far above (1 + theta) * mean
    current = rng.integers(0, n, 60)
    return RebalanceProblem(loads, loads, current, rng.integers(0, n, 60), n, theta_max=0.1)


def test_hot_keys_heaviest_first():
    loads = np.array([1.0, 40, 1, 60, 1, 1])
    problem = RebalanceProblem(loads, loads, np.zeros(6, int), np.zeros(6, int), 4, theta_max=0.2)
    assert problem.hot_keys().tolist() == [3, 1]  # bound 1.2 * 104 / 4 = 31.2
    assert RebalanceProblem(np.ones(4), np.ones(4), np.zeros(4, int), np.zeros(4, int), 2).hot_keys().size == 0


@pytest.mark.parametrize("method", ["scan", "redist", "readj"])
@pytest.mark.parametrize("seed", range(5))
def test_split_covers_the_hot_load_and_stays_consistent(method, seed):
    problem = hot_problem(seed)
    base_result = rebalance(problem, method=method)
    assert not base_result.feasible and set(base_result.hot_keys.tolist()) == {0, 1}
    result = split_hot_keys(problem, base_result)
    assert set(result.split_keys) == {0, 1} and result.method == f"{method}+split"
    bound = (1 + problem.theta_max) * problem.loads.sum() / problem.n_instances
    cold = np.ones(60, bool)
    cold[[0, 1]] = False
    base = np.bincount(base_result.assignment[cold], weights=problem.loads[cold], minlength=problem.n_instances)
    for key, instances in result.split_keys.items():
        assert len(instances) >= 2 and len(set(instances)) == len(instances)
        assert result.assignment[key] == instances[0]
        assert key in result.table
    per = water_levels(base, problem, result.split_keys)
    assert per.sum() == pytest.approx(problem.loads.sum())  # every unit of load lands somewhere
    assert result.imbalance_after == pytest.approx(per.max() / per.mean())
    assert result.feasible == bool(per.max() <= bound * (1 + 1e-9))
    assert result.feasible  # there is room: the hot keys fit once split
    # Every key still has exactly one (first-choice) instance, and the figures follow from it.
    assert result.assignment.shape == (60,) and result.assignment.max() < problem.n_instances
    assert np.array_equal(result.moved, np.flatnonzero(result.assignment != problem.current))
    moved = problem.state_sizes[result.moved].sum() / problem.state_sizes.sum()
    assert result.migration_cost == pytest.approx(moved)
    assert np.array_equal(np.delete(result.assignment, [0, 1]), np.delete(base_result.assignment, [0, 1]))


def test_split_uses_the_fewest_least_loaded_instances():
    loads = np.array([10.0, 1, 1, 1, 2, 2, 3])  # total 20, 4 instances, bound 1.2 * 5 = 6
    assignment = np.array([0, 1, 2, 3, 1, 2, 3])
    problem = RebalanceProblem(loads, loads, assignment, assignment, 4, theta_max=0.2)
    result = rebalance(problem, method="readj", delta=1.0)  # nothing tracked: the fallback as it is
    split = split_hot_keys(problem, result)
    # Base loads without the hot key: [0, 3, 3, 4]; two instances ([0, 3]) take 10 at level 6.5 > 6,
    # three ([0, 3, 3]) at level 5.33 <= 6.
    assert split.split_keys == {0: [0, 1, 2]}
    assert split.feasible
    per = water_levels(np.array([0.0, 3, 3, 4]), problem, split.split_keys)
    assert split.theta_after == pytest.approx(np.abs(per - 5).max() / 5)
    limited = split_hot_keys(problem, result, max_ways=2)
    assert limited.split_keys == {0: [0, 1]} and not limited.feasible


def test_split_keeps_the_current_instance_first_when_chosen():
    loads = np.array([10.0, 1, 1, 1, 2, 2, 3])
    current = np.array([2, 1, 2, 3, 1, 2, 3])
    problem = RebalanceProblem(loads, loads, current, current, 4, theta_max=0.2)
    result = rebalance(problem, method="scan", delta=1.0)
    split = split_hot_keys(problem, result)
    assert split.split_keys[0][0] == 2 and split.assignment[0] == 2  # no state moves for the split key
    assert 0 not in split.moved


def test_split_after_a_load_only_rebalancer_and_without_hot_keys():
    loads = np.array([1.0, 1, 9, 1, 1, 1])
    current = np.array([0, 0, 0, 1, 1, 1])
    problem = RebalanceProblem(loads, np.ones(6), current, current, 3, theta_max=0.2)
    result = split_hot_keys(problem, rebalance(problem, method="llfd"))
    assert list(result.split_keys) == [2] and result.feasible
    calm = RebalanceProblem(np.ones(6), np.ones(6), current, current, 2)
    plain = rebalance(calm, method="llfd")
    assert split_hot_keys(calm, plain) is plain


def test_split_rejects_bad_input():
    problem = hot_problem(0)
    result = rebalance(problem, method="scan")
    with pytest.raises(InvalidParameterError, match="'max_ways' parameter of split_hot_keys must be an int >= 2"):
        split_hot_keys(problem, result, max_ways=1)
    other = hot_problem(0)
    short = RebalanceProblem(other.loads[:10], other.loads[:10], other.current[:10], other.fallback[:10], 6)
    with pytest.raises(InvalidParameterError, match="'result' parameter of split_hot_keys"):
        split_hot_keys(short, result)


# ------------------------------------------------------------------ splitting by neighbour server


def local_share(split, instance_servers: np.ndarray) -> float:
    """Share of a split key's expected load whose hop stays on one server (flow s goes to route[s])."""
    local = instance_servers[split.route] == np.arange(split.route.shape[0])
    return float(split.flows[local].sum() / split.flows.sum())


def test_split_locally_keeps_each_servers_flow_local_while_there_is_room():
    # 3 servers, one instance each, bound 10; the key brings 12: 6 from server 0, 4 from server 1, 2 from server 2
    loads = np.array([6.0, 2.0, 1.0])
    split = split_locally(7, 12.0, np.array([3.0, 2.0, 1.0]), loads, np.array([0, 1, 2]), 10.0)
    # server 0's flow does not fit next to its 6 (12 > 10): it goes where there is the most room (instance 2);
    # the flows of servers 1 and 2 stay local
    assert split.route.tolist() == [2, 1, 2] and split.parts == [1, 2]
    assert loads.tolist() == [6.0, 6.0, 9.0]
    assert local_share(split, np.array([0, 1, 2])) == pytest.approx(6 / 12)
    # without edges the load comes evenly from every server, and each flow stays local
    even = split_locally(7, 3.0, None, np.zeros(3), np.array([0, 1, 2]), 10.0)
    assert even.route.tolist() == [0, 1, 2] and local_share(even, np.array([0, 1, 2])) == 1.0


@pytest.fixture(scope="module")
def hot_window():
    rng = np.random.default_rng(1)
    n = 12_000
    location = rng.integers(0, 60, 2 * n)
    tags = np.array([f"t{loc % 12}-{i}" for loc, i in zip(location, rng.integers(0, 30, 2 * n))], dtype=object)
    tags[n:][rng.random(n) < 0.3] = "hot"
    days = np.concatenate([np.sort(rng.uniform(0, 7, n)), np.sort(rng.uniform(7, 14, n))])
    trace = pd.DataFrame(
        {
            "ts": pd.Timestamp("2015-06-01", tz="UTC") + pd.to_timedelta(days, unit="D"),
            "location": [f"l{v}" for v in location],
            "hashtag": tags,
            "value": np.arange(2 * n),
        }
    )
    first, second = trace.iloc[:n], trace.iloc[n:].reset_index(drop=True)
    fitted = LocalityOptimizer(Topology.uniform(["location", "hashtag"], 6), alpha=1.03).fit(first)
    start, end = pd.Timestamp("2015-06-08", tz="UTC"), pd.Timestamp("2015-06-15", tz="UTC")

    def route(split: bool, merge: str = "fold"):
        router = WindowRouter(
            fitted.config_, second, ts="ts", start=start, end=end, graph=fitted.graph_, warmup=first.iloc[-2000:]
        )
        return router.route(RebalancePolicy(every="6h", split_hot_keys=split, split_merge=merge))

    return second, fitted, route(True), route(False), route(True, "downstream")


def test_a_split_key_reaches_only_instances_holding_its_state_and_merges_to_the_unsplit_result(hot_window):
    second, fitted, split, plain, _ = hot_window
    assert set(split.split["hashtag"]) == {"hot"} and not split.split["location"]
    info = split.split["hashtag"]["hot"]
    rows = (second["hashtag"] == "hot").to_numpy()
    reached = split.routes["hashtag"][rows]
    # every tuple of the key went to an instance reported as holding a part of its state
    assert set(reached.tolist()) == set(info["holders"]) and len(info["holders"]) >= 3

    # an associative state (count, sum and max per key) kept in parts on each instance: the merge step reads
    # the partials of the holders the replay reports, and equals the state of the unsplit run
    def state(routed):
        frame = second.assign(instance=routed.routes["hashtag"])
        return frame.groupby(["hashtag", "instance"])["value"].agg(["count", "sum", "max"])

    held = state(split).loc["hot"].reindex(info["holders"])
    merged = [held["count"].sum(), held["sum"].sum(), held["max"].max()]
    unsplit = state(plain).loc["hot"]
    assert merged == [unsplit["count"].sum(), unsplit["sum"].sum(), unsplit["max"].max()]
    assert merged == [rows.sum(), second["value"][rows].sum(), second["value"][rows].max()]
    # the key follows its neighbours: most of its hops stay on one server (a hash split would keep 1/6)
    servers = fitted.config_.topology
    local = (
        servers.instance_servers("hashtag")[reached]
        == servers.instance_servers("location")[split.routes["location"][rows]]
    )
    assert local.mean() > 0.6
    # balanced without migrating the key: unsplit, the rebalancer balances only by moving the hot key (and its
    # state) to the least-loaded instance again and again
    for routed in (split, plain):
        loads = np.bincount(routed.routes["hashtag"], minlength=6)
        assert loads.max() / loads.mean() < 1.1
    assert split.moved_state < 0.5 * plain.moved_state


def test_a_fold_moves_the_partials_held_elsewhere_and_a_downstream_merge_moves_none(hot_window):
    second, _, split, plain, downstream = hot_window
    info = split.split["hashtag"]["hot"]
    rows = (second["hashtag"] == "hot").to_numpy()
    away = np.count_nonzero(split.routes["hashtag"][rows] != info["instance"])
    assert split.folded_state == away > 0 and plain.folded_state == 0
    # merged downstream: the same routes and moves, nothing folded
    np.testing.assert_array_equal(downstream.routes["hashtag"], split.routes["hashtag"])
    assert downstream.folded_state == 0 and downstream.moved_state == split.moved_state
