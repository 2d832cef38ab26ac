"""When each version of a store is in force: one schedule every router reads, so that all switch at the same point.

The problem: a job has many upstream instances, each with its own
:class:`~locality.router.Router`. If each one switches to a new version when it
happens to notice ``CURRENT`` moved, then for a while two of them route the same
key to different instances, and the key's state splits in two. The core paper
(Caneill et al. [1]_, section 3.4) has a manager push new tables to the routers
and propagate the switch in pipeline order; here there is no manager. Instead,
a version is published *for a point*: every record carries a point that every
instance agrees on (its event time in milliseconds by default; any integer the
engine gives every record the same way, such as a micro-batch id, will do), and
each record is routed with the version in force at its point, whichever router
routes it and whenever it does.

That is deterministic only if no router ever routes a point before learning of
every version in force at that point. So the schedule is *sealed* up to a
point: ``sealed_until`` promises that no version will ever be scheduled before
it. A router routes a record whose point lies below the seal from what it
knows; at or past the seal it reads the schedule again and, if the publisher
has not extended it yet, waits (a bounded time) instead of guessing. Publishers
only schedule versions at or past the seal, and move it forward on every run
(the online job seals one switch lead ahead each time, even when it publishes
nothing), so routers wait only when the job that extends the schedule is late.

The schedule lives in the store as ``SCHEDULE`` (one JSON document, replaced
whole by the lease holder, conditionally on its ETag): ``entries`` (``version``,
``from``) in increasing order of ``from``, ``sealed_until``, and the token of the
writer that wrote it (``docs/store-protocol.md``). The first scheduled
publication also records the version in force before it, from the beginning of
time, so every point has a version. Versions are immutable, so a router that
dropped an old version can always load it again for a late record.

References
----------
.. [1] Caneill, El Rheddane, Leroy, De Palma. "Locality-aware routing in
   stateful streaming applications." Middleware 2016 (section 3.4).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np

from locality.errors import InvalidParameterError, SerializationError, StoreDamagedError

__all__ = ["SwitchSchedule", "SCHEDULE_FILE", "BEGINNING", "point_of"]

SCHEDULE_FILE = "SCHEDULE"

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

#: The point before every other: where the version in force when scheduling began starts.
BEGINNING = -(2**63)


def point_of(moment: datetime) -> int:
    """The default point of an instant (aware, as :func:`locality.time_range.parse_time` gives): epoch milliseconds.

    Integer arithmetic, floor to the millisecond: a float timestamp times 1000 can land a hair below a whole
    millisecond and be truncated to the one before.
    """
    return (moment - _EPOCH) // timedelta(milliseconds=1)


@dataclass(frozen=True)
class SwitchSchedule:
    """Which version is in force from which point, and up to which point that is settled.

    Parameters
    ----------
    starts : tuple of int
        Increasing points; ``versions[i]`` is in force from ``starts[i]`` until ``starts[i + 1]``.
    versions : tuple of int
        The store version of each entry.
    sealed_until : int
        No entry will ever start before this point: every point below it has its final version.
    """

    starts: tuple[int, ...] = ()
    versions: tuple[int, ...] = ()
    sealed_until: int = BEGINNING
    _starts: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.starts) != len(self.versions):
            raise SerializationError("a schedule needs as many starts as versions")
        if any(b <= a for a, b in zip(self.starts, self.starts[1:])):
            raise SerializationError(f"the starts of a schedule must increase; got {list(self.starts)}")
        object.__setattr__(self, "_starts", np.asarray(self.starts, dtype=np.int64))

    # ------------------------------------------------------------------ questions
    def covers(self, point: int) -> bool:
        """True when ``point``'s version is settled (it lies below the seal)."""
        return point < self.sealed_until

    def version_at(self, point: int) -> int:
        """The version in force at ``point``.

        Raises
        ------
        InvalidParameterError
            If the schedule has no entry yet.
        """
        if not self.versions:
            raise InvalidParameterError("the store has no schedule yet: publish a version for a point first")
        return self.versions[max(bisect.bisect_right(self.starts, point) - 1, 0)]

    def versions_at(self, points: np.ndarray) -> np.ndarray:
        """The version in force at every point of an int64 array (vectorized :meth:`version_at`)."""
        if not self.versions:
            raise InvalidParameterError("the store has no schedule yet: publish a version for a point first")
        index = np.maximum(np.searchsorted(self._starts, points, side="right") - 1, 0)
        return np.asarray(self.versions, dtype=np.int64)[index]

    def extends(self, known: SwitchSchedule) -> bool:
        """Whether this schedule may replace ``known`` in a router: the same past, a seal no earlier.

        Every entry ``known`` settled (from before its seal) is here too, and the seal
        did not move back: a schedule read from a store restored from an old backup,
        or emptied, is not taken.
        """
        settled = [(s, v) for s, v in zip(known.starts, known.versions) if s < known.sealed_until]
        mine = list(zip(self.starts, self.versions))
        return self.sealed_until >= known.sealed_until and mine[: len(settled)] == settled

    # ------------------------------------------------------------------ changes (the store makes them under its lease)
    def scheduled(self, version: int, start: int, in_force: int | None) -> SwitchSchedule:
        """This schedule with ``version`` in force from ``start`` (and the seal moved up to it).

        ``in_force`` is the version in force before (the store's current one);
        on an empty schedule it becomes the first entry, from the beginning.

        Raises
        ------
        InvalidParameterError
            If ``start`` lies before the seal: some router may already have
            routed that point with the version in force.
        """
        start = _check_point(start, "in_force_from")
        if start < self.sealed_until:
            raise InvalidParameterError(
                f"the 'in_force_from' point {start} lies before the schedule's seal {self.sealed_until}: routers may "
                f"already have routed records there; schedule the version at or after {self.sealed_until}"
            )
        starts, versions = list(self.starts), list(self.versions)
        if not versions and in_force is not None and in_force != version:
            starts, versions = [BEGINNING], [in_force]
        if starts and starts[-1] == start:  # two versions for one point: the later publication wins
            starts.pop(), versions.pop()
        return SwitchSchedule((*starts, start), (*versions, version), max(self.sealed_until, start))

    def sealed(self, until: int, in_force: int | None) -> SwitchSchedule:
        """This schedule with its seal moved forward to ``until`` (a seal never moves back).

        On an empty schedule, ``in_force`` (the store's current version) becomes
        the first entry, from the beginning: sealing is how a store starts a schedule.
        """
        until = _check_point(until, "until")
        if not self.versions and in_force is not None:
            return SwitchSchedule((BEGINNING,), (in_force,), until)
        return SwitchSchedule(self.starts, self.versions, max(self.sealed_until, until))

    # ------------------------------------------------------------------ file
    def to_dict(self) -> dict:
        return {
            "entries": [{"version": v, "from": s} for s, v in zip(self.starts, self.versions)],
            "sealed_until": self.sealed_until,
        }

    @classmethod
    def from_dict(cls, doc: Mapping) -> SwitchSchedule:
        try:
            entries = doc["entries"]
            starts = tuple(_check_point(e["from"], "from") for e in entries)
            versions = tuple(int(e["version"]) for e in entries)
            return cls(starts, versions, _check_point(doc["sealed_until"], "sealed_until"))
        except (KeyError, TypeError, ValueError) as exc:
            raise SerializationError(f"not a switch schedule: {exc!r}") from None

    @classmethod
    def from_document(cls, doc: object, where: str) -> SwitchSchedule:
        """The schedule in the store's ``SCHEDULE`` document ``doc`` (read from ``where``).

        Raises
        ------
        StoreDamagedError
            ``doc`` is not a schedule; the message names ``where``.
        """
        try:
            if not isinstance(doc, Mapping):
                raise SerializationError(f"it holds a JSON {type(doc).__name__}, not an object")
            return cls.from_dict(doc)
        except (SerializationError, InvalidParameterError) as exc:
            raise StoreDamagedError(f"the store's schedule {where} is damaged: {exc}", where, str(exc)) from None


def _check_point(point: object, name: str) -> int:
    if isinstance(point, bool) or not isinstance(point, (int, np.integer)) or not BEGINNING <= point < 2**63:
        raise InvalidParameterError(
            f"the '{name}' point must be a 64-bit integer (e.g. event time in ms); got {point!r}"
        )
    return int(point)
