"""Routing tables: explicit ``key -> instance`` entries, the engine's hash for every other key.

A :class:`RoutingTable` serves one operator; a :class:`RoutingConfiguration`
holds the tables of the whole chain with the topology and the parameters
that made them. Entries equal to the fallback are never stored: the table
holds only what the hash gets wrong, so its size is what an engine must load.

A table may also *split* hot keys (associative state only, see
:mod:`locality.rebalance.split`): a split key's tuples go to the instance its
plan names for the server of the tuple's neighbouring key (the upstream
key's server, which is the sending instance's; for the first operator, the
server of the next operator's key). :meth:`RoutingTable.route` takes that
server; without one a split key goes to its home instance, the one its
partial states fold back into. :meth:`RoutingConfiguration.route_rows`
applies the rule to whole tuples.

A configuration is written as JSON (one document: topology, fallback spec,
entries) and as Parquet (one file per operator with typed ``key`` and int32
``instance`` columns, plus ``configuration.json`` without the entries), so a
non-Python engine can load either. Split plans add one Parquet file per
operator that has some (``key``, ``server_index``, ``server``, ``instance``:
one row per key and server) and raise the format version to 2, so that a
reader that cannot route them refuses the configuration instead of routing
split keys whole.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from locality._arrow_files import table_bytes, table_from_bytes
from locality.errors import InvalidParameterError, SerializationError
from locality.hashing import FallbackHash, fallback_from_dict
from locality.hashing.keys import key_columns
from locality.topology import Topology

__all__ = ["RoutingTable", "RoutingConfiguration", "FORMAT_VERSION"]

logger = logging.getLogger(__name__)

#: Version of the JSON / Parquet layout; readers refuse newer versions. A configuration
#: without split keys is written as version 1 (readable by every release), with them as 2.
FORMAT_VERSION = 2
_SPLIT_FORMAT = 2


def _plain(value):
    """A JSON-ready Python scalar from a numpy scalar."""
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True)
class _Lookups:
    """A table's lookups: key -> instance as a dict, and for integer keys an int64 hash index over ``instances``."""

    by_key: dict
    int_index: pd.Index | None
    instances: np.ndarray


