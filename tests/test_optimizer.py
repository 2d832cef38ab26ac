"""Acceptance of the core library on the real tweet trace (location -> hashtag, 6 servers, alpha 1.03)."""

import pytest

from locality.errors import InvalidParameterError
from locality.optimizer import LocalityOptimizer
from locality.topology import Topology
from tests.conftest import trace_keys

OPS = trace_keys("geotweets")
ALPHA = 1.03


@pytest.fixture(scope="module")
def topo():
    return Topology.uniform(OPS, 6)


@pytest.fixture(scope="module")
def in_sample(geotweets, topo):
    return LocalityOptimizer(topo, alpha=ALPHA).fit(geotweets)


def test_in_sample_locality_with_every_operator_within_alpha(in_sample):
    report = in_sample.report_
    # hash routing keeps about 1/6 of the hops local; the tables keep two thirds
    assert 0.15 < report.hash.locality < 0.18
    assert report.optimized.locality >= 0.66
    for op in OPS:
        assert report.optimized.imbalance[op] <= ALPHA + 1e-9
        assert report.hash.imbalance[op] > ALPHA  # hash routing itself is not balanced on this skew
    assert in_sample.partition_.feasible
    assert in_sample.placement_.balanced


def test_next_half_locality(geotweets, topo):
    half = len(geotweets) // 2
    model = LocalityOptimizer(topo, alpha=ALPHA).fit(geotweets.iloc[:half])
    report = model.evaluate(geotweets.iloc[half:])
    assert report.optimized.locality >= 0.33
    assert report.optimized.locality > 1.9 * report.hash.locality


def test_sketched_graph_close_to_exact(geotweets, topo, in_sample):
    # 65,536 pair counters (about 3.5 MB serialized) per sketch
    sketched = LocalityOptimizer(topo, alpha=ALPHA, capacity=1 << 16).fit(geotweets)
    assert sketched.report_.optimized.locality >= 0.95 * in_sample.report_.optimized.locality
    smaller = LocalityOptimizer(topo, alpha=ALPHA, capacity=10_000).fit(geotweets)
    assert smaller.report_.optimized.locality < sketched.report_.optimized.locality


def test_table_cap_keeps_the_valuable_entries(geotweets, topo, in_sample):
    capped = LocalityOptimizer(topo, alpha=ALPHA, max_entries=2_000).fit(geotweets)
    sizes = capped.config_.table_sizes()
    assert all(n <= 2_000 for n in sizes.values())
    # 2,000 hashtag entries (of ~33,000) still more than double hash routing's locality
    assert capped.report_.optimized.locality > 2 * capped.report_.hash.locality
    assert capped.report_.optimized.locality < in_sample.report_.optimized.locality
    # the cap is applied before balancing, so it does not break alpha
    assert all(v <= ALPHA + 1e-9 for v in capped.report_.optimized.imbalance.values())


def test_hot_key_makes_alpha_infeasible_and_is_named(flights):
    model = LocalityOptimizer(Topology.uniform(trace_keys("flights"), 24), alpha=ALPHA).fit(flights)
    hot = {h.key for h in model.partition_.hot_keys}
    assert {"ORD", "ATL"} <= hot
    assert all(h.operator == "dest" and h.load > h.bound for h in model.partition_.hot_keys)


def test_unfitted_and_bad_parameters(topo, geotweets):
    with pytest.raises(AttributeError, match="not fitted"):
        LocalityOptimizer(topo).evaluate(geotweets)
    with pytest.raises(InvalidParameterError, match="'alpha' parameter of LocalityOptimizer"):
        LocalityOptimizer(topo, alpha=0.5).fit(geotweets)


def test_the_hash_and_the_sketch_size_are_named_as_on_the_command_line(geotweets, topo):
    """``hash`` and ``capacity`` (``--hash``, ``--capacity``) take effect and are recorded under those names."""
    rows = geotweets.iloc[:3_000]
    fitted = LocalityOptimizer(topo, hash="spark", capacity=500).fit(rows)
    assert (fitted.hash, fitted.capacity) == ("spark", 500)
    assert fitted.config_.parameters["hash"] == "spark" and fitted.config_.parameters["capacity"] == 500
    assert {table.fallback.engine for table in fitted.config_.tables.values()} == {"spark"}


def test_the_optimizer_says_where_its_time_goes(in_sample):
    result = in_sample.optimization_
    stages = result.summary()["stage_seconds"]
    assert list(stages) == ["csr", "metis", "fallback", "assign", "repair", "refine", "tables"]
    assert stages["metis"]["wall"] >= result.partition.metis_seconds
    assert sum(s["wall"] for s in stages.values()) <= result.seconds
    assert all(s["cpu"] >= 0 for s in stages.values())
