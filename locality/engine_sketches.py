"""Sketches the engines publish into a store, per interval of wall-clock time, and the window of them a run reads.

Every engine instance (a Flink subtask, a Kafka Streams task, a user of the
Python :class:`~locality.router.Router`) sketches what it routes during an
interval and publishes each sketch as one object under the store's root, with
the store's own object layer (a directory or an ``s3://`` prefix)::

    sketches/<from>-<to>/pairs/<a>/<b>/<publisher>.lcss   (key of a, key of b) pairs of records from a to b
    sketches/<from>-<to>/loads/<op>/<publisher>.lcss      the keys of op (its key loads)

``<from>`` and ``<to>`` are the interval's bounds in epoch milliseconds (UTC),
13 digits, zero-padded, so that names sort by time; the bytes are
:meth:`SpaceSaving.to_bytes` (arity 2 for pairs, 1 for loads). A publisher
writes each object once with a plain put: no lease, as these names never meet
the store's own files, and a reader sees an object whole or not at all.

:func:`publish_sketches` is the writer; :func:`read_sketches` lists the
intervals, keeps those inside a window, merges every publisher's sketch of
each hop and operator, and returns the window's
:class:`~locality.counts.KeyCounts` with their error bounds
(:class:`SketchWindow`). The protocol and its choices:
``docs/store-protocol.md``, "Sketches the engines publish".
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from locality._store_files import damaged, read_blob
from locality._validation import check_duration, check_integer
from locality.counts import KeyCounts, sketch_error_bounds
from locality.errors import InvalidParameterError, SerializationError, StoreError
from locality.schedule import point_of
from locality.sketch import SpaceSaving, serde
from locality.sketch.columns import INT, STR
from locality.storage import NotAnObject, Objects, open_objects
from locality.store import ConfigStore
from locality.time_range import parse_time

__all__ = ["Interval", "SketchSelection", "SketchWindow", "publish_sketches", "read_sketches", "SKETCHES", "SUFFIX"]

logger = logging.getLogger(__name__)

#: The folder under a store's root that holds the engines' sketches.
SKETCHES = "sketches"
#: The name ending of a sketch object (LCSS: the layout of :mod:`locality.sketch.serde`).
SUFFIX = ".lcss"
#: An operator's name or a publisher's id: 1-100 of [A-Za-z0-9_.-], not starting with a dot.
_NAME = re.compile(r"(?!\.)[A-Za-z0-9_.-]{1,100}")
_NAME_RULE = "1-100 characters of [A-Za-z0-9_.-], not starting with '.'"
#: An interval's folder: its bounds in epoch milliseconds, 13 digits each.
_INTERVAL = re.compile(r"([0-9]{13})-([0-9]{13})")
_DIGITS = 13
#: Combines the hashes of a key's components into one (an odd 64-bit constant: a multiply keeps every bit).
_HASH_MULTIPLIER = 0x9E3779B97F4A7C15
#: How many pairs or objects a message lists, at most.
_NAMED = 5


def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


@dataclass(frozen=True, order=True)
class Interval:
    """An interval of wall-clock time ``[start, end)`` in epoch milliseconds (UTC): what one sketch covers.

    Both bounds are written with 13 digits (until the year 2286), ``start < end``.

    Raises
    ------
    InvalidParameterError
        A bound that is not an int in ``[0, 10**13)``, or ``end <= start``.
    """

    start: int
    end: int

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            check_integer(getattr(self, name), name, "Interval", lower=0, upper=10**_DIGITS - 1)
        if self.end <= self.start:
            raise InvalidParameterError(
                f"an Interval must end after it starts; got start {self.start} and end {self.end} (epoch ms)"
            )

    @classmethod
    def between(cls, start: str | datetime, end: str | datetime) -> Interval:
        """The interval from ``start`` to ``end`` (ISO 8601 text or datetimes; UTC when they name no zone)."""
        return cls(point_of(parse_time(start, "start")), point_of(parse_time(end, "end")))

    @classmethod
    def containing(cls, moment: str | datetime, length: str | pd.Timedelta) -> Interval:
        """The interval of ``length`` (e.g. ``"5min"``, ``"1h"``) holding ``moment``, aligned on the epoch.

        Every publisher that cuts its stream this way cuts it at the same
        bounds, so their sketches of one interval meet in one folder.
        """
        span = check_duration(length, "length", "Interval.containing") // pd.Timedelta(milliseconds=1)
        if span < 1:
            raise InvalidParameterError(
                f"the 'length' parameter of Interval.containing must be >= 1 ms; got {length!r}",
                parameter="length",
            )
        at = point_of(parse_time(moment, "moment"))
        return cls(at - at % span, at - at % span + span)

    @classmethod
    def parse(cls, name: str) -> Interval | None:
        """The interval a folder's name spells (``<from>-<to>``), or None when it spells none."""
        match = _INTERVAL.fullmatch(name)
        if match is None or int(match[2]) <= int(match[1]):
            return None
        return cls(int(match[1]), int(match[2]))

    @property
    def name(self) -> str:
        """The interval's folder name: ``<from>-<to>``, 13 digits each."""
        return f"{self.start:0{_DIGITS}d}-{self.end:0{_DIGITS}d}"

    @property
    def start_time(self) -> datetime:
        return _time(self.start)

    @property
    def end_time(self) -> datetime:
        return _time(self.end)

    def __str__(self) -> str:
        return f"[{self.start_time.isoformat()}, {self.end_time.isoformat()})"