class RoutingTable:
    """Explicit entries for one operator, falling back to the engine's hash.

    Parameters
    ----------
    operator : str
    fallback : FallbackHash
        The engine's own routing for keys not in the table.
    entries : mapping of key -> instance, or pandas Series indexed by key
        Entries equal to the fallback are dropped on construction.
    splits : mapping of key -> sequence of int, optional
        Split keys: for each, the instance of its tuples whose neighbouring
        key is on server ``s`` (position ``s`` in the topology's servers),
        one per server. The key's entry (or the fallback) stays its home
        instance.
    differ_from_fallback : bool, default False
        The caller knows every entry differs from the fallback (it compared
        them already): the hash of every entry that drops the others is
        skipped (seconds for millions of entries).
    unique_keys : bool, default False
        The caller knows no key appears twice (the store's tables are sorted,
        which the reader checks in one vectorized pass): the hash-based check
        is skipped.

    Notes
    -----
    A table is not changed after construction, so any number of threads may
    route through one table. Its lookups (a dict, and an int64 hash index for
    batches of integer keys) are built at the first lookup, under a lock (a
    table read only to be evaluated or exported never pays for them);
    :meth:`warm` builds them ahead, as the Router does before it serves a version.
    """

    def __init__(
        self,
        operator: str,
        fallback: FallbackHash,
        entries: Mapping | pd.Series | None = None,
        splits: Mapping[str | int, Iterable[int]] | None = None,
        *,
        differ_from_fallback: bool = False,
        unique_keys: bool = False,
    ) -> None:
        self.operator = operator
        self.fallback = fallback
        series = pd.Series(entries, dtype="int64") if not isinstance(entries, pd.Series) else entries.astype("int64")
        if len(series) and (series.min() < 0 or series.max() >= fallback.n_instances):
            raise InvalidParameterError(
                f"routing table of {operator!r} sends keys to instances outside [0, {fallback.n_instances - 1}]"
            )
        if not unique_keys and series.index.has_duplicates:
            raise InvalidParameterError(f"routing table of {operator!r} lists a key twice")
        # infer_dtype checks millions of keys in C; the per-key set below only names the kinds found.
        plain = not len(series) or pd.api.types.infer_dtype(series.index, skipna=False) in ("string", "integer")
        kinds = set() if plain else {_key_kind(k) for k in series.index}
        if len(kinds) > 1 or None in kinds:
            raise InvalidParameterError(
                f"routing table keys of {operator!r} must be all strings or all integers; got {sorted(map(str, kinds))}"
            )
        if len(series) and not differ_from_fallback:
            keep = series.to_numpy() != fallback.instances_of(series.index.to_numpy(dtype=object))
            series = series[keep]
        self.entries: pd.Series = series
        self.splits: dict[str | int, tuple[int, ...]] = _checked_splits(operator, splits, fallback.n_instances)
        self._build_lookups()

    def _build_lookups(self) -> None:
        """What every lookup reads first: the key kind and the split plans (the entries' lookups wait: :meth:`warm`)."""
        keys = self.entries.index
        first = keys[0] if len(keys) else next(iter(self.splits), None)
        self._kind = None if first is None else _key_kind(first)
        if self.splits:
            self._split_index = pd.Index(list(self.splits))
            self._split_routes = np.array(list(self.splits.values()), dtype=np.int64)
        self._lookups: _Lookups | None = None
        self._lookups_guard = threading.Lock()

    def warm(self) -> RoutingTable:
        """Build the lookups now (once), so that the first lookup does not pay for them; returns the table.

        A dict serves single keys, and batches of strings too: Python's dict is
        already a hash table of str objects with cached hashes, probed from C
        through ``map(dict.get, ...)``. Batches of integers probe an int64 hash
        table (a pandas index, its table built here rather than lazily under
        concurrent readers) without making a Python int per key.
        """
        self._lookup()
        return self

    def _lookup(self) -> _Lookups:
        lookups = self._lookups
        if lookups is not None:
            return lookups
        with self._lookups_guard:
            if self._lookups is None:
                keys = self.entries.index
                instances = self.entries.to_numpy(dtype=np.int64)
                int_index = None
                if self._kind == "integer":
                    int_index = pd.Index(keys.to_numpy(dtype=np.int64))
                    int_index.get_indexer(int_index[:1])  # populates the hash table now
                self._lookups = _Lookups(dict(zip(keys.tolist(), instances.tolist())), int_index, instances)
            return self._lookups

    @property
    def key_kind(self) -> str | None:
        """``"string"`` or ``"integer"``: the type of the keys, split ones included (None for an empty table)."""
        return self._kind

    def __getstate__(self) -> dict:
        # pickles (Spark shipping a table to executors) hold the entries, not the lookups (nor their lock)
        return {"operator": self.operator, "fallback": self.fallback, "entries": self.entries, "splits": self.splits}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._build_lookups()

    @property
    def n_servers(self) -> int | None:
        """Servers a split plan names an instance for (None without split keys)."""
        return len(next(iter(self.splits.values()))) if self.splits else None

    def route(self, key: str | int, server: int | None = None) -> int:
        """Instance of ``key``: its split plan's for ``server``, else its entry, else the fallback hash.

        Parameters
        ----------
        key : str or int
        server : int, optional
            Position of the server of the tuple's neighbouring key (see the
            module docstring); only split keys read it.

        Raises
        ------
        InvalidParameterError
            If ``key`` is not a str or an int the fallback takes, or ``server``
            is not a server position of the split plan.
        """
        # bool is an int that equals 0 or 1: it must not find the entries of 0 and 1
        if isinstance(key, (str, int, np.integer)) and not isinstance(key, bool):
            if server is not None and self.splits:
                plan = self.splits.get(key)
                if plan is not None:
                    return plan[self._check_server(server)]
            instance = self._lookup().by_key.get(key)
            if instance is not None:
                return instance
        return self.fallback.instance_of(key)

    def route_many(
        self, keys: Iterable[str | int] | np.ndarray | pd.Series | pa.Array, servers: np.ndarray | None = None
    ) -> np.ndarray:
        """Instances of a batch of keys: one hash-table probe, then the fallback hash for the misses.

        Gives exactly ``[self.route(k, s) for k, s in zip(keys, servers)]``
        (``[self.route(k) for k in keys]`` without ``servers``).

        Parameters
        ----------
        keys : sequence of str and int, numpy array, pandas Series or pyarrow Array
            The containers and key types :meth:`FallbackHash.instances_of` takes.
        servers : array of int, optional
            Per key, the position of its neighbouring key's server (split keys only read it).

        Returns
        -------
        numpy.ndarray of int64, shape (len(keys),)

        Raises
        ------
        InvalidParameterError
            If a key has another type or is null (the message gives its position).
        """
        out = self._route_entries(keys)
        return out if servers is None else self.with_splits(out, keys, servers)

    def with_splits(self, home: np.ndarray, keys, servers: np.ndarray) -> np.ndarray:
        """``home`` (the instances of ``keys`` without servers) with each split key's row sent to its part.

        ``servers`` holds, per key, the position of its neighbouring key's
        server. Only the split keys' rows are looked up again; ``home`` is
        returned as it is when the table splits no key.
        """
        if not self.splits:
            return home
        servers = np.asarray(servers, dtype=np.int64)
        if servers.shape != home.shape:
            raise InvalidParameterError(
                f"RoutingTable.route_many of {self.operator!r} needs one server per key; "
                f"got {servers.shape[0] if servers.ndim == 1 else servers.shape} for {home.shape[0]} keys"
            )
        plan = self._split_index.get_indexer(_as_objects(keys))
        split = np.flatnonzero(plan >= 0)
        if not split.size:
            return home
        for server in np.unique(servers[split]).tolist():
            self._check_server(server)
        out = home.copy()
        out[split] = self._split_routes[plan[split], servers[split]]
        return out

    def _route_entries(self, keys: Iterable[str | int] | np.ndarray | pd.Series | pa.Array) -> np.ndarray:
        """Instances of a batch of keys by their entries and the fallback (split keys at home)."""
        if self._kind == "string" and isinstance(keys, (list, np.ndarray)):
            try:  # probe the dict with the objects as they come, without a trip through Arrow
                return self._route_strings(keys, keys)
            except TypeError:
                pass  # a key that is not a str or an int: key_columns below names it and its position
        cols = key_columns(keys, "RoutingTable.route_many")
        out = np.empty(cols.n, dtype=np.int64)
        for kind, column, rows in (("string", cols.strings, cols.string_rows), ("integer", cols.ints, cols.int_rows)):
            if column is not None and len(column):
                out[slice(None) if rows is None else rows] = self._route_column(kind, column)
        return out

    def _check_server(self, server: int) -> int:
        n = self.n_servers
        if isinstance(server, bool) or not isinstance(server, (int, np.integer)) or not 0 <= server < n:
            raise InvalidParameterError(
                f"the 'server' of a split key of {self.operator!r} must be a server position in [0, {n - 1}]; "
                f"got {server!r}"
            )
        return int(server)

    def _route_column(self, kind: str, column: pa.LargeStringArray | np.ndarray) -> np.ndarray:
        """Instances of valid keys of one kind (Arrow strings or int64)."""
        if kind != self._kind:  # an empty table, or keys of the other kind: no entry can match
            return self.fallback.instances_of(column)
        if kind == "string":
            return self._route_strings(column.to_numpy(zero_copy_only=False), column)
        lookups = self._lookup()
        position = lookups.int_index.get_indexer(column)
        out = np.where(position >= 0, lookups.instances[position], -1)
        return self._fall_back(out, column)

    def _route_strings(self, objects: Iterable, keys: list | np.ndarray | pa.Array) -> np.ndarray:
        """Probe the dict from C with ``objects``; ``keys`` holds the same keys for the fallback."""
        out = np.fromiter(map(self._lookup().by_key.get, objects, repeat(-1)), dtype=np.int64, count=len(keys))
        return self._fall_back(out, keys)

    def _fall_back(self, out: np.ndarray, keys: list | np.ndarray | pa.Array) -> np.ndarray:
        """Fill the misses (-1) of ``out`` with the fallback's instances of those keys (which checks them)."""
        miss = np.flatnonzero(out < 0)
        if miss.size:
            if isinstance(keys, list):
                keys = [keys[i] for i in miss.tolist()]
            else:
                keys = keys.take(miss) if isinstance(keys, pa.Array) else keys[miss]
            out[miss] = self.fallback.instances_of(keys)
        return out

    def __len__(self) -> int:
        return len(self.entries)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, RoutingTable)
            and self.operator == other.operator
            and self.fallback.to_dict() == other.fallback.to_dict()
            and self.entries.sort_index().equals(other.entries.sort_index())
            and self.splits == other.splits
        )

    def __repr__(self) -> str:
        split = f", {len(self.splits)} split keys" if self.splits else ""
        return f"RoutingTable({self.operator!r}, {len(self)} entries{split}, fallback={self.fallback.to_dict()})"


