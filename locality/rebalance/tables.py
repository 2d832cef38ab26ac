"""Apply a skew rebalancer to the routing tables of a whole configuration.

Between two locality reconfigurations, each operator's table is adjusted to
the key loads seen lately: the rebalancer sees the keys observed (their load
as computation cost and as state size), where the tables send them now and
where the fallback hash would; entries of keys not seen are kept as they are.
"""

from __future__ import annotations

import pandas as pd

from locality.rebalance import DEFAULT_METHOD, RebalanceProblem, rebalance
from locality.routing import RoutingConfiguration, RoutingTable

__all__ = ["rebalance_tables"]


def rebalance_tables(
    config: RoutingConfiguration,
    seen: pd.DataFrame,
    *,
    method: str = DEFAULT_METHOD,
    theta_max: float = 0.08,
    table_cap: int | None = None,
) -> tuple[RoutingConfiguration, float, float]:
    """Rebalance every operator's table on the key loads of ``seen``.

    Parameters
    ----------
    config : RoutingConfiguration
    seen : pandas.DataFrame
        Recent tuples, one key column per operator (each row weighs 1).
    method, theta_max, table_cap
        The rebalancer (:data:`locality.rebalance.METHODS`), its bound and table cap.

    Returns
    -------
    (RoutingConfiguration, float, float)
        The adjusted configuration, the share of the seen keys' state that
        moves, and the planning time in seconds.
    """
    tables, moved, total, seconds = {}, 0.0, 0.0, 0.0
    for op in config.topology.operators:
        loads = seen[op].value_counts()
        keys = loads.index.to_numpy(dtype=object)
        table = config.tables[op]
        problem = RebalanceProblem(
            loads=loads.to_numpy(dtype=float),
            state_sizes=loads.to_numpy(dtype=float),
            current=table.route_many(keys),
            fallback=table.fallback.instances_of(keys),
            n_instances=config.topology.n_instances(op),
            theta_max=theta_max,
            table_cap=table_cap,
        )
        result = rebalance(problem, method=method)
        kept = table.entries[~table.entries.index.isin(loads.index)]
        assigned = pd.Series(result.assignment, index=pd.Index(keys, dtype=object))
        tables[op] = RoutingTable(op, table.fallback, pd.concat([kept, assigned]))
        moved += float(problem.state_sizes[result.moved].sum())
        total += float(problem.state_sizes.sum())
        seconds += result.planning_seconds
    return RoutingConfiguration(config.topology, tables, config.parameters), (moved / total if total else 0.0), seconds
