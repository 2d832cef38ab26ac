"""Apache Flink: routing keys that make ``keyBy`` follow a routing table, for PyFlink and for Java jobs.

Keyed state lives in key groups, so a routing table takes effect by keying on
a *surrogate* (:mod:`locality.hashing.flink`): a reserved value whose key
group Flink's own assignment puts on the subtask the table names, while the
state under the surrogate keeps the real keys (a map state).
:class:`RoutingKeySelector` maps real keys to routing keys (PyFlink's
``key_by``), and :func:`write_routing_file` writes the mapping for a Java job.
A split key gets the surrogate of its part on the selecting instance's server.
Its Java twin, of the same name, is in ``jvm/locality-flink`` and
reads the store itself. See ``docs/engines/flink.md``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import numpy as np

from locality._durable import replace_file
from locality.engines._source import routing_table_of, server_position
from locality.errors import InvalidParameterError, SerializationError
from locality.hashing.base import make_fallback
from locality.hashing.flink import (
    RESERVED_INTS,
    RESERVED_LONGS,
    SURROGATE_PREFIX,
    FlinkKeyGroups,
    PyFlinkKeyGroups,
    check_key_type,
    flink_surrogates,
    is_surrogate,
)
from locality.router import Router, RoutingSnapshot
from locality.routing import RoutingConfiguration, RoutingTable

__all__ = [
    "RoutingKeySelector",
    "write_routing_file",
    "read_routing_file",
]

logger = logging.getLogger(__name__)

_FILE_FORMAT = "locality-flink-routing"
_FILE_VERSION = 1
_PYTHON_TYPES = {"string": str, "long": int, "int": int}


class RoutingKeySelector:
    """Routing key of a record for Flink: a table key's surrogate, every other key itself.

    Keyed on the routing key, a record of a table key reaches the subtask its
    table names, and a record of any other key the subtask Flink's own hash
    gives it (what the table's fallback predicts). Call it on a record: it is
    a key selector for PyFlink's ``key_by`` (use :meth:`key_by`, which
    declares the key type). The state of a table key must be kept under the
    real key inside the routing key's state (a ``MapState``), since several
    real keys share one surrogate.

    A table may split hot keys of an associative operator (its ``splits``):
    a split key's record then goes to the part its plan names for the server
    of the instance that selects the key (the upstream instance), keyed on
    that part's subtask's surrogate, and the state under the real key there
    is a partial state, merged downstream by the real key. The selector must
    know that server (``server``); without it split keys go whole to their
    home subtask (their entry's, else Flink's hash), and a warning says so
    once.

    Parameters
    ----------
    routing : RoutingTable, RoutingConfiguration, RoutingSnapshot or Router
        The table itself, or where to find it: a configuration or a snapshot
        (its ``tables[operator]``), or a router (the version in service when
        the selector is built). The fallback must be
        :class:`~locality.hashing.flink.PyFlinkKeyGroups` for PyFlink,
        :class:`~locality.hashing.flink.FlinkKeyGroups` for a Java job keyed on
        the value.
    operator : str, optional
        Operator whose table to use; required unless ``routing`` is a table.
    field : int, str, callable or None, default None
        Where the key is in a record: ``record[field]``, ``field(record)``,
        or the record itself.
    key_type : {"string", "long", "int"}, optional
        Java type of the keys (``String``, ``Long``, ``Integer``). Default: from
        the table's keys (str -> ``string``, int -> the fallback's
        ``int_type``); an empty table needs it.
    server : str, int or callable, optional
        The server whose parts split keys go to: a server name of the
        topology (``routing`` a configuration or a router) or a position in
        ``topology.servers``; or ``server(record)`` returning one, for a
        selector shared by instances on several servers (PyFlink ships one
        selector to every upstream subtask: let the upstream operator put its
        server in the record).

    Attributes
    ----------
    operator : str
    fallback : FlinkKeyGroups
        Where keys without an entry go; gives ``max_parallelism``, ``n_instances``.
    key_type : str
    routes : dict
        Real key -> surrogate, one per table entry.
    split_routes : dict
        Split key -> the routing key of its part for each server position (a surrogate, or the key itself
        on the subtask Flink's hash gives it).
    servers : tuple of str or None
        The topology's servers (None for a table given alone).
    server : int, callable or None
        ``server`` as a position (or the callable).

    Raises
    ------
    InvalidParameterError
        If the table cannot be found, its fallback is not Flink's, ``key_type``
        does not match its keys, one of its keys has a reserved form, or
        ``server`` is not a server of the topology.

    Notes
    -----
    Subtask ``i`` owns key groups ``s .. e`` and has one surrogate in each
    (:func:`flink_surrogates`). A table key ``k`` sent to ``i`` gets the
    surrogate of key group ``s + g(k) mod (e - s + 1)``, where ``g(k)`` is
    ``k``'s own key group: the table keys of a subtask spread over its key
    groups as hashed keys do, so no key group holds all of them (Flink
    restores and rescales state one key group at a time), and a key keeps
    its routing key as long as it keeps its subtask, so a new table version
    moves exactly the state of the keys its migration plan lists.

    Examples
    --------
    >>> import pandas as pd
    >>> from locality.routing import RoutingTable
    >>> table = RoutingTable("tag", PyFlinkKeyGroups(6, 128), pd.Series({"abc": 0, "job": 4}))
    >>> select = RoutingKeySelector(table, field=1)
    >>> [select(("US/Ohio", tag)) for tag in ("abc", "other")]
    ['\\x00locality:355', 'other']
    >>> split = RoutingTable("tag", PyFlinkKeyGroups(6, 128), pd.Series({"abc": 0}), {"hot": [2, 5]})
    >>> PyFlinkKeyGroups(6, 128).instance_of(RoutingKeySelector(split, field=1, server=1)(("US/Ohio", "hot")))
    5
    """

    def __init__(
        self,
        routing: RoutingTable | RoutingConfiguration | RoutingSnapshot | Router,
        operator: str | None = None,
        *,
        field: int | str | Callable[[Any], Hashable] | None = None,
        key_type: str | None = None,
        server: str | int | Callable[[Any], str | int] | None = None,
    ) -> None:
        owner = "RoutingKeySelector"
        table, self.servers = routing_table_of(routing, operator, owner)
        fallback = table.fallback
        if not isinstance(fallback, FlinkKeyGroups):
            raise InvalidParameterError(
                f"the table of {table.operator!r} falls back to {type(fallback).__name__}; "
                f"Flink routing keys need a table learned with the 'pyflink' (PyFlink key_by) or 'flink' "
                f"(Java keyBy) fallback"
            )
        keys = [k.item() if isinstance(k, np.generic) else k for k in table.entries.index]
        splits = dict(table.splits)
        self.operator: str = table.operator
        self.fallback = fallback
        self.key_type = _key_type_of(keys + list(splits), fallback, key_type, owner)
        self.field = field
        reserved = next((k for k in [*keys, *splits] if is_surrogate(k, self.key_type)), None)
        if reserved is not None:
            raise InvalidParameterError(
                f"the table of {self.operator!r} holds {_reserved_error(reserved, self.key_type)}"
            )
        self.routes = dict(
            zip(keys, _surrogates(keys, table.entries.to_numpy(dtype=np.int64), fallback, self.key_type))
        )
        self.split_routes = _split_routes(splits, self.routes, fallback, self.key_type)
        self.server = server if server is None or callable(server) else self._position(server)
        self._warned_whole = False

    @property
    def max_parallelism(self) -> int:
        """Flink's max parallelism (number of key groups) the routes are for."""
        return self.fallback.max_parallelism

    @property
    def parallelism(self) -> int:
        """Parallelism of the keyed operator the routes are for."""
        return self.fallback.n_instances

    @property
    def n_servers(self) -> int | None:
        """Servers a split key has a part for (the topology's; None for a table alone without split keys)."""
        if self.servers is not None:
            return len(self.servers)
        return len(next(iter(self.split_routes.values()))) if self.split_routes else None

    def _position(self, server: str | int) -> int:
        return server_position(server, self.servers, self.n_servers, "RoutingKeySelector")

    def __call__(self, record: Any) -> Hashable:
        field, server = self.field, self.server
        key = record if field is None else field(record) if callable(field) else record[field]
        return self.routing_key(key, server(record) if callable(server) else None)

    def routing_key(self, key: Hashable, server: str | int | None = None) -> Hashable:
        """Routing key of one real key: a split key's part for ``server``, its surrogate if the table lists it,
        else the key itself.

        Parameters
        ----------
        key : str or int
        server : str or int, optional
            Server name or position of the selecting instance (read by split
            keys only). Default: the selector's ``server`` if it is not a
            callable; without any, split keys get their home routing key.

        Raises
        ------
        InvalidParameterError
            If ``key`` is not of the selector's key type or has the reserved
            form of a surrogate, or ``server`` is not a server of the topology.
        """
        parts = self.split_routes.get(key) if self.split_routes else None
        if parts is not None:
            if server is not None:
                return parts[self._position(server)]
            if self.server is not None and not callable(self.server):
                return parts[self.server]  # a position, checked when the selector was made
            if not self._warned_whole:
                logger.warning(
                    "the table of %r splits %d hot keys but the key selector was given no 'server': "
                    "their records go whole to their home subtask",
                    self.operator,
                    len(self.split_routes),
                )
                self._warned_whole = True
        route = self.routes.get(key)
        if route is not None:
            return route
        if not isinstance(key, _PYTHON_TYPES[self.key_type]) or isinstance(key, bool):
            raise InvalidParameterError(
                f"the keys of operator {self.operator!r} are Java {self.key_type} values; "
                f"got {type(key).__name__} ({key!r})"
            )
        if is_surrogate(key, self.key_type):
            raise InvalidParameterError(f"operator {self.operator!r} got {_reserved_error(key, self.key_type)}")
        return key

    def key_type_info(self) -> Any:
        """PyFlink ``TypeInformation`` of the routing key, for ``key_by(..., key_type=...)``.

        Without it PyFlink keys on the pickled bytes of the key, which Flink
        hashes as a byte array: the surrogates would land anywhere.
        """
        from pyflink.common import Types

        return {"string": Types.STRING, "long": Types.LONG, "int": Types.INT}[self.key_type]()

    def key_by(self, stream: Any) -> Any:
        """``stream.key_by(self, key_type=self.key_type_info())``: the PyFlink keyed stream.

        Parameters
        ----------
        stream : pyflink.datastream.DataStream
            Its job must run with ``max_parallelism`` key groups and the keyed
            operator with ``parallelism`` subtasks.

        Raises
        ------
        InvalidParameterError
            If the table was learned for a Java job (``flink`` fallback):
            PyFlink hashes keys wrapped in a ``Row``, so its routes would be wrong.
        """
        if self.fallback.engine != PyFlinkKeyGroups.engine:
            raise InvalidParameterError(
                f"the table of {self.operator!r} was learned with the {self.fallback.engine!r} fallback, "
                f"where Java keys on the value; PyFlink's key_by keys on a Row around it: learn the table "
                f"with make_fallback('pyflink', ...)"
            )
        return stream.key_by(self, key_type=self.key_type_info())

    def __repr__(self) -> str:
        splits = f", splits={len(self.split_routes)}" if self.split_routes else ""
        server = "" if self.server is None else f", server={self.server!r}"
        return (
            f"RoutingKeySelector(operator={self.operator!r}, engine={self.fallback.engine!r}, "
            f"key_type={self.key_type!r}, max_parallelism={self.max_parallelism}, "
            f"parallelism={self.parallelism}, routes={len(self.routes)}{splits}{server})"
        )


def _key_type_of(keys: list, fallback: FlinkKeyGroups, key_type: str | None, owner: str) -> str:
    kinds = {"string" if isinstance(k, str) else "int" for k in keys}
    if key_type is None:
        if not kinds:
            raise InvalidParameterError(
                f"the table given to {owner} is empty, so its keys' type is unknown; pass key_type='string', "
                f"'long' or 'int'"
            )
        key_type = "string" if kinds == {"string"} else fallback.int_type
    key_type = check_key_type(key_type, fallback, owner)
    other = kinds - {"string" if key_type == "string" else "int"}
    if other:
        raise InvalidParameterError(
            f"the 'key_type' parameter of {owner} is {key_type!r} but the table holds {other.pop()} keys",
            parameter="key_type",
        )
    return key_type


def _surrogates(keys: list, subtasks: np.ndarray, fallback: FlinkKeyGroups, key_type: str) -> list:
    """Per key, the surrogate of key group ``start + own key group mod size`` of its subtask."""
    if not keys:
        return []
    start, stop = fallback.subtask_key_groups(subtasks)
    groups = start + fallback.key_groups(keys) % (stop - start)
    by_group = fallback.surrogates(key_type)
    return [by_group[g] for g in groups.tolist()]


def _split_routes(splits: dict, routes: dict, fallback: FlinkKeyGroups, key_type: str) -> dict:
    """Split key -> the routing key of each part: on subtask ``i``, the one a table entry for ``i`` would give.

    That is a surrogate, or the key itself on the subtask Flink's hash gives a
    key without an entry (``routes`` holds the entries' surrogates).
    """
    if not splits:
        return {}
    n = len(next(iter(splits.values())))
    keys = [k for k in splits for _ in range(n)]
    subtasks = np.array(list(splits.values()), dtype=np.int64).ravel()
    flat = _surrogates(keys, subtasks, fallback, key_type)
    hashed = (fallback.instances_of(keys) == subtasks).tolist()
    flat = [k if own and k not in routes else s for k, s, own in zip(keys, flat, hashed)]
    return {k: tuple(flat[i * n : (i + 1) * n]) for i, k in enumerate(splits)}


def _reserved_error(key: Any, key_type: str) -> str:
    form = (
        f"strings starting with {SURROGATE_PREFIX!r}"
        if key_type == "string"
        else ("{} values in [{}, {})".format(key_type, *(RESERVED_LONGS if key_type == "long" else RESERVED_INTS)))
    )
    return f"key {key!r}, whose form is reserved for Flink surrogates ({form})"


# The routing file a Java job loads.


def write_routing_file(
    routing: RoutingTable | RoutingConfiguration | RoutingSnapshot | Router,
    path: str | os.PathLike,
    operator: str | None = None,
    *,
    key_type: str | None = None,
    server: str | int | None = None,
) -> Path:
    """Write one operator's routes (real key -> surrogate) as a JSON-lines file a Flink job loads.

    The first line is a header object; each next line one table entry::

        {"format": "locality-flink-routing", "version": 1, "operator": "hashtag", "engine": "flink",
         "key_type": "string", "max_parallelism": 128, "parallelism": 6, "entries": 2}
        {"key": "jobs", "surrogate": "\\u0000locality:176", "subtask": 0, "key_group": 7}
        {"key": "tbt", "surrogate": "\\u0000locality:116", "subtask": 1, "key_group": 36}

    ``engine`` is ``flink`` for a Java job keyed on the value itself and
    ``pyflink`` for PyFlink's ``key_by``; ``key_type`` is the Java type of
    ``key`` and ``surrogate`` (``string``, ``long``, ``int``: JSON strings or
    numbers); ``subtask`` and ``key_group`` are where Flink puts the
    surrogate, for a job to check at start-up. Entries are sorted by key. A
    job keys every record on ``surrogate`` if its key is listed, else on the
    key itself, with the file's max parallelism and parallelism.

    A table with split keys has one file per server: the routes of the
    instances on ``server`` (``"server"`` in the header), where a split key
    is an entry for its part on that server (not listed where that part is
    the subtask Flink's hash gives the key itself). The format stays that of
    a plain table. Without ``server`` split keys get their home routes, and
    a warning says so.

    Parameters
    ----------
    routing, operator, key_type
        As for :class:`RoutingKeySelector`.
    server : str or int, optional
        As for :class:`RoutingKeySelector`, a server name or position (not a callable).
    path : str or path-like
        File to write. It is written aside and renamed into place, so a
        reader never sees half of it and a failed write leaves no file.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    InvalidParameterError
        As :class:`RoutingKeySelector`.
    """
    if callable(server):
        raise InvalidParameterError(
            f"the 'server' parameter of write_routing_file must be a server name or position; got {server!r}",
            parameter="server",
        )
    selector = RoutingKeySelector(routing, operator, key_type=key_type, server=server)
    fallback = selector.fallback
    routes = {k: selector.routing_key(k) for k in {**selector.routes, **selector.split_routes}}
    keys = sorted(k for k, route in routes.items() if route != k)
    surrogates = [routes[k] for k in keys]
    groups = fallback.key_groups(surrogates).tolist() if keys else []
    header = {
        "format": _FILE_FORMAT,
        "version": _FILE_VERSION,
        "operator": selector.operator,
        "engine": fallback.engine,
        "key_type": selector.key_type,
        "max_parallelism": selector.max_parallelism,
        "parallelism": selector.parallelism,
        "entries": len(keys),
    }
    if server is not None:
        header["server"] = server if selector.servers is None else selector.servers[selector.server]
    p = fallback.n_instances
    lines = [json.dumps(header, ensure_ascii=False)]
    for key, surrogate, group in zip(keys, surrogates, groups):
        entry = {
            "key": key,
            "surrogate": surrogate,
            "subtask": group * p // fallback.max_parallelism,
            "key_group": group,
        }
        lines.append(json.dumps(entry, ensure_ascii=False))
    path = replace_file(path, ("\n".join(lines) + "\n").encode("utf-8"))
    logger.info("wrote %d Flink routes of %r to %s", len(keys), selector.operator, path)
    return path


def read_routing_file(
    path: str | os.PathLike, *, field: int | str | Callable[[Any], Hashable] | None = None
) -> RoutingKeySelector:
    """Load a file :func:`write_routing_file` wrote, as a :class:`RoutingKeySelector`.

    Parameters
    ----------
    path : str or path-like
    field : int, str, callable or None, default None
        As for :class:`RoutingKeySelector`.

    Returns
    -------
    RoutingKeySelector
        With the file's routes, operator, key type and Flink parameters.

    Raises
    ------
    SerializationError
        If the file is unreadable, not such a file, of a newer version, or an
        entry's surrogate is not the one its key group has.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0]) if lines else None
        entries = [json.loads(line) for line in lines[1:] if line]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SerializationError(f"cannot read Flink routing file {path}: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != _FILE_FORMAT:
        raise SerializationError(f"{path} is not a Flink routing file: its first line is not a {_FILE_FORMAT} header")
    if not isinstance(header.get("version"), int) or header["version"] > _FILE_VERSION:
        raise SerializationError(
            f"{path} has Flink routing file version {header.get('version')!r}; this locality reads <= {_FILE_VERSION}"
        )
    try:
        key_type = header["key_type"]
        fallback = make_fallback(
            header["engine"],
            header["parallelism"],
            max_parallelism=header["max_parallelism"],
            int_type="int" if key_type == "int" else "long",
        )
        routes = {entry["key"]: entry["surrogate"] for entry in entries}
        by_group = flink_surrogates(fallback, key_type)["surrogate"]
        wrong = next((e for e in entries if by_group[e["key_group"]] != e["surrogate"]), None)
    except (KeyError, TypeError, InvalidParameterError) as exc:
        raise SerializationError(f"{path} is a damaged Flink routing file: {exc!r}") from None
    if wrong is not None or len(routes) != header.get("entries"):
        raise SerializationError(
            f"{path} does not match its header: entry {wrong!r} or {len(routes)} entries for {header.get('entries')}"
        )
    selector = RoutingKeySelector.__new__(RoutingKeySelector)
    selector.operator, selector.fallback, selector.key_type = header["operator"], fallback, key_type
    selector.field, selector.routes = field, routes
    selector.split_routes, selector.servers, selector.server, selector._warned_whole = {}, None, None, False
    return selector