@dataclass
class RoutingConfiguration:
    """The routing tables of every operator, with the topology and the parameters that made them."""

    topology: Topology
    tables: dict[str, RoutingTable]
    parameters: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        n_servers = len(self.topology.servers)
        for op, table in self.tables.items():
            if table.splits and table.n_servers != n_servers:
                raise InvalidParameterError(
                    f"the split plans of {op!r} name an instance for {table.n_servers} servers; "
                    f"the topology has {n_servers}"
                )

    def route(self, operator: str, key, server: int | str | None = None) -> int:
        """Instance of ``key`` at ``operator``; a split key reads ``server`` (a position or a server name)."""
        if isinstance(server, str):
            server = self.server_index(server)
        return self.tables[operator].route(key, server)

    def route_many(self, operator: str, keys, servers: np.ndarray | None = None) -> np.ndarray:
        """Instances of an array of keys at ``operator`` (split keys read ``servers``, positions)."""
        return self.tables[operator].route_many(keys, servers)

    def server_index(self, server: str) -> int:
        """Position of the server named ``server`` in the topology (what split plans are indexed by)."""
        try:
            return self.topology.servers.index(server)
        except ValueError:
            servers = list(self.topology.servers)
            raise InvalidParameterError(f"unknown server {server!r}; the topology has {servers}") from None

    def route_rows(
        self,
        columns: Mapping[str, Iterable[str | int] | np.ndarray | pa.Array],
        home: Mapping[str, np.ndarray] | None = None,
    ) -> dict[str, np.ndarray]:
        """Instances of whole tuples at every operator: ``columns[op]`` holds each tuple's key of ``op``.

        Split keys follow their neighbouring key's server: the upstream one
        (the instance that sends the tuple), and for the first operator the
        next operator's key where that one routes without a split (its home).
        Without split keys this is ``route_many`` per operator. ``home``, if
        given, holds those per-operator routes already (computed once per
        distinct key, say); ``columns`` then needs only the operators that
        split keys, whose split rows alone are routed again.
        """
        ops = list(self.topology.operators)
        routes = {op: home[op] if home is not None else self.route_many(op, columns[op]) for op in ops}
        for i, op in enumerate(ops):
            if not self.tables[op].splits or len(ops) < 2:
                continue
            neighbour = ops[i - 1] if i > 0 else ops[1]
            servers = self.topology.instance_servers(neighbour)[routes[neighbour]]
            routes[op] = self.tables[op].with_splits(routes[op], columns[op], servers)
        return routes

    def split_keys(self) -> dict[str, int]:
        """Number of split keys per operator."""
        return {op: len(t.splits) for op, t in self.tables.items()}

    def server_of(self, operator: str, key) -> str:
        """Server of the instance that ``key`` goes to at ``operator``."""
        return self.topology.server_of(operator, self.route(operator, key))

    def table_sizes(self) -> dict[str, int]:
        return {op: len(t) for op, t in self.tables.items()}

    @classmethod
    def hash_routing(
        cls, topology: Topology, fallbacks: Mapping[str, FallbackHash], parameters: Mapping | None = None
    ) -> RoutingConfiguration:
        """Empty tables: every key goes where its operator's fallback hash sends it."""
        tables = {op: RoutingTable(op, fallbacks[op]) for op in topology.operators}
        return cls(topology, tables, dict(parameters or {}))

    def hash_only(self) -> RoutingConfiguration:
        """The same topology and fallbacks with empty tables: the hash baseline."""
        fallbacks = {op: t.fallback for op, t in self.tables.items()}
        return RoutingConfiguration.hash_routing(self.topology, fallbacks, {**self.parameters, "baseline": "hash"})

    # ------------------------------------------------------------------ JSON
    def _header(self) -> dict:
        return {
            "format_version": _SPLIT_FORMAT if any(t.splits for t in self.tables.values()) else 1,
            "topology": self.topology.to_dict(),
            "parameters": self.parameters,
            "fallbacks": {op: t.fallback.to_dict() for op, t in self.tables.items()},
        }

    def to_json_dict(self) -> dict:
        """Everything as one JSON-ready document (entries as ``[key, instance]`` lists)."""
        doc = self._header()
        # tolist() gives Python scalars in C: no per-entry conversion in Python (a million entries a second)
        doc["tables"] = {
            op: list(map(list, zip(t.entries.index.tolist(), t.entries.to_numpy(dtype=np.int64).tolist())))
            for op, t in self.tables.items()
        }
        splits = {op: [[k, list(r)] for k, r in t.splits.items()] for op, t in self.tables.items() if t.splits}
        if splits:
            doc["splits"] = splits
        return doc

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict(), sort_keys=True)

    @classmethod
    def from_json_dict(cls, doc: Mapping) -> RoutingConfiguration:
        """Inverse of :meth:`to_json_dict`."""
        cls._check_version(doc)
        entries = {op: pd.Series({_key(k): v for k, v in rows}, dtype="int64") for op, rows in doc["tables"].items()}
        splits = {op: {_key(k): route for k, route in rows} for op, rows in doc.get("splits", {}).items()}
        return cls._from_parts(doc, entries, splits)

    @classmethod
    def from_json(cls, text: str) -> RoutingConfiguration:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SerializationError(f"not a routing configuration JSON document: {exc}") from None
        return cls.from_json_dict(doc)

    # ------------------------------------------------------------------ Parquet
    def to_files(self) -> dict[str, bytes]:
        """``configuration.json`` (the full document), ``header.json`` and ``tables/<i>.parquet``, by relative name.

        Parquet files are numbered by operator position (operator names may
        not be valid file names); ``header.json`` maps each operator to its file.
        """
        files: dict[str, bytes] = {}
        header = self._header()
        header["table_files"] = {}
        header["tables_sorted_by_key"] = True  # so a reader checks the keys unique in one pass (from_files)
        for i, op in enumerate(self.topology.operators):
            table = self.tables[op]
            name = f"tables/{i:02d}.parquet"
            header["table_files"][op] = name
            keys = table.entries.index.to_numpy(dtype=object)
            key_array = pa.array(list(keys), type=_arrow_key_type(keys))
            instances = table.entries.to_numpy(dtype=np.int32)
            servers = topology_servers(self.topology, op, instances)
            columns = pa.table({"key": key_array, "instance": pa.array(instances, pa.int32()), "server": servers})
            files[name] = table_bytes(columns.take(pc.sort_indices(key_array)))
            if table.splits:
                header.setdefault("split_files", {})[op] = name = f"tables/{i:02d}.splits.parquet"
                files[name] = table_bytes(_split_frame(self.topology, table))
        files["header.json"] = json.dumps(header, indent=2, sort_keys=True).encode()
        files["configuration.json"] = self.to_json().encode()
        return files

    def write(self, directory: str | Path) -> None:
        """Write :meth:`to_files` into ``directory``."""
        directory = Path(directory)
        for name, data in self.to_files().items():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_bytes(data)

    @classmethod
    def from_files(cls, read: Callable[[str], bytes], where: str = "") -> RoutingConfiguration:
        """Read what :meth:`to_files` wrote, from the Parquet tables; ``read(name)`` gives a file's bytes.

        ``where`` names the configuration in messages.
        """
        try:
            header = json.loads(read("header.json"))
        except (OSError, ValueError) as exc:
            raise SerializationError(f"cannot read routing configuration header in {where}: {exc}") from None
        cls._check_version(header)
        unique: set[str] = set()
        entries = {}
        for op, name in header["table_files"].items():
            try:
                table = table_from_bytes(read(name), ["key", "instance"])
            except (OSError, pa.ArrowException) as exc:
                raise SerializationError(f"cannot read routing table {where}/{name}: {exc}") from None
            keys = table.column("key").combine_chunks()
            if header.get("tables_sorted_by_key") and len(keys) > 1:
                if not pc.all(pc.less(keys.slice(0, len(keys) - 1), keys.slice(1))).as_py():
                    raise SerializationError(f"routing table {where}/{name} is not sorted by key, or lists a key twice")
                unique.add(op)
            entries[op] = pd.Series(
                table.column("instance").to_numpy().astype(np.int64),
                index=pd.Index(keys.to_numpy(zero_copy_only=False), dtype=object),
            )
        splits = {}
        for op, name in header.get("split_files", {}).items():
            try:
                frame = table_from_bytes(read(name), ["key", "server_index", "instance"])
            except (OSError, pa.ArrowException) as exc:
                raise SerializationError(f"cannot read split plans {where}/{name}: {exc}") from None
            frame = frame.to_pandas().sort_values(["key", "server_index"], kind="stable")
            splits[op] = {k: g["instance"].tolist() for k, g in frame.groupby("key", sort=False)}
        # The writer dropped the entries equal to the fallback: the tables are not hashed again here.
        return cls._from_parts(header, entries, splits, stored=True, unique=unique)

    @classmethod
    def read(cls, directory: str | Path) -> RoutingConfiguration:
        """Read what :meth:`write` wrote into ``directory``."""
        directory = Path(directory)
        return cls.from_files(lambda name: (directory / name).read_bytes(), str(directory))

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _check_version(doc: Mapping) -> None:
        version = doc.get("format_version") if isinstance(doc, Mapping) else None
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise SerializationError(
                f"routing configuration format version {version!r} is not one this locality reads (<= {FORMAT_VERSION})"
            )

    @classmethod
    def _from_parts(
        cls,
        doc: Mapping,
        entries: Mapping[str, pd.Series],
        splits: Mapping[str, Mapping],
        *,
        stored: bool = False,
        unique: set[str] = frozenset(),
    ) -> RoutingConfiguration:
        try:
            topology = Topology.from_dict(doc["topology"])
            tables = {
                op: RoutingTable(
                    op,
                    fallback_from_dict(doc["fallbacks"][op]),
                    entries.get(op),
                    splits.get(op),
                    differ_from_fallback=stored,
                    unique_keys=op in unique,
                )
                for op in topology.operators
            }
        except KeyError as exc:
            raise SerializationError(f"routing configuration lacks {exc}") from None
        return cls(topology, tables, dict(doc.get("parameters", {})))


