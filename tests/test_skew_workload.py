"""Tests of the synthetic skewed workload generator (locality.datasets.skew)."""

import numpy as np
import pytest

from locality.datasets.skew import SkewWorkload, fibonacci_fallback, skew_workload
from locality.errors import InvalidParameterError
from locality.rebalance import RebalanceProblem


@pytest.fixture(scope="module")
def workload() -> SkewWorkload:
    return skew_workload(5000, 6, 8, zipf=0.85, fluctuation=1.0, window=3, seed=11)


def test_shapes_and_read_only(workload):
    assert workload.costs.shape == (6, 5000)
    assert workload.state_sizes.shape == (6, 5000)
    assert workload.fallback.shape == (5000,)
    assert (workload.n_intervals, workload.n_keys, workload.n_instances) == (6, 5000, 8)
    for arr in (workload.costs, workload.state_sizes, workload.fallback):
        with pytest.raises(ValueError):
            arr[0] = 1


def test_each_interval_is_a_permutation_of_the_zipf_frequencies(workload):
    ranks = np.arange(1, 5001, dtype=float)
    pmf = ranks**-0.85
    expected = pmf / pmf.sum() * 100 * 5000  # default n_tuples = 100 K
    for costs in workload.costs:
        np.testing.assert_allclose(np.sort(costs)[::-1], expected, rtol=1e-12)


def test_fluctuation_reaches_f_between_consecutive_intervals(workload):
    for i in range(1, workload.n_intervals):
        before, after = workload.hash_loads(i - 1), workload.hash_loads(i)
        change = np.abs(after - before).max() / before.mean()
        assert change >= 1.0
        # and it stops there: the last swap moves at most one key's frequency
        assert change < 1.0 + workload.costs[i].max() * 2 / before.mean()


def test_no_fluctuation_repeats_the_first_interval():
    w = skew_workload(1000, 4, 5, fluctuation=0.0, seed=3)
    for i in range(1, 4):
        np.testing.assert_array_equal(w.costs[i], w.costs[0])


def test_state_is_the_cost_summed_over_the_window(workload):
    w = 3
    for i in range(w - 1, workload.n_intervals):
        np.testing.assert_allclose(workload.state_sizes[i], workload.costs[i - w + 1 : i + 1].sum(axis=0), rtol=1e-12)
    # earlier intervals also hold a full window, from generated intervals that are not returned
    assert np.all(workload.state_sizes[0] >= workload.costs[0])
    assert workload.state_sizes[0].sum() == pytest.approx(3 * workload.costs[0].sum())


def test_window_one_state_equals_cost():
    w = skew_workload(800, 3, 4, window=1, seed=2)
    np.testing.assert_array_equal(w.state_sizes, w.costs)


def test_seeded_and_reproducible():
    a = skew_workload(2000, 3, 6, seed=5)
    b = skew_workload(2000, 3, 6, seed=5)
    c = skew_workload(2000, 3, 6, seed=6)
    np.testing.assert_array_equal(a.costs, b.costs)
    assert not np.array_equal(a.costs, c.costs)
    d = skew_workload(2000, 3, 6, seed=np.random.default_rng(5))
    np.testing.assert_array_equal(a.costs, d.costs)


def test_default_fallback_is_fibonacci_hashing():
    w = skew_workload(3000, 2, 7, seed=1)
    np.testing.assert_array_equal(w.fallback, fibonacci_fallback(3000, 7))
    # pinned values: the hash is pure integer arithmetic, identical everywhere
    assert fibonacci_fallback(10, 4).tolist() == [0, 2, 0, 3, 1, 0, 2, 1, 3, 2]
    keys = np.arange(10, dtype=np.uint64)
    manual = (((keys * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) * np.uint64(4)) >> np.uint64(32)
    np.testing.assert_array_equal(fibonacci_fallback(10, 4), manual.astype(np.int64))
    counts = np.bincount(fibonacci_fallback(100_000, 40), minlength=40)
    assert counts.min() >= 2490 and counts.max() <= 2510  # low discrepancy: far tighter than random


def test_custom_fallback_is_used_for_loads_and_fluctuation():
    fallback = np.arange(1000) % 4
    w = skew_workload(1000, 3, 4, fallback=fallback, seed=9)
    np.testing.assert_array_equal(w.fallback, fallback)
    np.testing.assert_allclose(w.hash_loads(1), np.bincount(fallback, weights=w.costs[1], minlength=4))
    assert np.abs(w.hash_loads(1) - w.hash_loads(0)).max() / w.hash_loads(0).mean() >= 1.0


def test_problem_poses_an_interval(workload):
    p = workload.problem(2, theta_max=0.02, table_cap=100)
    assert isinstance(p, RebalanceProblem)
    np.testing.assert_array_equal(p.loads, workload.costs[2])
    np.testing.assert_array_equal(p.state_sizes, workload.state_sizes[2])
    np.testing.assert_array_equal(p.current, workload.fallback)
    assert (p.theta_max, p.table_cap, p.n_instances) == (0.02, 100, 8)
    current = (workload.fallback + 1) % 8
    np.testing.assert_array_equal(workload.problem(0, current).current, current)
    with pytest.raises(InvalidParameterError, match="'interval' parameter of SkewWorkload.problem"):
        workload.problem(6)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_keys": 0}, "the 'n_keys' parameter of skew_workload must be an int >= 1; got 0"),
        ({"zipf": -0.5}, "the 'zipf' parameter of skew_workload must be a float >= 0; got -0.5"),
        ({"fluctuation": -1.0}, "the 'fluctuation' parameter of skew_workload must be a float >= 0; got -1.0"),
        ({"window": 0}, "the 'window' parameter of skew_workload must be an int >= 1; got 0"),
        ({"n_instances": 1}, "must be an int >= 2 when fluctuation > 0; got 1"),
        ({"fallback": np.zeros(5, dtype=int)}, "the 'fallback' parameter of skew_workload must be an int array"),
        ({"fallback": np.full(100, 9)}, r"must hold instances in \[0, 3\]"),
        ({"seed": None}, "the 'seed' parameter of skew_workload must be an int >= 0"),
    ],
)
def test_bad_parameters_are_named(kwargs, message):
    args = {"n_keys": 100, "n_intervals": 2, "n_instances": 4, "seed": 0} | kwargs
    with pytest.raises(InvalidParameterError, match=message):
        skew_workload(**args)


def test_unreachable_fluctuation_is_logged_not_endless(caplog):
    # Two keys, two instances: no swap can move the mean ten times over.
    w = skew_workload(2, 2, 2, fluctuation=10.0, fallback=np.array([0, 1]), seed=0)
    assert w.costs.shape == (2, 2)
    assert "not reached" in caplog.text
