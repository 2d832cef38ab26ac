"""Rebalancing runs that balance a whole balance window: what each instance served, plus what is ahead."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from locality.cli import ExitCode, main
from locality.evaluation import evaluate
from locality.rebalance.options import RebalanceOptions
from locality.store import ConfigStore
from pipelines.online import run
from pipelines.params import OnlineParams
from pipelines.trace import TraceSpec
from tests.spark.test_online_job import ira_week, window_rows

SINCE, UNTIL = "2016-09-12T00:00:00+00:00", "2016-09-19T00:00:00+00:00"
LOCAL = dict(rebalance=RebalanceOptions("local", theta_max=0.05, state_weight=3.0))
WEEK = dict(balance_since=SINCE, balance_until=UNTIL, **LOCAL)


def spec(path, keys, start, end) -> TraceSpec:
    return TraceSpec(path, keys, ts="ts", start=pd.Timestamp(start).isoformat(), end=pd.Timestamp(end).isoformat())


def killed(self, version):
    raise OSError("killed between the rename and the pointer")


def projected(served: dict, config, rows: pd.DataFrame, ahead: float) -> dict[str, float]:
    """Each operator's imbalance over the balance window: what was served plus ``rows`` scaled to what is ahead."""
    loads = evaluate(rows, config).optimized.instance_loads
    totals = {op: np.asarray(done) + ahead * np.asarray(loads[op]) for op, done in served.items()}
    return {op: float(total.max() / total.mean()) for op, total in totals.items()}


def test_each_instance_s_served_load_is_counted_once_as_routed_and_balanced_with_what_is_ahead(
    spark, tmp_path, monkeypatch
):
    """Three runs into one balance window on the IRA tweets, the tables of the week before in force at first.

    The second run is killed while publishing first, then run again, as a scheduler's retry would.
    """
    path, keys = ira_week(spark, tmp_path, "2016-09-05", "2016-09-12")
    store = ConfigStore(tmp_path)
    ticks = [pd.Timestamp(t, tz="UTC") for t in ("2016-09-12T12:00", "2016-09-13T00:00", "2016-09-13T12:00")]
    expected = None
    counted_to = pd.Timestamp(SINCE)
    for tick in ticks:
        # what the instances served since the last run, through the tables that were in force
        version = store.current_version()
        in_force = store.get(version).config
        served = evaluate(window_rows(spec(path, keys, counted_to, tick)), in_force).optimized.instance_loads
        expected = {op: np.asarray(v) + (0 if expected is None else expected[op]) for op, v in served.items()}
        window = spec(path, keys, tick - pd.Timedelta("1D"), tick)
        if tick == ticks[1]:
            monkeypatch.setattr(ConfigStore, "_point_current", killed)
            with pytest.raises(OSError):
                run(spark, OnlineParams(trace=window, store=str(tmp_path), **WEEK))
            monkeypatch.undo()
            assert store.current_version() == version  # the killed run left the tables in force as they were
        outcome = run(spark, OnlineParams(trace=window, store=str(tmp_path), **WEEK))
        assert pd.Timestamp(outcome["served"]["until"]) == tick and outcome["served"]["balance_until"] == UNTIL
        for op in keys:
            np.testing.assert_allclose(outcome["served"]["loads"][op], expected[op])
        counted_to = tick
    assert outcome["published"] and outcome["moved_keys"] > 0
    # a rerun of the window counts nothing twice
    stored = json.loads(next((tmp_path / "balance").glob("*.json")).read_text())
    again = run(spark, OnlineParams(trace=window, store=str(tmp_path), **WEEK))
    assert again["rerun"] and json.loads(next((tmp_path / "balance").glob("*.json")).read_text()) == stored
    # the last run balanced the week as a whole: served so far + the window's loads scaled to the rest of the
    # week, better than the tables it replaced and than the same run blind to what was served
    rows = window_rows(window)
    ahead = (pd.Timestamp(UNTIL) - ticks[-1]) / pd.Timedelta("1D")
    before = store.get(outcome["previous_version"]).config
    after = store.get(outcome["version"]).config
    blind_root = tmp_path.parent / "blind"
    shutil.copytree(tmp_path, blind_root, ignore=shutil.ignore_patterns("balance", "decisions"))
    blind = run(spark, OnlineParams(trace=window, store=str(blind_root), horizon=f"{ahead}D", **LOCAL))
    blind_tables = ConfigStore(blind_root).get(blind["version"]).config
    balanced = projected(expected, after, rows, ahead)
    assert max(balanced.values()) < max(projected(expected, before, rows, ahead).values())
    unaware = projected(expected, blind_tables, rows, ahead)
    assert all(balanced[op] <= unaware[op] + 1e-9 for op in keys) and any(balanced[op] < unaware[op] for op in keys)


def test_balance_window_options_are_checked_before_spark(tmp_path, capsys):
    """Each option that cannot be used is named (exit 2), before any Spark work."""
    args = [
        "reconfigure",
        "unused.parquet",
        "--keys",
        "user,hashtag",
        "--ts",
        "ts",
        "--quiet",
        "--store",
        str(tmp_path),
    ]
    window = ["--start", "2016-09-12T12:00", "--end", "2016-09-13T12:00"]
    cases = [
        (["--rebalance", "local", "--balance-since", SINCE], "'balance_since' and 'balance_until'"),
        (["--rebalance", "mixed", "--balance-since", SINCE, "--balance-until", UNTIL], "locality-aware rebalancer"),
        (["--rebalance", "local", "--balance-since", SINCE, "--balance-until", UNTIL, "--horizon", "1D"], "horizon"),
        (["--rebalance", "local", "--balance-since", UNTIL, "--balance-until", SINCE], "must end after it begins"),
        (["--rebalance", "local", "--balance-since", "monday", "--balance-until", UNTIL], "balance_since"),
    ]
    for extra, message in cases:
        assert main([*args, *window, *extra]) == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize("until", ["2016-09-13T06:00:00+00:00"])
def test_a_balance_window_that_ends_before_the_run_s_window_is_refused(spark, tmp_path, capsys, until):
    path, keys = ira_week(spark, tmp_path, "2016-09-05", "2016-09-12")
    args = ["reconfigure", path, "--keys", ",".join(keys), "--ts", "ts", "--quiet", "--store", str(tmp_path)]
    window = ["--start", "2016-09-12T12:00", "--end", "2016-09-13T12:00", "--rebalance", "local"]
    assert main([*args, *window, "--balance-since", SINCE, "--balance-until", until]) == 2
    assert "nothing is left of it to balance" in capsys.readouterr().err
    assert main([*args, *window, "--balance-since", SINCE, "--balance-until", UNTIL]) == ExitCode.OK