def _key(value):
    """Keys come back from JSON as str or int; anything else is a damaged document."""
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return value
    raise SerializationError(f"routing table keys must be strings or integers; got {value!r}")


def _split_frame(topology: Topology, table: RoutingTable) -> pa.Table:
    """A table's split plans in long form: one row per split key and server."""
    n_servers = len(topology.servers)
    keys = list(table.splits)
    routes = np.array(list(table.splits.values()), dtype=np.int32).ravel()
    key_type = _arrow_key_type(np.array(keys, dtype=object))
    key_array = pa.array([k for k in keys for _ in range(n_servers)], type=key_type)
    return pa.table(
        {
            "key": key_array,
            "server_index": pa.array(np.tile(np.arange(n_servers, dtype=np.int32), len(keys))),
            "server": pa.array(list(topology.servers) * len(keys), type=pa.string()),
            "instance": pa.array(routes),
        }
    )


def _checked_splits(operator: str, splits: Mapping | None, n_instances: int) -> dict:
    """Split plans as ``key -> tuple of instances``, checked: one kind of key, one length, instances in range."""
    if not splits:
        return {}
    out = {}
    for key, plan in splits.items():
        if _key_kind(key) is None:
            raise InvalidParameterError(f"split keys of {operator!r} must be strings or integers; got {key!r}")
        route = tuple(int(i) for i in plan)
        if not route or min(route) < 0 or max(route) >= n_instances:
            raise InvalidParameterError(
                f"the split plan of key {key!r} of {operator!r} must name an instance in [0, {n_instances - 1}] "
                f"for every server; got {list(route)}"
            )
        out[_plain(key)] = route
    if len({_key_kind(k) for k in out}) > 1 or len({len(r) for r in out.values()}) > 1:
        raise InvalidParameterError(
            f"split keys of {operator!r} must be all strings or all integers, each with one instance per server"
        )
    return out


def _as_objects(keys) -> np.ndarray:
    """A batch of keys as a numpy array (Python objects for strings) to probe a pandas index with."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        return keys.to_numpy(zero_copy_only=False)
    if isinstance(keys, pd.Series):
        return keys.to_numpy()
    return keys if isinstance(keys, np.ndarray) else np.array(list(keys), dtype=object)


def _key_kind(key) -> str | None:
    if isinstance(key, str):
        return "string"
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return "integer"
    return None


def _arrow_key_type(keys: np.ndarray) -> pa.DataType:
    return pa.int64() if len(keys) and _key_kind(keys[0]) == "integer" else pa.string()


def topology_servers(topology: Topology, operator: str, instances: np.ndarray) -> pa.Array:
    """Server names of ``instances`` of ``operator`` as an Arrow string array."""
    hosts = np.array(topology.placement[operator], dtype=object)
    return pa.array(hosts[instances] if len(instances) else [], type=pa.string())
