"""Apache Flink: ``keyBy`` places a key in a key group, key groups on subtasks; surrogate keys impose a table.

:class:`FlinkKeyGroups` reproduces where Flink's ``keyBy`` puts a key (the
Java ``keyBy(r -> r.key)`` form); :class:`PyFlinkKeyGroups` where PyFlink's
``key_by`` puts it (the key wrapped in a one-field ``Row``). Keyed state lives
in key groups, so a routing table cannot move a key: it is realized by keying
on a *surrogate*, a reserved value whose key group Flink's own assignment puts
on the subtask the table names, while the state under the surrogate keeps the
real keys (a map state). :func:`flink_surrogates` finds the surrogates,
:class:`FlinkKeySelector` maps real keys to routing keys (PyFlink's
``key_by``), and :func:`write_routing_file` writes the mapping for a Java job.
A split key gets the surrogate of its part on the selecting instance's server.
See ``docs/engines/flink.md``. The module runs past 500 lines because everything
Flink needs (two hash forms, surrogates, selector, routing file) stays in one
file: one engine, one module.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from locality._durable import replace_file
from locality._validation import check_integer, check_option
from locality.engines.base import make_fallback, routing_table_of, server_position
from locality.engines.jvm import HashCodeEngine
from locality.engines.primitives import M32, murmur3_final, murmur3_step, signed32
from locality.errors import InvalidParameterError, SerializationError

if TYPE_CHECKING:
    from locality.routing import RoutingConfiguration, RoutingTable

__all__ = [
    "FlinkKeyGroups",
    "PyFlinkKeyGroups",
    "SURROGATE_PREFIX",
    "RESERVED_LONGS",
    "RESERVED_INTS",
    "KEY_TYPES",
    "flink_surrogates",
    "FlinkKeySelector",
    "write_routing_file",
    "read_routing_file",
]

logger = logging.getLogger(__name__)


class FlinkKeyGroups(HashCodeEngine):
    """Flink's ``keyBy`` placement: key -> key group -> operator subtask.

    Parameters
    ----------
    n_instances : int
        Operator parallelism ``p``, 1 <= p <= 32768.
    max_parallelism : int, optional
        Number of key groups ``M``, p <= M <= 32768. Default as Flink:
        ``min(max(roundUpToPowerOfTwo(p + p // 2), 128), 32768)``.
    int_type : {"long", "int"}, default "long"
        Java type of int keys: ``Long`` or ``Integer`` (their ``hashCode`` agree
        on 0 .. 2**31 - 1 and differ on negative numbers).

    Attributes
    ----------
    max_parallelism : int
        Number of key groups in use.

    Raises
    ------
    InvalidParameterError
        If ``n_instances`` is outside 1..32768, ``max_parallelism`` outside
        ``n_instances``..32768, or ``int_type`` unknown.

    Notes
    -----
    ``keyGroup = murmurHash(key.hashCode()) % M`` and
    ``subtask = keyGroup * p / M`` (integer division), where ``murmurHash(c)`` is
    one MurmurHash3 x86_32 block round on ``c`` with seed 0 (``c1 = 0xcc9e2d51``,
    rotl 15, ``c2 = 0x1b873593``, rotl 13, ``h * 5 + 0xe6546b64``), then ``h ^= 4``,
    ``fmix32``, and the absolute value (``Integer.MIN_VALUE`` -> 0). Subtask ``i``
    owns key groups ``ceil(i*M/p) .. ((i+1)*M - 1) // p``.

    Sources in apache/flink:

    - ``flink-runtime/src/main/java/org/apache/flink/runtime/state/KeyGroupRangeAssignment.java``
      (``assignToKeyGroup``, ``computeOperatorIndexForKeyGroup``, ``computeDefaultMaxParallelism``)
    - ``flink-core/src/main/java/org/apache/flink/util/MathUtils.java`` (``murmurHash``, ``roundUpToPowerOfTwo``)

    References
    ----------
    .. [1] Apache Flink, "Working with State: key groups / max parallelism",
       https://nightlies.apache.org/flink/flink-docs-stable/docs/dev/datastream/fault-tolerance/state/

    Examples
    --------
    >>> flink = FlinkKeyGroups(4)
    >>> flink.max_parallelism, flink.key_group("hello"), flink.instance_of("hello")
    (128, 35, 1)
    """

    engine = "flink"
    _PARAMETERS = ("max_parallelism", "int_type")
    _MAX_INSTANCES = 32768

    def __init__(self, n_instances: int, max_parallelism: int | None = None, *, int_type: str = "long") -> None:
        super().__init__(n_instances, int_type=int_type)
        p = self.n_instances
        if max_parallelism is None:
            max_parallelism = min(max(1 << (p + p // 2 - 1).bit_length(), 128), 32768)
        self.max_parallelism = check_integer(max_parallelism, "max_parallelism", "FlinkKeyGroups", lower=p, upper=32768)

    #: Added to the key's ``hashCode`` to get the ``hashCode`` of what Flink keys on (0: the key itself).
    _HASH_OFFSET: ClassVar[int] = 0

    def _key_group(self, h: Any) -> Any:
        mixed = signed32(murmur3_final(murmur3_step(0, (h + self._HASH_OFFSET) & M32), 4))
        return (abs(mixed) & 0x7FFF_FFFF) % self.max_parallelism

    def _place(self, h: Any) -> Any:
        return self._key_group(h) * self.n_instances // self.max_parallelism

    def key_group(self, key: str | int) -> int:
        """Key group of one key (``murmurHash(key.hashCode()) % max_parallelism``).

        Parameters
        ----------
        key : str or int
            The key, as for :meth:`instance_of`.

        Returns
        -------
        int
            Key group in ``0 .. max_parallelism - 1``; the subtask is
            ``key_group * n_instances // max_parallelism``.

        Raises
        ------
        InvalidParameterError
            For the same keys as :meth:`instance_of`.
        """
        return int(self._key_group(self._key_hash(key, f"{type(self).__name__}.key_group")))

    def key_groups(self, keys: Any) -> np.ndarray:
        """Key group of every key, computed with numpy (keys as for :meth:`instances_of`).

        Returns
        -------
        numpy.ndarray of int64
            ``[self.key_group(k) for k in keys]``.
        """
        # With parallelism M, subtask keyGroup * M / M is the key group itself.
        return type(self)(self.max_parallelism, self.max_parallelism, int_type=self.int_type).instances_of(keys)

    def _parameters(self) -> dict[str, Any]:
        return {"max_parallelism": self.max_parallelism, **super()._parameters()}


def _key_group_bounds(subtask: Any, m: int, p: int) -> tuple[Any, Any]:
    """``[start, stop)`` of the key groups of ``subtask`` (int or numpy array)."""
    return (subtask * m + p - 1) // p, ((subtask + 1) * m - 1) // p + 1


class PyFlinkKeyGroups(FlinkKeyGroups):
    """Where Flink puts a key that PyFlink's ``key_by`` produced: the key inside a one-field ``Row``.

    Parameters and attributes as :class:`FlinkKeyGroups`.

    Notes
    -----
    PyFlink's ``DataStream.key_by(selector, key_type)`` runs the selector in
    Python, emits ``Row(key, value)``, and keys the Java stream with
    flink-python's ``KeyByKeySelector``, which returns a new one-field
    ``Row`` holding the key. Flink then hashes ``Row.hashCode()``, which is
    ``RowUtils.deepHashCodeRow``: ``31 * kind.toByteValue()`` (0 for
    ``INSERT``) plus ``deepHashCodeArray(fields)`` = ``31 * 1 +
    deepHashCodeInternal(key)``, and ``deepHashCodeInternal`` of a String,
    Long or Integer is ``Arrays.deepHashCode(new Object[]{key})`` =
    ``31 + key.hashCode()``. So the hash Flink mixes is
    ``key.hashCode() + 62`` (mod 2**32); everything after it is
    :class:`FlinkKeyGroups`. Checked by running the 2.3.0 jars (``Row.of("abc")``
    through ``KeyByKeySelector``: ``hashCode`` 96416 = 96354 + 62), and by
    ``tests/flink/`` for every surrogate and in a real PyFlink job. Older
    Flink versions hashed a ``Row`` differently (without the array level).

    Sources in apache/flink:

    - ``flink-python/src/main/java/org/apache/flink/streaming/api/functions/python/KeyByKeySelector.java``
    - ``flink-python/pyflink/datastream/data_stream.py`` (``DataStream.key_by``)
    - ``flink-core/src/main/java/org/apache/flink/types/RowUtils.java`` (``deepHashCodeRow``)

    Examples
    --------
    >>> PyFlinkKeyGroups(6, 128).instance_of("abc"), FlinkKeyGroups(6, 128).instance_of("abc")
    (3, 5)
    """

    engine = "pyflink"
    _HASH_OFFSET = 62


# --------------------------------------------------------------------------------------------
# Surrogates: reserved keys, one per key group.
# --------------------------------------------------------------------------------------------

#: A String surrogate is this prefix (U+0000 then ``locality:``) and a decimal number.
SURROGATE_PREFIX = "\x00locality:"
#: Java ``Long`` surrogates, ``[low, high)``: ``Long.MIN_VALUE + n`` for ``n < 2**32``.
RESERVED_LONGS = (-(2**63), -(2**63) + 2**32)
#: Java ``Integer`` surrogates, ``[low, high)``: ``Integer.MIN_VALUE + n`` for ``n < 2**20``.
RESERVED_INTS = (-(2**31), -(2**31) + 2**20)
#: Key types a routing key can have: Java ``String``, ``Long``, ``Integer``.
KEY_TYPES = ("string", "long", "int")

_RESERVED = {"long": RESERVED_LONGS, "int": RESERVED_INTS}


def _candidate(key_type: str, n: int) -> str | int:
    """Candidate ``n`` of the family of ``key_type``."""
    return f"{SURROGATE_PREFIX}{n}" if key_type == "string" else _RESERVED[key_type][0] + n


def _candidates(key_type: str, start: int, stop: int) -> Any:
    """Candidates ``start .. stop - 1``, in order (an int64 array for int key types)."""
    if key_type == "string":
        return [_candidate(key_type, n) for n in range(start, stop)]
    return np.arange(start, stop, dtype=np.int64) + _RESERVED[key_type][0]


def _is_reserved(key: Any, key_type: str) -> bool:
    if key_type == "string":
        return isinstance(key, str) and key.startswith(SURROGATE_PREFIX)
    low, high = _RESERVED[key_type]
    return isinstance(key, (int, np.integer)) and low <= key < high


@functools.lru_cache(maxsize=32)
def _surrogates_by_key_group(engine: str, max_parallelism: int, key_type: str) -> tuple:
    """The first candidate of every key group (cached: it depends on M, key form and key type only)."""
    int_type = "int" if key_type == "int" else "long"
    # with parallelism M, subtask == key group
    groups_of = make_fallback(engine, max_parallelism, max_parallelism=max_parallelism, int_type=int_type)
    limit = None if key_type == "string" else _RESERVED[key_type][1] - _RESERVED[key_type][0]
    first = np.full(max_parallelism, -1, dtype=np.int64)
    start, chunk = 0, 4 * max_parallelism  # covering M groups takes about M ln M candidates
    while (first < 0).any():
        if limit is not None and start >= limit:
            raise InvalidParameterError(  # never seen: 2**20 candidates cover the 32768 key groups
                f"the {limit} reserved {key_type} values do not reach all {max_parallelism} key groups"
            )
        stop = start + chunk if limit is None else min(start + chunk, limit)
        groups, at = np.unique(groups_of.instances_of(_candidates(key_type, start, stop)), return_index=True)
        new = first[groups] < 0
        first[groups[new]] = start + at[new]  # np.unique's index is the first, hence smallest, candidate
        start = stop
    logger.debug("%s surrogates for %d key groups searched %d candidates", key_type, max_parallelism, start)
    return tuple(_candidate(key_type, int(n)) for n in first)


def flink_surrogates(fallback: FlinkKeyGroups, key_type: str = "string") -> pd.DataFrame:
    """The surrogate routing key of every key group, and the subtask that owns it.

    A surrogate is a reserved value of the key's Java type whose key group,
    in Flink's own assignment, is a given one; keying a record on the
    surrogate of one of subtask ``i``'s key groups sends it to subtask ``i``.
    There is one surrogate per key group, so subtask ``i`` has as many as it
    owns key groups (``M / p``, rounded down or up).

    Parameters
    ----------
    fallback : FlinkKeyGroups or PyFlinkKeyGroups
        Max parallelism ``M``, parallelism ``p`` and key form: :class:`FlinkKeyGroups`
        for a Java job keyed on the value itself, :class:`PyFlinkKeyGroups`
        for PyFlink's ``key_by``.
    key_type : {"string", "long", "int"}, default "string"
        Java type of the keys (``String``, ``Long``, ``Integer``). ``long``
        and ``int`` must match the fallback's ``int_type``.

    Returns
    -------
    pandas.DataFrame
        ``M`` rows indexed by key group ``0 .. M - 1``, with columns
        ``subtask`` (int64) and ``surrogate`` (str or int).

    Raises
    ------
    InvalidParameterError
        If ``fallback`` is not a Flink placement, ``key_type`` is unknown, or
        an int key type differs from ``fallback.int_type``.

    Notes
    -----
    The candidates are, for ``n = 0, 1, 2, ...``: the String
    ``SURROGATE_PREFIX + str(n)`` (``"\\u0000locality:0"``, ...), the Long
    ``Long.MIN_VALUE + n`` (``n < 2**32``) or the Integer
    ``Integer.MIN_VALUE + n`` (``n < 2**20``). The surrogate of key group
    ``g`` is the candidate with the smallest ``n`` whose key group is ``g``:
    deterministic, the same on every machine and for every parallelism with
    the same ``M``, and found in about ``M ln M`` hashes. Keys of these
    reserved forms cannot be real keys (:class:`FlinkKeySelector` refuses
    them), so a surrogate never shares state with a real key.

    Examples
    --------
    >>> table = flink_surrogates(PyFlinkKeyGroups(6, 128))
    >>> len(table), table["subtask"].nunique()
    (128, 6)
    """
    owner = "flink_surrogates"
    if not isinstance(fallback, FlinkKeyGroups):
        raise InvalidParameterError(
            f"the 'fallback' parameter of {owner} must be a FlinkKeyGroups or PyFlinkKeyGroups; "
            f"got {type(fallback).__name__}"
        )
    key_type = _check_key_type(key_type, fallback, owner)
    m, p = fallback.max_parallelism, fallback.n_instances
    groups = np.arange(m, dtype=np.int64)
    surrogates = _surrogates_by_key_group(fallback.engine, m, key_type)
    return pd.DataFrame(
        {"subtask": groups * p // m, "surrogate": pd.Series(list(surrogates), dtype=object)},
        index=pd.Index(groups, name="key_group"),
    )


def _check_key_type(key_type: object, fallback: FlinkKeyGroups, owner: str) -> str:
    key_type = check_option(key_type, "key_type", owner, KEY_TYPES)
    if key_type != "string" and key_type != fallback.int_type:
        raise InvalidParameterError(
            f"the 'key_type' parameter of {owner} is {key_type!r} but the fallback hashes int keys as "
            f"{fallback.int_type!r} (int_type); the table was learned for Java {fallback.int_type} keys"
        )
    return key_type


# --------------------------------------------------------------------------------------------
# Routing keys: a table's keys go to their subtask's surrogates, every other key keeps its value.
# --------------------------------------------------------------------------------------------

_FILE_FORMAT = "locality-flink-routing"
_FILE_VERSION = 1
_PYTHON_TYPES = {"string": str, "long": int, "int": int}


class FlinkKeySelector:
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
    routing : RoutingTable, RoutingConfiguration, or an object with the same lookup
        The table itself (anything with ``entries``, a pandas Series key ->
        subtask, and ``fallback``), or where to find it: an object with
        ``tables[operator]`` (a configuration), or with a ``snapshot()``
        method returning one (a router). The fallback must be
        :class:`PyFlinkKeyGroups` for PyFlink, :class:`FlinkKeyGroups` for a
        Java job keyed on the value.
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
    >>> select = FlinkKeySelector(table, field=1)
    >>> [select(("US/Ohio", tag)) for tag in ("abc", "other")]
    ['\\x00locality:355', 'other']
    >>> split = RoutingTable("tag", PyFlinkKeyGroups(6, 128), pd.Series({"abc": 0}), {"hot": [2, 5]})
    >>> PyFlinkKeyGroups(6, 128).instance_of(FlinkKeySelector(split, field=1, server=1)(("US/Ohio", "hot")))
    5
    """

    def __init__(
        self,
        routing: RoutingTable | RoutingConfiguration | Any,
        operator: str | None = None,
        *,
        field: int | str | Callable[[Any], Hashable] | None = None,
        key_type: str | None = None,
        server: str | int | Callable[[Any], str | int] | None = None,
    ) -> None:
        owner = "FlinkKeySelector"
        table, self.servers = routing_table_of(routing, operator, owner)
        fallback = table.fallback
        if not isinstance(fallback, FlinkKeyGroups):
            raise InvalidParameterError(
                f"the table of {getattr(table, 'operator', operator)!r} falls back to {type(fallback).__name__}; "
                f"Flink routing keys need a table learned with the 'pyflink' (PyFlink key_by) or 'flink' "
                f"(Java keyBy) fallback"
            )
        keys = [k.item() if isinstance(k, np.generic) else k for k in table.entries.index]
        splits = dict(getattr(table, "splits", None) or {})
        self.operator: str = getattr(table, "operator", operator)
        self.fallback = fallback
        self.key_type = _key_type_of(keys + list(splits), fallback, key_type, owner)
        self.field = field
        reserved = next((k for k in [*keys, *splits] if _is_reserved(k, self.key_type)), None)
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
        return server_position(server, self.servers, self.n_servers, "FlinkKeySelector")

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
            if server is None and not callable(self.server):
                server = self.server
            if server is not None:
                return parts[self._position(server)]
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
        if _is_reserved(key, self.key_type):
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
            f"FlinkKeySelector(operator={self.operator!r}, engine={self.fallback.engine!r}, "
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
    key_type = _check_key_type(key_type, fallback, owner)
    other = kinds - {"string" if key_type == "string" else "int"}
    if other:
        raise InvalidParameterError(
            f"the 'key_type' parameter of {owner} is {key_type!r} but the table holds {other.pop()} keys"
        )
    return key_type


def _surrogates(keys: list, subtasks: np.ndarray, fallback: FlinkKeyGroups, key_type: str) -> list:
    """Per key, the surrogate of key group ``start + own key group mod size`` of its subtask."""
    if not keys:
        return []
    m, p = fallback.max_parallelism, fallback.n_instances
    start, stop = _key_group_bounds(subtasks, m, p)
    groups = start + fallback.key_groups(keys) % (stop - start)
    by_group = _surrogates_by_key_group(fallback.engine, m, key_type)
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
        else ("{} values in [{}, {})".format(key_type, *_RESERVED[key_type]))
    )
    return f"key {key!r}, whose form is reserved for Flink surrogates ({form})"


# --------------------------------------------------------------------------------------------
# The routing file a Java job loads.
# --------------------------------------------------------------------------------------------


def write_routing_file(
    routing: RoutingTable | RoutingConfiguration | Any,
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
        As for :class:`FlinkKeySelector`.
    server : str or int, optional
        As for :class:`FlinkKeySelector`, a server name or position (not a callable).
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
        As :class:`FlinkKeySelector`.
    """
    if callable(server):
        raise InvalidParameterError(
            f"the 'server' parameter of write_routing_file must be a server name or position; got {server!r}"
        )
    selector = FlinkKeySelector(routing, operator, key_type=key_type, server=server)
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
) -> FlinkKeySelector:
    """Load a file :func:`write_routing_file` wrote, as a :class:`FlinkKeySelector`.

    Parameters
    ----------
    path : str or path-like
    field : int, str, callable or None, default None
        As for :class:`FlinkKeySelector`.

    Returns
    -------
    FlinkKeySelector
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
    selector = FlinkKeySelector.__new__(FlinkKeySelector)
    selector.operator, selector.fallback, selector.key_type = header["operator"], fallback, key_type
    selector.field, selector.routes = field, routes
    selector.split_routes, selector.servers, selector.server, selector._warned_whole = {}, None, None, False
    return selector
