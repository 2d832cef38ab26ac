"""``locality replay`` with the rebalancer options (no Spark: the replay runs in memory)."""

import json
from pathlib import Path

import pytest

from locality.cli import ExitCode, main
from locality.datasets.synthetic import twitter_like


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "trace.parquet"
    twitter_like(20_000, n_locations=100, n_hashtags=2_000, days=21, seed=2).to_parquet(path, index=False)
    return str(path)


def test_replay_with_the_local_rebalancer_prints_daily_and_state_figures(trace_file, capsys):
    args = ["replay", trace_file, "--keys", "location,hashtag", "--servers", "6", "--json"]
    window = ["--start", "2015-06-01", "--end", "2015-06-15"]
    rebalanced = ["--rebalance", "local", "--rebalance-every", "6h", "--forecast", "decay:0.5"]
    rebalanced += ["--split-hot-keys", "--split-share", "0.5"]
    assert main([*args, *window, *rebalanced]) == ExitCode.OK
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["windows"]) == 2  # --end cut the third week
    second = doc["windows"][1]
    assert len(second["daily_worst_imbalance"]) == 7 and second["rebalance_moved_keys"] > 0
    assert second["split_keys"] and second["fold_cost"] > 0
    moved = second["migration_cost"] + second["rebalance_cost"] + second["fold_cost"]
    assert doc["mean_state_moved"] == pytest.approx(moved)
    assert doc["mean_daily_worst_imbalance"] >= 1.0 and doc["mean_hash_daily_worst_imbalance"] >= 1.0
    # the same run with the split keys' partials merged downstream: the same moves, no fold
    assert main([*args, *window, *rebalanced, "--split-merge", "downstream"]) == ExitCode.OK
    merged = json.loads(capsys.readouterr().out)["windows"][1]
    assert merged["fold_cost"] == 0 and merged["rebalance_cost"] == second["rebalance_cost"]
    assert merged["locality"] == second["locality"] and merged["imbalance"] == second["imbalance"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--rebalance", "local", "--rebalance-forecast", "median"], "'forecast' parameter of parse_forecast"),
        (["--forecast", "decay:2"], "'decay' parameter of the decay forecast"),
        (["--rebalance", "mixed", "--split-hot-keys"], "split_hot_keys needs a locality-aware rebalancer"),
        (["--rebalance", "local", "--split-merge", "later"], "'later' is not one of 'fold', 'downstream'"),
    ],
)
def test_bad_rebalancer_options_exit_2_with_a_message(trace_file, capsys, extra, message):
    code = main(["replay", trace_file, "--keys", "location,hashtag", "--servers", "6", *extra])
    assert code == ExitCode.BAD_INPUT
    assert message in capsys.readouterr().err


def test_trace_may_be_a_dataset_cards_name(capsys):
    """TRACE names a shared card (``locality datasets``) as well as a path: same rows, same figures."""
    from locality.datasets.catalog import card

    common = ["--keys", "user,hashtag", "--servers", "6", "--mode", "hash", "--json", "-q"]
    common += ["--start", "2017-01-02", "--end", "2017-01-30"]
    docs = []
    for trace in ("ira_troll_hashtags", str(card("ira_troll_hashtags").path)):
        assert main(["replay", trace, *common]) == ExitCode.OK
        docs.append(json.loads(capsys.readouterr().out))
    assert docs[0] == docs[1] and len(docs[0]["windows"]) == 4
    assert main(["replay", "no_such_card", *common]) == ExitCode.BAD_INPUT
    assert "no_such_card" in capsys.readouterr().err


def test_following_hourly_lifts_next_week_locality_on_the_ira_tweets(capsys):
    """New hashtags join their users' server within the hour: locality up, balance no worse (six weeks of IRA)."""
    common = ["ira_troll_hashtags", "--keys", "user,hashtag", "--servers", "6", "--json", "-q"]
    common += ["--start", "2016-09-05", "--end", "2016-10-17"]
    docs = {}
    for name, extra in (("online", []), ("follow", ["--rebalance", "follow", "--rebalance-every", "1h"])):
        assert main(["replay", *common, *extra]) == ExitCode.OK
        docs[name] = json.loads(capsys.readouterr().out)
    online, follow = docs["online"], docs["follow"]
    assert follow["mean_locality"] > online["mean_locality"] + 0.05  # measured 38.0% -> 47.0%
    assert follow["mean_worst_imbalance"] <= online["mean_worst_imbalance"]  # 2.075 -> 1.971
    assert 0 < follow["mean_rebalance_cost"] < 0.1  # 7.1% of a week's state moved by following
    assert all(w["rebalance_moved_keys"] > 0 for w in follow["windows"][1:])


