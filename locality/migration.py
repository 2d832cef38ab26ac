"""From one routing configuration to the next: relabel partitions onto servers, plan the state moves.

METIS numbers its parts arbitrarily, so publishing part ``p`` on server ``p``
would move state for nothing. :func:`relabel_parts` solves the assignment
problem on the overlap between new parts and current servers, weighted by
state size, so that the least state moves [1]_.

:func:`plan_migration` compares two configurations key by key and returns the
:class:`MigrationPlan`: for every instance the paper's reconfiguration message
(its new router, the keys whose state it sends and to whom, the keys it
receives and from whom), the order in which operators reconfigure (pipeline
order, so upstream routers switch before downstream state moves), and the
total migration cost. The two configurations may be on different topologies
(servers added or removed, :mod:`locality.elastic`): an instance is then the
same in both when it has the same index on the same server, and keys that
neither table lists move too where the fallback hashes disagree.

References
----------
.. [1] Caneill, El Rheddane, Leroy, De Palma. "Locality-aware routing in
   stateful streaming applications." Middleware 2016 (section 3.4, Algorithm 1).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from locality._validation import check_option
from locality.defaults import DEFAULT_SPLIT_MERGE
from locality.errors import InvalidParameterError, SerializationError, TopologyError
from locality.routing import RoutingConfiguration
from locality.topology import Topology

__all__ = ["relabel_parts", "MigrationPlan", "InstanceMessage", "plan_migration", "SPLIT_MERGES"]

#: How an operator combines a split key's partial states (:func:`plan_migration`'s ``split_merge``).
SPLIT_MERGES = ("fold", "downstream")


def relabel_parts(new_parts: np.ndarray, current_servers: np.ndarray, state: np.ndarray, n_servers: int) -> np.ndarray:
    """Server for each new part so that the most state stays where it is.

    Parameters
    ----------
    new_parts : ndarray of int, shape (V,)
        Part of every vertex in the new partition (0..n_servers-1).
    current_servers : ndarray of int, shape (V,)
        Server every vertex's key is on now (-1: a server the new partition
        does not have; such keys move whatever the labels).
    state : ndarray of float, shape (V,)
        State size of every key (what moving it costs).
    n_servers : int

    Returns
    -------
    ndarray of int, shape (n_servers,)
        ``mapping[p]`` is the server part ``p`` goes to (a permutation).
    """
    from scipy.optimize import linear_sum_assignment

    overlap = np.zeros((n_servers, n_servers))
    held = np.asarray(current_servers) >= 0
    np.add.at(overlap, (new_parts[held], current_servers[held]), state[held])
    rows, cols = linear_sum_assignment(overlap, maximize=True)
    mapping = np.empty(n_servers, dtype=np.int64)
    mapping[rows] = cols
    return mapping


@dataclass(frozen=True)
class InstanceMessage:
    """The reconfiguration message of one node (the paper's ``router``, ``send``, ``receive``).

    A node's router sends tuples to the *next* operator, so ``router_for``
    names the operator whose new table it switches to (None for the last
    operator) and ``router_entries`` is that table's size. The sources that
    feed the first operator get a message too, with ``operator``,
    ``instance`` and ``server`` None. ``send`` maps each target instance to
    the keys whose state this instance sends there; ``receive`` maps each
    source instance to the keys it gets from there.
    """

    operator: str | None
    instance: int | None
    server: str | None
    router_for: str | None
    router_entries: int
    send: dict[int, list]
    receive: dict[int, list]

    def to_dict(self) -> dict:
        return {
            "operator": self.operator,
            "instance": self.instance,
            "server": self.server,
            "router_for": self.router_for,
            "router_entries": self.router_entries,
            "send": {str(k): v for k, v in self.send.items()},
            "receive": {str(k): v for k, v in self.receive.items()},
        }


@dataclass
class MigrationPlan:
    """Every key whose instance changes between two configurations, with the state it carries.

    ``moves`` has columns ``operator, key, source, target, state`` (instances
    are indices within the operator). ``order`` is the pipeline order in
    which operators switch. ``cost`` is the total state moved and
    ``cost_share`` that total over the state of all keys considered.

    Across a change of topology, ``from_topology`` is the one ``source``
    instances belong to (targets belong to the new configuration's), and
    ``rehashed`` is true when the fallback hashes changed: keys the plan does
    not list (in neither table, with no known state) may move as well, from
    where the old configuration routes them to where the new one does.
    """

    order: list[str]
    moves: pd.DataFrame
    total_state: float
    from_version: int | None = None
    to_version: int | None = None
    from_topology: Topology | None = None
    rehashed: bool = False

    @property
    def cost(self) -> float:
        return float(self.moves["state"].sum())

    @property
    def cost_share(self) -> float:
        return self.cost / self.total_state if self.total_state > 0 else 0.0

    @property
    def moved_keys(self) -> int:
        return int(len(self.moves))

    def moves_of(self, operator: str) -> pd.DataFrame:
        return self.moves[self.moves["operator"] == operator]

    def messages(self, new: RoutingConfiguration) -> list[InstanceMessage]:
        """The reconfiguration message of the sources, then of every instance, in pipeline order.

        The instances are ``new``'s, and across a change of topology also the
        old ones that do not survive (they only send).
        """
        sizes = new.table_sizes()
        first = self.order[0]
        out = [InstanceMessage(None, None, None, first, sizes[first], {}, {})]
        old = self.from_topology or new.topology
        for i, op in enumerate(self.order):
            moves = self.moves_of(op)
            sources, targets = moves["source"].to_numpy(dtype=np.int64), moves["target"].to_numpy(dtype=np.int64)
            source_servers = np.asarray(old.placement[op], dtype=object)[sources]
            target_servers = np.asarray(new.topology.placement[op], dtype=object)[targets]
            downstream = self.order[i + 1] if i + 1 < len(self.order) else None
            instances = new.topology.instances(op)
            instances += [inst for inst in old.instances(op) if inst not in set(instances)]
            for inst in instances:
                sending = moves[(moves["source"] == inst.index) & (source_servers == inst.server)]
                receiving = moves[(moves["target"] == inst.index) & (target_servers == inst.server)]
                out.append(
                    InstanceMessage(
                        op,
                        inst.index,
                        inst.server,
                        downstream,
                        sizes[downstream] if downstream else 0,
                        {int(t): g["key"].tolist() for t, g in sending.groupby("target")},
                        {int(s): g["key"].tolist() for s, g in receiving.groupby("source")},
                    )
                )
        return out

    def summary(self) -> dict:
        return {
            "from_version": self.from_version,
            "to_version": self.to_version,
            "order": self.order,
            "moved_keys": self.moved_keys,
            "migration_cost": self.cost,
            "migration_cost_share": self.cost_share,
            "moved_keys_by_operator": {op: int(len(self.moves_of(op))) for op in self.order},
            "topology_change": None
            if self.from_topology is None
            else {
                "servers_before": len(self.from_topology.servers),
                "rehashed": self.rehashed,
            },
        }

    def to_dict(self, new: RoutingConfiguration | None = None) -> dict:
        """JSON-ready: the summary, every move, and (given ``new``) every instance's message."""
        doc = self.summary()
        doc["total_state"] = self.total_state
        if self.from_topology is not None:
            doc["from_topology"] = self.from_topology.to_dict()
        doc["moves"] = [
            [row.operator, _plain(row.key), int(row.source), int(row.target), float(row.state)]
            for row in self.moves.itertuples(index=False)
        ]
        if new is not None:
            doc["messages"] = [m.to_dict() for m in self.messages(new)]
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping) -> MigrationPlan:
        try:
            moves = pd.DataFrame(doc["moves"], columns=["operator", "key", "source", "target", "state"])
            change = doc.get("topology_change") or {}
            return cls(
                list(doc["order"]),
                moves,
                float(doc["total_state"]),
                doc.get("from_version"),
                doc.get("to_version"),
                Topology.from_dict(doc["from_topology"]) if "from_topology" in doc else None,
                bool(change.get("rehashed", False)),
            )
        except (KeyError, TypeError, ValueError, TopologyError) as exc:
            raise SerializationError(f"not a migration plan document: {exc!r}") from None

    def to_json(self, new: RoutingConfiguration | None = None) -> str:
        return json.dumps(self.to_dict(new))


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _moved(op: str, old: RoutingConfiguration, new: RoutingConfiguration, source, target) -> np.ndarray:
    """Whether each key's state changes instance: another index, or (across topologies) the same index elsewhere."""
    if old.topology == new.topology:
        return source != target
    before = np.asarray(old.topology.placement[op], dtype=object)[source]
    after = np.asarray(new.topology.placement[op], dtype=object)[target]
    return (source != target) | (before != after)


def _folds(op: str, old: RoutingConfiguration, new: RoutingConfiguration, sizes: pd.Series) -> pd.DataFrame:
    """Partial states of ``old``'s split keys held where ``new`` no longer sends the key: folded into its home."""
    out = []
    for key, route in old.tables[op].splits.items():
        holders = sorted({*route, old.route(op, key)})
        home = new.route(op, key)
        keeps = [*new.tables[op].splits.get(key, ()), home]
        source = np.repeat(np.asarray(holders, dtype=np.int64), len(keeps))
        target = np.tile(np.asarray(keeps, dtype=np.int64), len(holders))
        # a holder keeps its partial when one of the instances new sends the key to is that same instance
        kept = ~_moved(op, old, new, source, target).reshape(len(holders), len(keeps)).all(axis=1)
        share = float(sizes.get(key, 0.0)) / len(holders)
        out.extend((op, key, part, home, share) for part, stays in zip(holders, kept) if not stays)
    return pd.DataFrame(out, columns=["operator", "key", "source", "target", "state"])


def plan_migration(
    old: RoutingConfiguration,
    new: RoutingConfiguration,
    state_sizes: Mapping[str, pd.Series],
    *,
    from_version: int | None = None,
    to_version: int | None = None,
    split_merge: str = DEFAULT_SPLIT_MERGE,
) -> MigrationPlan:
    """The keys whose instance changes from ``old`` to ``new``, and the state each carries.

    Parameters
    ----------
    old, new : RoutingConfiguration
        The same operators. On different topologies (servers added or
        removed), an instance is the same in both when it has the same index
        on the same server; with different fallback hashes every key may
        move, so the keys of ``state_sizes`` are compared too, and the plan
        is marked ``rehashed`` (keys it does not know move as well).
    state_sizes : mapping of operator -> Series (key -> state size)
        State of the keys known in the window (by default their load). Keys
        in either table but absent here carry no known state (0) but still
        move. A key in neither table routes by the same hash in both and
        never moves (when the fallbacks are the same).
    split_merge : {"fold", "downstream"}, default "fold"
        How split keys' partial states are combined (see
        :mod:`locality.rebalance.split`). ``"fold"``: a partial state held on
        an instance that ``new`` no longer sends the key to (a split ended, or
        its plan changed) moves to the key's home instance in ``new`` and is
        merged there; each partial counts an equal share of the key's state
        (the plan does not know the parts' sizes). ``"downstream"``: a final
        aggregation combines them; a split key's partials never move.

    Returns
    -------
    MigrationPlan

    Raises
    ------
    InvalidParameterError
        If the two configurations route different operators.
    """
    check_option(split_merge, "split_merge", "plan_migration", SPLIT_MERGES)
    if tuple(old.topology.operators) != tuple(new.topology.operators):
        raise InvalidParameterError(
            f"a migration plan needs two configurations of the same operators; got {list(old.topology.operators)} "
            f"and {list(new.topology.operators)}"
        )
    rehashed = any(old.tables[op].fallback != new.tables[op].fallback for op in new.topology.operators)
    rows = []
    total = 0.0
    for op in new.topology.operators:
        sizes = state_sizes.get(op, pd.Series(dtype=float))
        total += float(sizes.sum())
        was_split = old.tables[op].splits
        candidates = old.tables[op].entries.index.append(new.tables[op].entries.index)
        if rehashed:  # every known key may move, not only those a table lists
            candidates = candidates.append(sizes.index)
        candidates = candidates.unique()
        candidates = candidates[~candidates.isin(list(was_split))]  # their partials are handled below
        if len(candidates):
            keys = candidates.to_numpy(dtype=object)
            source = old.route_many(op, keys)
            target = new.route_many(op, keys)
            moved = _moved(op, old, new, source, target)
            state = sizes.reindex(candidates[moved]).fillna(0.0).to_numpy(dtype=float)
            frame = {"operator": op, "key": keys[moved], "source": source[moved], "target": target[moved]}
            rows.append(pd.DataFrame({**frame, "state": state}))
        if was_split and split_merge == "fold":
            rows.append(_folds(op, old, new, sizes))
    moves = (
        pd.concat(rows, ignore_index=True)
        if rows
        else pd.DataFrame({"operator": [], "key": [], "source": [], "target": [], "state": []})
    )
    moves = moves.astype({"source": "int64", "target": "int64", "state": "float64"})
    changed = old.topology != new.topology
    return MigrationPlan(
        list(new.topology.operators),
        moves,
        total,
        from_version,
        to_version,
        old.topology if changed else None,
        rehashed,
    )
