"""Routing a window interval by interval: what rows go through, the incremental affinity, the table cap."""

import numpy as np
import pandas as pd
import pytest

from locality.counts import blend, count_keys
from locality.datasets.synthetic import twitter_like
from locality.optimizer import LocalityOptimizer
from locality.rebalance.tables import key_affinity
from locality.rebalance.window import RebalancePolicy, WindowRouter
from locality.topology import Topology

KEYS = ["location", "hashtag"]
WEEK2 = (pd.Timestamp("2015-06-08", tz="UTC"), pd.Timestamp("2015-06-15", tz="UTC"))


@pytest.fixture(scope="module")
def weeks():
    trace = twitter_like(30_000, n_locations=120, n_hashtags=3_000, days=14, drift=0.5, seed=3)
    first = trace[trace.ts < WEEK2[0]]
    second = trace[trace.ts >= WEEK2[0]].reset_index(drop=True)
    fitted = LocalityOptimizer(Topology.uniform(KEYS, 6), alpha=1.03).fit(first)
    return first, second, fitted


def router(weeks, **kw) -> WindowRouter:
    first, second, fitted = weeks
    previous = {op: first[op].value_counts().astype(float) for op in KEYS}
    return WindowRouter(
        fitted.config_,
        second,
        ts="ts",
        start=WEEK2[0],
        end=WEEK2[1],
        graph=fitted.graph_,
        previous=previous,
        warmup=first[first.ts >= WEEK2[0] - pd.Timedelta("2D")],
        **kw,
    )


def test_without_a_schedule_every_row_goes_where_the_tables_say(weeks):
    _, second, fitted = weeks
    routed = router(weeks).route()
    for op in KEYS:
        keys = second[op].to_numpy(dtype=object)
        np.testing.assert_array_equal(routed.routes[op], fitted.config_.route_many(op, keys))
        np.testing.assert_array_equal(routed.hash_routes[op], fitted.config_.tables[op].fallback.instances_of(keys))
    assert routed.config is fitted.config_ and routed.moved_keys == 0


@pytest.mark.parametrize("schedule", [None, RebalancePolicy(every="6h")])
def test_a_router_routes_its_window_once(weeks, schedule):
    # rebalancing moves the router's keys: a second pass would start from the window's end, not its start
    once = router(weeks)
    once.route(schedule)
    with pytest.raises(RuntimeError, match="already routed its window"):
        once.route(schedule)


def test_rebalancing_balances_the_window_and_accounts_for_every_move(weeks):
    _, second, fitted = weeks
    routed = router(weeks).route(RebalancePolicy(every="6h"))
    assert routed.runs == 27 and routed.moved_keys > 0
    for op in KEYS:
        fixed = np.bincount(fitted.config_.route_many(op, second[op].to_numpy(dtype=object)), minlength=6)
        rebalanced = np.bincount(routed.routes[op], minlength=6)
        assert rebalanced.max() / rebalanced.mean() < fixed.max() / fixed.mean()
        # every row went to the instance the key was on when the row passed: the final tables for the last rows
        last = second.ts >= WEEK2[1] - pd.Timedelta("6h")
        keys = second.loc[last, op].to_numpy(dtype=object)
        np.testing.assert_array_equal(routed.routes[op][last.to_numpy()], routed.config.route_many(op, keys))


def locality(routed, topology) -> float:
    servers = [topology.instance_servers(op)[routed.routes[op]] for op in KEYS]
    return float(np.mean(servers[0] == servers[1]))


def test_following_hourly_makes_the_new_hashtags_local_for_little_state(weeks):
    _, second, fitted = weeks
    topology = fitted.config_.topology
    plain = router(weeks).route()
    followed = router(weeks).route(RebalancePolicy(method="follow", every="1h"))
    # a fifth of the week's tuples carry a hashtag the tables never saw; hourly they join their locations' server
    assert locality(followed, topology) > locality(plain, topology) + 0.03  # measured 31.0% -> 35.1%
    assert 0 < followed.moved_state < 0.05 * len(second) * len(KEYS)  # 1.4% of the week's state
    assert followed.moved_keys > 0 and followed.runs == 7 * 24 - 1


def test_incremental_affinity_equals_the_batch_one_after_the_moves(weeks):
    first, second, fitted = weeks
    r = router(weeks)
    routed = r.route(RebalancePolicy(every="6h"))
    assert routed.moved_keys > 0
    # the graph in force plus every pair of the window, by the servers of the final tables
    graph = blend([count_keys(first, KEYS), count_keys(second, KEYS)], windows=None).graph()
    for o in r.operators:
        expected = key_affinity(routed.config, graph, o.name, o.keys.to_numpy(dtype=object))
        np.testing.assert_allclose(o.affinity, expected, atol=1e-9)


def test_the_table_cap_is_never_exceeded_by_the_rebalancer(weeks):
    _, _, fitted = weeks
    cap = max(fitted.config_.table_sizes().values())
    routed = router(weeks).route(RebalancePolicy(every="6h", table_cap=cap))
    assert routed.moved_keys > 0
    assert max(routed.config.table_sizes().values()) <= cap


def test_schedule_checks_its_parameters():
    with pytest.raises(ValueError, match="'method' parameter of RebalancePolicy must be one of"):
        RebalancePolicy(method="fastest")
    for bad in ("-1h", "soon"):
        with pytest.raises(ValueError, match="'every' parameter of RebalancePolicy must be a positive duration"):
            RebalancePolicy(every=bad)
    with pytest.raises(ValueError, match="must cover at least one interval"):
        RebalancePolicy(every="1D", history="6h")
    with pytest.raises(ValueError, match="split_hot_keys needs a locality-aware rebalancer"):
        RebalancePolicy(method="mixed", split_hot_keys=True)
