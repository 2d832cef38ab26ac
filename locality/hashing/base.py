"""The fallback-hash interface every engine implements, and the registry that builds one by name.

A routing table lists only the keys whose placement was optimised; every other
key goes to its operator's *fallback hash*, the engine's own key -> instance
function reproduced bit for bit. An engine module (``kafka``, ``storm``,
``flink``, ``spark``, ``ring``) subclasses :class:`FallbackHash` with an
``engine`` name, which registers it for :func:`make_fallback` and
:func:`fallback_from_dict`. None of them uses Python's salted ``hash()``, so
every process and every machine computes the same instance.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa

from locality._validation import check_integer, check_option
from locality.errors import InvalidParameterError, SerializationError
from locality.hashing.keys import LONG_RANGE, check_int_key, key_columns, lone_surrogate_error
from locality.hashing.primitives import M64

__all__ = ["FallbackHash", "make_fallback", "fallback_from_dict", "registered_engines"]

_REGISTRY: dict[str, type[FallbackHash]] = {}


def registered_engines() -> tuple[str, ...]:
    """Names of the engines whose modules are loaded, in the order they registered."""
    return tuple(_REGISTRY)


class FallbackHash(abc.ABC):
    """Deterministic key -> instance function of one operator (abstract base).

    Subclasses reproduce one engine's placement. A fallback splits into a key
    hash (``str`` and ``int`` keys, scalar and vectorized) and a placement that
    turns that hash into an instance index in ``0 .. n_instances - 1``. A
    subclass that sets ``engine`` registers itself under that name.

    Parameters
    ----------
    n_instances : int
        Number of instances (partitions, tasks, subtasks) of the operator, >= 1.

    Attributes
    ----------
    engine : str
        Engine name, one of :func:`registered_engines`.
    n_instances : int
        Number of instances.

    Raises
    ------
    InvalidParameterError
        If ``n_instances`` is not an int >= 1 (some engines also cap it).
    """

    engine: ClassVar[str]
    _PARAMETERS: ClassVar[tuple[str, ...]] = ()
    _MAX_INSTANCES: ClassVar[int | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("engine")
        if name is not None:
            known = _REGISTRY.get(name)
            # the same class defined again (a module reloaded, or run as a script) replaces itself
            if known is not None and known.__qualname__ != cls.__qualname__:
                raise TypeError(f"engine {name!r} is registered twice: {known.__qualname__} and {cls.__qualname__}")
            _REGISTRY[name] = cls

    def __init__(self, n_instances: int) -> None:
        self.n_instances = check_integer(
            n_instances, "n_instances", type(self).__name__, lower=1, upper=self._MAX_INSTANCES
        )

    # -- engine hooks ---------------------------------------------------------------------
    @abc.abstractmethod
    def _hash_str(self, key: str) -> int:
        """Key hash of one string (may raise UnicodeEncodeError on lone surrogates)."""

    @abc.abstractmethod
    def _hash_strs(self, keys: pa.LargeStringArray) -> np.ndarray:
        """Key hashes of many strings, as an unsigned numpy array."""

    @abc.abstractmethod
    def _hash_int(self, u: Any) -> Any:
        """Key hash of the 64-bit two's-complement pattern ``u`` (Python int or uint64 array)."""

    @abc.abstractmethod
    def _place(self, h: Any) -> Any:
        """Instance of a key hash (Python int, or int64 array)."""

    def _place_batch(self, h: np.ndarray) -> np.ndarray:
        return self._place(h.astype(np.int64))

    def _int_bounds(self) -> tuple[int, int]:
        return LONG_RANGE

    def _parameters(self) -> dict[str, Any]:
        return {}

    # -- public API -----------------------------------------------------------------------
    def instance_of(self, key: str | int) -> int:
        """Instance index of one key.

        Parameters
        ----------
        key : str or int
            The key. ``int`` (Python or numpy) must fit the engine's Java type
            (``long`` by default).

        Returns
        -------
        int
            Instance index in ``0 .. n_instances - 1``.

        Raises
        ------
        InvalidParameterError
            If ``key`` is of another type (None, float, bytes, bool...), an int out
            of range, or a string with a lone surrogate.
        """
        return int(self._place(self._key_hash(key, f"{type(self).__name__}.instance_of")))

    def _key_hash(self, key: object, owner: str) -> int:
        """Validate one key and return its key hash."""
        if isinstance(key, str):
            try:
                return self._hash_str(key)
            except UnicodeEncodeError:
                raise lone_surrogate_error(key, "key", owner) from None
        return self._hash_int(check_int_key(key, self._int_bounds(), owner) & M64)

    def instances_of(self, keys: Iterable[str | int] | np.ndarray | pd.Series | pa.Array) -> np.ndarray:
        """Instance index of every key, computed with numpy.

        Gives exactly ``[self.instance_of(k) for k in keys]``.

        Parameters
        ----------
        keys : sequence of str and int, numpy array, pandas Series or pyarrow Array
            The keys: str, int or object numpy arrays; string, integer or
            dictionary Arrow arrays (chunked or not); any Series. No nulls.

        Returns
        -------
        numpy.ndarray of int64, shape (len(keys),)
            Instance index of each key.

        Raises
        ------
        InvalidParameterError
            If a key has another type or is null (the message gives its position),
            or an int is out of range.
        """
        owner = f"{type(self).__name__}.instances_of"
        cols = key_columns(keys, owner)
        out = np.empty(cols.n, dtype=np.int64)
        if cols.strings is not None and len(cols.strings):
            rows = slice(None) if cols.string_rows is None else cols.string_rows
            out[rows] = self._place_batch(self._hash_strs(cols.strings))
        if cols.ints is not None and cols.ints.size:
            low, high = self._int_bounds()
            outside = (cols.ints < low) | (cols.ints > high)
            if outside.any():
                i = int(np.argmax(outside))
                position = i if cols.int_rows is None else int(cols.int_rows[i])
                raise InvalidParameterError(
                    f"the 'keys' parameter of {owner} must hold ints >= {low} and <= {high}; "
                    f"got {cols.ints[i]} at position {position}",
                    parameter="keys",
                )
            rows = slice(None) if cols.int_rows is None else cols.int_rows
            out[rows] = self._place_batch(self._hash_int(np.ascontiguousarray(cols.ints).view(np.uint64)))
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description: ``{"engine", "n_instances", "parameters"}``.

        :func:`fallback_from_dict` rebuilds an equal fallback from it.
        """
        return {"engine": self.engine, "n_instances": self.n_instances, "parameters": self._parameters()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FallbackHash):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def __reduce__(self) -> tuple[Any, ...]:
        # what pickle (and Spark shipping a fallback to executors) stores: the description, not the ring
        return (fallback_from_dict, (self.to_dict(),))

    def __repr__(self) -> str:
        args = [f"n_instances={self.n_instances}"] + [f"{k}={v!r}" for k, v in self._parameters().items()]
        return f"{type(self).__name__}({', '.join(args)})"


def make_fallback(engine: str, n_instances: int, **params: Any) -> FallbackHash:
    """Build the fallback hash of an engine by name.

    Parameters
    ----------
    engine : {"kafka", "storm", "flink", "spark", "ring"}
        Engine whose placement to reproduce (see :func:`registered_engines`).
    n_instances : int
        Number of instances of the operator.
    **params
        Engine parameters: ``int_type`` (kafka, storm, flink, spark),
        ``max_parallelism`` (flink), ``virtual_nodes`` (ring).

    Returns
    -------
    FallbackHash
        The fallback.

    Raises
    ------
    InvalidParameterError
        If ``engine`` is unknown, a parameter is not one of that engine's, or a
        value is out of range.

    Examples
    --------
    >>> make_fallback("flink", 6, max_parallelism=128)
    FlinkKeyGroups(n_instances=6, max_parallelism=128, int_type='long')
    """
    cls = _REGISTRY[check_option(engine, "engine", "make_fallback", registered_engines())]
    unknown = sorted(set(params) - set(cls._PARAMETERS))
    if unknown:
        raise InvalidParameterError(
            f"the {unknown[0]!r} parameter of make_fallback is not accepted for engine {engine!r}; "
            f"accepted parameters are {list(cls._PARAMETERS)}"
        )
    return cls(n_instances, **params)


def fallback_from_dict(d: Mapping[str, Any]) -> FallbackHash:
    """Rebuild a fallback from :meth:`FallbackHash.to_dict` output.

    Parameters
    ----------
    d : mapping
        ``{"engine": str, "n_instances": int, "parameters": {...}}``
        (``parameters`` may be left out).

    Returns
    -------
    FallbackHash
        A fallback equal to the one that wrote ``d``.

    Raises
    ------
    SerializationError
        If ``d`` is not a mapping with exactly those fields.
    InvalidParameterError
        If a field has a wrong value (see :func:`make_fallback`).
    """
    fields = {"engine", "n_instances", "parameters"}
    if not isinstance(d, Mapping) or not {"engine", "n_instances"} <= set(d) or not set(d) <= fields:
        got = sorted(d) if isinstance(d, Mapping) else type(d).__name__
        raise SerializationError(
            f"a fallback dict has the fields 'engine', 'n_instances' and optionally 'parameters'; got {got}"
        )
    parameters = d.get("parameters", {})
    if not isinstance(parameters, Mapping):
        raise SerializationError(f"the 'parameters' of a fallback dict must be a mapping; got {parameters!r}")
    return make_fallback(d["engine"], d["n_instances"], **parameters)
