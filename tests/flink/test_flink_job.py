"""A real PyFlink job (local mini-cluster, parallelism 6) follows the tweet tables, and measures their locality.

The tables are learned from the first half of the tweet trace (by ``seq``) with
PyFlink's fallback. The job (``tweets_job.py``) streams a window of the second
half through two keyed operators (location -> hashtag) twice: keyed on
:class:`~locality.engines.flink.RoutingKeySelector`'s routing keys, and on the raw
keys. To check every table key without streaming the whole trace, the routed
branch also gets one record of each table key the window lacks (the key's first
record after the window, else in the first half). Locality is measured on the
window only, beside ``evaluate`` on the same records.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locality.evaluation import evaluate
from locality.hashing import FlinkKeyGroups
from tests.conftest import trace_keys

from .conftest import TWEET_MAX_PARALLELISM

HERE = Path(__file__).parent
REPO = HERE.parents[1]
OPERATORS = trace_keys("geotweets")
#: Second-half records streamed through both branches (the whole half, 58,423, takes minutes more).
WINDOW = int(os.environ.get("LOCALITY_FLINK_WINDOW", "10000"))
COLUMNS = ["branch", "seq"] + [f"{op}_{tag}" for op in OPERATORS for tag in ("subtask", "pid", "count")]


def job_records(geotweets: pd.DataFrame, second: pd.DataFrame, config) -> pd.DataFrame:
    """The window (``raw`` True) and one record of every table key it lacks (``raw`` False)."""
    window = second.iloc[:WINDOW]
    rest = pd.concat([second.iloc[WINDOW:], geotweets.iloc[: len(geotweets) - len(second)]])
    cover = []
    for op in OPERATORS:
        missing = set(config.tables[op].entries.index) - set(window[op]) - {k for c in cover for k in c[op]}
        cover.append(rest[rest[op].isin(missing)].drop_duplicates(op))
    records = pd.concat([window.assign(raw=True), *(c.assign(raw=False) for c in cover)])
    return records[["seq", *OPERATORS, "raw"]].drop_duplicates("seq").reset_index(drop=True)


def run_job(flink_env, script: str, work) -> pd.DataFrame:
    """Run the PyFlink job ``script`` on ``work``'s records.parquet and configuration; its output rows."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [str(flink_env.python), str(HERE / script), "records.parquet", "configuration", "out"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"the PyFlink job failed:\n{done.stderr[-5000:]}"
    parts = [p for p in (work / "out").rglob("*") if p.is_file() and not p.name.startswith(".")]
    return pd.concat([pd.read_csv(p, header=None, names=COLUMNS, dtype={"branch": str}) for p in parts])


@pytest.fixture(scope="module")
def job_run(flink_env, geotweets, tweet_halves, tweet_configuration, tmp_path_factory):
    """Run the job once; returns (records streamed, job output)."""
    work = tmp_path_factory.mktemp("flink-job")
    records = job_records(geotweets, tweet_halves[1], tweet_configuration)
    records.to_parquet(work / "records.parquet", index=False)
    tweet_configuration.write(work / "configuration")
    out = run_job(flink_env, "tweets_job.py", work)
    return records, out.merge(records[["seq", *OPERATORS]], on="seq", how="left", validate="many_to_one")


def test_every_record_went_through_each_branch_once(job_run):
    records, out = job_run
    assert len(records) > WINDOW
    routed, raw = (out[out["branch"] == b] for b in ("routed", "raw"))
    assert sorted(routed["seq"]) == sorted(records["seq"])
    assert sorted(raw["seq"]) == sorted(records.loc[records["raw"], "seq"])


def test_subtask_i_of_both_operators_shares_slot_i(job_run):
    """The assumption the locality figure rests on (LocalInputPreferredSlotSharingStrategy, equal parallelism)."""
    _, out = job_run
    slots = {}
    for op in OPERATORS:
        pairs = out[[f"{op}_subtask", f"{op}_pid"]].drop_duplicates()
        assert pairs[f"{op}_subtask"].is_unique, f"a {op} subtask ran in two Python workers"
        slots[op] = dict(pairs.to_numpy().tolist())
    assert sorted(slots["location"]) == list(range(6)) and len(set(slots["location"].values())) == 6
    assert slots["location"] == slots["hashtag"]


def test_records_go_where_the_tables_and_flinks_hash_say(job_run, tweet_configuration):
    _, out = job_run
    config = tweet_configuration
    routed, raw = (out[out["branch"] == b] for b in ("routed", "raw"))
    for op in OPERATORS:
        table = config.tables[op]
        keys = routed[op].to_numpy(dtype=object)
        in_table = routed[op].isin(table.entries.index).to_numpy()
        # every record of a table key on the subtask its table names, and every table key checked
        assert (routed[f"{op}_subtask"].to_numpy()[in_table] == table.entries[keys[in_table]].to_numpy()).all()
        assert set(keys[in_table]) == set(table.entries.index)
        # every other key where PyFlink's own hash puts it
        fallback = table.fallback.instances_of(keys[~in_table])
        assert (routed[f"{op}_subtask"].to_numpy()[~in_table] == fallback).all()
        # raw keys: Flink's placement of PyFlink's Row-wrapped key, not the plain key's
        raw_keys = raw[op].to_numpy(dtype=object)
        assert (raw[f"{op}_subtask"].to_numpy() == table.fallback.instances_of(raw_keys)).all()
        distinct = np.unique(raw_keys)
        plain = FlinkKeyGroups(6, TWEET_MAX_PARALLELISM).instances_of(distinct)
        assert (plain != table.fallback.instances_of(distinct)).mean() > 0.7


def test_map_state_keeps_each_real_key_apart(job_run):
    """Counts per real key in a MapState under the routing key: exactly 1..n for a key seen n times."""
    records, out = job_run
    for branch, streamed in (("routed", records), ("raw", records[records["raw"]])):
        rows = out[out["branch"] == branch]
        for op in OPERATORS:
            counts = rows.groupby(op)[f"{op}_count"]
            assert counts.ngroups == streamed[op].nunique() > 0, (branch, op)  # every key streamed, each checked
            for key, seen in counts:
                assert sorted(seen) == list(range(1, len(seen) + 1)), (branch, key)


def test_measured_locality_is_what_evaluate_says(job_run, tweet_configuration, tweet_halves):
    records, out = job_run
    window = tweet_halves[1].iloc[:WINDOW]
    in_window = out["seq"].isin(window["seq"])
    same_slot = {
        b: float(
            (out.loc[in_window & (out["branch"] == b), ["location_pid", "hashtag_pid"]].nunique(axis=1) == 1).mean()
        )
        for b in ("routed", "raw")
    }
    report = evaluate(window, tweet_configuration)
    print(
        f"PyFlink job on {len(window):,} second-half records: same-slot share {same_slot['routed']:.4f} "
        f"(evaluate {report.optimized.locality:.4f}); raw keys {same_slot['raw']:.4f} (evaluate hash "
        f"{report.hash.locality:.4f}); {len(records) - len(window):,} more records to reach every table key"
    )
    assert abs(same_slot["routed"] - report.optimized.locality) < 0.005
    assert abs(same_slot["raw"] - report.hash.locality) < 0.005
    assert abs(same_slot["raw"] - 1 / 6) < 0.03 and same_slot["routed"] > 1.5 * same_slot["raw"]