def test_hot_keys_split_by_neighbour_server_balance_the_ira_bursts(capsys):
    """Six IRA weeks: split hot keys, partials merged downstream: balanced, more local, little state moved."""
    common = ["ira_troll_hashtags", "--keys", "user,hashtag", "--servers", "6", "--json", "-q"]
    common += ["--start", "2016-09-05", "--end", "2016-10-17"]
    split = ["--mode", "offline", "--rebalance", "local", "--rebalance-every", "30min", "--theta-max", "0.05"]
    split += ["--state-weight", "3", "--split-hot-keys", "--split-share", "0.05"]
    docs = {}
    for name, extra in (
        ("online", []),
        ("fold", [*split, "--split-merge", "fold"]),
        ("downstream", [*split, "--split-merge", "downstream"]),
    ):
        assert main(["replay", *common, *extra]) == ExitCode.OK
        docs[name] = json.loads(capsys.readouterr().out)
    online, fold, downstream = docs["online"], docs["fold"], docs["downstream"]
    assert downstream["mean_worst_imbalance"] < 1.2 < online["mean_worst_imbalance"]  # measured 2.075 -> 1.126
    assert downstream["mean_locality"] > online["mean_locality"] + 0.2  # 38.0% -> 68.8%
    assert downstream["mean_state_moved"] < 0.15 < online["mean_state_moved"]  # 45.1% -> 7.2% a week
    # folding the parts into one instance instead: the same routing, and the partials' migration on top
    assert fold["mean_locality"] == downstream["mean_locality"]
    assert fold["mean_fold_cost"] > 0.2 and downstream["mean_fold_cost"] == 0  # 35.4% of a week's state
    assert fold["mean_state_moved"] == pytest.approx(downstream["mean_state_moved"] + fold["mean_fold_cost"])


def test_replay_reads_every_format_as_the_jobs_do_and_zoned_bounds_on_naive_times(trace_file, tmp_path, capsys):
    """Parquet, CSV (gzip too) and JSON lines of one trace replay alike; ``--start`` with a zone on naive times."""
    import pandas as pd

    frame = pd.read_parquet(trace_file)
    frame = frame.assign(ts=frame["ts"].dt.tz_convert(None) if frame["ts"].dt.tz is not None else frame["ts"])
    frame[["location", "hashtag", "ts"]].to_csv(tmp_path / "t.csv", index=False)
    frame[["location", "hashtag", "ts"]].to_csv(tmp_path / "t.csv.gz", index=False)
    frame.assign(ts=frame["ts"].dt.strftime("%Y-%m-%dT%H:%M:%S.%f"))[["location", "hashtag", "ts"]].to_json(
        tmp_path / "t.jsonl", orient="records", lines=True
    )
    common = ["--keys", "location,hashtag", "--servers", "6", "--mode", "hash", "--json", "-q"]
    common += ["--start", "2015-06-01T02:00:00+02:00", "--end", "2015-06-15"]  # 00:00 UTC
    docs = {}
    for name in (trace_file, tmp_path / "t.csv", tmp_path / "t.csv.gz", tmp_path / "t.jsonl"):
        assert main(["replay", str(name), *common]) == ExitCode.OK, capsys.readouterr().err
        docs[Path(name).name] = json.loads(capsys.readouterr().out)
    first = next(iter(docs.values()))
    assert len(first["windows"]) == 2 and sum(w["tuples"] for w in first["windows"]) > 0
    assert all(doc == first for doc in docs.values())
    # --format names the format of files whose names do not
    (tmp_path / "t.csv").rename(tmp_path / "trace.txt")
    assert main(["replay", str(tmp_path / "trace.txt"), "--format", "csv", *common]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out) == first


def test_replay_reads_latin1_text_with_its_encoding(tmp_path, capsys):
    rows = "".join(f"Z\xfcrich{i % 3},tag{i % 5},2024-01-{1 + i % 14:02d}T10:00:00\n" for i in range(300))
    (tmp_path / "t.csv").write_bytes(("location,hashtag,ts\n" + rows).encode("latin-1"))
    args = ["replay", str(tmp_path / "t.csv"), "--keys", "location,hashtag", "--servers", "2", "--period", "3D", "-q"]
    assert main([*args, "--json"]) == ExitCode.BAD_INPUT
    assert "--encoding" in capsys.readouterr().err
    assert main([*args, "--json", "--encoding", "latin-1"]) == ExitCode.OK
    assert sum(w["tuples"] for w in json.loads(capsys.readouterr().out)["windows"]) == 300


def test_a_replay_by_calendar_year_on_the_flickr_photos(capsys):
    """``--period YS``: one window per calendar year (a year is no fixed length); learned on earlier years, it pays."""
    common = ["flickr_dresden_tags", "--keys", "user,tag", "--servers", "6", "--json", "-q"]
    common += ["--start", "2006-01-01", "--end", "2019-01-01"]
    assert main(["replay", *common, "--period", "YS"]) == ExitCode.OK
    doc = json.loads(capsys.readouterr().out)
    assert [w["start"][:10] for w in doc["windows"]] == [f"{year}-01-01" for year in range(2006, 2019)]
    assert doc["windows"][-1]["end"][:10] == "2019-01-01" and doc["windows"][2]["tuples"] == 7_847  # 2008
    assert doc["mean_locality"] > 1.5 * doc["mean_hash_locality"]  # measured 27.4% against 14.3%
    assert main(["replay", *common, "--period", "1Y"]) == ExitCode.BAD_INPUT
    assert "a calendar period 'YS', 'QS' or 'MS'" in capsys.readouterr().err
