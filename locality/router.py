"""Serve the current routing tables of a configuration store to a running job, and follow new versions.

A streaming job routes every record through the tables that ``locality optimize``
and ``locality reconfigure`` publish. :class:`Router` opens a
:class:`~locality.store.ConfigStore` read-only, loads the version ``CURRENT``
names into an immutable :class:`RoutingSnapshot` (tables with their lookups,
fallback hashes, topology, migration plan) and answers ``route`` /
``route_many`` / ``server_of`` from it. :meth:`Router.refresh` builds the
snapshot of a newer version completely and then replaces one reference, so a
lookup sees the old version or the new one, never a half-loaded one or a mixture;
a version that cannot be loaded is logged and the old one stays in service. A
background thread can poll ``CURRENT`` (``poll_interval``) and a callback hears
of every change, with the migration plan a job needs to hand state over.

The router never writes into the store and takes no lease on it: the store's
writer publishes a version whole (its manifest last, then ``CURRENT``
replaced), so reading ``CURRENT`` and then that version is consistent without
one (``docs/store-protocol.md``). When the store cannot be read (its server is
down, its link cut), the router keeps serving what it has: the version in
service, and the schedule it knows, which it replaces only by one that extends
it (never by an empty, older or unreadable one).

References
----------
.. [1] Caneill, El Rheddane, Leroy, De Palma. "Locality-aware routing in
   stateful streaming applications." Middleware 2016 (section 3.4: routers
   switch to the new tables, then instances exchange the state of moved keys).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from locality._validation import check_wait
from locality.errors import InvalidParameterError, ScheduleExpiredError, StoreError
from locality.migration import MigrationPlan, plan_migration
from locality.routing import RoutingConfiguration, RoutingTable
from locality.schedule import SwitchSchedule
from locality.store import MIGRATION_PLAN, ConfigStore

__all__ = ["Router", "RoutingSnapshot", "load_snapshot"]

logger = logging.getLogger(__name__)

#: The shortest ``poll_interval`` (seconds) a Router takes.
MIN_POLL_INTERVAL = 0.001

#: A batch of keys: the containers :meth:`RoutingTable.route_many` takes.
KeyBatch = Iterable[str | int] | np.ndarray | pd.Series | pa.Array

#: Versions a router keeps loaded for routing by point (older ones are loaded again for a late record).
_HELD_VERSIONS = 8


@dataclass(frozen=True, eq=False)
class RoutingSnapshot:
    """One version of the store, loaded whole; every answer of one snapshot comes from that version.

    Attributes
    ----------
    version : int
        The store version.
    configuration : RoutingConfiguration
        Tables (lookups built), fallback hashes, topology and parameters.
    migration_plan : MigrationPlan or None
        The plan published with this version (online versions): the keys that
        moved from the version before it, with their state. None for versions
        published without one (``locality optimize``).
    manifest : dict
        The version's manifest (created, job, fingerprint, summary...).
    """

    version: int
    configuration: RoutingConfiguration
    migration_plan: MigrationPlan | None
    manifest: Mapping[str, Any]

    @property
    def operators(self) -> tuple[str, ...]:
        """Operators in pipeline order."""
        return tuple(self.configuration.topology.operators)

    def table(self, operator: str) -> RoutingTable:
        """The routing table of ``operator`` (immutable; safe to keep and share between threads).

        Raises
        ------
        InvalidParameterError
            If the version has no such operator.
        """
        try:
            return self.configuration.tables[operator]
        except (KeyError, TypeError):
            raise InvalidParameterError(
                f"the 'operator' parameter must be one of {list(self.operators)} (version {self.version}); "
                f"got {operator!r}",
                parameter="operator",
            ) from None

    def route(self, operator: str, key: str | int, server: int | str | None = None) -> int:
        """Instance of ``key`` at ``operator``: its split plan's for ``server``, its entry, else the fallback hash.

        ``server`` (a position or a name) is the server of the tuple's
        neighbouring key: for a router inside an instance, its own server.
        """
        self.table(operator)  # names the operator when it is unknown
        return self.configuration.route(operator, key, server)

    def route_many(self, operator: str, keys: KeyBatch, servers: np.ndarray | None = None) -> np.ndarray:
        """Instances of a batch of keys at ``operator`` (see :meth:`RoutingTable.route_many`)."""
        return self.table(operator).route_many(keys, servers)

    def server_of(self, operator: str, key: str | int) -> str:
        """Server of the instance ``key`` goes to at ``operator``."""
        return self.configuration.topology.server_of(operator, self.route(operator, key))

    def plan_from(self, previous: RoutingSnapshot) -> MigrationPlan:
        """The keys whose instance changes from ``previous`` to this version, per operator.

        The plan published with this version when it was made for exactly this
        step (it carries each key's state size); otherwise (versions skipped, a
        roll-back) the plan computed from the two versions' tables, with state
        sizes unknown (0).

        Across a change of topology (servers added or removed) the plan's
        ``from_topology`` is the previous version's and an instance is the same
        in both when it has the same index on the same server. The fallback
        hash then changes too (``plan.rehashed``): a plan computed from the
        tables lists only the keys they name, while keys outside them move
        where the two hashes disagree; a job holding such a key's state finds
        out with ``previous.route_many(op, keys)`` and ``route_many(op, keys)``.

        Raises
        ------
        InvalidParameterError
            If the two versions route different operators.
        """
        plan = self.migration_plan
        if plan is not None and plan.from_version == previous.version:
            return plan
        return plan_migration(
            previous.configuration, self.configuration, {}, from_version=previous.version, to_version=self.version
        )


def load_snapshot(store: ConfigStore, version: int) -> RoutingSnapshot:
    """Load one version of ``store`` whole: tables, lookups, fallbacks, migration plan.

    Raises
    ------
    StoreError
        If the version is missing or any part of it cannot be read (the message
        names the version and, through the cause, the file).
    """
    try:
        stored = store.get(version)
        configuration = stored.config
        for table in configuration.tables.values():
            table.warm()  # before the version serves: its first lookups must not build them
        plan = None
        if MIGRATION_PLAN in stored.manifest.get("files", ()):
            plan = MigrationPlan.from_dict(stored.read_json(MIGRATION_PLAN))
        return RoutingSnapshot(version, configuration, plan, dict(stored.manifest))
    except Exception as exc:  # any damage (JSON, Parquet, missing files, bad fields) makes the version unusable
        raise StoreError(f"cannot load version {version} of the store {store.location}: {exc}") from exc


class Router:
    """The current routing tables of a configuration store, for a running job.

    Parameters
    ----------
    store : ConfigStore, str or path
        The store ``locality optimize`` / ``reconfigure`` publish into. It is
        only read.
    poll_interval : float, optional
        Seconds between two looks at ``CURRENT`` by a background (daemon)
        thread that calls :meth:`refresh`. None (default): no thread; call
        :meth:`refresh` yourself. Stop the thread with :meth:`close` or by
        using the router as a context manager.
    on_change : callable, optional
        Called as ``on_change(old, new)`` with the two :class:`RoutingSnapshot`
        after every swap, on the thread that refreshed; ``new.plan_from(old)``
        lists the keys whose state must move. An exception it raises is logged
        and does not undo the swap.

    Raises
    ------
    StoreError
        If the store has no current version or it cannot be loaded.
    InvalidParameterError
        If ``poll_interval`` is not a number of seconds from 0.001 to
        ``threading.TIMEOUT_MAX``, or ``on_change`` is not callable.

    Notes
    -----
    Lookups read one reference (the current snapshot) and take no lock.
    :meth:`refresh` loads the new version completely before replacing that
    reference, so every single call answers from one version. Two calls may
    straddle a refresh: work that must see one version across several calls
    or operators takes :meth:`snapshot` once and asks it.

    Refresh policy: a version that cannot be loaded (damaged, half-copied,
    removed) never replaces the one in service. :meth:`refresh` logs the error
    (once per version), keeps serving, records it in :attr:`last_error` and
    returns False; ``refresh(strict=True)`` raises it instead. The next
    refresh tries again, so a version repaired in place is picked up. The
    router follows ``CURRENT`` wherever it points, including back to an older
    version (a roll-back).

    Routing by point (:meth:`at`, :meth:`route_at`, :meth:`route_many_at`)
    follows the store's :class:`~locality.schedule.SwitchSchedule` instead of
    ``CURRENT``: each record goes by the version in force at its point (its
    event time, say), so every router of a job routes it the same way, whenever
    it sees the schedule change. A point past the schedule's seal waits for the
    publisher to extend it (``schedule_wait``), never guesses.

    Examples
    --------
    >>> with Router("/data/locality-store", poll_interval=5.0) as router:  # doctest: +SKIP
    ...     router.route_many("hashtag", batch["hashtag"])
    ...     router.route_many_at("hashtag", batch["hashtag"], batch["ts_ms"])  # by the schedule
    """

    def __init__(
        self,
        store: ConfigStore | str | os.PathLike,
        *,
        poll_interval: float | None = None,
        on_change: Callable[[RoutingSnapshot, RoutingSnapshot], Any] | None = None,
        schedule_wait: float = 30.0,
    ) -> None:
        if poll_interval is not None:
            # Seconds: from a millisecond (a thread re-reading CURRENT faster only burns a core) to the longest wait
            # a thread event accepts (beyond it the thread would die at its first wait, and the router never follow).
            poll_interval = check_wait(poll_interval, "poll_interval", "Router", lower=MIN_POLL_INTERVAL)
        self.schedule_wait = check_wait(schedule_wait, "schedule_wait", "Router", lower=0)
        if on_change is not None and not callable(on_change):
            raise InvalidParameterError(
                f"the 'on_change' parameter of Router must be callable; got {on_change!r}", parameter="on_change"
            )
        self.store = store if isinstance(store, ConfigStore) else ConfigStore(store)
        self.on_change = on_change
        #: Why the last refresh could not load the version ``CURRENT`` names (None after a good one).
        self.last_error: StoreError | None = None
        self._reported: int | str | None = None  # the unloadable version (or error) already logged at ERROR
        self._refreshing = threading.RLock()  # one refresh at a time; lookups never take it
        version = self.store.current_version()
        if version is None:
            raise StoreError(f"the store {self.store.location} has no published version yet")
        self._snapshot = load_snapshot(self.store, version)
        self._schedule: SwitchSchedule | None = None  # read on the first lookup by point
        self._schedule_error: str | None = None  # why the last read of the schedule was not taken (logged once)
        self._held: dict[int, RoutingSnapshot] = {version: self._snapshot}  # versions loaded for lookups by point
        logger.info("router on %s: serving version %d", self.store.location, version)
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        if poll_interval is not None:
            self._watcher = threading.Thread(
                target=self._watch, args=(poll_interval,), name=f"locality-router-{self.store.location}", daemon=True
            )
            self._watcher.start()

    # ------------------------------------------------------------------ lookups
    def snapshot(self) -> RoutingSnapshot:
        """The version in service, as one immutable object (for work spanning several calls or operators)."""
        return self._snapshot

    @property
    def version(self) -> int:
        """The store version in service."""
        return self._snapshot.version

    @property
    def migration_plan(self) -> MigrationPlan | None:
        """The migration plan published with the version in service (None if it has none)."""
        return self._snapshot.migration_plan

    @property
    def schedule(self) -> SwitchSchedule | None:
        """The store's schedule as this router last took it (None before the first lookup by point).

        Only a schedule that extends it replaces it: an outage or a damaged ``SCHEDULE`` leaves it as it was.
        """
        return self._schedule

    def table(self, operator: str) -> RoutingTable:
        """The current routing table of ``operator`` (see :meth:`RoutingSnapshot.table`)."""
        return self._snapshot.table(operator)

    def route(self, operator: str, key: str | int, server: int | str | None = None) -> int:
        """Instance of ``key`` at ``operator`` in the version in service (see :meth:`RoutingSnapshot.route`)."""
        return self._snapshot.route(operator, key, server)

    def route_many(self, operator: str, keys: KeyBatch, servers: np.ndarray | None = None) -> np.ndarray:
        """Instances of a batch of keys at ``operator``, all from one version.

        Parameters
        ----------
        operator : str
        keys : sequence of str and int, numpy array, pandas Series or pyarrow Array
        servers : array of int, optional
            Per key, the position of its neighbouring key's server (read by split keys only).

        Returns
        -------
        numpy.ndarray of int64, shape (len(keys),)
        """
        return self._snapshot.table(operator).route_many(keys, servers)

    def server_of(self, operator: str, key: str | int) -> str:
        """Server of the instance ``key`` goes to at ``operator``."""
        return self._snapshot.server_of(operator, key)

    # ------------------------------------------------------------------ routing by point (the switch schedule)
    def at(self, point: int) -> RoutingSnapshot:
        """The version in force at ``point`` by the store's switch schedule: the same one in every router.

        Raises
        ------
        ScheduleExpiredError
            If ``point`` lies past the schedule's seal and the seal did not move
            past it within ``schedule_wait`` seconds.
        StoreError
            If that version cannot be loaded (the record must not go elsewhere).
        """
        return self._held_version(self._schedule_covering(int(point)).version_at(int(point)))

    def route_at(self, operator: str, key: str | int, point: int, server: int | str | None = None) -> int:
        """Instance of ``key`` at ``operator`` in the version in force at ``point`` (see :meth:`at`)."""
        return self.at(point).route(operator, key, server)

    def route_many_at(
        self, operator: str, keys: KeyBatch, points: np.ndarray, servers: np.ndarray | None = None
    ) -> np.ndarray:
        """Instances of a batch of keys, each in the version in force at its point (see :meth:`at`).

        Parameters
        ----------
        operator : str
        keys : sequence of str and int, numpy array, pandas Series or pyarrow Array
        points : array of int
            Per key, its record's point (e.g. event time in ms).
        servers : array of int, optional
            Per key, the position of its neighbouring key's server (read by split keys only).
        """
        points = np.asarray(points, dtype=np.int64)
        keys = keys if isinstance(keys, (np.ndarray, pd.Series, pa.Array, pa.ChunkedArray)) else list(keys)
        if len(points) != len(keys):
            raise InvalidParameterError(f"route_many_at needs a point per key; got {len(points)} for {len(keys)} keys")
        if not len(points):
            return np.empty(0, dtype=np.int64)
        versions = self._schedule_covering(int(points.max())).versions_at(points)
        out = np.empty(len(points), dtype=np.int64)
        for version in np.unique(versions):
            rows = np.flatnonzero(versions == version)
            some = _take(keys, rows) if len(rows) < len(points) else keys
            part = servers[rows] if servers is not None else None
            out[rows] = self._held_version(int(version)).route_many(operator, some, part)
        return out

    def _schedule_covering(self, point: int) -> SwitchSchedule:
        """The store's schedule once it settles ``point``: read again, and waited for, past its seal."""
        schedule = self._schedule
        if schedule is not None and schedule.covers(point):
            return schedule
        deadline = time.monotonic() + self.schedule_wait
        pause = 0.01
        while True:
            schedule = self._read_schedule()
            if schedule.covers(point):
                return schedule
            left = deadline - time.monotonic()
            if left <= 0:
                raise ScheduleExpiredError(
                    f"the switch schedule of {self.store.location} is sealed until {schedule.sealed_until}, and a "
                    f"record at {point} waited {self.schedule_wait:g} s for it to move: is the job that extends it "
                    f"late (the online job with a switch lead, or a seal of the store)?"
                )
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.5)

    def _read_schedule(self) -> SwitchSchedule:
        """The store's schedule now, if it extends the one known; else the one known (logged once)."""
        known = self._schedule
        try:
            read = self.store.schedule()
        except StoreError as exc:
            if known is None:
                raise
            self._schedule_failed(f"keeps the schedule it knows (sealed until {known.sealed_until}): {exc}")
            return known
        if known is not None and not read.extends(known):
            self._schedule_failed(
                f"keeps the schedule it knows (sealed until {known.sealed_until}): the store's schedule does not "
                f"extend it (sealed until {read.sealed_until}, {len(read.versions)} entries)"
            )
            return known
        self._schedule, self._schedule_error = read, None
        return read

    def _schedule_failed(self, message: str) -> None:
        level = logging.WARNING if message != self._schedule_error else logging.DEBUG
        logger.log(level, "router on %s %s", self.store.location, message)
        self._schedule_error = message

    def _held_version(self, version: int) -> RoutingSnapshot:
        """The snapshot of ``version``, loaded once and kept among the last few used."""
        held = self._held.get(version)
        if held is not None:
            return held
        with self._refreshing:
            held = self._held.get(version)
            if held is None:
                held = load_snapshot(self.store, version)
                kept = {v: s for v, s in list(self._held.items())[-(_HELD_VERSIONS - 1) :]}
                self._held = {**kept, version: held}  # one reference swap: lookups never see it half-built
        return held

    # ------------------------------------------------------------------ following the store
    def refresh(self, *, strict: bool = False) -> bool:
        """Serve the version ``CURRENT`` names now, if it is another one and loads whole.

        Parameters
        ----------
        strict : bool, default False
            Raise instead of returning False when that version cannot be loaded.

        Returns
        -------
        bool
            True if the router swapped to another version; False if ``CURRENT``
            still names the version in service, or names one that cannot be
            loaded (the old version stays in service; :attr:`last_error` says why).

        Raises
        ------
        StoreError
            With ``strict=True``, if the version cannot be loaded.
        """
        with self._refreshing:
            old, version = self._snapshot, None
            try:
                version = self.store.current_version()
                if version is None:
                    raise StoreError(f"the store {self.store.location} has no CURRENT version any more")
                if version == old.version:
                    self.last_error, self._reported = None, None
                    return False
                new = load_snapshot(self.store, version)
            except StoreError as exc:
                return self._failed(version, exc, strict)
            except OSError as exc:  # CURRENT unreadable (permissions, a directory...)
                error = StoreError(f"cannot read {self.store.location}: {exc}")
                error.__cause__ = exc
                return self._failed(version, error, strict)
            self._snapshot = new  # the swap: one reference, to a snapshot built completely above
            self.last_error, self._reported = None, None
            logger.info("router on %s: version %d -> %d", self.store.location, old.version, new.version)
            if self.on_change is not None:
                try:
                    self.on_change(old, new)
                except Exception:
                    logger.exception(
                        "the router's on_change callback failed for version %d -> %d", old.version, version
                    )
            return True

    def _failed(self, version: int | None, error: StoreError, strict: bool) -> bool:
        """Keep the version in service; record, log (at ERROR level once per version) or raise why."""
        self.last_error = error
        what = version if version is not None else str(error)
        level = logging.ERROR if what != self._reported else logging.DEBUG
        logger.log(level, "router keeps serving version %d: %s", self._snapshot.version, error)
        self._reported = what
        if strict:
            raise error
        return False

    def _watch(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.refresh()
                if self._schedule is not None:  # keep the schedule fresh too, so lookups by point rarely wait
                    self._read_schedule()
            except Exception:  # the watch must outlive any surprise; refresh() already logs store errors
                logger.exception("router on %s: refresh failed", self.store.location)

    def close(self) -> None:
        """Stop the background thread, if any (lookups keep working on the last version)."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()
            self._watcher = None

    def __enter__(self) -> Router:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        watching = "watching" if self._watcher is not None else "not watching"
        return f"Router({str(self.store.location)!r}, version={self.version}, {watching})"


def _take(keys: KeyBatch, rows: np.ndarray) -> KeyBatch:
    """The keys at positions ``rows`` of a batch, in the batch's own container."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        return keys.take(pa.array(rows))
    if isinstance(keys, pd.Series):
        return keys.iloc[rows]
    if isinstance(keys, np.ndarray):
        return keys[rows]
    return [keys[i] for i in rows]
