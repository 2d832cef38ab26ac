"""The exceptions locality raises, in one hierarchy.

Every error a user can cause derives from :class:`LocalityError`, so a scheduler
or the CLI can catch "the input was wrong" apart from a bug. Parameter errors
also derive from ``ValueError`` and ``TypeError`` (scikit-learn's convention),
so callers that already catch those keep working.

An error about one parameter says which in :attr:`LocalityError.parameter`, so
that a caller can point at what it passed without reading the message: the
command line names its option from it (``locality.cli``). Messages name
parameters as the library takes them, never by a command-line option.

:class:`JobError` is the exception that is *not* a :class:`LocalityError`: a
job that failed for a reason outside its input (a Spark worker died, memory
ran out). Rerunning the same job may succeed; the CLI reports it with the exit
code of unexpected failures and keeps the traceback in a log file.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "LocalityError",
    "InvalidParameterError",
    "TopologyError",
    "TraceError",
    "SerializationError",
    "StoreError",
    "StoreBusyError",
    "LeaseLostError",
    "StoreUnavailableError",
    "EngineError",
    "StoreDamagedError",
    "JobError",
    "parameters_of",
]


class LocalityError(Exception):
    """Base class of every error caused by the input of a locality function.

    ``parameter`` names the parameter the error is about, when it is about one: its name, or for a field of
    an object the jobs hold under a name, that name and the field's (``rebalance.every``, ``trace.newest``,
    :func:`parameters_of`). None otherwise.
    """

    def __init__(self, *args: object, parameter: str | None = None) -> None:
        super().__init__(*args)
        self.parameter = parameter


@contextmanager
def parameters_of(holder: str) -> Iterator[None]:
    """Inside: an error about a parameter names it as a field of ``holder`` (``every`` becomes ``rebalance.every``).

    For the checks of an object that the jobs and the replay hold under one name (their ``rebalance``
    options, their ``trace``), so that its fields do not pass for parameters of the same name of its holder.
    """
    try:
        yield
    except LocalityError as error:
        if error.parameter is not None:
            error.parameter = f"{holder}.{error.parameter}"
        raise


class InvalidParameterError(LocalityError, ValueError, TypeError):
    """A parameter has a wrong type or a value outside what is allowed.

    The message names the parameter, its owner, what is allowed and what came in.
    """


class TopologyError(LocalityError, ValueError):
    """The servers, operators or instance placement do not describe a valid deployment."""


class TraceError(LocalityError, ValueError):
    """A trace cannot be used: missing or mistyped column, empty, unreadable."""


class SerializationError(LocalityError, ValueError):
    """Bytes or files that should hold a locality object do not."""


class StoreError(LocalityError):
    """The configuration store is missing, damaged, or has no such version."""


class StoreBusyError(StoreError):
    """Another process holds the store's writer lock and did not release it within the timeout.

    The message names the holder (pid, host, command) and since when it holds
    the lock. Retrying later is the remedy, so the CLI gives it an exit code of
    its own (see ``locality.cli.ExitCode``).
    """


class LeaseLostError(StoreBusyError):
    """A writer lost the store's lease while it worked (it stalled past its expiry, another writer took over).

    Its conditional writes are refused from then on, so it published nothing
    that was not already whole; like a busy store, retrying later is the remedy.
    """


class StoreUnavailableError(StoreError):
    """The store could not be reached: its server refused the connection, timed out or answered with an error.

    Nothing was published; what was current stays current. Retrying later is
    the remedy, so the CLI reports it with the exit code of a busy store.
    """


class StoreDamagedError(StoreError, SerializationError):
    """A file of the configuration store is damaged: the message names the file and what is wrong with it.

    A directory where a file belongs (or the reverse), bytes that are not
    UTF-8, JSON cut short or of the wrong shape, a field missing or of the
    wrong type. Both a :class:`StoreError` and a :class:`SerializationError`,
    so handlers of either keep working. ``path`` is the damaged file,
    ``problem`` what is wrong with it.
    """

    def __init__(self, message: str, path: object = None, problem: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.problem = problem if problem is not None else message  # what is wrong, without the file's name


class ScheduleExpiredError(StoreError):
    """A record's point lies past the store's switch schedule, and the schedule was not extended in time.

    Routing it with the version a router happens to hold could disagree with
    another router; the record must wait until the job that extends the
    schedule (``locality reconfigure --switch-after``, ``locality seal``) has run.
    """


class EngineError(LocalityError):
    """A stream engine could not be reached, refused a request, or failed a job it was given.

    The message quotes the engine and says what state the user's job was left in
    (e.g. a Flink job restarted on its previous version after a refused switch).
    """


class JobError(Exception):
    """A job failed for a reason outside its input: a Spark worker died, an executor ran out of memory.

    Nothing was published. The message says what died; rerunning may succeed.
    """
