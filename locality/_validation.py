"""Parameter checks shared by every public function.

Public functions validate their arguments once, at the boundary, with these
helpers; private ``_helpers`` assume clean input. A public function that
others call (``optimize`` inside ``reconfigure``, inside the online job) is
marked :func:`boundary`: called from another such function, or from a job
whose parameters were checked when they were built, it trusts its arguments
(:func:`outermost` is False), as scikit-learn's nested validation does
(``prefer_skip_nested_validation``); each boundary checks everything the
functions it calls would. Every message has the same
shape: ``the 'alpha' parameter of partition_key_graph must be a float >= 1; got 0.9``.

Numbers are checked for finiteness as well as range: NaN never passes, and
an infinity passes only where the interval names it as a bound (``upper=math.inf``:
"no limit" is then a meaning the caller gave it). A value that passes is
usable all the way down: an infinite alpha or a timeout beyond what a thread
lock accepts would otherwise fail deep inside, after Spark ran.
"""

from __future__ import annotations

import contextvars
import functools
import math
import numbers
import os
import stat
import threading
import uuid
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset

from locality.errors import InvalidParameterError, TraceError

__all__ = [
    "MAX_WAIT_SECONDS",
    "WAIT_LIMIT",
    "check_interval",
    "check_integer",
    "check_at_most",
    "check_wait",
    "check_option",
    "check_duration",
    "check_period",
    "check_columns",
    "check_random_state",
    "check_output_path",
    "boundary",
    "outermost",
]

#: How many :func:`boundary` functions are running in this context (a thread, a task) right now.
_BOUNDARIES = contextvars.ContextVar("locality_boundaries", default=0)


#: The longest wait (seconds) Python's locks and events accept (``threading.TIMEOUT_MAX``, ~292 years on Linux).
MAX_WAIT_SECONDS = float(threading.TIMEOUT_MAX)
WAIT_LIMIT = "the longest wait a thread lock accepts"


def _describe(lower: float | None, upper: float | None, closed: str) -> str:
    left = ">=" if closed in ("both", "left") else ">"
    right = "<=" if closed in ("both", "right") else "<"
    parts = []
    if lower is not None:
        parts.append(f"{left} {lower}")
    if upper is not None:
        parts.append(f"{right} {upper}")
    return " and ".join(parts)


def _inside(value: float, lower: float | None, upper: float | None, closed: str) -> bool:
    if lower is not None:
        if value < lower or (value == lower and closed in ("neither", "right")):
            return False
    if upper is not None:
        if value > upper or (value == upper and closed in ("neither", "left")):
            return False
    return True


def check_interval(
    value: object,
    name: str,
    owner: str,
    *,
    lower: float | None = None,
    upper: float | None = None,
    closed: str = "both",
) -> float:
    """Return ``value`` as a float if it is a finite real number inside the interval.

    ``closed`` says which ends belong to the interval: ``"both"``, ``"left"``,
    ``"right"`` or ``"neither"``. NaN is always rejected; an infinity only
    passes when it is a closed bound of the interval (``upper=math.inf``).
    """
    bound = _describe(lower, upper, closed)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or np.isnan(value):
        raise InvalidParameterError(
            f"the {name!r} parameter of {owner} must be a float {bound}; got {value!r}".replace(" ;", ";"),
            parameter=name,
        )
    number = float(value)
    if math.isinf(number) and number not in (lower, upper):
        raise InvalidParameterError(
            f"the {name!r} parameter of {owner} must be a finite float {bound}; got {value!r}".replace(" ;", ";"),
            parameter=name,
        )
    if not _inside(number, lower, upper, closed):
        raise InvalidParameterError(
            f"the {name!r} parameter of {owner} must be a float {bound}; got {value!r}", parameter=name
        )
    return number


