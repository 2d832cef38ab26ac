"""Apply a rebalancer to the routing tables of a whole configuration.

Between two locality reconfigurations, each operator's table is adjusted to
the key loads seen lately: the rebalancer sees the keys observed (their load
as computation cost, their state size), where the tables send them now and
where the fallback hash would; entries of keys not seen are kept as they are.
Given the key graph of the tables in force, the locality-aware rebalancers
(``"local"``, ``"follow"``) also see each key's affinity to every server (the
weight of its edges to keys routed there) and the hops it will make until the
next reconfiguration (its load times ``horizon``). With ``split_hot_keys``
they split the keys too hot for one instance by neighbour server
(:func:`locality.rebalance.split.plan_local_splits`, associative state only)
and rebalance the other keys around the split keys' flows; the tables carry
the split plans (:attr:`RoutingTable.splits`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from locality._validation import check_interval, check_option
from locality.defaults import DEFAULT_THETA_MAX
from locality.errors import InvalidParameterError
from locality.graph import KeyGraph
from locality.imbalance import unequal_shares
from locality.placement import server_connections
from locality.rebalance import (
    BASE_AWARE,
    DEFAULT_METHOD,
    METHODS,
    RebalanceProblem,
    check_locality_aware,
    rebalance,
    table_room,
    within_cap,
)
from locality.rebalance.local import hops_per_tuple
from locality.rebalance.split import plan_local_splits
from locality.routing import RoutingConfiguration, RoutingTable

__all__ = ["rebalance_tables", "rebalance_configuration", "key_affinity"]


def key_affinity(config: RoutingConfiguration, graph: KeyGraph, op: str, keys: np.ndarray) -> np.ndarray:
    """Edge weight from each of ``keys`` (of operator ``op``) to the keys ``config`` routes to each server.

    Keys absent from ``graph`` have no edges (a row of zeros).

    Returns
    -------
    ndarray of float, shape (len(keys), n_servers)
    """
    topology = config.topology
    servers = np.concatenate(
        [
            topology.instance_servers(o)[config.route_many(o, graph.keys[o].to_numpy(dtype=object))]
            for o in graph.operators
        ]
    ).astype(np.int64)
    out = np.zeros((len(keys), len(topology.servers)))
    positions = graph.keys[op].get_indexer(pd.Index(keys, dtype=object))
    known = np.flatnonzero(positions >= 0)
    if known.size:
        vertices = positions[known].astype(np.int64) + graph.offsets[op]
        out[known] = server_connections(graph, vertices, servers, len(topology.servers))
    return out


def rebalance_configuration(
    config: RoutingConfiguration,
    loads: Mapping[str, pd.Series],
    *,
    state: Mapping[str, pd.Series] | None = None,
    graph: KeyGraph | None = None,
    method: str = DEFAULT_METHOD,
    theta_max: float = DEFAULT_THETA_MAX,
    table_cap: int | None = None,
    horizon: float = 1.0,
    split_hot_keys: bool = False,
    split_share: float | None = None,
    base_loads: Mapping[str, np.ndarray] | None = None,
    **options,
) -> tuple[RoutingConfiguration, float, float]:
    """Rebalance every operator's table on the key loads ``loads``.

    Parameters
    ----------
    config : RoutingConfiguration
    loads : mapping of operator -> Series (key -> load)
        Recent load of the keys of each operator.
    state : mapping of operator -> Series (key -> state size), optional
        State of each key (default: its load).
    graph : KeyGraph, optional
        The key graph of the tables in force; with it, the rebalancers of
        :data:`~locality.rebalance.BASE_AWARE` weigh the locality each move
        loses or gains.
    method, theta_max, table_cap
        The rebalancer (:data:`locality.rebalance.METHODS`), its bound and
        table cap. The cap is on each whole table: the entries of keys absent
        from ``loads`` count against it (:func:`~locality.rebalance.table_room`);
        if they alone exceed it, the surplus goes back to the fallback (the
        entries last in the table first).
    horizon : float, default 1.0
        Locality-aware rebalancers: how many times its load in ``loads`` a key
        crosses each hop before the next reconfiguration (the time until then
        over the length of the window ``loads`` were counted on). A move gains
        or loses locality on that many hops, against its state once.
    split_hot_keys : bool, default False
        Locality-aware rebalancers with a ``graph``: split the hot keys by
        neighbour server (associative state only). A key split before stays
        split, re-planned, while ``loads`` holds it; a split key absent from
        ``loads`` goes back to its home instance (its partial states fold
        there, :func:`locality.migration.plan_migration`).
    split_share : float, optional
        With ``split_hot_keys``: a key is hot above this share of an
        instance's fair share of the load; None: when it fits on no instance.
    base_loads : mapping of operator -> array (one load per instance), optional
        Locality-aware rebalancers: load each instance carries whatever the
        keys do (what it served since the balance window began, when
        ``loads`` forecast the rest of it); the bound is on base + keys.
    **options
        Passed to the rebalancer (e.g. ``state_weight`` for ``local``).

    Returns
    -------
    (RoutingConfiguration, float, float)
        The adjusted configuration, the share of the seen keys' state that
        moves, and the planning time in seconds.
    """
    owner = "rebalance_configuration"
    check_option(method, "method", owner, METHODS)
    horizon = check_interval(horizon, "horizon", owner, lower=0.0)
    if split_hot_keys:
        check_locality_aware(method, "method", owner, "split_hot_keys")
        if graph is None:
            raise InvalidParameterError(
                f"split_hot_keys in {owner} needs the key graph (the 'graph' parameter)", parameter="graph"
            )
    if split_share is not None:
        check_interval(split_share, "split_share", owner, lower=0.0, closed="neither")
    if base_loads is not None:
        check_locality_aware(method, "method", owner, "base_loads")
    tables, moved, total, seconds = {}, 0.0, 0.0, 0.0
    operators = list(config.topology.operators)
    for position, op in enumerate(operators):
        series = loads[op]
        keys = series.index.to_numpy(dtype=object)
        sizes = series if state is None or op not in state else state[op].reindex(series.index).fillna(series)
        table = config.tables[op]
        servers = config.topology.instance_servers(op)
        n = config.topology.n_instances(op)
        shares = unequal_shares(config.topology.instance_shares(op))
        current = table.route_many(keys)
        load = series.to_numpy(dtype=float)
        extra = dict(options)
        if method in BASE_AWARE and graph is not None:
            extra.update(
                affinity=key_affinity(config, graph, op, keys),
                servers=servers,
                hop_loads=load * horizon * hops_per_tuple(position, len(operators)),
            )
        inside, splits = np.ones(len(keys), dtype=bool), {}
        base = None if base_loads is None else np.asarray(base_loads[op], dtype=float)
        if split_hot_keys:
            ids = np.arange(len(keys))
            keep = pd.Index(keys).isin(list(table.splits))
            plans, base = plan_local_splits(
                ids,
                load,
                current,
                np.zeros(n) if base is None else base,
                extra["affinity"],
                servers,
                theta_max=theta_max,
                split_share=split_share,
                keep=keep,
                shares=shares,
            )
            splits = {keys[r]: plan.route for r, plan in plans.items()}
            inside[list(plans)] = False
            extra = {k: (v[inside] if k in ("affinity", "hop_loads") else v) for k, v in extra.items()}
        fallback = table.fallback.instances_of(keys)
        kept = table.entries[~table.entries.index.isin(series.index)]
        homes = pd.Series(current[~inside], index=pd.Index(keys[~inside], dtype=object))  # split keys stay home
        room, excess = table_room(table_cap, len(kept) + int(np.count_nonzero(current[~inside] != fallback[~inside])))
        kept = kept.iloc[: max(0, len(kept) - excess)]
        problem = RebalanceProblem(
            loads=load[inside],
            state_sizes=sizes.to_numpy(dtype=float)[inside],
            current=current[inside],
            fallback=fallback[inside],
            n_instances=n,
            theta_max=theta_max,
            table_cap=room,
            base_loads=base,
            shares=shares,
        )
        result = within_cap(problem, rebalance(problem, method=method, **extra))
        assigned = pd.Series(result.assignment, index=pd.Index(keys[inside], dtype=object))
        tables[op] = RoutingTable(op, table.fallback, pd.concat([kept, assigned, homes]), splits)
        moved += float(problem.state_sizes[result.moved].sum())
        total += float(sizes.sum())
        seconds += result.planning_seconds
    return RoutingConfiguration(config.topology, tables, config.parameters), (moved / total if total else 0.0), seconds


def rebalance_tables(
    config: RoutingConfiguration,
    seen: pd.DataFrame,
    *,
    method: str = DEFAULT_METHOD,
    theta_max: float = DEFAULT_THETA_MAX,
    table_cap: int | None = None,
) -> tuple[RoutingConfiguration, float, float]:
    """Rebalance every operator's table on the key loads of the tuples ``seen`` (each row weighs 1).

    :func:`rebalance_configuration` with each key's count in ``seen`` as its load and state.
    """
    loads = {op: seen[op].value_counts() for op in config.topology.operators}
    return rebalance_configuration(config, loads, method=method, theta_max=theta_max, table_cap=table_cap)
