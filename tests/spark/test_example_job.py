"""The example a user copies, end to end: ``locality optimize`` publishes, the streaming job follows the store.

``examples/spark_streaming_job.py`` runs twice on one checkpoint, on the tweet
trace: with version 1 on a first file, then, after the nightly job published
version 2, on a second file. Spark's ``TaskContext`` inside the job says where
every key ran; the counts say whether the state of moved keys followed them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest
from pyspark import cloudpickle

from locality.cli import main as cli_main
from locality.evaluation import evaluate
from locality.store import ConfigStore
from tests.conftest import trace_keys

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_streaming_job.py"
OPERATOR = "location"


def load_example():
    spec = importlib.util.spec_from_file_location("spark_streaming_job", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cloudpickle.register_pickle_by_value(module)  # the Python workers cannot import it by name
    return module


@pytest.fixture(scope="module")
def runs(spark, geotweets, tmp_path_factory):
    """Publish v1, run the job on file 1, publish v2, run the job again on file 2."""
    work = tmp_path_factory.mktemp("example")
    store, incoming = work / "store", work / "incoming"
    incoming.mkdir()
    trace = geotweets[trace_keys("geotweets")]
    example = load_example()
    args = [
        f"--store={store}",
        f"--operator={OPERATOR}",
        f"--input={incoming}",
        f"--checkpoint={work / 'checkpoint'}",
        f"--output={work / 'output'}",
        "--once",
    ]
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    files = []
    try:
        for version, (learn, stream) in enumerate(
            [((0, 20_000), (40_000, 46_000)), ((20_000, 40_000), (46_000, 52_000))]
        ):
            learned = work / f"learn-{version}.parquet"
            trace.iloc[learn[0] : learn[1]].to_parquet(learned, index=False)
            code = cli_main(
                ["optimize", str(learned), "--keys", ",".join(trace_keys("geotweets")), "--servers", "6"]
                + ["--hash", "spark", "--store", str(store), "--quiet", "--json"]
            )
            assert code in (0, 1)  # 1: published, a hot key reported
            records = trace.iloc[stream[0] : stream[1]]
            records.to_parquet(incoming / f"part-{version}.parquet", index=False)
            files.append((ConfigStore(store).get().config, records))
            assert example.main(args) == 0
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    output = pd.read_parquet(work / "output")
    return files, output


def test_the_nightly_job_published_two_versions(runs):
    (v1, _), (v2, _) = runs[0]
    assert v1.table_sizes()[OPERATOR] > 0 and v2.table_sizes()[OPERATOR] > 0
    assert not v1.tables[OPERATOR].entries.equals(v2.tables[OPERATOR].entries)


def increments(output: pd.DataFrame, version: int) -> pd.DataFrame:
    """The rows of one run, with the records each key had in that run (its count minus the run before's)."""
    rows = output[output["version"] == version].set_index("key")
    before = output[output["version"] < version].groupby("key")["count"].max()
    return rows.assign(records=rows["count"] - before.reindex(rows.index, fill_value=0))


def test_each_run_served_its_version(runs):
    files, output = runs
    versions = sorted(output["version"].unique())
    assert len(versions) == 2
    for version, (_, records) in zip(versions, files):
        assert set(output.loc[output["version"] == version, "key"]) == set(records[OPERATOR])


def test_every_key_ran_where_its_version_routes_it(runs):
    files, output = runs
    versions = sorted(output["version"].unique())
    assert len(versions) == len(files) == 2
    for version, (config, records) in zip(versions, files):
        rows = increments(output, version)
        assert len(rows) > 0 and set(rows.index) == set(records[OPERATOR])  # every key of the run, checked below
        assert rows["partition"].tolist() == config.route_many(OPERATOR, rows.index.to_numpy(dtype=object)).tolist()


def test_counts_carry_over_the_version_change(runs):
    files, output = runs
    streamed = pd.concat([records for _, records in files])
    final = output.groupby("key")["count"].max()
    pd.testing.assert_series_equal(
        final.sort_index(), streamed[OPERATOR].value_counts().sort_index(), check_names=False
    )
    old, new = (config.tables[OPERATOR] for config, _ in files)
    keys = sorted(set(files[0][1][OPERATOR]) & set(files[1][1][OPERATOR]))
    moved = [k for k in keys if old.route(k) != new.route(k)]
    assert moved  # keys whose state had to follow them to another partition, and did (counts above)


def test_partition_loads_equal_the_evaluators(runs):
    files, output = runs
    for version, (config, records) in zip(sorted(output["version"].unique()), files):
        rows = increments(output, version)
        loads = rows.groupby("partition")["records"].sum().reindex(range(6), fill_value=0)
        expected = evaluate(records, config).optimized.instance_loads[OPERATOR]
        assert loads.tolist() == [int(x) for x in expected]
