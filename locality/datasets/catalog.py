"""The dataset cards of ``datasets/``: find a trace by its card's name and load it with its columns named.

Every trace the project is judged on has a card in the repository's top-level
``datasets/`` folder: a ``README.md`` for people and one table of
``datasets/catalog.toml`` for programs, which writes down once where the trace
is, its key columns in operator order, its timestamp, order and weight columns.
Tests, benchmarks and notebooks ask this module instead of repeating paths and
column lists.

Two kinds of card:

- **shared** (``file`` and ``sha256``): a real trace kept outside the
  repository, under the shared data folder (``../shared/data`` beside the
  checkout, or ``$LOCALITY_SHARED_DATA``); :func:`verify` checks its checksum;
- **generated** (``generator`` and ``recipes``): a seeded generator of
  :mod:`locality.datasets` with the parameters of each benchmark, test or
  notebook that uses it (:mod:`locality.datasets.generate` writes it).

The catalog is found at ``datasets/`` of the checkout this package is imported
from, or at ``$LOCALITY_DATASETS``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pandas as pd

from locality.errors import InvalidParameterError, TraceError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["DatasetCard", "Trace", "datasets_dir", "shared_data_dir", "catalog", "card", "load", "verify"]

_REPO = Path(__file__).resolve().parents[2]


def datasets_dir() -> Path:
    """The folder of the cards: ``$LOCALITY_DATASETS``, else ``datasets/`` of this checkout."""
    return Path(os.environ.get("LOCALITY_DATASETS", _REPO / "datasets"))


def shared_data_dir() -> Path:
    """The folder of the shared traces: ``$LOCALITY_SHARED_DATA``, else ``../shared/data`` beside the checkout."""
    return Path(os.environ.get("LOCALITY_SHARED_DATA", _REPO.parent / "shared" / "data"))


@dataclass(frozen=True)
class DatasetCard:
    """What ``datasets/catalog.toml`` says about one trace.

    Attributes
    ----------
    name : str
        The card's name, also its folder under ``datasets/``.
    keys : list of str
        Key columns in operator order (one stateful operator per key).
    ts, order, weight : str or None
        Timestamp column, arrival-order column, and the column a tuple counts for
        (``None``: every tuple counts 1).
    stands_for : str
        The workload the trace stands for.
    file, sha256 : str or None
        A shared trace's Parquet file (relative to :func:`shared_data_dir`) and its checksum.
    generator : str or None
        A generated trace's generator (a name of :data:`locality.datasets.generate.GENERATORS`).
    recipes : mapping of str -> mapping
        A generated trace's named parameter sets, each with ``used_by`` (who uses it).
    """

    name: str
    keys: list[str]
    stands_for: str
    ts: str | None = None
    order: str | None = None
    weight: str | None = None
    file: str | None = None
    sha256: str | None = None
    generator: str | None = None
    recipes: Mapping[str, Mapping] = field(default_factory=dict)

    @property
    def shared(self) -> bool:
        return self.file is not None

    @property
    def path(self) -> Path:
        """The Parquet file of a shared trace (which may be missing: see :func:`verify`)."""
        if not self.shared:
            raise InvalidParameterError(f"the dataset {self.name!r} is generated: write it with `locality generate`")
        return shared_data_dir() / self.file

    @property
    def readme(self) -> Path:
        return datasets_dir() / self.name / "README.md"

    def recipe(self, name: str | None = None) -> dict:
        """A generated trace's parameters for recipe ``name`` (default: its first recipe), without ``used_by``."""
        if self.shared:
            raise InvalidParameterError(f"the dataset {self.name!r} is a shared trace: it has no recipe")
        name = next(iter(self.recipes)) if name is None else name
        if name not in self.recipes:
            raise InvalidParameterError(
                f"the dataset {self.name!r} has no recipe {name!r}; recipes: {', '.join(self.recipes)}"
            )
        return {k: v for k, v in self.recipes[name].items() if k != "used_by"}


_FIELDS = {"keys", "stands_for", "ts", "order", "weight", "file", "sha256", "generator", "recipes"}


@lru_cache(maxsize=4)
def _read_catalog(path: Path) -> dict[str, DatasetCard]:
    if not path.is_file():
        raise TraceError(f"no dataset catalog at {path} (set LOCALITY_DATASETS to the datasets/ folder)")
    with open(path, "rb") as fh:
        tables = tomllib.load(fh)
    cards = {}
    for name, table in tables.items():
        unknown = set(table) - _FIELDS
        if unknown or "keys" not in table or ("file" in table) == ("generator" in table):
            raise TraceError(
                f"the card {name!r} of {path} needs keys and exactly one of file/generator"
                + (f"; unknown fields: {sorted(unknown)}" if unknown else "")
            )
        keys = table["keys"]
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k for k in keys):
            raise TraceError(f"the card {name!r} of {path}: keys must be a list of column names; got {keys!r}")
        cards[name] = DatasetCard(name=name, **{"stands_for": "", **table})
    return cards