def check_integer(
    value: object,
    name: str,
    owner: str,
    *,
    lower: int | None = None,
    upper: int | None = None,
) -> int:
    """Return ``value`` as an int if it is an integer within ``[lower, upper]``."""
    bound = _describe(lower, upper, "both")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidParameterError(
            f"the {name!r} parameter of {owner} must be an int {bound}; got {value!r}", parameter=name
        )
    if not _inside(int(value), lower, upper, "both"):
        raise InvalidParameterError(
            f"the {name!r} parameter of {owner} must be an int {bound}; got {value!r}", parameter=name
        )
    return int(value)


def check_at_most(value: float, limit: float, name: str, owner: str, why: str) -> float:
    """Return ``value`` unless it exceeds ``limit``, what the code beneath can hold (``why`` says what holds it).

    Kept apart from the range checks: a range is what the parameter means,
    this is how far the implementation goes, and its message says why.
    """
    if value > limit:
        raise InvalidParameterError(
            f"the {name!r} parameter of {owner} must be at most {limit:,} ({why}); got {value!r}",
            parameter=name,
        )
    return value


def check_wait(value: object, name: str, owner: str, *, lower: float = 0.0) -> float:
    """Return ``value`` as a float if it is a wait in seconds from ``lower`` up to what a thread lock accepts."""
    return check_at_most(check_interval(value, name, owner, lower=lower), MAX_WAIT_SECONDS, name, owner, WAIT_LIMIT)


