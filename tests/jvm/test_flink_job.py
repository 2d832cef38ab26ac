"""The two-stage Flink Java job (``TwoStageJob``, on locality-flink's drop-in jar) on a MiniCluster follows the tables.

The tables are learned from the first half of the tweet trace with Flink's own fallback
(``--hash flink``, M = 128) and published to a store. The job reads the second half as JSON
lines, plus one record of each table key the second half lacks (its first record in the
first half), keys it by location, then by hashtag, at parallelism 6: once through the
tables' routing keys, once on the raw keys (Flink's hash). Each operator records on every
record its subtask and its real key's count (kept in a ``MapState`` under the routing key);
the job reports where each subtask ran (the allocation ID of its task slot) and how many
records went from each first-operator subtask to each second-operator subtask. From those,
the measured share of records whose two subtasks shared a slot is compared with
``evaluate`` on the same records.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from locality.evaluation import evaluate
from locality.hashing import FlinkKeyGroups
from tests.jvm.conftest import FLINK_EXAMPLES, TWEET_MAX_PARALLELISM, run_java

OPERATORS = ["location", "hashtag"]
JOB = "io.locality.flink.job.TwoStageJob"


def run_job(job_input, mode: str, out, *options: object) -> tuple[dict, pd.DataFrame]:
    """Run the job in ``mode`` (and ``options``); its summary and its output records, joined to the records streamed."""
    store, path, records = job_input
    done = run_java([FLINK_EXAMPLES], JOB, "--store", store.root, "--input", path, "--mode", mode,
                    "--output", out, *options, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-5000:]
    summary = json.loads(done.stdout)
    parts = [p for p in out.rglob("*") if p.is_file() and not p.name.startswith(".")]
    lines = pd.concat([pd.read_json(p, lines=True, dtype={op: str for op in OPERATORS}) for p in parts])
    return summary, lines.merge(records[["seq", "second"]], on="seq", how="left", validate="one_to_one")


@pytest.fixture(scope="module")
def runs(job_input, tmp_path_factory):
    return {mode: run_job(job_input, mode, tmp_path_factory.mktemp(f"out-{mode}")) for mode in ("tables", "raw")}


def test_every_record_went_through_both_operators_once(runs, job_input):
    records = job_input[2]
    for summary, out in runs.values():
        assert sorted(out["seq"]) == sorted(records["seq"])
        assert summary["records"] == len(records) == int(np.sum(summary["hops"]))


def test_records_go_where_the_tables_and_flinks_own_assignment_say(runs, flink_tweet_tables):
    config = flink_tweet_tables[0]
    flink = FlinkKeyGroups(6, TWEET_MAX_PARALLELISM)
    _, routed = runs["tables"]
    _, raw = runs["raw"]
    for op in OPERATORS:
        entries = config.tables[op].entries
        in_table = routed[op].isin(entries.index).to_numpy()
        subtasks = routed[f"{op}_subtask"].to_numpy()
        # every record of a table key on the subtask its table names, and every table key streamed
        assert (subtasks[in_table] == entries[routed.loc[in_table, op]].to_numpy()).all()
        assert set(routed.loc[in_table, op]) == set(entries.index)
        # every other key where Flink's own assignment puts it
        assert (subtasks[~in_table] == flink.instances_of(routed.loc[~in_table, op].tolist())).all()
        assert (raw[f"{op}_subtask"].to_numpy() == flink.instances_of(raw[op].tolist())).all()


def test_the_map_state_keeps_each_real_key_apart(runs, flink_tweet_tables):
    """Table keys of one subtask share surrogates, yet each real key counts exactly 1..n."""
    _, routed = runs["tables"]
    config = flink_tweet_tables[0]
    assert config.tables["hashtag"].entries.size > TWEET_MAX_PARALLELISM  # more table keys than surrogates
    for op in OPERATORS:
        for key, counts in routed.groupby(op)[f"{op}_count"]:
            assert sorted(counts) == list(range(1, len(counts) + 1)), key


def same_slot_share(summary: dict, out: pd.DataFrame) -> float:
    """Share of ``out``'s records whose two subtasks ran in one slot, by the slots the job reported."""
    slot = {op: {p["subtask"]: p["slot"] for p in summary["placements"][op]} for op in OPERATORS}
    first, second = (out[f"{op}_subtask"].map(slot[op]) for op in OPERATORS)
    return float((first == second).mean())


def test_measured_same_slot_share_is_what_evaluate_says(runs, job_input, flink_tweet_tables):
    config = flink_tweet_tables[0]
    records = job_input[2]
    for summary, _ in runs.values():
        for op in OPERATORS:  # six slots, one subtask of each operator in each (measured, not assumed)
            assert len({p["slot"] for p in summary["placements"][op]}) == 6
    on_all, on_second = evaluate(records, config), evaluate(records[records["second"]], config)
    measured = {mode: runs[mode][0]["same_slot_share"] for mode in runs}
    second_half = {mode: same_slot_share(summary, out[out["second"]]) for mode, (summary, out) in runs.items()}
    print(
        f"Flink Java job, MiniCluster, parallelism 6, {len(records):,} records: same-slot share "
        f"{measured['tables']:.4f} (evaluate {on_all.optimized.locality:.4f}), raw keys {measured['raw']:.4f} "
        f"(evaluate hash {on_all.hash.locality:.4f}); second half alone ({records['second'].sum():,}): "
        f"{second_half['tables']:.4f} (evaluate {on_second.optimized.locality:.4f}), raw {second_half['raw']:.4f} "
        f"(hash {on_second.hash.locality:.4f})"
    )
    assert abs(measured["tables"] - on_all.optimized.locality) < 0.005
    assert abs(measured["raw"] - on_all.hash.locality) < 0.005
    assert abs(second_half["tables"] - on_second.optimized.locality) < 0.005
    assert abs(second_half["raw"] - on_second.hash.locality) < 0.005
    assert abs(measured["raw"] - 1 / 6) < 0.03 and measured["tables"] > 1.5 * measured["raw"]


def test_tables_run_only_with_their_parallelism(job_input):
    store, path, _ = job_input
    done = run_java([FLINK_EXAMPLES], JOB, "--store", store.root, "--input", path, "--mode", "tables",
                    "--parallelism", "4")  # fmt: skip
    assert done.returncode == 2
    assert "the tables of 'location' are for parallelism 6 and max parallelism 128" in done.stderr


def test_a_bad_input_line_fails_the_job_naming_the_field(job_input, tmp_path):
    store = job_input[0]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"seq": 1, "location": "US/Ohio", "hashtag": "tbt"}\n{"seq": 2, "location": "US/Ohio"}\n')
    done = run_java([FLINK_EXAMPLES], JOB, "--store", store.root, "--input", bad, "--mode", "raw")
    assert done.returncode == 2
    assert "no field 'hashtag' in the input line '{\"seq\": 2" in done.stderr