def _check_name(value: object, parameter: str, owner: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise InvalidParameterError(f"the {parameter!r} parameter of {owner} must be {_NAME_RULE}; got {value!r}")
    return value


def _objects(store: str | os.PathLike | ConfigStore | Objects, owner: str) -> Objects:
    """The object layer of ``store``: a location (path or URI), a ConfigStore, or Objects as they are."""
    if isinstance(store, ConfigStore):
        return store.objects
    if isinstance(store, Objects):
        return store
    return open_objects(store, owner=owner, parameter="store")


def _pairs_name(interval: Interval, a: str, b: str, publisher: str) -> str:
    return f"{SKETCHES}/{interval.name}/pairs/{a}/{b}/{publisher}{SUFFIX}"


def _loads_name(interval: Interval, op: str, publisher: str) -> str:
    return f"{SKETCHES}/{interval.name}/loads/{op}/{publisher}{SUFFIX}"


def _check_sketch(sketch: object, arity: int, parameter: str, what: str) -> None:
    if not isinstance(sketch, SpaceSaving) or sketch.arity != arity:
        got = f"arity {sketch.arity}" if isinstance(sketch, SpaceSaving) else type(sketch).__name__
        raise InvalidParameterError(
            f"the {parameter!r} parameter of publish_sketches must map {what} to a SpaceSaving of arity {arity}; "
            f"got {got}"
        )


def publish_sketches(
    store: str | os.PathLike | ConfigStore | Objects,
    interval: Interval,
    publisher: str,
    *,
    pairs: Mapping[tuple[str, str], SpaceSaving] | None = None,
    loads: Mapping[str, SpaceSaving] | None = None,
) -> list[str]:
    """Publish one publisher's sketches of one interval into ``store``'s ``sketches/``; the names written.

    Parameters
    ----------
    store : str, path, ConfigStore or Objects
        The store (a directory or ``s3://bucket/prefix``), as ``--store`` names it.
    interval : Interval
        The wall-clock interval the sketches cover.
    publisher : str
        This publisher's id (e.g. ``"flink-3"``, a subtask): distinct per publisher of the
        interval. A publisher restarted with the same id replaces what it published.
    pairs : mapping of (operator a, operator b) -> SpaceSaving, optional
        Arity-2 sketches of the (key of a, key of b) pairs of the records that went from a to b.
    loads : mapping of operator -> SpaceSaving, optional
        Arity-1 sketches of each operator's keys.

    Raises
    ------
    InvalidParameterError
        An operator name or the publisher id is not 1-100 characters of
        ``[A-Za-z0-9_.-]`` (not starting with ``.``), a sketch of the wrong
        arity, or nothing to publish. Nothing is written then.
    StoreError
        The store cannot be written (StoreUnavailableError: cannot be reached).
    """
    owner = "publish_sketches"
    if not isinstance(interval, Interval):
        raise InvalidParameterError(
            f"the 'interval' parameter of {owner} must be an Interval; got {type(interval).__name__}",
            parameter="interval",
        )
    _check_name(publisher, "publisher", owner)
    pairs, loads = dict(pairs or {}), dict(loads or {})
    if not pairs and not loads:
        raise InvalidParameterError(f"publish_sketches was given no sketch (pairs and loads are empty) for {publisher}")
    objects = {}
    for hop, sketch in pairs.items():
        if not isinstance(hop, tuple) or len(hop) != 2 or hop[0] == hop[1]:
            raise InvalidParameterError(
                f"the 'pairs' parameter of {owner} must be keyed by (operator a, operator b), two operators; "
                f"got {hop!r}",
                parameter="pairs",
            )
        a, b = (_check_name(op, "pairs", owner) for op in hop)
        _check_sketch(sketch, 2, "pairs", f"{hop!r}")
        objects[_pairs_name(interval, a, b, publisher)] = sketch
    for op, sketch in loads.items():
        _check_sketch(sketch, 1, "loads", repr(_check_name(op, "loads", owner)))
        objects[_loads_name(interval, op, publisher)] = sketch
    store_objects = _objects(store, owner)
    for name, sketch in objects.items():
        try:
            store_objects.put(name, sketch.to_bytes())
        except NotAnObject as exc:
            raise StoreError(f"cannot write {exc.where} in the store: {exc.problem}") from None
    logger.info("published %d sketches of %s as %s into %s", len(objects), interval, publisher, store_objects.location)
    return list(objects)


# ---------------------------------------------------------------------- reading
@dataclass(frozen=True)
class _Read:
    """One merged sketch of the window and what went into it."""

    sketch: SpaceSaving
    first: str  # the first object merged, for messages
    keys: np.ndarray  # 64-bit hashes of every key its objects monitor (their union)
    full: bool  # whether one of its objects was full (then some keys were never monitored)


@dataclass(frozen=True, eq=False)
class SketchWindow:
    """The engines' sketches of a window, merged: the counts, their error bounds, and what was read.

    ``start`` and ``end`` (epoch ms) bound the intervals read (the first's
    start, the last's end); ``left_out`` are the intervals that straddle the
    window's bounds. ``error_bound`` is each merged sketch's ``min_count``
    (the most any count over-estimates, and the most a key it misses may
    weigh); ``apriori_bound`` its ``total_weight / capacity``, the bound known
    before any record. ``distinct_keys`` counts the keys each merged sketch's
    objects monitor between them; when none of them was full
    (``publisher_full`` False) that is every key of the window, and a
    capacity that large keeps the window exact. ``digest`` identifies the
    objects read and their bytes.
    """

    store: str
    start: int
    end: int
    operators: tuple[str, ...]
    counts: KeyCounts
    capacity: int
    error_bound: dict[str, float]
    apriori_bound: dict[str, float]
    distinct_keys: dict[str, int]
    publisher_full: dict[str, bool]
    intervals: tuple[Interval, ...]
    left_out: tuple[Interval, ...]
    publishers: tuple[str, ...]
    objects: int
    bytes: int
    digest: str
    ignored: tuple[str, ...] = field(default=())

    @property
    def span(self) -> Interval:
        return Interval(self.start, self.end)

    def exact_capacity(self) -> int | None:
        """The capacity that would keep every merged sketch of this window exact (error bound 0); None if it is.

        The most keys any merged sketch's objects monitor between them. When a
        publisher's own sketch was full it missed keys, and the window holds
        more: the capacity is then a lower bound (:meth:`summary` says so).
        """
        most, full = max(self.distinct_keys.values()), any(self.publisher_full.values())
        if most <= self.capacity and not full:
            return None
        return max(most, self.capacity + 1) if full else most

    def summary(self) -> dict:
        """What was read and how exact it is, JSON-ready (the outcome's ``sketches``)."""
        weight = self.counts.total_weight
        bound, apriori = max(self.error_bound.values()), max(self.apriori_bound.values())
        return {
            "window": {"start": self.span.start_time.isoformat(), "end": self.span.end_time.isoformat()},
            "intervals": len(self.intervals),
            "intervals_left_out": len(self.left_out),
            "publishers": len(self.publishers),
            "objects": self.objects,
            "bytes": self.bytes,
            "ignored": list(self.ignored),
            "operators": list(self.operators),
            "capacity": self.capacity,
            "error_bound": bound,
            "error_bound_share": bound / weight if weight > 0 else 0.0,
            "apriori_error_bound": apriori,
            "error_bound_by_sketch": self.error_bound,
            "apriori_error_bound_by_sketch": self.apriori_bound,
            "distinct_keys": self.distinct_keys,
            "exact_capacity": self.exact_capacity(),
            "exact_capacity_is_lower_bound": any(self.publisher_full.values()),
        }


def _window_bounds(
    start: str | datetime | None, end: str | datetime | None, last: str | pd.Timedelta | None, owner: str
) -> tuple[int | None, int | None, int | None]:
    """``start`` and ``end`` in epoch ms, and ``last`` in ms (each None when unset), checked."""
    lo = None if start is None else point_of(parse_time(start, "start"))
    hi = None if end is None else point_of(parse_time(end, "end"))
    if lo is not None and hi is not None and hi <= lo:
        raise InvalidParameterError(f"the window of {owner} must end after it starts; got {start} .. {end}")
    length = None if last is None else check_duration(last, "last", owner) // pd.Timedelta(milliseconds=1)
    return lo, hi, length


@dataclass(frozen=True)
class SketchSelection:
    """Which window of sketches a run reads: ``[start, end)``, or its last ``last`` (:func:`read_sketches`).

    Checked when built (times as ISO 8601 text, ``last`` a duration such as ``"7D"``).
    """

    start: str | None = None
    end: str | None = None
    last: str | None = None

    def __post_init__(self) -> None:
        _window_bounds(self.start, self.end, self.last, "SketchSelection")

    def read(self, store: str | os.PathLike | ConfigStore | Objects) -> SketchWindow:
        """The window's sketches of ``store``, merged."""
        return read_sketches(store, start=self.start, end=self.end, last=self.last)


def read_sketches(
    store: str | os.PathLike | ConfigStore | Objects,
    *,
    start: str | datetime | None = None,
    end: str | datetime | None = None,
    last: str | pd.Timedelta | None = None,
) -> SketchWindow:
    """The sketches of a window of ``store``'s ``sketches/``, every publisher's merged per hop and operator.

    The window is ``[start, end)`` (ISO 8601 or datetimes, UTC when they name
    no zone); without ``start`` it begins with the first interval, without
    ``end`` it ends with the last. With ``last`` (e.g. ``"7D"``) it is the last
    ``last`` of it, ending at the end of the newest interval inside it. An
    interval is read when it lies inside the window; one that straddles a
    bound is left out (and counted). The operators and their order come from
    the pairs' names: the hops must chain (a -> b, b -> c).

    Raises
    ------
    StoreError
        No ``sketches/`` in the store, no interval inside the window, sketches of
        two capacities, operators that do not chain, or an operator without its
        loads; each message names the store, the window or the objects.
    StoreDamagedError
        An object that is not a sketch of its kind (the message names it).
    InvalidParameterError
        A bound that is not a time, ``last`` not a positive duration, or ``end <= start``.
    """
    owner = "read_sketches"
    lo, hi, length = _window_bounds(start, end, last, owner)
    objects = _objects(store, owner)
    intervals = _intervals(objects)
    chosen, left_out = _select(intervals, lo, hi, length)
    if not chosen:
        raise StoreError(
            f"no interval of sketches in the store {objects.location} lies inside {_window_text(lo, hi, last)}: "
            f"its {len(intervals):,} intervals span {_span_text(intervals)}"
            + (f"; {len(left_out)} straddle the window's bounds" if left_out else "")
        )
    return _merged(objects, chosen, tuple(left_out))


def _intervals(objects: Objects) -> list[Interval]:
    """The intervals under ``sketches/``, oldest first."""
    try:
        children = objects.children(f"{SKETCHES}/")
    except NotAnObject as exc:
        raise damaged("the engines' sketches folder", exc.where, exc.problem) from None
    intervals = sorted(iv for name, folder in children.items() if folder for iv in [Interval.parse(name)] if iv)
    if not intervals:
        raise StoreError(
            f"the store {objects.location} has no sketches: nothing under {objects.where(SKETCHES + '/')} "
            "names an interval (<from>-<to>, epoch ms); have the engines published any?"
        )
    return intervals


def _select(
    intervals: list[Interval], lo: int | None, hi: int | None, length: int | None
) -> tuple[list[Interval], list[Interval]]:
    """The intervals inside the window, and those straddling its bounds."""
    inside = [iv for iv in intervals if (lo is None or iv.start >= lo) and (hi is None or iv.end <= hi)]
    if length is not None:
        hi = max((iv.end for iv in inside), default=hi if hi is not None else intervals[-1].end)
        lo = max(hi - length, lo) if lo is not None else hi - length
    lo = min(iv.start for iv in intervals) if lo is None else lo
    hi = max(iv.end for iv in intervals) if hi is None else hi
    chosen = [iv for iv in intervals if iv.start >= lo and iv.end <= hi]
    straddle = [iv for iv in intervals if iv.start < hi and iv.end > lo and iv not in chosen]
    return chosen, straddle


def _window_text(lo: int | None, hi: int | None, last: object) -> str:
    """The window as asked: ``[start, end)``, ``...`` for a bound not given, and the last ``last`` of it."""
    start, end = ("..." if ms is None else _time(ms).isoformat() for ms in (lo, hi))
    text = f"the window [{start}, {end})"
    return f"the last {last} of {text}" if last is not None else text


def _span_text(intervals: list[Interval]) -> str:
    return f"{intervals[0].start_time.isoformat()} to {_time(max(iv.end for iv in intervals)).isoformat()}"


def _parse_object(name: str, interval: Interval) -> tuple[tuple[str, ...], str] | None:
    """``(("pairs", a, b) or ("loads", op), publisher)`` of an object's name; None for a name off the layout."""
    parts = name[len(f"{SKETCHES}/{interval.name}/") :].split("/")
    if not parts[-1].endswith(SUFFIX):
        return None
    publisher = parts[-1][: -len(SUFFIX)]
    what = tuple(parts[:-1])
    shape = (what[:1] == ("pairs",) and len(what) == 3 and what[1] != what[2]) or (
        what[:1] == ("loads",) and len(what) == 2
    )
    if not shape or not all(_NAME.fullmatch(n) for n in (*what[1:], publisher)):
        return None
    return what, publisher


def _merged(objects: Objects, chosen: list[Interval], left_out: tuple[Interval, ...]) -> SketchWindow:
    """Read, check and merge every sketch of the ``chosen`` intervals."""
    found, ignored = _listed(objects, chosen)
    operators = _chain(objects, found)
    reads, first, digest, size = {}, None, hashlib.sha256(), 0
    for what in sorted(found):
        merged = None
        for name, _ in sorted(found[what]):
            data = _read(objects, name)
            sketch, hashes = _decode(objects, name, data, 2 if what[0] == "pairs" else 1)
            first = first or (name, sketch.capacity)
            if sketch.capacity != first[1]:
                raise StoreError(
                    f"the engines' sketches of one window must have one capacity: {objects.where(first[0])} has "
                    f"{first[1]:,} counters, {objects.where(name)} {sketch.capacity:,}; give every publisher "
                    "one capacity (or read a window of one capacity)"
                )
            merged = _absorb(objects, merged, name, sketch, hashes)
            digest.update(f"{name}\0{hashlib.sha256(data).hexdigest()}\n".encode())
            size += len(data)
        reads[what] = merged
    order = [("pairs", a, b) for a, b in zip(operators, operators[1:])] + [("loads", op) for op in operators]
    names = [f"{a}->{b}" for a, b in zip(operators, operators[1:])] + list(operators)
    sketches = [reads[what].sketch for what in order]
    pairs, loads = sketches[: len(operators) - 1], sketches[len(operators) - 1 :]
    return SketchWindow(
        store=objects.location,
        start=chosen[0].start,
        end=max(iv.end for iv in chosen),
        operators=tuple(operators),
        counts=KeyCounts.from_sketches(operators, pairs, loads),
        capacity=first[1],
        error_bound=sketch_error_bounds(operators, pairs, loads),
        apriori_bound={n: s.total_weight / s.capacity for n, s in zip(names, sketches)},
        distinct_keys={n: len(reads[what].keys) for n, what in zip(names, order)},
        publisher_full={n: reads[what].full for n, what in zip(names, order)},
        intervals=tuple(chosen),
        left_out=left_out,
        publishers=tuple(sorted({publisher for listed in found.values() for _, publisher in listed})),
        objects=sum(len(listed) for listed in found.values()),
        bytes=size,
        digest=digest.hexdigest(),
        ignored=tuple(ignored),
    )


def _listed(objects: Objects, chosen: list[Interval]) -> tuple[dict[tuple[str, ...], list[tuple[str, str]]], list]:
    """The sketch objects of the ``chosen`` intervals as ``{("pairs", a, b) or ("loads", op): [(name, publisher)]}``,
    and the names off the layout (ignored, and logged)."""
    found: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    ignored = []
    for interval in chosen:
        for info in objects.list(f"{SKETCHES}/{interval.name}/"):
            parsed = _parse_object(info.name, interval)
            if parsed is None:
                ignored.append(info.name)
            else:
                found.setdefault(parsed[0], []).append((info.name, parsed[1]))
    if ignored:
        logger.warning(
            "%d objects under %s follow no sketch name of the protocol and are ignored, such as %s",
            len(ignored),
            objects.where(SKETCHES + "/"),
            ", ".join(ignored[:_NAMED]),
        )
    return found, ignored


def _read(objects: Objects, name: str) -> bytes:
    blob = read_blob(objects, name, "an engine's sketch")
    if blob is None:  # listed, then gone: a publisher's object is never removed by this protocol
        raise StoreError(f"the engine's sketch {objects.where(name)} was listed but cannot be read: it is gone")
    return blob.data


def _decode(objects: Objects, name: str, data: bytes, arity: int) -> tuple[SpaceSaving, np.ndarray]:
    """The sketch an object holds, and the 64-bit hashes of the keys it monitors: its bytes parsed once."""
    try:
        image = serde.decode(data)
        sketch = SpaceSaving.from_image(image)
    except SerializationError as exc:
        raise damaged("an engine's sketch", objects.where(name), str(exc)) from None
    if sketch.arity != arity:
        kind = "pairs" if arity == 2 else "loads"
        raise damaged(
            "an engine's sketch",
            objects.where(name),
            f"a sketch of {kind} has arity {arity}; this one has arity {sketch.arity}",
        )
    return sketch, _key_hashes(image)


def _key_hashes(image: serde.SketchImage) -> np.ndarray:
    """64-bit hashes of the keys an image holds (its columns as stored: no sort, no Python objects kept)."""
    hashes = np.zeros(len(image.counts), dtype=np.uint64)
    for kind, column in zip(image.kinds, image.columns):
        values = column if kind == INT else column.to_numpy(zero_copy_only=False) if kind == STR else None
        if values is not None:
            hashes = hashes * np.uint64(_HASH_MULTIPLIER) ^ pd.util.hash_array(values)
    return np.unique(hashes)


def _absorb(objects: Objects, merged: _Read | None, name: str, sketch: SpaceSaving, hashes: np.ndarray) -> _Read:
    """``merged`` with ``sketch`` (the object ``name``, its keys' ``hashes``) merged in, its keys added to the union."""
    if merged is None:
        whole = SpaceSaving(sketch.capacity, sketch.arity)
        merged = _Read(whole, name, np.zeros(0, dtype=np.uint64), False)
    try:
        merged.sketch.merge(sketch)
    except InvalidParameterError as exc:  # keys of another type (integers where the others have strings)
        raise StoreError(
            f"the engine's sketch {objects.where(name)} cannot be merged with {objects.where(merged.first)}: {exc}"
        ) from None
    return _Read(merged.sketch, merged.first, np.union1d(merged.keys, hashes), merged.full or sketch.min_count > 0)


def _chain(objects: Objects, found: Mapping[tuple[str, ...], Iterable]) -> list[str]:
    """The operators in chain order, from the hops of the pairs' names; StoreError naming what does not chain."""
    hops = sorted(what[1:] for what in found if what[0] == "pairs")
    loaded = {what[1] for what in found if what[0] == "loads"}
    where = objects.where(SKETCHES + "/")
    if not hops:
        raise StoreError(
            f"the engines' sketches of the window under {where} hold no pairs (sketches/<interval>/pairs/<a>/<b>/): "
            f"a reconfiguration needs the hops between operators; loads of {sorted(loaded)} only"
        )
    after, before = {}, {}
    for a, b in hops:
        for table, key, value, side in ((after, a, b, "sends to"), (before, b, a, "receives from")):
            if key in table:
                raise StoreError(
                    f"the operators of the engines' sketches under {where} do not chain: {key!r} {side} both "
                    f"{table[key]!r} and {value!r} (pairs {sorted(hops)[:_NAMED]}); one operator order is needed"
                )
            table[key] = value
    first = [op for op in after if op not in before]
    if len(first) != 1:
        raise StoreError(
            f"the operators of the engines' sketches under {where} do not chain into one line: the pairs "
            f"{hops[:_NAMED]} " + ("form a cycle" if not first else f"start {len(first)} chains, at {sorted(first)}")
        )
    chain = [first[0]]
    while chain[-1] in after:
        chain.append(after[chain[-1]])
    if len(chain) != len(after) + 1:
        rest = sorted((set(after) | set(before)) - set(chain))
        raise StoreError(
            f"the operators of the engines' sketches under {where} do not chain into one line: {chain} and {rest}"
        )
    missing, extra = sorted(set(chain) - loaded), sorted(loaded - set(chain))
    if missing or extra:
        raise StoreError(
            f"the engines' sketches under {where} chain the operators {chain}, but "
            + (f"no loads of {missing} were published" if missing else f"loads of {extra} are of no hop")
            + " (sketches/<interval>/loads/<op>/): every operator of the chain needs its loads, and only those"
        )
    return chain
