"""Where an adapter finds its table, and which server a split key's part is for: one rule each.

An adapter takes its routing from a :class:`~locality.routing.RoutingTable`
(fixed, naming no servers), a :class:`~locality.routing.RoutingConfiguration`
or a :class:`~locality.router.RoutingSnapshot` (fixed, with the topology's
servers) or a :class:`~locality.router.Router` (the version in service, read
again at every call): :func:`routing_table_of`. A split key's records go to
the part its plan names for a server, given as a name of the topology or a
position in its server list (:func:`server_position`).
"""

from __future__ import annotations

from collections.abc import Sequence

from locality._validation import check_integer, check_option
from locality.errors import InvalidParameterError
from locality.router import Router, RoutingSnapshot
from locality.routing import RoutingConfiguration, RoutingTable

__all__ = ["routing_table_of", "server_position"]


def server_position(server: str | int, servers: Sequence[str] | None, n_servers: int | None, owner: str) -> int:
    """Position of ``server`` in a split plan: a name of ``servers``, or a position below ``n_servers``.

    ``servers`` is the topology's server list (None for a bare table, which
    names no servers); ``n_servers`` bounds a position when there is no list
    (None: no bound).

    Raises
    ------
    InvalidParameterError
        Naming ``owner``'s ``server`` parameter, if ``server`` is not one.
    """
    if isinstance(server, str):
        if servers is None:
            raise InvalidParameterError(
                f"the 'server' parameter of {owner} must be a server position with a routing table alone, which "
                f"names no servers; got {server!r} (pass a router, snapshot or configuration to name servers)",
                parameter="server",
            )
        return list(servers).index(check_option(server, "server", owner, servers))
    n = len(servers) if servers is not None else n_servers
    return check_integer(server, "server", owner, lower=0, upper=None if n is None else n - 1)


def routing_table_of(
    routing: RoutingTable | RoutingConfiguration | RoutingSnapshot | Router, operator: str | None, owner: str
) -> tuple[RoutingTable, tuple[str, ...] | None]:
    """The table of ``operator`` and the topology's servers: from a table (no servers), a configuration, a
    snapshot or a router (its version in service).

    Raises
    ------
    InvalidParameterError
        Naming ``owner``'s parameter, if ``routing`` is none of these or has no table for ``operator``.
    """
    if isinstance(routing, RoutingTable):
        return routing, None
    if isinstance(routing, Router):
        routing = routing.snapshot()
    if isinstance(routing, RoutingSnapshot):
        routing = routing.configuration
    if not isinstance(routing, RoutingConfiguration):
        raise InvalidParameterError(
            f"the 'routing' parameter of {owner} must be a RoutingTable, or a RoutingConfiguration or router "
            f"holding one per operator; got {type(routing).__name__}",
            parameter="routing",
        )
    if operator not in routing.tables:
        raise InvalidParameterError(
            f"the 'operator' parameter of {owner} must be one of {sorted(routing.tables)}; got {operator!r}",
            parameter="operator",
        )
    return routing.tables[operator], tuple(routing.topology.servers)
