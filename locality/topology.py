"""Servers, the chain of stateful operators, and where each operator's instances run.

An instance is ``(operator, index)``; ``index`` is the engine's own numbering
(Kafka partition, Storm task position, Flink subtask), which is what the
fallback hash returns. Each instance lives on exactly one server. Locality is
about servers: two consecutive hops are local when both instances share one.

Capacities are relative server speeds (default 1). An instance's fair share of
its operator's load is proportional to the capacity of its server, so with
equal capacities every instance of an operator should get the operator's mean
load, whatever the number of instances per server.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from locality._validation import check_integer
from locality.defaults import DEFAULT_INSTANCES_PER_SERVER
from locality.errors import TopologyError

__all__ = ["Instance", "Topology"]


@dataclass(frozen=True, order=True)
class Instance:
    """One instance of a stateful operator, placed on a server."""

    operator: str
    index: int
    server: str


#: Instances one operator may have: instance numbers are int32 in the tables, and every load vector, fallback and
#: placement holds one entry per instance, so a count beyond a million is a typo (a deployment that large would be
#: measured first), refused before anything is allocated for it.
MAX_INSTANCES = 1 << 20


def _check_instance_count(count: int, what: str) -> None:
    if count > MAX_INSTANCES:
        raise TopologyError(f"{what} give {count:,} instances per operator; a topology has at most {MAX_INSTANCES:,}")


def _check_names(names: Sequence[str], what: str) -> tuple[str, ...]:
    names = tuple(names)
    if not names:
        raise TopologyError(f"a topology needs at least one {what}; got none")
    for name in names:
        if not isinstance(name, str) or not name:
            raise TopologyError(f"{what} names must be non-empty strings; got {name!r}")
    duplicates = sorted(n for n, c in Counter(names).items() if c > 1)
    if duplicates:
        raise TopologyError(f"duplicate {what} names: {duplicates}")
    return names


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _check_shape(value: object, field: str, keys: str, item: str, is_item: Callable[[object], bool]) -> None:
    """Raise TopologyError naming ``field`` unless ``value`` is a JSON object of ``keys`` -> ``item`` (``is_item``)."""
    if not isinstance(value, Mapping):
        raise TopologyError(f"{field!r} must be a JSON object of {keys} -> {item}; got {value!r:.80}")
    for name, value_item in value.items():
        if not is_item(value_item):
            raise TopologyError(f"{field}[{name!r}] must be {item}; got {value_item!r:.80}")


class Topology:
    """A deployment: servers (with capacities), operators in pipeline order, placement.

    Parameters
    ----------
    servers : sequence of str
        Server names, unique.
    operators : sequence of str
        Stateful operators in pipeline order (two or more), unique. In a trace
        these are the key column names.
    placement : mapping of operator -> sequence of server names
        ``placement[op][i]`` is the server of instance ``i`` of ``op``.
    capacities : mapping of server -> positive float, optional
        Relative processing capacity of each server (default 1 for all).

    Raises
    ------
    TopologyError
        No servers, fewer than two operators, duplicate names, an operator with
        no instance, an instance on an unknown server, a server without an
        instance of some operator (more servers than instances), or a
        non-positive capacity.

    Examples
    --------
    >>> topo = Topology.uniform(["location", "hashtag"], n_servers=3, instances_per_server=2)
    >>> topo.n_instances("hashtag"), topo.server_of("hashtag", 4)
    (6, 's1')
    """

    def __init__(
        self,
        servers: Sequence[str],
        operators: Sequence[str],
        placement: Mapping[str, Sequence[str]],
        capacities: Mapping[str, float] | None = None,
    ) -> None:
        self.servers = _check_names(servers, "server")
        self.operators = _check_names(operators, "operator")
        if len(self.operators) < 2:
            raise TopologyError(
                f"a topology needs a chain of at least two stateful operators; got {list(self.operators)}"
            )
        known = set(self.servers)
        unknown_ops = sorted(set(placement) - set(self.operators))
        if unknown_ops:
            raise TopologyError(f"placement names operators not in the chain: {unknown_ops}")
        self.placement: dict[str, tuple[str, ...]] = {}
        for op in self.operators:
            hosts = tuple(placement.get(op, ()))
            if not hosts:
                raise TopologyError(f"operator {op!r} has no instance")
            stray = sorted({h for h in hosts if h not in known})
            if stray:
                raise TopologyError(
                    f"operator {op!r} has instances on unknown servers {stray}; servers are {list(self.servers)}"
                )
            hosted = set(hosts)  # once: a set per server made this quadratic (minutes for 100,000 servers)
            empty = [s for s in self.servers if s not in hosted]
            if empty:
                raise TopologyError(
                    f"operator {op!r} has {len(hosts)} instances but no instance on servers {empty}: "
                    "every server needs at least one instance of every operator (more servers than instances?)"
                )
            self.placement[op] = hosts
        caps = dict(capacities or {})
        stray_caps = sorted(set(caps) - known)
        if stray_caps:
            raise TopologyError(f"capacities given for unknown servers {stray_caps}")
        for server, cap in caps.items():
            if not isinstance(cap, (int, float)) or not np.isfinite(cap) or cap <= 0:
                raise TopologyError(f"the capacity of server {server!r} must be a positive number; got {cap!r}")
        self.capacities = {s: float(caps.get(s, 1.0)) for s in self.servers}

    # ------------------------------------------------------------------ builders
    @classmethod
    def uniform(
        cls,
        operators: Sequence[str],
        n_servers: int,
        instances_per_server: int = DEFAULT_INSTANCES_PER_SERVER,
        capacities: Sequence[float] | None = None,
    ) -> Topology:
        """``n_servers`` servers named ``s0..s{n-1}``, ``instances_per_server`` instances of each operator on each.

        Instance ``i`` runs on server ``i mod n_servers`` (round-robin, like
        Storm's even scheduler), so instance indices interleave servers.
        """
        n = check_integer(n_servers, "n_servers", "Topology.uniform", lower=1)
        k = check_integer(instances_per_server, "instances_per_server", "Topology.uniform", lower=1)
        _check_instance_count(n * k, f"{n:,} servers x {k:,} instances per server")
        servers = [f"s{i}" for i in range(n)]
        placement = {op: [servers[i % n] for i in range(n * k)] for op in operators}
        caps = None
        if capacities is not None:
            if len(capacities) != n:
                raise TopologyError(f"got {len(capacities)} capacities for {n} servers")
            caps = dict(zip(servers, capacities))
        return cls(servers, operators, placement, caps)

    @classmethod
    def from_counts(
        cls,
        operators: Sequence[str],
        counts: Mapping[str, Mapping[str, int]] | Mapping[str, int],
        capacities: Mapping[str, float] | None = None,
    ) -> Topology:
        """Explicit placement by instance counts per server.

        ``counts`` is either ``{server: count}`` (same for every operator) or
        ``{operator: {server: count}}``. Instances are numbered round-robin over
        the servers in the order given, so unequal counts interleave too.
        """
        per_op = counts if all(isinstance(v, Mapping) for v in counts.values()) else {op: counts for op in operators}
        servers: list[str] = []
        for table in per_op.values():
            servers.extend(s for s in table if s not in servers)
        placement = {}
        for op, table in per_op.items():
            remaining = {s: int(c) for s, c in table.items()}
            if any(c < 0 for c in remaining.values()):
                raise TopologyError(f"instance counts of operator {op!r} must be >= 0; got {dict(table)}")
            _check_instance_count(sum(remaining.values()), f"the instance counts of operator {op!r}")
            hosts: list[str] = []
            while any(remaining.values()):
                for s in table:
                    if remaining[s] > 0:
                        hosts.append(s)
                        remaining[s] -= 1
            placement[op] = hosts
        return cls(servers, operators, placement, capacities)

    # ------------------------------------------------------------------ queries
    def n_instances(self, operator: str) -> int:
        """Number of instances of ``operator``."""
        return len(self._hosts(operator))

    def instances(self, operator: str) -> list[Instance]:
        """The instances of ``operator`` in index order."""
        return [Instance(operator, i, s) for i, s in enumerate(self._hosts(operator))]

    def server_of(self, operator: str, index: int) -> str:
        """The server that runs instance ``index`` of ``operator``."""
        return self._hosts(operator)[index]

    def instance_servers(self, operator: str) -> np.ndarray:
        """Server position (into :attr:`servers`) of each instance of ``operator``, as int64."""
        position = {s: i for i, s in enumerate(self.servers)}
        return np.array([position[s] for s in self._hosts(operator)], dtype=np.int64)

    def instance_shares(self, operator: str) -> np.ndarray:
        """Fair share of the operator's load for each instance (sums to 1).

        Proportional to the capacity of the instance's server; uniform when
        capacities are equal.
        """
        caps = np.array([self.capacities[s] for s in self._hosts(operator)], dtype=float)
        return caps / caps.sum()

    def server_shares(self, operator: str) -> np.ndarray:
        """Fair share of the operator's load for each server (sums to 1)."""
        return np.bincount(
            self.instance_servers(operator), weights=self.instance_shares(operator), minlength=len(self.servers)
        )

    def _hosts(self, operator: str) -> tuple[str, ...]:
        try:
            return self.placement[operator]
        except KeyError:
            raise TopologyError(f"unknown operator {operator!r}; operators are {list(self.operators)}") from None

    # ------------------------------------------------------------------ I/O
    def to_dict(self) -> dict:
        """A JSON-ready description (servers, capacities, operators, placement)."""
        return {
            "servers": list(self.servers),
            "capacities": dict(self.capacities),
            "operators": list(self.operators),
            "placement": {op: list(hosts) for op, hosts in self.placement.items()},
        }

    @classmethod
    def from_document(cls, doc: object, operators: Sequence[str]) -> Topology:
        """The topology a user's JSON document describes for the chain ``operators``, its shape checked field by field.

        Either ``{"servers": [names], "placement": {operator: [server per instance]}}`` or
        ``{"instances": {server: count}}`` / ``{"instances": {operator: {server: count}}}``, each with an
        optional ``"capacities": {server: number}``. Raises :class:`TopologyError` naming the field
        that has the wrong shape (a string where a list is due, a count that is not an integer...).
        """
        if not isinstance(doc, Mapping):
            raise TopologyError(f"a topology is a JSON object; got {type(doc).__name__}")
        unknown = sorted(set(doc) - {"servers", "placement", "instances", "capacities"})
        if unknown:
            raise TopologyError(f"unknown fields {unknown}: a topology has servers and placement, or instances")
        capacities = doc.get("capacities")
        if capacities is not None:
            _check_shape(capacities, "capacities", "server", "a positive number", _is_number)
        if "instances" in doc:
            if "servers" in doc or "placement" in doc:
                raise TopologyError("give either 'instances' or 'servers' with 'placement', not both")
            counts = doc["instances"]
            if isinstance(counts, Mapping) and counts and all(isinstance(v, Mapping) for v in counts.values()):
                if sorted(counts) != sorted(operators):
                    raise TopologyError(f"'instances' names operators {sorted(counts)}; the chain is {list(operators)}")
                for op, table in counts.items():
                    _check_shape(table, f"instances[{op!r}]", "server", "an instance count", _is_count)
            else:
                _check_shape(counts, "instances", "server", "an instance count", _is_count)
            return cls.from_counts(operators, counts, capacities)
        servers, placement = doc.get("servers"), doc.get("placement")
        if not _is_names(servers):
            raise TopologyError(f"'servers' must be a list of server names; got {servers!r:.80}")
        _check_shape(placement, "placement", "operator", "a list of server names", _is_names)
        return cls(servers, operators, placement, capacities)

    @classmethod
    def from_dict(cls, data: Mapping) -> Topology:
        """Inverse of :meth:`to_dict`; raises :class:`TopologyError` on a malformed document."""
        try:
            return cls(data["servers"], data["operators"], data["placement"], data.get("capacities"))
        except (KeyError, TypeError) as exc:
            raise TopologyError(
                f"a topology document needs 'servers', 'operators' and 'placement'; could not read it: {exc!r}"
            ) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Topology) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        counts = ", ".join(f"{op}={self.n_instances(op)}" for op in self.operators)
        return f"Topology(servers={len(self.servers)}, instances: {counts})"