def catalog() -> dict[str, DatasetCard]:
    """Every card of ``datasets/catalog.toml``, by name, in the file's order."""
    return dict(_read_catalog(datasets_dir() / "catalog.toml"))


def card(name: str) -> DatasetCard:
    """The card called ``name``.

    Raises
    ------
    InvalidParameterError
        No card has that name (the message lists the names).
    """
    cards = catalog()
    if name not in cards:
        raise InvalidParameterError(f"no dataset card {name!r}; cards: {', '.join(cards)}")
    return cards[name]


def verify(name: str) -> str:
    """Check a shared trace against its card: the file exists and its sha256 is the card's; returns the digest.

    Raises
    ------
    TraceError
        The file is missing or its checksum differs.
    """
    entry = card(name)
    path = entry.path
    if not path.is_file():
        raise TraceError(f"the shared trace {path} of card {name!r} is missing (set LOCALITY_SHARED_DATA)")
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != entry.sha256:
        raise TraceError(f"{path} has sha256 {digest.hexdigest()}, its card {name!r} says {entry.sha256}")
    return entry.sha256


@dataclass(frozen=True)
class Trace:
    """A loaded trace with its columns named: what a card (or a caller) says each column is for.

    Attributes
    ----------
    name : str
        The card's name, or the file's stem for a trace given by path.
    frame : pandas.DataFrame
        The key columns (then ``ts``, ``order``, ``weight`` when set), sorted by ``order`` (else ``ts``).
    keys : list of str
        Key columns in operator order.
    ts, order, weight : str or None
    source : str
        Where the rows come from: a file path, or ``generator(parameters)``.
    """

    name: str
    frame: pd.DataFrame
    keys: list[str]
    ts: str | None
    order: str | None
    weight: str | None
    source: str


def load(
    source: str | os.PathLike,
    keys: Sequence[str] | None = None,
    *,
    ts: str | None = None,
    order: str | None = None,
    weight: str | None = None,
    start: str | pd.Timestamp | None = None,
    end: str | pd.Timestamp | None = None,
    recipe: str | None = None,
) -> Trace:
    """Load a trace by its card's name (or by path) with its keys, timestamp, order and weight named.

    Parameters
    ----------
    source : str or path
        A card's name (``locality datasets`` lists them), or the path of a
        Parquet file or directory or a CSV file (then ``keys`` is required).
    keys : list of str, optional
        Key columns in operator order; default: the card's. Another chain of the
        same trace's columns (e.g. ``["hashtag", "country"]``) is allowed.
    ts, order, weight : str, optional
        Override the card's columns (a path has none unless given).
    start, end : str or Timestamp, optional
        Keep rows with ``start <= ts < end`` (needs a timestamp column).
    recipe : str, optional
        A generated card's recipe (default: its first one); the trace is generated in memory.

    Returns
    -------
    Trace

    Raises
    ------
    InvalidParameterError
        ``source`` is neither a card's name nor an existing path, or a path without ``keys``.
    TraceError
        A shared trace is missing, a column is missing, or no row is left (see
        :func:`locality.analysis.load_trace`, which reads every file).
    """
    from locality.analysis import load_trace

    name = str(source)
    cards = catalog()
    if name in cards:
        entry = cards[name]
        keys = list(entry.keys if keys is None else keys)
        ts, order, weight = ts or entry.ts, order or entry.order, weight or entry.weight
        if entry.shared:
            if not entry.path.is_file():
                raise TraceError(f"the shared trace {entry.path} of card {name!r} is missing (LOCALITY_SHARED_DATA)")
            frame = load_trace(entry.path, keys, ts=ts, order=order, start=start, end=end, extra=[weight])
            return Trace(name, frame, keys, ts, order, weight, str(entry.path))
        from locality.datasets.generate import generate_frame

        parameters = entry.recipe(recipe)
        generated = generate_frame(entry.generator, parameters)
        frame = load_trace(generated, keys, ts=ts, order=order, start=start, end=end, extra=[weight])
        text = ", ".join(f"{k}={v!r}" for k, v in parameters.items())
        return Trace(name, frame, keys, ts, order, weight, f"{entry.generator}({text})")
    path = Path(source).expanduser()
    if not path.exists():
        raise InvalidParameterError(
            f"the trace {name!r} is neither a dataset card ({', '.join(cards)}) nor an existing path"
        )
    if keys is None:
        raise InvalidParameterError(f"the trace {path} has no card: give its key columns (keys)")
    keys = list(keys)
    frame = load_trace(path, keys, ts=ts, order=order, start=start, end=end, extra=[weight])
    return Trace(path.stem, frame, keys, ts, order, weight, str(path))
