"""Touching the nightly job's input publishes nothing new; changing it does (the fingerprint is the content's)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from locality.cli import ExitCode, main
from locality.store import ConfigStore


def test_a_touched_input_publishes_nothing_and_a_changed_one_publishes(spark, tmp_path, capsys):
    rng = np.random.default_rng(3)
    path = tmp_path / "t.parquet"
    pd.DataFrame(
        {"user": rng.choice([f"u{i}" for i in range(30)], 2_000), "tag": rng.choice(list("abcdefg"), 2_000)}
    ).to_parquet(path)
    args = ["optimize", str(path), "--keys", "user,tag", "--servers", "3", "--store", str(tmp_path / "store"), "-q"]
    assert main(args) == ExitCode.OK
    os.utime(path, ns=(10**18, 10**18))  # touched (a copy with other dates, a restore from backup)
    assert main(args) == ExitCode.OK
    store = ConfigStore(tmp_path / "store")
    assert store.versions() == [1]
    pd.read_parquet(path).iloc[::-1].to_parquet(path)  # the same rows in another order: another file
    assert main(args) == ExitCode.OK
    assert store.versions() == [1, 2] and store.current_version() == 2
    capsys.readouterr()
