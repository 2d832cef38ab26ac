"""Gedik's hybrid partitioning: lossy counting, the threshold rule, Scan / Redist / Readj."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from locality.errors import InvalidParameterError
from locality.rebalance import METHODS, RebalanceProblem, rebalance
from locality.rebalance._base import instance_loads
from locality.rebalance.hybrid import (
    frequency_threshold,
    ratio_from_theta,
    refine_threshold,
    resource_costs,
    theta_from_ratio,
    tracked_keys,
)
from locality.rebalance.readj import readj
from locality.rebalance.redist import redist
from locality.rebalance.scan import scan
from locality.testing.lossy_counting import LossyCounter, SlidingLossyCounter

GEDIK = {"scan": scan, "redist": redist, "readj": readj}


def zipf_stream(n_keys: int, length: int, z: float, seed: int) -> np.ndarray:
    p = 1.0 / np.arange(1, n_keys + 1) ** z
    return np.random.default_rng(seed).choice(n_keys, size=length, p=p / p.sum())


def zipf_problem(n_keys: int, n: int, seed: int, theta_max: float = 0.2, z: float = 1.0) -> RebalanceProblem:
    rng = np.random.default_rng(seed)
    loads = 1.0 / np.arange(1, n_keys + 1) ** z
    loads = loads[rng.permutation(n_keys)]
    return RebalanceProblem(
        loads,
        loads * rng.uniform(0.5, 1.5, n_keys),
        rng.integers(0, n, n_keys),
        rng.integers(0, n, n_keys),
        n,
        theta_max=theta_max,
    )


# -- lossy counting ------------------------------------------------------------------------------


@pytest.mark.parametrize(("epsilon", "support"), [(0.001, 0.005), (0.0005, 0.002), (0.002, 0.01)])
def test_lossy_counting_guarantees_on_zipf(epsilon, support):
    stream = zipf_stream(20_000, 200_000, 1.1, seed=7)
    truth = Counter(stream.tolist())
    lc = LossyCounter(epsilon)
    lc.update_batch(stream)
    n = lc.total_weight
    assert n == stream.shape[0]
    for key, count in truth.items():
        assert lc.lower_bound(key) <= count <= lc.upper_bound(key)
        assert lc.upper_bound(key) - lc.lower_bound(key) <= epsilon * n
    reported = {row[0] for row in lc.frequent_items(support)}
    assert {k for k, c in truth.items() if c >= support * n} <= reported  # no false negatives
    assert all(truth[k] >= (support - epsilon) * n for k in reported)
    assert len(lc) <= (1 / epsilon) * math.log(epsilon * n)
    assert LossyCounter.apriori_error(epsilon, n) == pytest.approx(epsilon * n)


def test_lossy_counting_batch_equals_repeated_update_and_rows_are_sorted():
    stream = zipf_stream(500, 12_345, 1.0, seed=3)
    one, batch, chunks = LossyCounter(0.01), LossyCounter(0.01), LossyCounter(0.01)
    for key in stream.tolist():
        one.update(key)
    batch.update_batch(stream)
    for part in np.array_split(stream, 17):
        chunks.update_batch(part)
    # Same state; rows of equal count may come in another order (insertion order differs).
    assert sorted(one.frequent_items(0.0)) == sorted(batch.frequent_items(0.0)) == sorted(chunks.frequent_items(0.0))
    assert len(one) == len(batch) == len(chunks)
    rows = one.frequent_items(0.02)
    assert [r[1] for r in rows] == sorted((r[1] for r in rows), reverse=True)
    assert all(lower == est <= upper for _, est, lower, upper in rows)


def test_lossy_counting_weights_equal_repetition_and_exact_before_first_bucket():
    weighted, repeated = LossyCounter(0.1), LossyCounter(0.1)
    items = [("a", 7), ("b", 3), ("c", 12), ("a", 4)]
    weighted.update_batch([k for k, _ in items], [w for _, w in items])
    for key, w in items:
        for _ in range(w):
            repeated.update(key)
    assert sorted(weighted.frequent_items(0.0)) == sorted(repeated.frequent_items(0.0))
    exact = LossyCounter(0.01)  # bucket width 100: nothing is ever dropped below 100 tuples
    exact.update_batch(["x"] * 30 + ["y"] * 5 + ["z"])
    assert [(k, e) for k, e, _, _ in exact.frequent_items(0.0)] == [("x", 30), ("y", 5), ("z", 1)]
    assert exact.upper_bound("absent") == 0 and not exact.is_empty()


def test_lossy_counting_rejects_bad_parameters():
    with pytest.raises(InvalidParameterError, match=r"the 'epsilon' parameter of LossyCounter must be a float > 0"):
        LossyCounter(0.0)
    with pytest.raises(InvalidParameterError, match="'weight'"):
        LossyCounter(0.1).update("a", 0)
    with pytest.raises(InvalidParameterError, match="'support'"):
        LossyCounter(0.1).frequent_items(1.5)
    with pytest.raises(InvalidParameterError, match="'n_counters'"):
        SlidingLossyCounter(0.1, 100, n_counters=1)


def test_sliding_lossy_counter_reads_the_latest_window():
    window, eps = 6_000, 0.002
    stream = zipf_stream(3_000, 40_000, 1.0, seed=11)
    slc = SlidingLossyCounter(eps, window)
    assert slc.stagger == 3_000 and slc.period == 9_000
    fed = 0
    for part in np.array_split(stream, 23):
        slc.update_batch(part)
        fed += part.shape[0]
        n = slc.total_weight
        if fed >= window:
            assert window <= n < window + slc.stagger  # between W and 1.5 W for three counters
        truth = Counter(stream[fed - n : fed].tolist())  # the active counter saw the latest n tuples
        reported = {row[0] for row in slc.frequent_items(0.01)}
        assert {k for k, c in truth.items() if c >= 0.01 * n} <= reported
        assert all(truth[k] >= (0.01 - eps) * n for k in reported)
    freqs = slc.frequencies(0.01)
    assert freqs and all(0 < v <= 1 for v in freqs.values())
    one = SlidingLossyCounter(eps, window)
    for key in stream[:7_000].tolist():
        one.update(key)
    batch = SlidingLossyCounter(eps, window)
    batch.update_batch(stream[:7_000])
    assert sorted(one.frequent_items(0.0)) == sorted(batch.frequent_items(0.0))


# -- threshold rule ------------------------------------------------------------------------------


def test_threshold_anchor_of_seeds_section_2_5():
    theta = theta_from_ratio(1.2, 10)
    assert theta == pytest.approx(0.17647, abs=1e-5)
    assert ratio_from_theta(theta, 10) == pytest.approx(1.2)
    delta = frequency_threshold(10, theta, sigma=0.1, resources="LCL")
    assert delta == pytest.approx(1.765e-3, rel=1e-3)
    f = 1.0 / np.arange(1, 1_000_001)
    f /= f.sum()
    assert np.count_nonzero(f >= delta) == 39  # exact Zipf z = 1, |D| = 1e6
    quad = frequency_threshold(10, theta, sigma=0.1, resources="CQC", n_domain=1_000_000)
    assert quad == pytest.approx(4.2e-5, rel=1e-2)
    assert np.count_nonzero(f >= quad) == 1653
    refined = refine_threshold(f[f >= quad], 10, theta, sigma=0.1, resources="CQC", n_domain=1_000_000)
    assert quad < refined < 1 and np.count_nonzero(f >= refined) < 1653
    assert frequency_threshold(10, theta, resources="CCC") == 1.0


def test_tracked_keys_rule_matches_closed_form_and_cap():
    problem = zipf_problem(5_000, 8, seed=1)
    f = problem.loads / problem.loads.sum()
    delta = frequency_threshold(8, problem.theta_max, sigma=0.1, resources="LCL")
    keys = tracked_keys(problem)
    assert set(keys.tolist()) == set(np.flatnonzero(f >= delta * (1 - 1e-12)).tolist())
    assert np.all(np.diff(f[keys]) <= 0)  # decreasing frequency
    assert set(tracked_keys(problem, delta=0.01).tolist()) == set(np.flatnonzero(f >= 0.01).tolist())
    capped = RebalanceProblem(problem.loads, problem.state_sizes, problem.current, problem.fallback, 8, table_cap=5)
    assert tracked_keys(capped).tolist() == keys[:5].tolist()
    assert tracked_keys(problem, resources="CCC").shape[0] == 0
    stateless = RebalanceProblem(problem.loads, np.zeros(5_000), problem.current, problem.fallback, 8, theta_max=0.2)
    assert tracked_keys(stateless, resources="MCC").shape[0] == 0  # no memory used: nothing to balance
    measured = tracked_keys(stateless, resources="MMC")  # processing measured = the loads
    assert set(measured.tolist()) == set(keys.tolist())
    with pytest.raises(InvalidParameterError, match=r"the 'resources' parameter of tracked_keys must be 3 letters"):
        tracked_keys(problem, resources="LX")


# -- Scan, Redist, Readj: what every construction guarantees -------------------------------------


@pytest.mark.parametrize("name", sorted(GEDIK))
@pytest.mark.parametrize("seed", range(4))
def test_construction_is_a_consistent_hybrid_function(name, seed):
    problem = zipf_problem(3_000, 6 + seed, seed=seed)
    result = GEDIK[name](problem)
    a = result.assignment
    assert a.shape == (problem.n_keys,) and a.min() >= 0 and a.max() < problem.n_instances
    tracked = tracked_keys(problem)
    untracked = np.setdiff1d(np.arange(problem.n_keys), tracked)
    assert np.array_equal(a[untracked], problem.fallback[untracked])
    assert set(result.table.tolist()) <= set(tracked.tolist())
    assert np.array_equal(result.table, np.flatnonzero(a != problem.fallback))
    assert np.array_equal(result.moved, np.flatnonzero(a != problem.current))
    moved_state = problem.state_sizes[a != problem.current].sum() / problem.state_sizes.sum()
    assert result.migration_cost == pytest.approx(moved_state)
    assert result.method == name and result.feasible
    same = rebalance(problem, method=name)
    assert np.array_equal(same.assignment, a)


def _rho(loads: np.ndarray, assignment: np.ndarray, n: int, theta: float) -> float:
    per = np.bincount(assignment, weights=loads, minlength=n)
    return (per.max() - per.min()) / (theta * per.mean()) if per.mean() > 0 else 0.0


@pytest.mark.parametrize("seed", range(6))
def test_readj_never_worsens_the_tracked_balance(seed):
    problem = zipf_problem(2_000, 5, seed=seed, theta_max=0.1)
    keys = tracked_keys(problem)
    result = readj(problem)
    f = problem.loads[keys]
    before = _rho(f, problem.current[keys], 5, 0.1)
    after = _rho(f, result.assignment[keys], 5, 0.1)
    assert after <= before + 1e-12
    strict = readj(problem, require_gain=True, max_moves=1)
    assert _rho(f, strict.assignment[keys], 5, 0.1) <= before + 1e-12


@pytest.mark.parametrize("seed", range(10))
def test_scan_with_balance_utility_reaches_theta_when_no_key_is_heavy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    loads = rng.uniform(0.1, 1.0, int(rng.integers(40, 120)))
    theta_max = 1.01 * loads.max() / (loads.sum() / n)  # every key lighter than theta_max * mean
    keys = loads.shape[0]
    problem = RebalanceProblem(loads, loads, rng.integers(0, n, keys), rng.integers(0, n, keys), n, theta_max=theta_max)
    result = scan(problem, utility="A", delta=0.0)
    assert result.theta_after <= loads.max() / (loads.sum() / n) + 1e-12
    assert result.theta_after <= problem.theta_max


def test_untracked_load_option_balances_whole_instances_better():
    problem = zipf_problem(20_000, 10, seed=5, theta_max=0.18)
    plain = readj(problem)
    seen = readj(problem, untracked_load=True)
    assert seen.imbalance_after < plain.imbalance_after


def test_hot_key_is_reported_and_infeasible():
    loads = np.array([30.0, 1, 1, 1, 1, 1, 1, 1, 1, 1])
    problem = RebalanceProblem(loads, loads, np.zeros(10, int), np.arange(10) % 3, 3, theta_max=0.2)
    for fn in GEDIK.values():
        result = fn(problem)
        assert not result.feasible and result.hot_keys.tolist() == [0]


def test_options_are_validated_with_named_messages():
    problem = zipf_problem(100, 3, seed=0)
    with pytest.raises(InvalidParameterError, match=r"the 'sigma' parameter of readj must be a float > 0"):
        readj(problem, sigma=-1)
    with pytest.raises(InvalidParameterError, match=r"the 'utility' parameter of scan must be one of"):
        scan(problem, utility="B")
    with pytest.raises(InvalidParameterError, match=r"the 'max_moves' parameter of readj"):
        readj(problem, max_moves=0)
    with pytest.raises(InvalidParameterError, match=r"the 'frequencies' parameter of redist"):
        redist(problem, frequencies=np.ones(3))
    with pytest.raises(InvalidParameterError, match=r"the 'tracked_before' parameter of scan"):
        scan(problem, tracked_before=np.array([1000]))
    custom = scan(problem, utility=lambda rho, gamma: rho + 2 * gamma)
    assert custom.assignment.shape == (100,)
    for name in ("scan", "redist", "readj"):
        assert name in METHODS


def test_every_utility_runs_and_plain_balance_moves_more():
    problem = zipf_problem(3_000, 8, seed=9, theta_max=0.15)
    results = {u: readj(problem, utility=u) for u in ("A", "APM", "APLM", "ATM", "ATLM")}
    assert all(r.assignment.shape == (3_000,) for r in results.values())
    assert results["A"].migration_cost >= results["APM"].migration_cost


# -- Fig. 1 of the paper (seeds-algorithms.md §2.11) ---------------------------------------------

TOY = "XZVRUYWL"
TOY_F = np.array([5, 3, 2, 1, 4, 3, 3, 1], dtype=float)


def _parts(*groups: str) -> np.ndarray:
    return np.array([next(i for i, g in enumerate(groups) if key in g) for key in TOY])


def _toy_loads(assignment: np.ndarray, n: int) -> tuple[list[float], list[float]]:
    problem = RebalanceProblem(TOY_F, TOY_F, np.zeros(8, int), np.zeros(8, int), n)
    costs = resource_costs(problem, "CQL", TOY_F)  # processing f^2, network f (in counts, as in the figure)
    return (
        instance_loads(costs[:, 1], assignment, n).tolist(),
        instance_loads(costs[:, 0], assignment, n).tolist(),
    )


def test_fig1_loads_of_the_paper_partitions():
    assert _toy_loads(_parts("XZVR", "UYWL"), 2) == ([11, 11], [39, 35])
    assert _toy_loads(_parts("XZV", "UYWLR"), 2) == ([10, 12], [38, 36])
    assert _toy_loads(_parts("XZ", "UY", "WVRL"), 3) == ([8, 7, 7], [34, 25, 15])  # the paper prints 24 for {U,Y}
    assert _toy_loads(_parts("XRL", "UY", "WZV"), 3) == ([7, 7, 8], [27, 25, 22])


def test_fig1_readj_reaches_the_optimise_both_row():
    current = _parts("XZV", "UYWLR")  # N = 2, "optimise both"
    problem = RebalanceProblem(TOY_F, TOY_F, current, current, 3, theta_max=0.2)
    result = readj(problem, delta=0.0, resources="CQL", frequencies=TOY_F / TOY_F.sum())
    network, processing = _toy_loads(result.assignment, 3)
    # The paper's N = 3 "optimise both" row: network [7, 7, 8], processing [27, 25, 22], migration 10.
    assert sorted(network) == [7, 7, 8] and sorted(processing) == [22, 25, 27]
    assert TOY_F[result.assignment != current].sum() == 10
    for fn in (scan, redist):
        other = fn(problem, delta=0.0, resources="CQL", frequencies=TOY_F / TOY_F.sum())
        _, proc = _toy_loads(other.assignment, 3)
        assert max(proc) / min(proc) > 27 / 22  # Readj balances processing better, as in the paper
