"""The online reconfiguration replayed on the weekly flights (tailnum -> dest, 6 servers, alpha 1.03)."""

import numpy as np
import pandas as pd
import pytest

from locality.errors import InvalidParameterError
from locality.rebalance.window import RebalancePolicy
from locality.replay import replay_trace, windows_of
from locality.topology import Topology
from tests.conftest import trace_keys

TOPO = Topology.uniform(trace_keys("flights"), 6)


@pytest.fixture(scope="module")
def weekly(flights):
    online = replay_trace(flights, TOPO, period="7D", mode="online", history=None, decay=0.85)
    offline = replay_trace(flights, TOPO, period="7D", mode="offline")
    return online, offline


def quarterly(result):
    frame = result.frame().iloc[1:]
    return frame.groupby(pd.to_datetime(frame["start"]).dt.quarter)["locality"].mean()


def test_online_beats_offline_every_quarter_and_hash_by_far(weekly):
    online, offline = weekly
    assert len(online.windows) == 53
    assert 0.15 < online.mean_hash_locality < 0.18
    assert online.mean_locality >= 0.58
    assert offline.mean_locality > 1.8 * offline.mean_hash_locality
    assert (quarterly(online) > quarterly(offline)).all()


def test_next_week_balance_is_reported_and_kept_near_alpha(weekly):
    online, _ = weekly
    for window in online.windows:
        assert set(window.imbalance) == {"tailnum", "dest"}
    assert online.mean_worst_imbalance() <= 1.10


def test_relabeling_moves_less_state_than_raw_metis_labels(weekly):
    online, _ = weekly
    moved = [w.migration_cost for w in online.windows[2:]]
    raw = [w.migration_cost_without_relabeling for w in online.windows[2:]]
    assert sum(moved) < 0.5 * sum(raw)
    assert all(0 <= m <= 1 for m in moved)


def test_min_gain_keeps_the_tables_when_the_gain_does_not_pay(flights):
    spring = flights[(flights["ts"] >= "2013-03-01") & (flights["ts"] < "2013-05-01")]
    lazy = replay_trace(
        spring, TOPO, period="7D", mode="online", history=None, decay=0.85, min_gain=1e9, max_imbalance=1.10
    )
    kept = [w for w in lazy.windows[2:] if not w.published]
    assert kept and all(w.migration_cost == 0 for w in kept)
    assert all("does not pay" in w.reason or "balance is broken" in w.reason for w in lazy.windows[2:])


def test_the_hash_and_the_rebalancer_are_named_as_on_the_command_line(flights):
    """``hash`` and ``rebalance`` (``--hash``, ``--rebalance``) take effect: keys move, Spark's hash differs."""
    spring = flights[(flights.ts >= "2013-03-01") & (flights.ts < "2013-03-22")]
    spark = replay_trace(spring, TOPO, period="7D", mode="hash", hash="spark", rebalance="mixed")
    assert len(spark.windows) == 3 and sum(w.rebalance_moved_keys for w in spark.windows) > 0
    assert not spark.frame().equals(replay_trace(spring, TOPO, period="7D", mode="hash", rebalance="mixed").frame())


def test_windows_cover_the_trace():
    ts = pd.Series(pd.to_datetime(["2013-01-01 10:00:00", "2013-01-09 00:00:00", "2013-01-15 23:59:00"], utc=True))
    bounds = windows_of(ts, "7D")
    assert [str(a.date()) for a, _ in bounds] == ["2013-01-01", "2013-01-08", "2013-01-15"]


def test_calendar_windows_are_whole_years_quarters_or_months():
    ts = pd.Series(pd.to_datetime(["2007-05-03 10:00:00", "2008-12-31 23:59:00", "2009-01-01 00:00:00"], utc=True))
    years = windows_of(ts, "YS")
    assert [(str(a.date()), str(b.date())) for a, b in years] == [
        ("2007-01-01", "2008-01-01"),
        ("2008-01-01", "2009-01-01"),  # a leap year: 366 days, where "365D" would drift off the calendar
        ("2009-01-01", "2010-01-01"),
    ]
    assert [str(a.date()) for a, _ in windows_of(ts[:1], "MS")] == ["2007-05-01"]
    assert [str(a.date()) for a, _ in windows_of(ts[1:], "QS")] == ["2008-10-01", "2009-01-01"]
    for bad in ("1Y", "YE", "M", "-7D", "weekly"):
        with pytest.raises(InvalidParameterError, match=f"'period' parameter of windows_of .*; got '{bad}'"):
            windows_of(ts, bad)


