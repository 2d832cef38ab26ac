"""Why a Spark job failed: its input, or what ran it (a worker that died, the JVM, memory, the network).

A scheduler acts on the exit code: bad input (2) is not retried, a crash (70) is. Spark reports both
alike, as a ``Py4JJavaError`` (or PySpark's captured exception) around the first failure that reached
the driver, and one Java class can mean either: an ``EOFException`` is a truncated Parquet file when
the Parquet reader threw it, and a killed Python worker when Spark's Python runner did. So the verdict
rests on the cause chain, each cause's class hierarchy and where it was thrown, not on the text of the
first line:

- a crash, when any cause is a JVM ``Error`` (``OutOfMemoryError``...) or Spark's out-of-memory error,
  an I/O failure thrown by Spark's Python runner (the worker's socket broke: it died), a network failure
  (``java.net``: the trace's server did not answer), or a task failure Spark reports only in words
  (an executor lost, a Python worker that exited, a cancelled job);
- bad input, when a cause names the input: Spark's analysis (a path, a column), a missing file, the
  Parquet reader, a record or value Spark could not parse, or an error our own code raised in a
  Python worker about the trace;
- a crash otherwise: a failure that shows nothing wrong with the input is not reported as bad input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CRASH_WORDS", "Cause", "causes_of", "crash_reason", "input_failure", "python_error"]

#: How deep the cause chain is followed, and how many frames of each cause are looked at.
_MAX_DEPTH = 16
_MAX_FRAMES = 64

_JVM_ERRORS = ("java.lang.Error", "org.apache.spark.memory.SparkOutOfMemoryError")
#: Where Spark's side of a Python worker's socket lives: an I/O failure thrown there is a worker that died.
_PYTHON_RUNNER = "org.apache.spark.api.python."
#: Task failures Spark reports only in words (no exception object reaches the driver).
CRASH_WORDS = (
    "Python worker exited unexpectedly",
    "Python worker failed to connect back",
    "OutOfMemoryError",
    "ExecutorLostFailure",
    "Executor heartbeat timed out",
    "SparkContext was shut down",
    "cancelled because",
)
_INPUT_CLASSES = (
    "org.apache.spark.sql.AnalysisException",
    "java.io.FileNotFoundException",
    "org.apache.parquet.io.ParquetDecodingException",
    "org.apache.parquet.io.InvalidRecordException",
    "org.apache.spark.sql.execution.datasources.SchemaColumnConvertNotSupportedException",
    "java.lang.NumberFormatException",
    "java.time.format.DateTimeParseException",
    "java.nio.charset.CharacterCodingException",
)
#: Spark's error classes (``SparkThrowable``) that name a record, a value or a file of the input.
_INPUT_ERROR_CLASSES = re.compile(
    r"^(FAILED_READ_FILE|MALFORMED_|CANNOT_PARSE|CAST_INVALID_INPUT|PATH_NOT_FOUND|UNABLE_TO_INFER_SCHEMA"
    r"|INVALID_|DATATYPE_MISMATCH|CANNOT_READ|PARSE_)"
)
_INPUT_WORDS = ("is not a Parquet file", "Malformed records", "expected magic number")
#: What a Python worker raised about the trace: our own TraceError, or a decoder's or parser's complaint.
_PYTHON_INPUT_ERRORS = re.compile(r"^([\w.]*\.)?(TraceError|UnicodeDecodeError|JSONDecodeError|ValueError)\b")
_PYTHON_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")
_CLASS_PREFIX = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception): ")


@dataclass(frozen=True)
class Cause:
    """One exception of a Java cause chain: its class and superclasses, message, error class, and frames."""

    classes: tuple[str, ...]
    message: str
    error_class: str
    frames: tuple[str, ...]

    def is_a(self, *names: str) -> bool:
        return any(name in self.classes for name in names)


def causes_of(exc: BaseException) -> list[Cause]:
    """The Java cause chain behind a PySpark failure, outermost first (empty when no Java exception is at hand)."""
    throwable = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    chain: list[Cause] = []
    while throwable is not None and len(chain) < _MAX_DEPTH:
        chain.append(_cause(throwable))
        following = throwable.getCause()
        throwable = None if following is None or following.equals(throwable) else following
    return chain


def _cause(throwable) -> Cause:
    classes = []
    java_class = throwable.getClass()
    while java_class is not None:
        classes.append(str(java_class.getName()))
        java_class = java_class.getSuperclass()
    trace = throwable.getStackTrace()
    frames = tuple(f"{trace[i].getClassName()}.{trace[i].getMethodName()}" for i in range(min(len(trace), _MAX_FRAMES)))
    return Cause(tuple(classes), str(throwable.getMessage() or ""), _error_class(throwable), frames)


def _error_class(throwable) -> str:
    """The Spark error class (``FAILED_READ_FILE.NO_HINT``...) of a ``SparkThrowable``; "" for other exceptions."""
    from py4j.protocol import Py4JError

    try:
        return str(throwable.getCondition() or "")
    except Py4JError:  # not a SparkThrowable: it has no such method
        return ""


def crash_reason(exc: BaseException) -> str | None:
    """What died or failed outside the input, in one line; None when the failure is about the input.

    ``exc`` is what PySpark raised (``Py4JJavaError``, or a ``PySparkException``).
    """
    chain = causes_of(exc)
    text = "\n".join(c.message for c in chain) if chain else str(exc)
    for cause in chain:
        if cause.is_a(*_JVM_ERRORS):
            return f"the JVM failed: {_short(cause)}"
        if cause.is_a("java.io.IOException") and any(f.startswith(_PYTHON_RUNNER) for f in cause.frames):
            return f"Python worker exited unexpectedly (its connection broke: {_short(cause)})"
        if cause.is_a("java.net.SocketException", "java.net.UnknownHostException", "java.net.SocketTimeoutException"):
            return f"the network failed: {_short(cause)}"
    words = next((line.strip() for line in text.splitlines() if any(w in line for w in CRASH_WORDS)), None)
    if words is not None:
        return _from_words(words)
    if not chain:  # no Java exception to look into: words of Python's alone
        if "EOFException" in text and _PYTHON_RUNNER in text:
            return "Python worker exited unexpectedly (its connection broke: java.io.EOFException)"
        return None
    raised = python_error(text)
    if raised is not None:  # a Python worker raised: about the trace, or a failure of its own
        return None if _PYTHON_INPUT_ERRORS.match(raised) else f"a Python worker failed: {raised[:300]}"
    if any(_names_the_input(cause) for cause in chain):
        return None
    return f"Spark failed: {_short(chain[-1])}"


def input_failure(exc: BaseException) -> str:
    """What a failure about the input says, in one line: what a Python worker raised, else the first line;
    without the exception's class name."""
    java = getattr(exc, "java_exception", None)  # a Py4JJavaError's own str() adds py4j's preamble
    text = str(java if java is not None else exc)
    first = python_error(text) or next((line.strip() for line in text.splitlines() if line.strip()), text)
    return _CLASS_PREFIX.sub("", first)


def _names_the_input(cause: Cause) -> bool:
    return (
        cause.is_a(*_INPUT_CLASSES)
        or bool(_INPUT_ERROR_CLASSES.match(cause.error_class))
        or any(words in cause.message for words in _INPUT_WORDS)
    )


def python_error(text: str) -> str | None:
    """The last ``SomeError: message`` line a Python worker raised, as Spark quotes it; None when none did."""
    if "exception was thrown from the Python worker" not in text and "Traceback (most recent call last)" not in text:
        return None
    raised = [line.strip() for line in text.splitlines() if _PYTHON_LINE.match(line.strip())]
    return raised[-1] if raised else None


def _short(cause: Cause) -> str:
    first = cause.message.strip().splitlines()[0] if cause.message.strip() else ""
    return f"{cause.classes[0]}: {first[:300]}" if first else cause.classes[0]


def _from_words(line: str) -> str:
    """``org.apache.spark.SparkException: Python worker exited ...`` -> ``Python worker exited ...``."""
    for words in CRASH_WORDS:
        if words in line:
            return line[line.index(words) :][:300]
    return line[:300]
