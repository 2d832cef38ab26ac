"""Apache Storm: fields grouping on a single field, and the routing file a custom grouping loads.

:class:`StormFieldsGrouping` reproduces where Storm's fields grouping sends a
key. Storm takes a routing table natively: a ``CustomStreamGrouping`` looks the
key up and otherwise computes the fields grouping's own index
(``docs/engines/storm.md``, with ``LocalityRoutes.java``, the JDK-only loader).
:func:`write_grouping_file` writes one operator's table in the plain text form
that loader reads (one file per server for a table with split keys);
:func:`read_grouping_file` reads it back.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from locality._durable import replace_file
from locality.engines.base import routing_table_of, server_position
from locality.engines.jvm import HashCodeEngine
from locality.engines.primitives import signed32
from locality.errors import InvalidParameterError, SerializationError

if TYPE_CHECKING:
    from locality.routing import RoutingConfiguration, RoutingTable

logger = logging.getLogger(__name__)

__all__ = ["StormFieldsGrouping", "write_grouping_file", "read_grouping_file", "GROUPING_FILE_FORMAT"]

#: First field of a Storm routing file's header line.
GROUPING_FILE_FORMAT = "locality-storm-routing"
_FILE_VERSION = 1
_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


class StormFieldsGrouping(HashCodeEngine):
    """Storm's fields grouping on a single field.

    Parameters
    ----------
    n_instances : int
        Number of target tasks, >= 1. The result indexes the target tasks
        sorted ascending by task id.
    int_type : {"long", "int"}, default "long"
        Java type of int keys: ``Long`` or ``Integer``.

    Raises
    ------
    InvalidParameterError
        If ``n_instances`` is not an int >= 1 or ``int_type`` is unknown.

    Notes
    -----
    ``index = Math.floorMod(Arrays.deepHashCode(new Object[]{key}), numTasks)``,
    that is ``floorMod(31 + key.hashCode(), n)`` in 32-bit int arithmetic, with
    ``String.hashCode`` over UTF-16 code units (a non-BMP character counts as two)
    and ``Long.hashCode = (int)(v ^ (v >>> 32))`` (``Integer.hashCode = v``).
    There is no bit mixing: sequential int keys go round robin.

    Sources in apache/storm (2.x), and the JDK's ``Arrays.deepHashCode`` and ``String.hashCode``:

    - ``storm-client/src/jvm/org/apache/storm/daemon/GrouperFactory.java`` (``FieldsGrouper``)
    - ``storm-client/src/jvm/org/apache/storm/utils/TupleUtils.java`` (``chooseTaskIndex``)

    References
    ----------
    .. [1] Apache Storm, "Concepts: stream groupings",
       https://storm.apache.org/releases/current/Concepts.html

    Examples
    --------
    >>> StormFieldsGrouping(4).instances_of(["hello", "#bigdata", "a"]).tolist()
    [1, 2, 0]
    """

    engine = "storm"

    def _place(self, h: Any) -> Any:
        return signed32(h + 31) % self.n_instances


def write_grouping_file(
    routing: RoutingTable | RoutingConfiguration | Any,
    path: str | os.PathLike,
    operator: str | None = None,
    *,
    server: str | int | None = None,
) -> Path:
    """Write one operator's routing table as the text file a Storm custom grouping loads.

    Line 1 is a tab-separated header: ``locality-storm-routing``, the format
    version (1), the operator, the key type (``string``, ``long`` or ``int``:
    the Java type of the field), the number of target tasks and the number of
    entries. Each next line is one entry: the task *index* (into the target
    tasks sorted ascending, as the fields grouping indexes them), a tab, and
    the key, UTF-8, with backslash, tab, newline and carriage return escaped
    as ``\\\\``, ``\\t``, ``\\n``, ``\\r``. Entries are sorted by key. Plain
    text, so the JDK alone reads it (``LocalityRoutes.java``): Storm's
    classpath offers no public JSON library.

    A table with split keys has one file per server: the routes the grouping
    of a worker on ``server`` follows, where a split key is an entry for its
    part on that server (not listed where that part is the task the fields
    grouping gives the key itself). The format stays that of a plain table
    (the header names no server: the file's name or place says which server
    it is for). Without ``server`` split keys get their home routes, and a
    warning says so.

    Parameters
    ----------
    routing : RoutingTable, RoutingConfiguration, RoutingSnapshot or Router
        The operator's table, or a configuration (or router) holding it; its
        fallback must be :class:`StormFieldsGrouping`.
    path : str or path-like
        The file; written aside and renamed, so a topology never loads half of it.
    operator : str, optional
        The operator whose table to write; needed unless ``routing`` is a table.
    server : str or int, optional
        The server whose workers load the file: a server name of the topology
        or its position in ``topology.servers`` (a bare table names no
        servers: give a position). Only split keys read it.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    InvalidParameterError
        If the table's fallback is not Storm's fields grouping, ``operator`` is
        not in ``routing``, or ``server`` is not a server of the topology.
    """
    owner = "write_grouping_file"
    if callable(server):
        raise InvalidParameterError(
            f"the 'server' parameter of {owner} must be a server name or position; got {server!r}"
        )
    table, servers = routing_table_of(routing, operator, owner)
    fallback = table.fallback
    if not isinstance(fallback, StormFieldsGrouping):
        raise InvalidParameterError(
            f"the table of {table.operator!r} falls back to {type(fallback).__name__}; a Storm grouping needs a "
            "table learned with the 'storm' fallback (--hash storm)"
        )
    position = None if server is None else server_position(server, servers, table.n_servers, owner)
    entries = _entries_seen_from(table, position).sort_index()
    # an empty table has no key to type: "string" then, which no entry needs parsing with
    key_type = "string" if table.key_kind in ("string", None) else fallback.int_type
    header = [GROUPING_FILE_FORMAT, str(_FILE_VERSION), _escape(table.operator), key_type]
    lines = ["\t".join(header + [str(fallback.n_instances), str(len(entries))])]
    lines += [f"{int(task)}\t{_escape(str(key))}" for key, task in entries.items()]
    return replace_file(path, ("\n".join(lines) + "\n").encode("utf-8"))


def _entries_seen_from(table: RoutingTable, position: int | None) -> pd.Series:
    """The table's entries with each split key's part on server ``position`` (its home route without one)."""
    if not table.splits:
        return table.entries
    if position is None:
        logger.warning(
            "the table of %r splits %d hot keys but write_grouping_file was given no 'server': "
            "the file routes them whole to their home task",
            table.operator,
            len(table.splits),
        )
        return table.entries
    from locality.routing import RoutingTable

    parts = {key: plan[position] for key, plan in table.splits.items()}
    routes = {**table.entries.to_dict(), **parts}
    return RoutingTable(table.operator, table.fallback, routes).entries  # parts equal to the hash dropped


def read_grouping_file(path: str | os.PathLike) -> RoutingTable:
    """The routing table a :func:`write_grouping_file` file holds.

    Raises
    ------
    SerializationError
        If the file cannot be read, is not such a file, is of a newer version,
        or its entries do not match its header.
    """
    from locality.routing import RoutingTable

    path = Path(path)
    try:
        lines = path.read_bytes().decode("utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise SerializationError(f"cannot read the Storm routing file {path}: {exc}") from None
    header = lines[0].split("\t")
    if len(header) != 6 or header[0] != GROUPING_FILE_FORMAT:
        raise SerializationError(
            f"{path} is not a Storm routing file: its first line is not a {GROUPING_FILE_FORMAT} header"
        )
    try:
        version, operator, key_type = int(header[1]), _unescape(header[2]), header[3]
        tasks, count = int(header[4]), int(header[5])
        if version > _FILE_VERSION or key_type not in ("string", "long", "int"):
            raise ValueError(f"version {version}, key type {key_type!r}")
        rows = [line.split("\t", 1) for line in lines[1:] if line]
        keys = [_unescape(key) if key_type == "string" else int(key) for _, key in rows]
        entries = pd.Series([int(task) for task, _ in rows], index=pd.Index(keys, dtype=object), dtype="int64")
        if len(entries) != count:
            raise ValueError(f"{len(entries)} entries for {count} in the header")
        fallback = StormFieldsGrouping(tasks, int_type="int" if key_type == "int" else "long")
        return RoutingTable(operator, fallback, entries)
    except (ValueError, InvalidParameterError) as exc:
        raise SerializationError(f"{path} is a damaged Storm routing file: {exc}") from None


def _escape(text: str) -> str:
    return "".join(_ESCAPES.get(ch, ch) for ch in text)


def _unescape(text: str) -> str:
    out, chars = [], iter(text)
    for ch in chars:
        if ch == "\\":
            code = next(chars, "")
            if code not in "\\tnr" or not code:
                raise ValueError(f"bad escape in {text!r}")
            ch = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}[code]
        out.append(ch)
    return "".join(out)
