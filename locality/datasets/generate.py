"""Write a generated trace as Parquet, the same bytes for the same parameters: ``locality generate``.

Each benchmark, test or notebook that runs on a generated trace names its
parameters as a recipe of the trace's card (``datasets/catalog.toml``);
:func:`generate` rebuilds the trace from a recipe, with any parameter
overridden. The generators are seeded and draw everything from one
``numpy.random.Generator``, and the file is written in one pass by pyarrow with
fixed options (no index, snappy, default row groups), so the same parameters
give the same file, byte for byte, with the same pyarrow (whose version is in
the file's footer). The file is written aside and renamed over ``out``: a
failure leaves no half-written file.
"""

from __future__ import annotations

import inspect
import io
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from locality._durable import replace_file
from locality.datasets.skew import skew_workload
from locality.datasets.synthetic import twitter_like, zipf_pairs
from locality.errors import InvalidParameterError

__all__ = ["GENERATORS", "generate_frame", "generate", "parse_parameter", "parquet_bytes", "skew_workload_frame"]

logger = logging.getLogger(__name__)


def skew_workload_frame(**parameters) -> pd.DataFrame:
    """:func:`~locality.datasets.skew.skew_workload` as a table: one row per (interval, key).

    Columns ``interval``, ``key`` (int64), ``cost`` and ``state_size`` (float64,
    the workload's ``costs`` and ``state_sizes``) and ``fallback`` (the key's
    fallback instance, int64).
    """
    w = skew_workload(**parameters)
    return pd.DataFrame(
        {
            "interval": np.repeat(np.arange(w.n_intervals, dtype=np.int64), w.n_keys),
            "key": np.tile(np.arange(w.n_keys, dtype=np.int64), w.n_intervals),
            "cost": w.costs.ravel(),
            "state_size": w.state_sizes.ravel(),
            "fallback": np.tile(w.fallback.astype(np.int64), w.n_intervals),
        }
    )


#: Generator name (a card's ``generator``) -> function of keyword parameters returning the trace.
GENERATORS: dict[str, Callable[..., pd.DataFrame]] = {
    "twitter_like": twitter_like,
    "zipf_pairs": zipf_pairs,
    "skew_workload": skew_workload_frame,
}


def generate_frame(generator: str, parameters: Mapping[str, object]) -> pd.DataFrame:
    """Run ``generator`` with ``parameters`` (checked against its signature).

    Raises
    ------
    InvalidParameterError
        An unknown generator or parameter (the message lists the valid ones), or
        a value the generator rejects.
    """
    if generator not in GENERATORS:
        raise InvalidParameterError(f"no generator {generator!r}; generators: {', '.join(GENERATORS)}")
    function = skew_workload if generator == "skew_workload" else GENERATORS[generator]  # the frame's parameters
    accepted = [p for p in inspect.signature(function).parameters if p != "fallback"]  # an array: not a parameter
    unknown = sorted(set(parameters) - set(accepted))
    if unknown:
        raise InvalidParameterError(
            f"{generator} has no parameter {', '.join(map(repr, unknown))}; parameters: {', '.join(accepted)}"
        )
    return GENERATORS[generator](**parameters)


def parse_parameter(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` from the command line, VALUE read as TOML (``10``, ``1.5``, ``true``), else kept as text."""
    from locality.datasets.catalog import tomllib

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise InvalidParameterError(f"a generator parameter is written KEY=VALUE; got {text!r}", parameter="overrides")
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value
    # a number, a boolean or a quoted string; anything else TOML reads (a date, a list) stays text
    return key.strip(), parsed if isinstance(parsed, (bool, int, float, str)) else value


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    """``frame`` as one Parquet file (no index, snappy): the same frame gives the same bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer, compression="snappy")
    return buffer.getvalue()


def generate(
    name: str, out: str | os.PathLike, *, recipe: str | None = None, overrides: Mapping[str, object] | None = None
) -> tuple[Path, dict]:
    """Write the generated trace of card ``name`` to ``out`` (Parquet); returns the path and the parameters used.

    Parameters
    ----------
    name : str
        A generated card of ``datasets/catalog.toml`` (``twitter_like``, ``zipf_pairs``, ``skew_workload``).
    out : path
        The Parquet file to write (replaced all at once if it exists; parents created).
    recipe : str, optional
        The card's recipe to start from (default: its first one).
    overrides : mapping, optional
        Parameters that replace the recipe's (or add to them).

    Raises
    ------
    InvalidParameterError
        An unknown card, a shared card, an unknown recipe or parameter, or a value out of range.
    """
    from locality.datasets.catalog import card

    entry = card(name)
    parameters = {**entry.recipe(recipe), **(overrides or {})}
    frame = generate_frame(entry.generator, parameters)
    path = replace_file(Path(out), parquet_bytes(frame))
    logger.info("generate: wrote %d rows of %s%s to %s", len(frame), name, parameters, path)
    return path, parameters
