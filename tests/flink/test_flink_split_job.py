"""A real PyFlink job follows split keys: a hot hashtag's records go to its part on their location's server.

The tweet tables (learned from the first half, PyFlink's fallback, 6 servers of one subtask each)
get 6 split hashtags, the most frequent of the streamed window; hashtag ``j``'s part for server
``s`` is subtask ``(s + j) mod 6``, so a selector that read a wrong server would send records
elsewhere. ``split_job.py`` streams the window; every record must run where
:meth:`RoutingConfiguration.route_rows` routes it, and the partial counts must add up.
"""

from __future__ import annotations

import pytest

from locality.routing import RoutingConfiguration, RoutingTable

from .test_flink_job import OPERATORS, run_job

WINDOW = 6000


@pytest.fixture(scope="module")
def split_run(flink_env, tweet_halves, tweet_configuration, tmp_path_factory):
    """Run the job once; returns (records with their expected subtasks, job output, split plans)."""
    records = tweet_halves[1].iloc[:WINDOW][["seq", *OPERATORS]].reset_index(drop=True)
    hot = records["hashtag"].value_counts().index[:6].tolist()
    plans = {k: [(s + j) % 6 for s in range(6)] for j, k in enumerate(hot)}
    tables = dict(tweet_configuration.tables)
    tables["hashtag"] = RoutingTable("hashtag", tables["hashtag"].fallback, tables["hashtag"].entries, plans)
    config = RoutingConfiguration(tweet_configuration.topology, tables)
    work = tmp_path_factory.mktemp("flink-split-job")
    records.to_parquet(work / "records.parquet", index=False)
    config.write(work / "configuration")
    out = run_job(flink_env, "split_job.py", work)
    routes = config.route_rows({op: records[op].to_numpy(dtype=object) for op in OPERATORS})
    expected = records.assign(**{f"{op}_expected": routes[op] for op in OPERATORS})
    return expected.merge(out, on="seq", how="left", validate="one_to_one"), plans


def test_every_record_runs_where_route_rows_says(split_run):
    run, plans = split_run
    assert len(run) == WINDOW and (run["branch"] == "split").all()
    for op in OPERATORS:
        assert (run[f"{op}_subtask"] == run[f"{op}_expected"]).all(), op
    hot = run[run["hashtag"].isin(list(plans))]
    # the part on the server of the location subtask that sent the record (server i runs subtask i)
    assert (hot["hashtag_subtask"] == [plans[k][s] for k, s in zip(hot["hashtag"], hot["location_subtask"])]).all()
    assert len(hot) > 300 and hot.groupby("hashtag")["hashtag_subtask"].nunique().min() >= 3


def test_partial_counts_add_up_to_each_hashtags_count(split_run):
    """Each part counts the hashtag in its MapState: 1..n per (hashtag, subtask), n summing to the hashtag's count."""
    run, plans = split_run
    for (_, _), counts in run.groupby(["hashtag", "hashtag_subtask"])["hashtag_count"]:
        assert sorted(counts) == list(range(1, len(counts) + 1))
    partial = run.groupby(["hashtag", "hashtag_subtask"])["hashtag_count"].max().groupby(level="hashtag").sum()
    assert partial.equals(run.groupby("hashtag").size().rename("hashtag_count"))
    assert (run[run["hashtag"].isin(list(plans))].groupby("hashtag")["hashtag_subtask"].nunique() >= 3).all()
