"""Seeded generators of traces with locality, Zipf skew and drift.

- :func:`twitter_like` : (location, hashtag) tuples over days; each hashtag is
  tweeted mostly from a few "home" locations, which drift from week to week,
  and new hashtags burst in. The embedded default trace of ``locality demo``.
- :func:`zipf_pairs` : two correlated integer (or string) keys with Zipf skew,
  at any size (the 10M-row benchmark trace of feasibility.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from locality._validation import check_integer, check_interval, check_random_state

__all__ = ["twitter_like", "zipf_pairs", "zipf_weights"]


def zipf_weights(n: int, s: float) -> np.ndarray:
    """Probabilities of ranks ``1..n`` under a Zipf law of exponent ``s`` (sums to 1)."""
    w = 1.0 / np.arange(1, n + 1, dtype=float) ** s
    return w / w.sum()


def twitter_like(
    n_rows: int = 200_000,
    *,
    n_locations: int = 500,
    n_hashtags: int = 20_000,
    days: int = 28,
    home_locations: int = 3,
    locality: float = 0.8,
    drift: float = 0.3,
    skew: float = 1.1,
    start: str = "2015-06-01",
    seed: int = 0,
) -> pd.DataFrame:
    """A timed (location, hashtag) trace whose correlations drift week to week.

    Parameters
    ----------
    n_rows : int
        Tuples in the trace, spread evenly over ``days``.
    n_locations, n_hashtags : int
        Key domains (Zipf popularity with exponent ``skew``; locations 0.8 x ``skew``).
    days : int
        Length of the trace; ``ts`` is uniform within each day.
    home_locations : int
        Locations a hashtag is mostly tweeted from.
    locality : float in [0, 1]
        Share of a hashtag's tuples that come from its home locations (the rest
        follow the global location popularity).
    drift : float in [0, 1]
        Share of hashtags that move to new home locations each week; as many
        hashtags swap popularity ranks each week (bursts and fades).
    skew : float
        Zipf exponent of hashtag popularity.
    start : str
        First day (UTC).
    seed : int

    Returns
    -------
    pandas.DataFrame
        Columns ``ts`` (UTC timestamps, sorted), ``location``, ``hashtag`` (strings).
    """
    owner = "twitter_like"
    n_rows = check_integer(n_rows, "n_rows", owner, lower=1)
    n_locations = check_integer(n_locations, "n_locations", owner, lower=1)
    n_hashtags = check_integer(n_hashtags, "n_hashtags", owner, lower=1)
    days = check_integer(days, "days", owner, lower=1)
    home_locations = check_integer(home_locations, "home_locations", owner, lower=1, upper=n_locations)
    locality = check_interval(locality, "locality", owner, lower=0.0, upper=1.0)
    drift = check_interval(drift, "drift", owner, lower=0.0, upper=1.0)
    skew = check_interval(skew, "skew", owner, lower=0.0)
    rng = check_random_state(seed, "seed", owner)

    location_p = zipf_weights(n_locations, 0.8 * skew)
    popularity = zipf_weights(n_hashtags, skew)
    rank_of = rng.permutation(n_hashtags)  # hashtag -> popularity rank
    homes = rng.choice(n_locations, size=(n_hashtags, home_locations), p=location_p)
    per_day = np.full(days, n_rows // days)
    per_day[: n_rows % days] += 1

    ts_parts, loc_parts, tag_parts = [], [], []
    day0 = pd.Timestamp(start, tz="UTC")
    for day in range(days):
        if day and day % 7 == 0:
            moved = rng.random(n_hashtags) < drift
            homes[moved] = rng.choice(n_locations, size=(int(moved.sum()), home_locations), p=location_p)
            n_swaps = int(drift * n_hashtags / 2)
            a, b = rng.integers(0, n_hashtags, n_swaps), rng.integers(0, n_hashtags, n_swaps)
            rank_of[a], rank_of[b] = rank_of[b], rank_of[a].copy()
        n = int(per_day[day])
        tags = rng.choice(n_hashtags, size=n, p=popularity[rank_of] / popularity[rank_of].sum())
        local = rng.random(n) < locality
        locs = rng.choice(n_locations, size=n, p=location_p)
        locs[local] = homes[tags[local], rng.integers(0, home_locations, int(local.sum()))]
        seconds = np.sort(rng.integers(0, 86_400, n))
        ts_parts.append(day0 + pd.Timedelta(days=day) + pd.to_timedelta(seconds, unit="s"))
        loc_parts.append(locs)
        tag_parts.append(tags)
    return pd.DataFrame(
        {
            "ts": np.concatenate([np.asarray(t) for t in ts_parts]),
            "location": pd.Series(np.concatenate(loc_parts)).map(lambda i: f"loc{i:04d}").to_numpy(dtype=object),
            "hashtag": pd.Series(np.concatenate(tag_parts)).map(lambda i: f"tag{i:06d}").to_numpy(dtype=object),
        }
    ).assign(ts=lambda d: pd.to_datetime(d["ts"], utc=True).astype("datetime64[us, UTC]"))  # Spark reads no ns


def zipf_pairs(
    n_rows: int,
    *,
    n_left: int = 100_000,
    n_right: int = 1_000_000,
    left_skew: float = 1.1,
    offset_skew: float = 1.3,
    n_offsets: int = 1_000,
    strings: bool = False,
    seed: int = 42,
) -> pd.DataFrame:
    """Two correlated Zipf keys: ``k1`` Zipf over ``n_left`` ids, ``k2 = (10 k1 + offset) mod n_right``.

    ``offset`` is Zipf(``offset_skew``) over ``n_offsets`` values, so each
    ``k1`` mostly travels with a few ``k2``. With ``strings`` the keys are
    ``u<id>`` / ``item<id>`` strings instead of int64.
    """
    owner = "zipf_pairs"
    n_rows = check_integer(n_rows, "n_rows", owner, lower=1)
    rng = check_random_state(seed, "seed", owner)
    ids = rng.permutation(n_left)
    k1 = ids[rng.choice(n_left, size=n_rows, p=zipf_weights(n_left, left_skew))]
    offsets = rng.choice(n_offsets, size=n_rows, p=zipf_weights(n_offsets, offset_skew))
    k2 = (k1.astype(np.int64) * 10 + offsets) % n_right
    if strings:
        return pd.DataFrame({"k1": np.char.add("u", k1.astype(str)), "k2": np.char.add("item", k2.astype(str))})
    return pd.DataFrame({"k1": k1.astype(np.int64), "k2": k2.astype(np.int64)})