def test_decay_0_forgets_as_in_the_online_job():
    """``decay=0`` is the latest window alone, in the replay as in ``locality reconfigure --decay 0``."""
    from locality.datasets.synthetic import twitter_like

    trace = twitter_like(20_000, n_locations=60, n_hashtags=1_000, days=21, drift=0.5, seed=3)
    topo = Topology.uniform(["location", "hashtag"], 4)
    forgetting = replay_trace(trace, topo, period="7D", mode="online", history=None, decay=0)
    latest = replay_trace(trace, topo, period="7D", mode="online", history=1)
    assert len(forgetting.windows) == 3
    assert forgetting.frame().equals(latest.frame())


def test_daily_figures_and_state_moved_on_a_generated_trace():
    from locality.datasets.synthetic import twitter_like

    trace = twitter_like(30_000, n_locations=120, n_hashtags=3_000, days=21, drift=0.5, seed=5)
    topo = Topology.uniform(["location", "hashtag"], 6)
    hashed = replay_trace(trace, topo, period="7D", mode="hash")
    # the hash's daily worst imbalance, recomputed by hand for the second week
    week = trace[(trace.ts >= "2015-06-08") & (trace.ts < "2015-06-15")]
    fallbacks = {op: hashed_fallback(topo, op) for op in topo.operators}
    manual = []
    for _, day in week.groupby(week.ts.dt.floor("D")):
        worst = 0.0
        for op in topo.operators:
            loads = np.bincount(fallbacks[op].instances_of(day[op].to_numpy(dtype=object)), minlength=6)
            worst = max(worst, loads.max() / loads.mean())
        manual.append(worst)
    assert hashed.windows[1].daily_worst_imbalance == pytest.approx(manual)
    assert hashed.windows[1].hash_daily_worst_imbalance == pytest.approx(manual)
    online = replay_trace(trace, topo, period="7D", mode="online", decay=0.85, history=None)
    local = replay_trace(
        trace, topo, period="7D", mode="online", decay=0.85, history=None, rebalance=RebalancePolicy(every="6h")
    )
    doc = local.to_dict()
    assert {"mean_daily_worst_imbalance", "mean_hash_daily_worst_imbalance", "mean_state_moved"} <= set(doc)
    for w in local.windows[1:]:
        assert len(w.daily_worst_imbalance) == 7 and w.state_moved == pytest.approx(w.migration_cost + w.rebalance_cost)
        assert w.rebalance_cost > 0 and w.rebalance_moved_keys > 0
    assert local.mean_worst_imbalance() < online.mean_worst_imbalance()
    assert local.mean_state_moved() > online.mean_state_moved()  # balance is paid for in moved state


def hashed_fallback(topology, op):
    from locality.optimizer import make_fallbacks

    return make_fallbacks(topology, "kafka")[op]


def test_a_rebalancer_runs_over_hash_routing_too():
    """``mode="hash"`` with a rebalancer is Fang et al.'s setting: the hash places keys, the rebalancer moves them."""
    from locality.datasets.synthetic import twitter_like

    trace = twitter_like(30_000, n_locations=120, n_hashtags=3_000, days=21, skew=1.4, seed=7)
    topo = Topology.uniform(["location", "hashtag"], 6)
    hashed = replay_trace(trace, topo, period="7D", mode="hash")
    rebalanced = replay_trace(trace, topo, period="7D", mode="hash", rebalance=RebalancePolicy(every="6h"))
    assert all(w.rebalance_cost == 0 and w.table_entries == {op: 0 for op in topo.operators} for w in hashed.windows)
    assert all(w.rebalance_moved_keys > 0 for w in rebalanced.windows)
    assert rebalanced.mean_worst_imbalance() < hashed.mean_worst_imbalance()
    # the keys it moved stay where it put them: the next window starts from its tables, not from the hash
    assert rebalanced.windows[1].table_entries != {op: 0 for op in topo.operators}
