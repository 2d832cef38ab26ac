"""One finiteness-and-range check for every number, and output paths checked before any work."""

from __future__ import annotations

import math

import pytest

from locality._validation import check_interval, check_output_path
from locality.errors import InvalidParameterError, TopologyError
from locality.router import Router
from locality.store import ConfigStore
from locality.topology import Topology
from tests._store_children import make_config


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, float("1e999")])
def test_no_infinity_or_nan_passes_a_range(value):
    with pytest.raises(InvalidParameterError, match="'alpha' parameter of f must be a (finite )?float >= 1"):
        check_interval(value, "alpha", "f", lower=1.0)


def test_an_infinity_passes_only_where_the_range_names_it():
    assert check_interval(math.inf, "max_cost", "f", lower=0.0, upper=math.inf) == math.inf
    assert check_interval(1e308, "alpha", "f", lower=1.0) == 1e308
    with pytest.raises(InvalidParameterError, match="must be a float >= 0.0 and < inf; got inf"):
        check_interval(math.inf, "w", "f", lower=0.0, upper=math.inf, closed="left")


@pytest.mark.parametrize("value", [math.inf, math.nan, 1e-9, 1e20, True, "5"])
def test_a_router_poll_interval_it_cannot_keep_is_refused(tmp_path, value):
    ConfigStore(tmp_path).publish(make_config(0, 5), fingerprint="f")
    with pytest.raises(InvalidParameterError, match="'poll_interval' parameter of Router"):
        Router(tmp_path, poll_interval=value)


@pytest.mark.parametrize("value", [math.inf, math.nan, -1.0, 1e20])
def test_a_lock_timeout_a_lock_cannot_wait_is_refused(tmp_path, value):
    with pytest.raises(InvalidParameterError, match="'lock_timeout' parameter of ConfigStore"):
        ConfigStore(tmp_path, lock_timeout=value)


def test_a_topology_too_large_to_build_is_refused_before_it_is_built():
    with pytest.raises(TopologyError, match="give 2,147,483,648 instances per operator; a topology has at most"):
        Topology.uniform(["a", "b"], 2**31)  # refused before a list of two billion servers is built
    with pytest.raises(TopologyError, match="2,000,000 instances per operator"):
        Topology.uniform(["a", "b"], 1_000, 2_000)
    with pytest.raises(TopologyError, match="1,048,577 instances"):
        Topology.from_counts(["a", "b"], {"s0": 2**20, "s1": 1})


def test_output_paths_are_checked_before_any_work(tmp_path):
    (tmp_path / "file").write_text("x")
    assert (
        check_output_path(tmp_path / "new" / "deeper" / "out.txt", "--out") == tmp_path / "new" / "deeper" / "out.txt"
    )
    assert not (tmp_path / "new").exists()  # checked, not created
    with pytest.raises(InvalidParameterError, match=r"output file .* \(--out\) is a directory"):
        check_output_path(tmp_path, "--out")
    with pytest.raises(InvalidParameterError, match=r"\(--out\) cannot be created: .*file is a file"):
        check_output_path(tmp_path / "file" / "out.txt", "--out")
    with pytest.raises(InvalidParameterError, match=r"output directory .* \(--workdir\) is a file"):
        check_output_path(tmp_path / "file", "--workdir", directory=True)


def test_parameters_are_checked_at_the_outermost_boundary_only():
    """scikit-learn's nested validation: a boundary called by another trusts what that one checked."""
    from locality._validation import boundary, outermost

    checked = []

    @boundary
    def inner(alpha):
        if outermost():
            checked.append("inner")
            check_interval(alpha, "alpha", "inner", lower=1.0)
        return alpha

    @boundary
    def outer(alpha):
        if outermost():
            checked.append("outer")
            check_interval(alpha, "alpha", "outer", lower=1.0)
        return inner(alpha)

    assert outer(1.1) == 1.1 and checked == ["outer"]  # inner trusted outer's check
    assert inner(1.1) == 1.1 and checked == ["outer", "inner"]  # alone, inner checks
    with pytest.raises(InvalidParameterError, match="'alpha' parameter of outer"):
        outer(0.5)
    assert outer(2.0) == 2.0  # the count went back down after the error: inner called alone checks again
    with pytest.raises(InvalidParameterError, match="'alpha' parameter of inner"):
        inner(0.5)


def test_each_boundary_checks_what_the_functions_it_calls_trust(flights):
    """A boundary checks every parameter it passes on: bad ones are named with the function the user called."""
    from locality.counts import count_keys
    from locality.optimizer import LocalityOptimizer, make_fallbacks, optimize
    from locality.reconfiguration import reconfigure

    keys = ["tailnum", "dest"]
    topology = Topology.uniform(keys, 3)
    graph = count_keys(flights.iloc[:2_000], keys).graph()
    fallbacks = make_fallbacks(topology)
    current = optimize(graph, topology, fallbacks).config
    with pytest.raises(InvalidParameterError, match="'max_entries' parameter of LocalityOptimizer must be an int"):
        LocalityOptimizer(topology, max_entries=-1).fit(flights.iloc[:2_000])
    with pytest.raises(InvalidParameterError, match="'seed' parameter of LocalityOptimizer must be an int"):
        LocalityOptimizer(topology, seed=-1).fit(flights.iloc[:2_000])
    for bad, name in ((dict(alpha=0.5), "alpha"), (dict(seed=2**40), "seed"), (dict(max_entries=-1), "max_entries")):
        with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of reconfigure must be"):
            reconfigure(graph, topology, current, fallbacks, **bad)
        with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of optimize must be"):
            optimize(graph, topology, fallbacks, **bad)
