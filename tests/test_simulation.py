"""Live reconfiguration on a simulated cluster: no tuple lost or counted twice, no key on two instances.

The real traces replay with real successive configurations (LocalityOptimizer on successive windows) injected
at seeded random rows, one right after another; broken protocols and tampered state must be caught.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from locality.errors import InvalidParameterError, TraceError
from locality.hashing import make_fallback
from locality.migration import plan_migration
from locality.optimizer import LocalityOptimizer
from locality.routing import RoutingConfiguration, RoutingTable
from locality.testing.simulation import SimulatedCluster, SimulationResult, verify
from locality.topology import Topology
from tests.conftest import trace_keys

ALPHA = 1.1


def state_sizes(trace: pd.DataFrame, operators, upto: int) -> dict[str, pd.Series]:
    """Key counts of the rows emitted before ``upto``: the state each key has when the plan is made."""
    return {op: trace[op].iloc[:upto].value_counts() for op in operators}


def injected(trace: pd.DataFrame, configs: list[RoutingConfiguration], seed: int) -> list:
    """hash -> c1 in the second half of window 2, c1 -> c2 in window 3, c2 -> c3 at the very next row."""
    rng = np.random.default_rng(seed)
    n = len(trace)
    ops = list(configs[0].topology.operators)
    t1 = int(rng.integers(n // 3, n // 2))
    t2 = int(rng.integers(2 * n // 3, 9 * n // 10))
    points = [t1, t2, t2 + 1]
    out = []
    for at, old, new in zip(points, configs, configs[1:]):
        out.append((at, new, plan_migration(old, new, state_sizes(trace, ops, at))))
    return out


def real_configs(trace: pd.DataFrame, topology: Topology, back: bool) -> list[RoutingConfiguration]:
    """Hash routing, then configurations fitted on the first and second thirds; the third goes back to the
    first (``back``: most moved keys return to where they were) or is fitted on the last third."""
    n = len(trace)
    fit = [
        LocalityOptimizer(topology, alpha=ALPHA).fit(trace.iloc[a * n // 3 : (a + 1) * n // 3]).config_
        for a in (0, 1, 2)
    ]
    c3 = fit[0] if back else fit[2]
    return [fit[0].hash_only(), fit[0], fit[1], c3]


@pytest.fixture(scope="module")
def geo_configs(geotweets):
    return real_configs(geotweets, Topology.uniform(trace_keys("geotweets"), 6), back=True)


@pytest.fixture(scope="module")
def flight_configs(flights):
    return real_configs(flights, Topology.uniform(trace_keys("flights"), 3, instances_per_server=2), back=False)


@pytest.fixture(scope="module")
def geo_replay(geotweets, geo_configs):
    reconfs = injected(geotweets, geo_configs, seed=0)
    return SimulatedCluster(geo_configs[0], seed=0, max_delay=20).run(geotweets, reconfs), reconfs


def assert_one_exact_owner(result: SimulationResult, trace: pd.DataFrame) -> None:
    """Independent of check_against: each key on exactly one instance, its final owner, with its exact count."""
    for op in result.operators:
        exact = trace[op].value_counts()
        held = [(key, index, count) for (o, index), st in result.state.items() if o == op for key, count in st.items()]
        keys, instances, counts = (np.array(column, dtype=object) for column in zip(*held))
        assert len(keys) == len(set(keys)) == len(exact)
        assert (counts == exact.reindex(keys).to_numpy()).all()
        assert (instances == result.final_config.route_many(op, keys)).all()
        assert sum(n for (o, _), n in result.processed.items() if o == op) == len(trace)


def assert_protocol_ran(result: SimulationResult) -> None:
    first, second, third = result.reconfigurations
    for record in result.reconfigurations:
        assert record.completed and record.moved_state > 0
        assert record.propagate_tick > record.started_tick
        ticks = list(record.operator_done_ticks.values())
        assert len(ticks) == len(result.operators) and ticks == sorted(ticks)  # pipeline order
    # the third was injected while the second still propagated: queued until it completed
    assert third.injected_tick == second.injected_tick + 1
    assert third.started_tick == second.completed_tick > third.injected_tick
    assert first.completed_tick < second.started_tick


# ---------------------------------------------------------------------------- real traces
@pytest.mark.parametrize("seed, max_delay", [(0, 20), (1, 100)])
def test_geotweets_replay_with_reconfigurations(geotweets, geo_configs, seed, max_delay):
    reconfs = injected(geotweets, geo_configs, seed)
    result = SimulatedCluster(geo_configs[0], seed=seed, max_delay=max_delay).run(geotweets, reconfs)
    assert result.check_against(geotweets) == []
    verify(result, geotweets)
    assert_one_exact_owner(result, geotweets)
    assert_protocol_ran(result)
    assert result.misrouted == 0 and result.violation_count == 0
    # the protocol was exercised: tuples raced their key's state and waited for it
    assert result.buffered > 0 and result.max_buffer > 0
    assert sum(r.buffered for r in result.reconfigurations) == result.buffered
    # the last configuration is the first one again: keys went back to where they were
    assert result.final_config is geo_configs[1]
    assert result.reconfigurations[2].moved_keys == result.reconfigurations[1].moved_keys


@pytest.mark.parametrize("seed, n_sources", [(0, None), (3, 1)])
def test_flights_replay_with_reconfigurations_three_servers_two_instances(flights, flight_configs, seed, n_sources):
    reconfs = injected(flights, flight_configs, seed)
    cluster = SimulatedCluster(flight_configs[0], seed=seed, max_delay=40, n_sources=n_sources)
    result = cluster.run(flights, reconfs)
    assert result.check_against(flights) == []
    assert_one_exact_owner(result, flights)
    assert_protocol_ran(result)
    assert result.buffered > 0
    assert len(result.state) == 2 * 6  # 3 servers x 2 instances, two operators


def test_replay_is_deterministic_given_the_seed(geotweets, geo_configs, geo_replay):
    result, reconfs = geo_replay
    again = SimulatedCluster(geo_configs[0], seed=0, max_delay=20).run(geotweets, reconfs)
    other = SimulatedCluster(geo_configs[0], seed=7, max_delay=20).run(geotweets, reconfs)
    same = [r.to_dict() for r in result.reconfigurations]
    assert [r.to_dict() for r in again.reconfigurations] == same
    assert (again.buffered, again.max_buffer, again.ticks) == (result.buffered, result.max_buffer, result.ticks)
    assert again.state == result.state
    assert [r.to_dict() for r in other.reconfigurations] != same
    assert other.check_against(geotweets) == []


# ---------------------------------------------------------------------------- the checker bites
def test_switching_routers_without_migrating_state_is_caught(geotweets, geo_configs, geo_replay):
    _, reconfs = geo_replay
    result = SimulatedCluster(geo_configs[0], seed=0, max_delay=20, protocol="no-migration").run(geotweets, reconfs)
    problems = result.check_against(geotweets)
    assert any("is held by 2 instances" in p for p in problems)
    assert any("but its final owner is" in p for p in problems)
    with pytest.raises(AssertionError, match=r"violations, protocol 'no-migration'"):
        verify(result, geotweets)


def test_migrating_before_routers_switch_is_caught(geotweets, geo_configs, geo_replay):
    _, reconfs = geo_replay
    result = SimulatedCluster(geo_configs[0], seed=0, max_delay=20, protocol="migrate-early").run(geotweets, reconfs)
    assert result.misrouted > 0  # old-routed tuples reached instances that had already sent the state away
    problems = result.check_against(geotweets)
    assert any("after it had sent that key's state away" in p for p in problems)
    assert any("but the trace has" in p for p in problems)  # the dropped tuples are missing from the counts


def test_processing_before_the_state_arrives_is_caught(geotweets, geo_configs, geo_replay):
    _, reconfs = geo_replay
    result = SimulatedCluster(geo_configs[0], seed=0, max_delay=20, protocol="no-buffer").run(geotweets, reconfs)
    assert result.buffered == 0
    problems = result.check_against(geotweets)
    # counts are commutative, so the totals still match: only the run-time invariant sees it
    assert problems and all("had already counted" in p or p.startswith("...") for p in problems)


def test_tampered_state_is_caught(geotweets, geo_replay):
    result, _ = geo_replay
    (op, index), st = next((name, st) for name, st in result.state.items() if st)
    key = next(iter(st))
    other = (op, (index + 1) % 6)

    def tampered(edit) -> list[str]:
        state = {name: dict(s) for name, s in result.state.items()}
        edit(state)
        return dataclasses.replace(result, state=state).check_against(geotweets)

    def plus_one(state):
        state[(op, index)][key] += 1

    def copied(state):
        state[other][key] = state[(op, index)][key]

    def moved(state):
        state[other][key] = state[(op, index)].pop(key)

    def lost(state):
        del state[(op, index)][key]

    assert any("but the trace has" in p for p in tampered(plus_one))
    assert any(
        f"is held by 2 instances [{min(index, other[1])}, {max(index, other[1])}]" in p for p in tampered(copied)
    )
    assert any("its final owner is" in p for p in tampered(moved))
    assert any(" lost: " in p for p in tampered(lost))
    assert result.check_against(geotweets.iloc[:-1]) != []  # not the trace that was replayed
    with pytest.raises(AssertionError, match="lost"):
        verify(dataclasses.replace(result, state={**result.state, (op, index): {}}), geotweets)


# ---------------------------------------------------------------------------- hand-made cases
def config(topology: Topology, entries: dict[str, dict] | None = None) -> RoutingConfiguration:
    entries = entries or {}
    tables = {
        op: RoutingTable(op, make_fallback("kafka", topology.n_instances(op)), entries.get(op))
        for op in topology.operators
    }
    return RoutingConfiguration(topology, tables)


def chain(configs: list[RoutingConfiguration], points: list[int], trace: pd.DataFrame) -> list:
    ops = list(configs[0].topology.operators)
    return [
        (at, new, plan_migration(old, new, state_sizes(trace, ops, at)))
        for at, old, new in zip(points, configs, configs[1:])
    ]


def test_single_moved_key_with_tuples_in_flight():
    topo = Topology.uniform(["a", "b"], 2)
    start = config(topo)
    home = start.route("a", "x")
    moved = config(topo, {"a": {"x": 1 - home}})
    trace = pd.DataFrame({"a": ["x"] * 60, "b": [f"b{i % 4}" for i in range(60)]})
    reconfs = chain([start, moved], [20], trace)
    # fixed one-tick delays, one source: the source switches at row 23, the MIGRATE arrives a tick after row 23
    result = SimulatedCluster(start, seed=0, min_delay=1, max_delay=1, n_sources=1).run(trace, reconfs)
    verify(result, trace)
    record = result.reconfigurations[0]
    assert (record.started_tick, record.propagate_tick, record.completed_tick) == (20, 22, 27)
    assert result.buffered_per_instance[("a", 1 - home)] == 1
    assert result.state[("a", 1 - home)] == {"x": 60} and result.state[("a", home)] == {}
    assert result.processed[("a", home)] == 23 and record.moved_state == 23
    # random delays: more tuples race the state, the counts still add up
    for seed in range(10):
        result = SimulatedCluster(start, seed=seed, max_delay=15, n_sources=2).run(trace, reconfs)
        verify(result, trace)
        assert result.state[("a", 1 - home)] == {"x": 60}


def three_instances() -> tuple[Topology, RoutingConfiguration, list[int]]:
    topo = Topology.uniform(["a", "b"], 3)
    start = config(topo)
    home = start.route("a", "x")
    return topo, start, [home, (home + 1) % 3, (home + 2) % 3]


@pytest.mark.parametrize("seed", range(5))
def test_key_moved_twice_by_back_to_back_reconfigurations(seed):
    topo, start, (f, g, h) = three_instances()
    trace = pd.DataFrame({"a": ["x", "y"] * 40, "b": [f"b{i % 5}" for i in range(80)]})
    configs = [start, config(topo, {"a": {"x": g}}), config(topo, {"a": {"x": h}})]
    result = SimulatedCluster(start, seed=seed, max_delay=1 + seed * 5).run(trace, chain(configs, [20, 21], trace))
    verify(result, trace)
    first, second = result.reconfigurations
    assert second.started_tick == first.completed_tick
    assert first.moved_state > 0 and second.moved_state > 0  # g held x in between and passed it on
    assert result.state[("a", h)]["x"] == 40
    assert "x" not in result.state[("a", f)] and "x" not in result.state[("a", g)]


@pytest.mark.parametrize("seed", range(5))
def test_key_moved_back_to_its_original_instance(seed):
    topo, start, (f, g, _) = three_instances()
    trace = pd.DataFrame({"a": ["x"] * 80, "b": [f"b{i % 5}" for i in range(80)]})
    configs = [start, config(topo, {"a": {"x": g}, "b": {"b1": 0, "b2": 0}}), start]
    result = SimulatedCluster(start, seed=seed, max_delay=1 + seed * 5).run(trace, chain(configs, [10, 11], trace))
    verify(result, trace)
    assert result.state[("a", f)] == {"x": 80}
    assert result.reconfigurations[1].moved_state > 0
    # with fixed delays the key's tuples reach g before its state twice over: both moves buffered
    fixed = SimulatedCluster(start, seed=seed, min_delay=1, max_delay=1, n_sources=1).run(
        trace, chain(configs, [10, 11], trace)
    )
    verify(fixed, trace)
    assert all(r.buffered >= 1 for r in fixed.reconfigurations)


def test_moved_key_without_state_still_migrates_and_releases_its_buffer():
    topo = Topology.uniform(["a", "b"], 2)
    fallback = make_fallback("kafka", 2)
    candidates = np.array([f"z{i}" for i in range(400)], dtype=object)
    fresh = candidates[fallback.instances_of(candidates) == 0][:60].tolist()
    start = config(topo)
    moved = config(topo, {"a": dict.fromkeys(fresh, 1)})
    # one "w" before the reconfiguration, then each fresh key once: most arrive only after the switch
    keys = ["w"] * 20 + fresh
    trace = pd.DataFrame({"a": keys, "b": ["b0"] * len(keys)})
    plan = plan_migration(start, moved, state_sizes(trace, ["a", "b"], 20))
    assert (plan.moves["state"] == 0).all()  # no fresh key had state when the plan was made
    result = SimulatedCluster(start, seed=0, min_delay=1, max_delay=1, n_sources=1).run(trace, [(20, moved, plan)])
    verify(result, trace)
    record = result.reconfigurations[0]
    # rows 20-22 left before the switch and carry state; the others had none at the old owner
    assert record.moved_state == 3 and record.empty_keys == len(fresh) - 3
    assert result.buffered_per_instance[("a", 1)] >= 1  # a key with no state waited for the (empty) MIGRATE
    assert result.state[("a", 1)] == dict.fromkeys(fresh, 1)


@pytest.mark.parametrize("seed", range(6))
def test_three_operator_chain_with_random_tables(seed):
    rng = np.random.default_rng(seed)
    topo = Topology.from_counts(["a", "b", "c"], {"s0": 2, "s1": 1, "s2": 2})
    sizes = {"a": 40, "b": 25, "c": 12}
    n = 3000
    trace = pd.DataFrame({op: [f"{op}{k}" for k in rng.zipf(1.5, n) % m] for op, m in sizes.items()})

    def random_config() -> RoutingConfiguration:
        return config(
            topo,
            {
                op: {f"{op}{k}": int(rng.integers(topo.n_instances(op))) for k in range(m) if rng.random() < 0.6}
                for op, m in sizes.items()
            },
        )

    configs = [random_config() for _ in range(5)]
    t1, t2 = sorted(int(t) for t in rng.integers(1, n - 1, size=2))
    points = [0, t1, t2, t2 + 1]  # one before the first row, two back to back
    if seed % 2:
        points[-1] = n  # after the last row, while its tuples are still in flight
    cluster = SimulatedCluster(configs[0], seed=seed, max_delay=int(rng.integers(1, 40)), n_sources=1 + seed % 3)
    result = cluster.run(trace, chain(configs, points, trace))
    verify(result, trace)
    assert_one_exact_owner(result, trace)
    assert all(r.completed for r in result.reconfigurations)
    assert list(result.reconfigurations[0].operator_done_ticks) == ["a", "b", "c"]


# ---------------------------------------------------------------------------- bad input
def test_bad_input_is_refused():
    topo = Topology.uniform(["a", "b"], 2)
    start = config(topo)
    home = start.route("a", "x")
    moved = config(topo, {"a": {"x": 1 - home}})
    trace = pd.DataFrame({"a": ["x"] * 10, "b": ["y"] * 10})
    plan = plan_migration(start, moved, state_sizes(trace, ["a", "b"], 5))
    cluster = SimulatedCluster(start, seed=0)
    with pytest.raises(InvalidParameterError, match="does not lead from the configuration in force"):
        cluster.run(trace, [(2, moved, plan), (5, start, plan)])  # the second plan goes the wrong way
    with pytest.raises(InvalidParameterError, match="triples"):
        cluster.run(trace, [(2, moved)])
    with pytest.raises(InvalidParameterError, match="needs a MigrationPlan"):
        cluster.run(trace, [(2, moved, None)])
    with pytest.raises(InvalidParameterError, match="'at' parameter"):
        cluster.run(trace, [(11, moved, plan)])
    with pytest.raises(TraceError, match="no column 'b'"):
        cluster.run(trace[["a"]])
    with pytest.raises(TraceError, match="null keys"):
        cluster.run(pd.DataFrame({"a": ["x", None], "b": ["y", "y"]}))
    with pytest.raises(InvalidParameterError, match="'protocol' parameter"):
        SimulatedCluster(start, protocol="magic")
    with pytest.raises(InvalidParameterError, match="'seed' parameter"):
        SimulatedCluster(start, seed=None)
    with pytest.raises(InvalidParameterError, match="'max_delay' parameter"):
        SimulatedCluster(start, min_delay=5, max_delay=2)
    other = config(Topology.uniform(["a", "b"], 1, instances_per_server=2))
    with pytest.raises(InvalidParameterError, match="same topology|simulated topology"):
        cluster.run(trace, [(2, other, plan)])
