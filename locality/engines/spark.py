"""Apache Spark: routing tables inside Structured Streaming's stateful operators.

Every stateful streaming operator places a row in the partition Spark's hash
gives its grouping columns
(:class:`~locality.hashing.spark.SparkHashPartitioning`). A routing table
cannot replace that placement, so it takes effect through the grouping column
instead: :func:`with_route` adds a *route* column equal to the key for keys
without an entry and, for a key whose entry names partition ``i``, to the
*surrogate* of ``i``
(:meth:`~locality.hashing.spark.SparkHashPartitioning.surrogates`), a reserved
value that Spark's own hash puts in ``i``. A stateful operator grouped by the
route keeps each table key in its table's partition and every other key where
Spark puts it. Because the surrogate of ``i`` is shared by all the table keys
on ``i``, one group holds several real keys: :func:`per_key_function`
(``applyInPandasWithState``) and :func:`per_key_processor`
(``transformWithStateInPandas``) run a function written for one real key with
its own :class:`KeyState`, so the results per real key are those of the query
grouped by the real key. When the job restarts with a new table version,
:func:`write_handover` hands the state of the keys whose group changes over to
their new group. A split key's rows get the route of the part on their
neighbouring key's server, given by a column (``server_column``).
``docs/engines/spark.md`` shows a whole job.

Why one module: the route column, per-key state inside
grouped state and the hand-over rest on one contract (a routed group holds
several real keys, whose state moves when their route does) and are used
together by a job (``examples/spark_streaming_job.py``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from locality._validation import check_columns
from locality.errors import InvalidParameterError, SerializationError
from locality.hashing.spark import SparkHashPartitioning
from locality.routing import RoutingTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import DataType, StructType

__all__ = [
    "route_values",
    "with_route",
    "checkpoint_partitions",
    "KeyState",
    "PerKeyFunction",
    "per_key_function",
    "per_key_processor",
    "HANDOVER",
    "with_handover",
    "write_handover",
]

logger = logging.getLogger(__name__)

_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
#: Default name of the binary column that carries handed-over states (:func:`with_handover`).
HANDOVER = "handover"


def _table_parts(table: RoutingTable, owner: str) -> tuple[SparkHashPartitioning, pd.Series, str]:
    """The Spark fallback, the entries (key -> instance) and the key kind of a routing table."""
    if not isinstance(table, RoutingTable):
        raise InvalidParameterError(
            f"the 'table' parameter of {owner} must be a routing table (locality.RoutingTable, e.g. "
            f"configuration.tables[operator]); got {type(table).__name__}",
            parameter="table",
        )
    fallback, entries = table.fallback, table.entries
    if not isinstance(fallback, SparkHashPartitioning):
        raise InvalidParameterError(
            f"the 'table' parameter of {owner} must route its other keys with Spark's hash (fallback engine "
            f"'spark'); got engine {fallback.engine!r}: learn the table on the 'spark' hash",
            parameter="table",
        )
    return fallback, entries, table.key_kind or "string"


def _split_parts(
    table: RoutingTable, fallback: SparkHashPartitioning, entries: pd.Series, kind: str
) -> tuple[list, np.ndarray]:
    """The split keys, and the route value of each one's part per server position (object array, key x server).

    A part on partition ``i`` has the route an entry for ``i`` would give: the
    surrogate of ``i``, or the key itself where Spark's hash puts a key
    without an entry (its home group).
    """
    splits = table.splits
    if not splits:
        return [], np.empty((0, 0), dtype=object)
    keys = list(splits)
    plans = np.array(list(splits.values()), dtype=np.int64)
    values = np.asarray(fallback.surrogates(kind), dtype=object)[plans]
    own = plans == fallback.instances_of(keys)[:, None]
    own &= ~pd.Index(keys, dtype=object).isin(entries.index)[:, None]
    rows, cols = np.nonzero(own)
    values[rows, cols] = np.array(keys, dtype=object)[rows]
    return keys, values


def route_values(
    table: RoutingTable,
    keys: Iterable[str | int] | np.ndarray | pd.Series,
    servers: Iterable[int] | np.ndarray | None = None,
) -> np.ndarray:
    """The route value of each key, as :func:`with_route` computes it in Spark.

    A key with an entry gets the surrogate of its entry's partition; any other
    key is its own route; a split key, given the position of its row's
    neighbouring key's server, the route of its part on that server (else
    its home route). Use it to name the group a key's state lives in, e.g.
    the old and new group of each key of a migration plan.

    Parameters
    ----------
    table : RoutingTable
        A table with a Spark fallback
        (:class:`~locality.hashing.spark.SparkHashPartitioning`), such as the
        table of one operator that :class:`~locality.routing.RoutingConfiguration`
        (or a router serving the current version) holds.
    keys : sequence of str or int
        Keys of the table's kind.
    servers : sequence of int, optional
        Per key, the position (in the topology's servers) of the server of its
        row's neighbouring key; read by split keys only.

    Returns
    -------
    numpy.ndarray of object
        Route value of each key.

    Raises
    ------
    InvalidParameterError
        If ``table`` is not a routing table with a Spark fallback, or
        ``servers`` is not one position per key, each a position of the
        split plans.
    """
    owner = "route_values"
    fallback, entries, kind = _table_parts(table, owner)
    keys = np.asarray(keys, dtype=object)
    out = keys.copy()
    if len(entries):
        position = entries.index.get_indexer(keys)
        hit = position >= 0
        surrogates = np.asarray(fallback.surrogates(kind), dtype=object)
        out[hit] = surrogates[entries.to_numpy()[position[hit]]]
    split_keys, parts = _split_parts(table, fallback, entries, kind)
    if servers is None or not split_keys:
        return out
    servers = np.asarray(servers)
    if servers.shape != keys.shape or not np.issubdtype(servers.dtype, np.integer):
        raise InvalidParameterError(
            f"the 'servers' parameter of {owner} must hold one server position (an int) per key; "
            f"got {servers.dtype} of shape {servers.shape} for {keys.shape[0]} keys",
            parameter="servers",
        )
    row = pd.Index(split_keys, dtype=object).get_indexer(keys)
    hit = np.flatnonzero(row >= 0)
    bad = hit[(servers[hit] < 0) | (servers[hit] >= parts.shape[1])]
    if bad.size:
        raise InvalidParameterError(
            f"the 'servers' parameter of {owner} must hold server positions in [0, {parts.shape[1] - 1}]; "
            f"got {servers[bad[0]]} for key {keys[bad[0]]!r}",
            parameter="servers",
        )
    out[hit] = parts[row[hit], servers[hit]]
    return out


def with_route(
    frame: DataFrame,
    table: RoutingTable,
    key: str,
    *,
    route: str = "route",
    checkpoint: str | None = None,
    server_column: str | None = None,
    servers: Sequence[str] | None = None,
):
    """Add the route column that makes a stateful operator follow a routing table.

    ``route = coalesce(surrogate of the key's table partition, key)``: grouped by
    ``route``, a stateful operator runs every table key in the partition its
    table names and every other key in the partition Spark's hash gives the key
    itself. The table keys of a partition share one group: run the state per
    real key with :func:`per_key_function` or :func:`per_key_processor`. The
    table becomes a small DataFrame ``(key, surrogate)`` joined to ``frame``
    with a broadcast left outer join, a stream-static join when ``frame`` is a
    stream: one hash lookup per row whatever the table's size, no cost measured
    up to 10,000 entries (``benchmarks/bench_spark_route.py`` compares it with
    a map literal, which grows with the table).

    The table is part of the query plan: a running query keeps it. A new version
    takes effect when the query restarts with a route column built from it (same
    checkpoint; the partition count is frozen there). Keys whose entry changes
    (the migration plan's keys) change group, hence state partition; Spark does
    not move their state, :func:`write_handover` does.

    A table that splits hot keys (its ``splits``) needs ``server_column``: a
    split key's row gets the route of the key's part on the server of the
    row's neighbouring key (the upstream key's server, see
    :meth:`~locality.routing.RoutingConfiguration.route_rows`), a surrogate
    or the key itself like an entry's. Its state is then a partial state per
    part, kept per real key by :func:`per_key_function`, to be merged
    downstream by the key. A row whose server is null, and every split key
    without ``server_column``, gets the key's home route (a warning says so).

    Parameters
    ----------
    frame : pyspark.sql.DataFrame
        The records, streaming or batch.
    table : RoutingTable
        The operator's table: ``entries`` (key -> instance) and a
        :class:`SparkHashPartitioning` ``fallback`` with as many instances as the
        query's shuffle partitions.
    key : str
        The key column: ``StringType`` (default ``UTF8_BINARY`` collation) for
        string keys, ``LongType`` or ``IntegerType`` (the fallback's
        ``int_type``) for integer keys.
    route : str, default "route"
        Name of the new column; it has the key column's type.
    checkpoint : str, optional
        The query's checkpoint directory (a local path). When it holds a
        started query, the table must have the partition count frozen there;
        otherwise it must have the session's ``spark.sql.shuffle.partitions``.
    server_column : str, optional
        A column of ``frame`` holding, per row, the server of its neighbouring
        key: its position in the topology's servers (an integer column) or
        its name (a string column, with ``servers``). A split key's row whose
        server is neither fails the query (``USER_RAISED_EXCEPTION``).
    servers : sequence of str, optional
        The topology's servers in order (``configuration.topology.servers``),
        to read a string ``server_column``.

    Returns
    -------
    pyspark.sql.DataFrame
        ``frame`` with the ``route`` column added.

    Raises
    ------
    TraceError
        If ``frame`` has no column ``key``.
    InvalidParameterError
        If ``route`` is already a column, the table is not a Spark-hash routing
        table, its keys or the column have another type, the column has a
        collation other than ``UTF8_BINARY``, the partition counts differ, or
        ``server_column`` is neither an integer column nor a string column
        with ``servers`` naming one server per split plan position.

    Examples
    --------
    >>> routed = with_route(records, config.tables["hashtag"], "hashtag")  # doctest: +SKIP
    >>> counts = routed.groupBy("route").applyInPandasWithState(...)  # doctest: +SKIP
    """
    from pyspark.sql import functions as F

    owner = "with_route"
    fallback, entries, kind = _table_parts(table, owner)
    check_columns(frame.columns, [key, server_column], "the DataFrame")
    if route in frame.columns:
        raise InvalidParameterError(
            f"the 'route' parameter of {owner} names a new column; {route!r} is already a column of the DataFrame",
            parameter="route",
        )
    key_type = frame.schema[key].dataType
    column_kind, int_type = _column_kind(key_type)
    split_keys, parts = _split_parts(table, fallback, entries, kind)
    if column_kind is None or ((len(entries) or split_keys) and column_kind != kind):
        raise InvalidParameterError(
            f"the key column {key!r} of {owner} must be string, bigint or int, of the kind of the table's keys "
            f"({kind}); got {key_type.simpleString()}"
        )
    if column_kind == "integer" and int_type != fallback.int_type:
        raise InvalidParameterError(
            f"the key column {key!r} of {owner} is {key_type.simpleString()} but the table's fallback hashes "
            f"ints as {fallback.int_type} (make_fallback('spark', n, int_type={int_type!r}))"
        )
    if column_kind == "string" and not key_type.isUTF8BinaryCollation():
        raise InvalidParameterError(
            f"the key column {key!r} of {owner} has collation {key_type.collation}: Spark hashes collated strings "
            f"by their collation key, which the Spark fallback does not reproduce; only UTF8_BINARY is supported"
        )
    _check_partitions(frame.sparkSession, fallback.n_instances, checkpoint, owner)
    position = _server_positions(frame, server_column, servers, parts.shape[1], owner) if split_keys else None
    if split_keys and server_column is None:
        logger.warning(
            "the table given to %s splits %d hot keys but no 'server_column' says where each row comes from: "
            "their rows go whole to their home group",
            owner,
            len(split_keys),
        )
        split_keys, parts = [], parts[:0]
    if not len(entries) and not split_keys:
        return frame.withColumn(route, F.col(key))
    columns = ("__locality_table_key", "__locality_table_route", "__locality_table_parts")
    surrogates = np.asarray(fallback.surrogates(column_kind), dtype=object)
    small = frame.sparkSession.createDataFrame(_lookup(entries, surrogates, split_keys, parts, int_type, columns))
    joined = frame.join(F.broadcast(small), frame[key] == small[columns[0]], "left")
    part = F.lit(None)
    if split_keys:
        n, plan = parts.shape[1], F.col(columns[2])
        off = plan.isNotNull() & position.isNotNull() & ((position < 0) | (position >= n))
        allowed = f"a server position in [0, {n - 1}]" + ("" if servers is None else f" or one of {list(servers)}")
        held = F.concat(
            F.lit(f"{owner}: the server_column {server_column!r} holds "), F.col(server_column).cast("string")
        )
        part = F.when(off, F.raise_error(F.concat(held, F.lit(f", not {allowed}")))).when(
            plan.isNotNull(), F.get(plan, position)
        )
    return joined.withColumn(route, F.coalesce(part, F.col(columns[1]), F.col(key))).drop(*columns)


def _lookup(
    entries: pd.Series, surrogates: np.ndarray, split_keys: list, parts: np.ndarray, int_type: str | None, names: tuple
) -> pa.Table:
    """The table joined to the rows: key, home route (null without an entry), the parts' routes (null unless split)."""
    arrow_type = {"string": pa.string(), "long": pa.int64(), "int": pa.int32()}[int_type or "string"]
    keys = entries.index.append(pd.Index(split_keys, dtype=object)).unique()
    home = pd.Series(surrogates[entries.to_numpy()], index=entries.index, dtype=object).reindex(keys)
    split = pd.Series([list(p) for p in parts], index=pd.Index(split_keys, dtype=object), dtype=object).reindex(keys)
    return pa.table(
        {
            names[0]: pa.array(keys.tolist(), type=arrow_type),
            names[1]: pa.array(home.where(home.notna(), None).tolist(), type=arrow_type),
            names[2]: pa.array(split.where(split.notna(), None).tolist(), type=pa.list_(arrow_type)),
        }
    )


def _server_positions(frame: DataFrame, column: str | None, servers: Sequence[str] | None, n: int, owner: str):
    """The Spark column of server positions that ``column`` holds (names read with ``servers``); None without it."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if servers is not None and (
        isinstance(servers, str) or len(servers) != n or not all(isinstance(s, str) for s in servers)
    ):
        raise InvalidParameterError(
            f"the 'servers' parameter of {owner} must list the {n} server names of the split plans in order "
            f"(configuration.topology.servers); got {servers!r}",
            parameter="servers",
        )
    if column is None:
        return None
    data_type = frame.schema[column].dataType
    if isinstance(data_type, (T.IntegerType, T.LongType, T.ShortType, T.ByteType)):
        return F.col(column).cast("int")
    if isinstance(data_type, T.StringType) and servers is not None:
        return F.array_position(F.array(*(F.lit(s) for s in servers)), F.col(column)).cast("int") - 1
    raise InvalidParameterError(
        f"the 'server_column' parameter of {owner} must name an integer column of server positions, or a string "
        f"column of server names with 'servers'; {column!r} is {data_type.simpleString()}"
        + ("" if servers is not None or not isinstance(data_type, T.StringType) else " and 'servers' is missing"),
        parameter="server_column",
    )


def _column_kind(data_type: Any) -> tuple[str | None, str | None]:
    """("string", None), ("integer", "long" or "int"), or (None, None) for a Spark key column type."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.StringType):
        return "string", None
    if isinstance(data_type, (T.LongType, T.IntegerType)):
        return "integer", "int" if isinstance(data_type, T.IntegerType) else "long"
    return None, None


def checkpoint_partitions(checkpoint: str | Path) -> int | None:
    """The shuffle partition count a streaming query froze in its checkpoint.

    Spark records the SQL confs that must not change across restarts, among
    them ``spark.sql.shuffle.partitions``, in every entry of the checkpoint's
    offset log (``offsets/<batch id>``: a version line, then a JSON line with
    ``conf``). A restarted query uses that count whatever the session says, so
    a routing table must have exactly that many instances.

    Parameters
    ----------
    checkpoint : str or Path
        The checkpoint directory, a local path (``file:`` URIs accepted).

    Returns
    -------
    int or None
        The frozen count, or None if the query never started a batch.

    Raises
    ------
    SerializationError
        If the latest offset log entry cannot be read as Spark writes it.
    """
    entries = _offset_log(checkpoint)
    if not entries:
        return None
    path = entries[-1][1]
    try:
        lines = path.read_text().splitlines()
        return int(json.loads(lines[1])["conf"][_SHUFFLE_PARTITIONS])
    except (OSError, IndexError, KeyError, TypeError, ValueError) as exc:
        raise SerializationError(
            f"cannot read the shuffle partitions from the offset log entry {path}: {exc!r}"
        ) from None


def _offset_log(checkpoint: str | Path) -> list[tuple[int, Path]]:
    """The entries of a checkpoint's offset log, ``(batch id, file)`` in batch order."""
    offsets = _local_path(checkpoint) / "offsets"
    return sorted((int(p.name), p) for p in offsets.glob("*") if p.name.isdigit()) if offsets.is_dir() else []


def _local_path(location: str | Path) -> Path:
    text = str(location)
    return Path(text[len("file:") :] if text.startswith("file:") else text)


def _check_partitions(session: Any, n: int, checkpoint: str | Path | None, owner: str) -> None:
    frozen = checkpoint_partitions(checkpoint) if checkpoint is not None else None
    if frozen is not None:
        if frozen != n:
            raise InvalidParameterError(
                f"the table of {owner} routes to {n} partitions but the checkpoint {checkpoint} froze "
                f"{_SHUFFLE_PARTITIONS} at {frozen}; learn the table for {frozen} instances"
            )
        return
    configured = int(session.conf.get(_SHUFFLE_PARTITIONS))
    if configured != n:
        raise InvalidParameterError(
            f"the table of {owner} routes to {n} partitions but the session has {_SHUFFLE_PARTITIONS}={configured}; "
            f"set it to {n} before starting the query"
        )


# ------------------------------------------------------------------------------------------
# The state of each real key inside a routed group
# ------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A Python value from a numpy scalar (state stores take Python values)."""
    return value.item() if isinstance(value, np.generic) else value


class KeyState:
    """The state of one real key inside a routed group, with ``GroupState``'s interface.

    A function written for ``applyInPandasWithState`` grouped by the real key
    uses ``state.exists``, ``state.get``, ``state.getOption``, ``state.update``
    and ``state.remove``; given a :class:`KeyState` instead, the same code
    keeps its state per real key inside the group of the route.

    Parameters
    ----------
    store : MapState or alike
        Where the group's per-key states live: ``transformWithStateInPandas``'s
        ``MapState`` or the dictionary :func:`per_key_function` keeps
        (``containsKey``, ``getValue``, ``updateValue``, ``removeKey``).
    key : tuple
        The real key, as a one-element tuple.

    Notes
    -----
    ``hasTimedOut`` is always False: timeouts are per group in Spark, not per
    real key, so routed groups must run with ``GroupStateTimeout.NoTimeout``.
    """

    def __init__(self, store: Any, key: tuple) -> None:
        self._store = store
        self._key = key

    @property
    def exists(self) -> bool:
        return bool(self._store.containsKey(self._key))

    @property
    def get(self) -> tuple:
        value = self.getOption
        if value is None:
            raise ValueError(f"the state of key {self._key[0]!r} does not exist")
        return value

    @property
    def getOption(self) -> tuple | None:
        value = self._store.getValue(self._key)  # None when absent (MapState too): one call, not two
        return None if value is None else tuple(value)

    @property
    def hasTimedOut(self) -> bool:
        return False

    def update(self, newValue: tuple) -> None:
        if newValue is None:
            raise ValueError(f"the state of key {self._key[0]!r} cannot be set to None (remove() it)")
        self._store.updateValue(self._key, tuple(_plain(v) for v in newValue))

    def remove(self) -> None:
        self._store.removeKey(self._key)


class _DictStore:
    """``MapState``'s calls over a dict, for the per-key states of an ``applyInPandasWithState`` group."""

    def __init__(self, states: dict[tuple, tuple]) -> None:
        self.states = states

    def containsKey(self, key: tuple) -> bool:
        return key in self.states

    def getValue(self, key: tuple) -> tuple | None:
        return self.states.get(key)

    def updateValue(self, key: tuple, value: tuple) -> None:
        self.states[key] = value

    def removeKey(self, key: tuple) -> None:
        self.states.pop(key, None)


def _split_by_key(pdfs: Iterable[pd.DataFrame], key: str) -> Iterator[tuple[Any, pd.DataFrame]]:
    """The rows of one group, split by real key (in order of first appearance)."""
    frames = list(pdfs)
    if not frames:
        return
    rows = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    keys = rows[key]
    if len(rows) and (keys == keys.iloc[0]).all():  # the group of a key without an entry: one real key
        yield _plain(keys.iloc[0]), rows
        return
    for real_key, part in rows.groupby(key, sort=False, dropna=False):
        yield (None if pd.isna(real_key) else _plain(real_key)), part.reset_index(drop=True)


def _struct(schema: StructType | str, name: str, owner: str) -> StructType:
    from pyspark.sql.types import DataType, StructType

    parsed = DataType.fromDDL(schema) if isinstance(schema, str) else schema
    if not isinstance(parsed, StructType):
        raise InvalidParameterError(
            f"the {name!r} parameter of {owner} must be a StructType or a DDL string of fields; got {schema!r}"
        )
    return parsed


#: A function of one real key: ``func(key_tuple, iterator of pandas.DataFrame, state) -> iterator of DataFrame``.
KeyFunction = Callable[[tuple, Iterator[pd.DataFrame], KeyState], Iterator[pd.DataFrame]]


class PerKeyFunction:
    """An ``applyInPandasWithState`` function of one real key, run per real key inside a routed group.

    Built by :func:`per_key_function`; pass it as the function and
    :attr:`group_state_schema` as ``stateStructType``.

    The group's state is one binary field holding the states of its real keys
    as an Arrow IPC stream: one record batch, the real key in column 0 and the
    fields of ``state_schema`` after it. (PySpark 4.3's worker cannot read an
    ``applyInPandasWithState`` state schema with array or map fields, so the
    dictionary is kept as bytes in a fixed layout rather than as a Spark map.)
    """

    def __init__(self, func: KeyFunction, key: str, state_schema: StructType, handover: str = HANDOVER) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import BinaryType, StructField, StructType

        self.func = func
        self.key = key
        self.state_schema = state_schema
        self.handover = handover
        self._arrow_fields = list(to_arrow_schema(state_schema))
        self.group_state_schema = StructType([StructField("key_states", BinaryType(), False)])

    def __call__(self, group: tuple, pdfs: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        states = self.decode(state.get[0]) if state.exists else {}
        store = _DictStore(states)
        for real_key, rows in _split_by_key(pdfs, self.key):
            rows = _take_over(rows, self.handover, store)
            if len(rows):
                yield from self.func((real_key,), iter([rows]), KeyState(store, (real_key,)))
        if states:
            state.update((self.encode(states),))
        else:
            state.remove()

    def encode(self, states: Mapping[tuple, tuple]) -> bytes:
        """The per-key states as Arrow IPC bytes (key column, then one column per state field)."""
        values = list(zip(*states.values())) or [()] * len(self._arrow_fields)
        columns = [pa.array([k[0] for k in states])]
        columns += [pa.array(list(v), type=f.type) for v, f in zip(values, self._arrow_fields)]
        return _ipc(pa.table(columns, names=["key", *(f.name for f in self._arrow_fields)]))

    @staticmethod
    def decode(blob: bytes) -> dict[tuple, tuple]:
        """Inverse of :meth:`encode`."""
        table = pa.ipc.open_stream(blob).read_all()
        keys = table.column(0).to_pylist()
        values = zip(*(c.to_pylist() for c in table.columns[1:]))
        return {(k,): tuple(v) for k, v in zip(keys, values)}


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _take_over(rows: pd.DataFrame, column: str, store: _DictStore) -> pd.DataFrame:
    """Install the states that handover rows carry; return the data rows without the handover column."""
    if column not in rows.columns:
        return rows
    carried = rows[column].notna().to_numpy()
    for blob in rows.loc[carried, column]:
        for key, value in PerKeyFunction.decode(blob).items():
            store.updateValue(key, value)
    return rows.loc[~carried].drop(columns=column)


def per_key_function(
    func: KeyFunction, key: str, state_schema: StructType | str, *, handover: str = HANDOVER
) -> PerKeyFunction:
    """Run an ``applyInPandasWithState`` function per real key inside the groups of the route.

    Grouped by the route, one group holds every table key of a partition (they
    share its surrogate), plus at most one key without an entry. The returned
    function splits the group's rows by ``key`` and calls ``func`` once per
    real key with that key's rows and its own :class:`KeyState`, kept in the
    group's state, so every real key gets the output and state it would get in
    the query grouped by ``key``.

    Parameters
    ----------
    func : callable
        ``func(key_tuple, iterator of pandas.DataFrame, state)`` returning an
        iterator of DataFrames, as for ``applyInPandasWithState`` grouped by
        ``key``; ``state`` is a :class:`KeyState` (no timeouts).
    key : str
        The real key column.
    state_schema : StructType or str
        The state of one real key (what ``stateStructType`` would be when
        grouping by ``key``).
    handover : str, default "handover"
        A binary column of the rows, if any, holding states handed over by
        :func:`write_handover` (see :func:`with_handover`): such a row installs
        its key's state and is not passed to ``func``; ``func`` sees the other
        rows without this column.

    Returns
    -------
    PerKeyFunction
        The function for ``applyInPandasWithState``; its ``group_state_schema``
        is the ``stateStructType`` to pass.

    Raises
    ------
    InvalidParameterError
        If ``state_schema`` is not a struct.

    Examples
    --------
    >>> def count(key, pdfs, state):  # doctest: +SKIP
    ...     n = (state.get[0] if state.exists else 0) + sum(len(p) for p in pdfs)
    ...     state.update((n,))
    ...     yield pd.DataFrame({"hashtag": [key[0]], "count": [n]})
    >>> f = per_key_function(count, "hashtag", "count long")  # doctest: +SKIP
    >>> with_route(records, table, "hashtag").groupBy("route").applyInPandasWithState(
    ...     f, "hashtag string, count long", f.group_state_schema, "Update", "NoTimeout")  # doctest: +SKIP
    """
    if not callable(func):
        raise InvalidParameterError(
            f"the 'func' parameter of per_key_function must be callable; got {func!r}", parameter="func"
        )
    return PerKeyFunction(func, key, _struct(state_schema, "state_schema", "per_key_function"), handover)


def per_key_processor(
    func: KeyFunction, key: str, key_type: DataType | str, state_schema: StructType | str
) -> StatefulProcessor:
    """A ``transformWithStateInPandas`` processor that runs a function per real key of a routed group.

    The processor keeps one ``MapState`` (``"key_states"``) keyed by the real
    key and splits each group's rows by ``key``; ``func`` is called once per real
    key with its rows and a :class:`KeyState` over its map entry. The same
    ``func`` runs under :func:`per_key_function` or, given Spark's
    ``GroupState``, grouped by the real key. Needs the RocksDB state store, as
    every ``transformWithStateInPandas`` query.

    Parameters
    ----------
    func : callable
        ``func(key_tuple, iterator of pandas.DataFrame, state)`` returning an
        iterator of DataFrames; ``state`` is a :class:`KeyState`.
    key : str
        The real key column.
    key_type : DataType or str
        Spark type of the key column (``"string"``, ``"bigint"``, ...).
    state_schema : StructType or str
        The state of one real key.

    Returns
    -------
    pyspark.sql.streaming.StatefulProcessor
        The processor for ``groupBy(route).transformWithStateInPandas``.

    Raises
    ------
    InvalidParameterError
        If ``func`` is not callable or ``state_schema`` is not a struct.
    """
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import DataType, StructField, StructType

    owner = "per_key_processor"
    if not callable(func):
        raise InvalidParameterError(f"the 'func' parameter of {owner} must be callable; got {func!r}", parameter="func")
    value_schema = _struct(state_schema, "state_schema", owner)
    key_schema = StructType([StructField(key, DataType.fromDDL(key_type) if isinstance(key_type, str) else key_type)])

    class PerKeyProcessor(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.states = handle.getMapState("key_states", key_schema, value_schema)

        def handleInputRows(self, group: Any, rows: Iterator[pd.DataFrame], timerValues: Any = None):
            for real_key, part in _split_by_key(rows, key):
                yield from func((real_key,), iter([part]), KeyState(self.states, (real_key,)))

        def close(self) -> None:
            pass

    return PerKeyProcessor()


# ------------------------------------------------------------------------------------------
# Handing the state of moved keys over to their new group
# ------------------------------------------------------------------------------------------


def with_handover(frame: DataFrame, directory: str | Path, key: str, *, column: str = HANDOVER):
    """The records plus the handover rows that :func:`write_handover` drops in ``directory``.

    A streaming query cannot add a source when it restarts from its checkpoint,
    so a job that will take new table versions reads its handover directory
    from its first start (empty until a version changes). The handover rows
    have the key and a binary ``column``; the records get that column, null.
    Route the result with :func:`with_route`: a handover row reaches the new
    group of its key, where :func:`per_key_function` installs the state.

    Parameters
    ----------
    frame : pyspark.sql.DataFrame
        The streaming records, with the key column.
    directory : str or Path
        Where :func:`write_handover` writes (a local path, created if missing).
    key : str
        The key column.
    column : str, default "handover"
        Name of the binary column (must not be a column of ``frame``).

    Returns
    -------
    pyspark.sql.DataFrame
        ``frame`` with ``column`` (null) unioned with the handover rows.

    Raises
    ------
    TraceError
        If ``frame`` has no column ``key``.
    InvalidParameterError
        If ``column`` is already a column of ``frame``.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StructField, StructType

    check_columns(frame.columns, [key], "the DataFrame")
    if column in frame.columns:
        raise InvalidParameterError(
            f"the 'column' parameter of with_handover names a new column; {column!r} is already a column",
            parameter="column",
        )
    path = _local_path(directory)
    path.mkdir(parents=True, exist_ok=True)
    schema = StructType([frame.schema[key], StructField(column, BinaryType())])
    handover = frame.sparkSession.readStream.schema(schema).parquet(str(path))
    return frame.withColumn(column, F.lit(None).cast(BinaryType())).unionByName(handover, allowMissingColumns=True)


def write_handover(
    spark: Any,
    checkpoint: str | Path,
    old: RoutingTable,
    new: RoutingTable,
    key: str,
    directory: str | Path,
    *,
    column: str = HANDOVER,
    operator_id: int = 0,
) -> int:
    """Write the state of every key whose group changes from ``old`` to ``new``, for its new group.

    Run it after stopping a query of :func:`per_key_function` (with its
    checkpoint) and before restarting it with ``new``. The keys are those of the
    migration plan: an entry added, removed or changed. Their states are read
    from the checkpoint with Spark's state data source (``format("statestore")``,
    the last committed batch) and written to one Parquet file, ``key`` and the
    binary ``column`` (each key's state in :class:`PerKeyFunction`'s layout).
    The restarted query reads it through :func:`with_handover` in its first
    micro-batch: each state is installed in the key's new group before that
    group's records run. The old group keeps its copy, unused, until the key
    comes back (then a handover overwrites it).

    The file is named after the checkpoint's last batch and written aside then
    renamed, so a rerun for the same stop writes nothing new and a reader never
    sees half a file.

    Parameters
    ----------
    spark : SparkSession
    checkpoint : str or Path
        Checkpoint of the stopped query (a local path).
    old, new : RoutingTable
        The table the query ran with and the one it restarts with (same Spark
        fallback: the partition count is frozen in the checkpoint).
    key : str
        Name of the key column in the records.
    directory : str or Path
        The handover directory the query reads with :func:`with_handover`.
    column : str, default "handover"
    operator_id : int, default 0
        The stateful operator of the query (0 when it has one).

    Returns
    -------
    int
        Number of keys whose state was handed over (keys of the plan without
        state are skipped).

    Raises
    ------
    InvalidParameterError
        If the tables' fallbacks differ, or the operator's state is not the one
        :func:`per_key_function` keeps.
    """
    owner = "write_handover"
    old_fallback, old_entries, _ = _table_parts(old, owner)
    new_fallback, new_entries, _ = _table_parts(new, owner)
    if old_fallback != new_fallback:
        raise InvalidParameterError(
            f"the 'new' table of {owner} must keep the old table's fallback {old_fallback!r}; got {new_fallback!r} "
            f"(a new partition count needs a new checkpoint)"
        )
    keys = old_entries.index.append(new_entries.index).unique().to_numpy(dtype=object)
    before, after = route_values(old, keys), route_values(new, keys)
    moved = before != after
    if not moved.any():
        return 0
    path = _local_path(directory)
    last_batch = max((batch for batch, _ in _offset_log(checkpoint)), default=-1)
    target = path / f"handover-{last_batch:06d}.parquet"
    if target.exists():  # this stop was handed over already: the query may have run on since
        return pq.read_metadata(target).num_rows
    states = _moved_states(spark, checkpoint, set(keys[moved]), before[moved], operator_id, owner)
    key_type = (
        pa.string() if isinstance(keys[0], str) else {"long": pa.int64(), "int": pa.int32()}[old_fallback.int_type]
    )
    table = pa.table(
        {key: pa.array(list(states), type=key_type), column: pa.array(list(states.values()), type=pa.binary())}
    )
    path.mkdir(parents=True, exist_ok=True)
    aside = path / f".{target.name}.tmp"
    pq.write_table(table, aside)
    aside.replace(target)
    logger.info("handed over the state of %d of %d moved keys in %s", len(states), int(moved.sum()), target)
    return len(states)


def _moved_states(
    spark: Any, checkpoint: str | Path, moved: set, old_groups: np.ndarray, operator_id: int, owner: str
) -> dict[Any, bytes]:
    """Each moved key's state (one-row Arrow IPC), read from the groups it was in."""
    from pyspark.sql import functions as F

    state = spark.read.format("statestore").option("operatorId", operator_id).load(str(_local_path(checkpoint)))
    value = state.schema["value"].dataType
    if "groupState" not in value.names or "key_states" not in value["groupState"].dataType.names:
        raise InvalidParameterError(
            f"the state of operator {operator_id} in {checkpoint} is not per_key_function's "
            f"(value.groupState.key_states); {owner} hands over applyInPandasWithState state only"
        )
    group = state.schema["key"].dataType.names[0]
    groups = spark.createDataFrame(pa.table({group: pa.array(sorted(set(old_groups.tolist())))}))
    held = state.join(F.broadcast(groups), state["key"][group] == groups[group], "left_semi")
    out: dict[Any, bytes] = {}
    for (blob,) in held.select("value.groupState.key_states").toLocalIterator():
        table = pa.ipc.open_stream(blob).read_all()
        for i, k in enumerate(table.column(0).to_pylist()):
            if k in moved:
                out[k] = _ipc(table.slice(i, 1))
    return out