def check_option(value: object, name: str, owner: str, options: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``options`` (strings)."""
    allowed = sorted(options)
    if not isinstance(value, str) or value not in allowed:
        raise InvalidParameterError(
            f"the {name!r} parameter of {owner} must be one of {allowed}; got {value!r}", parameter=name
        )
    return value


def check_duration(value: object, name: str, owner: str) -> pd.Timedelta:
    """Return ``value`` (a pandas offset such as ``"6h"`` or ``"1D"``) as a positive ``Timedelta``."""
    try:
        duration = pd.Timedelta(value)
    except (TypeError, ValueError):
        duration = None
    if duration is None or duration is pd.NaT or duration <= pd.Timedelta(0):
        raise InvalidParameterError(
            f"the {name!r} parameter of {owner} must be a positive duration such as '6h' or '1D'; got {value!r}",
            parameter=name,
        )
    return duration


def check_period(value: object, name: str, owner: str) -> pd.Timedelta | pd.DateOffset:
    """Return a window length: a positive ``Timedelta`` (``"7D"``, ``"12h"``) or a calendar period.

    Calendar periods are named by their first day, as pandas does: ``"YS"``
    (years), ``"QS"`` (quarters), ``"MS"`` (months), with a multiple
    (``"2YS"``) or an anchor (``"QS-FEB"``); they come back as a ``DateOffset``.
    A year is not a fixed length (leap years), so ``"365D"`` would drift off
    the calendar.
    """
    try:
        return check_duration(value, name, owner)
    except InvalidParameterError:
        pass
    try:
        with warnings.catch_warnings():  # pandas warns on deprecated aliases ('M', 'Y') refused below anyway
            warnings.simplefilter("ignore", FutureWarning)
            offset = to_offset(value)
    except (TypeError, ValueError):
        offset = None
    if not isinstance(offset, _CALENDAR_PERIODS) or offset.n < 1:
        raise InvalidParameterError(
            f"the {name!r} parameter of {owner} must be a positive duration such as '7D' or '12h', or a calendar "
            f"period 'YS', 'QS' or 'MS' (years, quarters, months); got {value!r}",
            parameter=name,
        )
    return offset


#: Calendar periods a window may last: each starts on its first day.
_CALENDAR_PERIODS = (pd.offsets.YearBegin, pd.offsets.QuarterBegin, pd.offsets.MonthBegin)


def check_columns(present: Sequence[str], required: Iterable[str | None], what: str) -> None:
    """Raise :class:`TraceError` naming every required column missing from ``present``.

    ``None`` entries in ``required`` (optional columns left unset) are ignored.
    """
    missing = [c for c in required if c is not None and c not in present]
    if missing:
        names = ", ".join(repr(c) for c in missing)
        raise TraceError(f"{what} has no column {names}; the columns present are {list(present)}")


def check_random_state(seed: object, name: str = "seed", owner: str = "locality") -> np.random.Generator:
    """Turn an int seed (or an existing Generator) into a ``numpy.random.Generator``.

    ``None`` is refused on purpose: every random choice in locality is seeded.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InvalidParameterError(
            f"the {name!r} parameter of {owner} must be an int >= 0 or a numpy Generator; got {seed!r}",
            parameter=name,
        )
    return np.random.default_rng(int(seed))


def check_output_path(path: str | os.PathLike, option: str, *, directory: bool = False) -> Path:
    """Return ``path`` if a file (or with ``directory``, a directory) can be written there; checked before any work.

    The path may not exist yet (it, and missing parents, are created when
    written); what exists must be of the right kind, and the nearest existing
    directory must accept a new file, tried for real (a mode says nothing on a
    read-only mount or to root). A file is written whole and renamed into place,
    so only a regular file is ever replaced: a symbolic link (whose target the
    user may not mean), a device or a FIFO is refused, and so is any path inside
    a configuration store (its files are written by the store's protocol only).
    ``option`` names the path in messages.

    Raises
    ------
    InvalidParameterError
        A directory where a file goes or the reverse, a link, device or FIFO, a path
        inside a store, a parent that is a file, or a directory that refuses new files.
    """
    target = Path(path)
    kind = "directory" if directory else "file"
    if target.is_symlink():
        raise InvalidParameterError(
            f"the output {kind} {target} ({option}) is a symbolic link to {os.readlink(target)}; give the path itself"
        )
    if target.exists() and target.is_dir() != directory:
        raise InvalidParameterError(
            f"the output {kind} {target} ({option}) is a {'file' if directory else 'directory'}; give a {kind} path"
        )
    if target.exists() and not directory and not target.is_file():
        raise InvalidParameterError(
            f"the output file {target} ({option}) is {_special_kind(target)}, not a regular file; give a file path"
        )
    store = _store_holding(target)
    if store is not None:
        raise InvalidParameterError(
            f"the output {kind} {target} ({option}) is inside the configuration store {store}; write it elsewhere"
        )
    existing = target if target.is_dir() else target.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise InvalidParameterError(f"the output {kind} {target} ({option}) cannot be created: {existing} is a file")
    probe = existing / f".probe-{uuid.uuid4().hex}"
    try:
        probe.touch(exist_ok=False)
        probe.unlink()
    except OSError as exc:
        raise InvalidParameterError(
            f"the output {kind} {target} ({option}) cannot be written: {existing}: {exc.strerror}"
        ) from None
    return target


def _special_kind(path: Path) -> str:
    mode = path.stat().st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file"


def _store_holding(path: Path) -> Path | None:
    """The local configuration store ``path`` lies in (or is), if any: a directory with ``CURRENT`` or ``LEASE``."""
    from locality.store import is_store_directory

    for folder in [path, *path.absolute().parents]:
        if folder.is_dir() and is_store_directory(folder):
            return folder
    return None


def boundary(func: Callable) -> Callable:
    """Decorator: ``func`` checks its parameters unless another boundary up the call stack checked them already.

    Inside ``func``, :func:`outermost` says whether to check. A boundary
    checks every parameter it passes on, so that the functions it calls may
    trust them.
    """

    @functools.wraps(func)
    def call(*args, **kwargs):
        token = _BOUNDARIES.set(_BOUNDARIES.get() + 1)
        try:
            return func(*args, **kwargs)
        finally:
            _BOUNDARIES.reset(token)

    return call


def outermost() -> bool:
    """In a :func:`boundary` function: True when no boundary called it, so that it must check its parameters."""
    return _BOUNDARIES.get() <= 1
