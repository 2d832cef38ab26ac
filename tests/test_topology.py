import numpy as np
import pytest

from locality.errors import InvalidParameterError, TopologyError
from locality.topology import Instance, Topology

OPS = ["location", "hashtag"]


def test_uniform_places_instances_round_robin():
    topo = Topology.uniform(OPS, n_servers=3, instances_per_server=2)
    assert topo.servers == ("s0", "s1", "s2")
    assert topo.n_instances("hashtag") == 6
    assert [topo.server_of("hashtag", i) for i in range(6)] == ["s0", "s1", "s2", "s0", "s1", "s2"]
    assert topo.instances("location")[4] == Instance("location", 4, "s1")
    np.testing.assert_allclose(topo.instance_shares("location"), np.full(6, 1 / 6))
    np.testing.assert_allclose(topo.server_shares("location"), np.full(3, 1 / 3))


def test_unequal_counts_and_capacities():
    topo = Topology.from_counts(OPS, {"location": {"a": 2, "b": 1}, "hashtag": {"a": 1, "b": 3}}, {"a": 2.0, "b": 1.0})
    assert topo.placement["location"] == ("a", "b", "a")
    assert topo.placement["hashtag"] == ("a", "b", "b", "b")
    # instance shares follow the capacity of their server
    np.testing.assert_allclose(topo.instance_shares("hashtag"), [0.4, 0.2, 0.2, 0.2])
    np.testing.assert_allclose(topo.server_shares("hashtag"), [0.4, 0.6])


def test_dict_round_trip():
    topo = Topology.from_counts(OPS, {"a": 2, "b": 1}, {"a": 1.5})
    assert Topology.from_dict(topo.to_dict()) == topo


@pytest.mark.parametrize(
    "servers, operators, placement, message",
    [
        ([], OPS, {}, "at least one server"),
        (["a"], ["only"], {"only": ["a"]}, "at least two stateful operators"),
        (["a", "a"], OPS, {}, "duplicate server names: ['a']"),
        (["a"], ["x", "x"], {}, "duplicate operator names: ['x']"),
        (["a"], OPS, {"location": ["a"]}, "operator 'hashtag' has no instance"),
        (["a"], OPS, {"location": ["a"], "hashtag": ["zz"]}, "unknown servers ['zz']"),
        (["a", "b"], OPS, {"location": ["a", "b"], "hashtag": ["a"]}, "no instance on servers ['b']"),
    ],
)
def test_bad_topologies_say_what_is_wrong(servers, operators, placement, message):
    with pytest.raises(TopologyError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Topology(servers, operators, placement)


def test_bad_capacity_and_sizes():
    with pytest.raises(TopologyError, match="capacity of server 'a' must be a positive number"):
        Topology(["a"], OPS, {op: ["a"] for op in OPS}, {"a": 0})
    with pytest.raises(
        InvalidParameterError, match="'n_servers' parameter of Topology.uniform must be an int >= 1; got 0"
    ):
        Topology.uniform(OPS, 0)
    with pytest.raises(InvalidParameterError, match="'instances_per_server'"):
        Topology.uniform(OPS, 2, 0)
