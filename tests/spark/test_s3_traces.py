"""Traces in object storage: the jobs read ``s3a://``, the replay and the checks before Spark read ``s3://``.

Against a real S3 server (the Versity S3 Gateway, :mod:`testbed.s3server`), on three weeks of the
flights trace, one Parquet file per week. The tests' shared session reads ``s3a://`` with the jars
``make s3a`` fetched and the settings :func:`pipelines.session.s3a_options` derives from the AWS
variables the server hands out; one test runs ``locality optimize`` in its own process, whose embedded
session does both itself, as a user's does. The stores stay local directories.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from locality.cli import ExitCode, main
from pipelines.jars import GRAPHFRAMES_JARS, spark_jars, spark_jars_dir
from pipelines.session import s3a_options
from pipelines.trace import TraceSpec, check_trace, input_files, input_identity, read_trace
from testbed.s3server import S3Server
from tests.conftest import REPO, trace_keys, trace_path

KEYS = trace_keys("flights")
WEEKS = pd.to_datetime(["2013-01-07", "2013-01-14", "2013-01-21", "2013-01-28"], utc=True)
#: A bucket of this run's own: Hadoop keeps one file system per bucket, with the settings of its first use.
BUCKET = f"traces-{uuid.uuid4().hex[:8]}"
#: The trace's folder in the bucket, named without a format (as a nightly's dated folder is).
FOLDER = "flights/2013-01"


def parquet_bytes(frame: pd.DataFrame, row_group_size: int | None = None) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sink, row_group_size=row_group_size)
    return sink.getvalue()


@pytest.fixture(scope="module")
def weeks() -> list[pd.DataFrame]:
    """Three weeks of flights (about 18,000 rows), one frame each."""
    flights = pd.read_parquet(trace_path("flights"), columns=["ts", *KEYS])
    return [flights[(flights.ts >= start) & (flights.ts < end)] for start, end in zip(WEEKS, WEEKS[1:])]


@pytest.fixture(scope="module")
def local_trace(weeks, tmp_path_factory) -> Path:
    """The weeks as a local directory, a README beside them."""
    folder = tmp_path_factory.mktemp("flights")
    for number, week in enumerate(weeks):
        (folder / f"part-{number}.parquet").write_bytes(parquet_bytes(week))
    (folder / "README.md").write_text("three weeks of flights\n")
    return folder


@pytest.fixture(scope="module")
def s3(spark, weeks):
    """The S3 server, the same trace under ``FOLDER/`` (with a README and a ``_SUCCESS`` marker), the AWS
    variables set, and the shared session's ``s3a`` pointed at the server (restored afterwards)."""
    if not any(Path(jar).name.startswith("hadoop-aws-") for jar in spark_jars()):
        pytest.fail(f"no hadoop-aws jar in {spark_jars_dir()}: `make s3a` fetches the s3a connector")
    with S3Server(buckets=(BUCKET,)) as server, pytest.MonkeyPatch.context() as env:
        client = server.client()
        for number, week in enumerate(weeks):
            client.put_object(Bucket=BUCKET, Key=f"{FOLDER}/part-{number}.parquet", Body=parquet_bytes(week))
        client.put_object(Bucket=BUCKET, Key=f"{FOLDER}/README.md", Body=b"three weeks of flights\n")
        client.put_object(Bucket=BUCKET, Key=f"{FOLDER}/_SUCCESS", Body=b"")
        for name, value in server.env.items():
            env.setenv(name, value)
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        # The shared session's JVM started before these variables were set, so it cannot read the keys from its
        # environment, as a session started after them does: they are handed to s3a as settings.
        options = s3a_options() | {
            "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            "fs.s3a.access.key": server.env["AWS_ACCESS_KEY_ID"],
            "fs.s3a.secret.key": server.env["AWS_SECRET_ACCESS_KEY"],
        }
        before = {name: hadoop.get(name) for name in options}
        for name, value in options.items():
            hadoop.set(name, value)
        try:
            yield server
        finally:
            for name, value in before.items():
                if value is None:
                    hadoop.unset(name)
                else:
                    hadoop.set(name, value)


def uri(scheme: str, key: str = FOLDER) -> str:
    return f"{scheme}://{BUCKET}/{key}"


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def optimize_args(trace: str, store: Path) -> list[str]:
    return ["optimize", trace, "--keys", ",".join(KEYS), "--servers", "4", "--store", str(store), "--json", "-q"]


def table_digests(store: Path, version: int = 1) -> dict[str, str]:
    """SHA-256 of each routing table of a version, from its manifest."""
    manifest = json.loads((store / "versions" / f"{version:06d}" / "manifest.json").read_text())
    return {name: c["sha256"] for name, c in manifest["checksums"].items() if name.startswith("configuration/tables/")}


@pytest.fixture(scope="module")
def local_run(spark, local_trace, tmp_path_factory) -> tuple[dict, Path]:
    """``locality optimize`` on the local copy: its report and its store."""
    store = tmp_path_factory.mktemp("local") / "store"
    assert main(optimize_args(str(local_trace), store)) == ExitCode.OK
    return json.loads((store / "versions" / "000001" / "report.json").read_text()), store


def assert_same_tables(done: subprocess.CompletedProcess, store: Path, local_run: tuple[dict, Path]) -> None:
    """A run on the S3 copy published the local run's tables, byte for byte, from the same rows and parameters."""
    assert done.returncode == ExitCode.OK, done.stderr[-3000:]
    remote, (local, local_store) = json.loads(done.stdout), local_run
    assert remote["trace"] == uri("s3a") and remote["counting"]["rows"] == local["counting"]["rows"] > 15_000
    assert remote["parameters"] == local["parameters"]  # the fingerprint differs by the input's identity alone
    assert table_digests(store) == table_digests(local_store) != {}
    assert remote["in_sample"] == local["in_sample"]


def test_optimize_on_s3a_publishes_the_tables_of_the_same_trace_read_locally(s3, local_run, tmp_path):
    """``locality optimize s3a://...`` in its own process, as a user runs it: the embedded session loads the s3a
    jars and finds the server, region and keys in the AWS variables."""
    done = subprocess.run(
        [sys.executable, "-m", "locality.cli", *optimize_args(uri("s3a"), tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env={**os.environ, **s3.env},
    )
    assert_same_tables(done, tmp_path / "store", local_run)


def test_spark_submit_reads_s3a_with_the_submitters_jars_and_settings(s3, local_run, tmp_path):
    """The README's ``spark-submit`` line for a trace in S3 (``local[2]`` for the cluster): the session is the
    submitter's, with its ``--jars`` and ``--conf``; the job adds nothing to it and reads the trace all the same."""
    s3a_jars = sorted(set(spark_jars()) - set(spark_jars(GRAPHFRAMES_JARS)))
    command = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master", "local[2]",
        "--jars", ",".join(s3a_jars),
        "--conf", f"spark.hadoop.fs.s3a.endpoint={s3.endpoint}",
        "--conf", "spark.hadoop.fs.s3a.path.style.access=true",
        "--conf", f"spark.hadoop.fs.s3a.endpoint.region={s3.env['AWS_REGION']}",
        str(REPO / "locality_job.py"),
        *optimize_args(uri("s3a"), tmp_path / "store"),
    ]  # fmt: skip
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, **s3.env, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert_same_tables(done, tmp_path / "store", local_run)


def test_the_format_comes_from_the_files_listed_not_from_the_path(spark, s3, weeks):
    """A folder URI says no format: its files do, on S3 (before Spark starts) and on any Hadoop file system."""
    rows = sum(len(week) for week in weeks)
    client = s3.client()
    for number, week in enumerate(weeks):  # the same weeks as compressed CSV
        text = week.assign(ts=week.ts.dt.strftime("%Y-%m-%dT%H:%M:%SZ")).to_csv(index=False)
        client.put_object(Bucket=BUCKET, Key=f"csv/2013-01/part-{number}.csv.gz", Body=gzip.compress(text.encode()))
    for trace, fmt, extension in ((uri("s3a"), "parquet", ".parquet"), (uri("s3", "csv/2013-01/"), "csv", ".csv.gz")):
        spec = TraceSpec(trace, KEYS, ts="ts")
        files = input_files(spec)  # neither the README nor _SUCCESS
        assert [Path(f.path).name for f in files] == [f"part-{n}{extension}" for n in range(3)]
        assert spec.file_format([f.path for f in files]) == fmt
        check_trace(spec)  # footers and prefixes read from the server
        assert read_trace(spark, spec).count() == rows
    # A Hadoop scheme is listed by Spark's Hadoop file system: hdfs:// served here by s3a (no HDFS on this machine).
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop.set("fs.hdfs.impl", "org.apache.hadoop.fs.s3a.S3AFileSystem")
    try:
        spec = TraceSpec(uri("hdfs"), KEYS)
        check_trace(spec)
        assert [Path(f.path).name for f in input_files(spec)] == [f"part-{n}.parquet" for n in range(3)]
        assert read_trace(spark, spec).count() == rows
    finally:
        hadoop.unset("fs.hdfs.impl")


def test_a_rewritten_object_is_a_new_input(spark, s3, weeks, tmp_path, capsys):
    """The identity of a remote file is its listing's (path, size, ETag): a backfill rewritten at the same
    path publishes a new version; a rerun on the same objects publishes nothing."""
    key = "rewritten/2013-01"
    client = s3.client()
    for number, week in enumerate(weeks):
        client.put_object(Bucket=BUCKET, Key=f"{key}/part-{number}.parquet", Body=parquet_bytes(week))
    spec = TraceSpec(uri("s3a", key), KEYS)
    identity = input_identity(spec)
    assert [row[0] for row in identity] == [uri("s3a", f"{key}/part-{n}.parquet") for n in range(3)]
    args = optimize_args(uri("s3a", key), tmp_path / "store")
    assert run_cli(capsys, *args)[0] == ExitCode.OK
    code, out, _ = run_cli(capsys, *args)
    assert code == ExitCode.OK and json.loads(out)["reused"] is True
    # The same rows written again in smaller row groups: other bytes at the same path.
    client.put_object(Bucket=BUCKET, Key=f"{key}/part-1.parquet", Body=parquet_bytes(weeks[1], row_group_size=500))
    rewritten = input_identity(spec)
    assert rewritten != identity and [r[0] for r in rewritten] == [r[0] for r in identity]
    code, out, _ = run_cli(capsys, *args)
    report = json.loads(out)
    assert code == ExitCode.OK and report["version"] == 2 and not report.get("reused")
    assert table_digests(tmp_path / "store", 2) == table_digests(tmp_path / "store", 1)  # the same rows


def test_newest_files_of_a_remote_trace_are_the_newest_by_the_listings_time(spark, s3, weeks):
    key = "newest/2013-01"
    client = s3.client()
    for number in (2, 0, 1):  # written last: part-1, though its name is not the last
        client.put_object(Bucket=BUCKET, Key=f"{key}/part-{number}.parquet", Body=parquet_bytes(weeks[number]))
        time.sleep(1.1)  # S3 times have whole seconds
    spec = TraceSpec(uri("s3a", key), KEYS, newest=2)
    assert [Path(f.path).name for f in input_files(spec)] == ["part-0.parquet", "part-1.parquet"]
    assert read_trace(spark, spec).count() == len(weeks[0]) + len(weeks[1])


def test_replay_reads_s3_as_it_reads_a_local_trace(s3, local_trace, capsys):
    """Without Spark, from ``s3://``: the same windows and figures as from the local copy."""
    args = ["--keys", ",".join(KEYS), "--servers", "4", "--period", "7D", "--mode", "online", "--json", "-q"]
    code, out, err = run_cli(capsys, "replay", local_trace, *args)
    assert code == ExitCode.OK, err
    local = json.loads(out)
    code, out, err = run_cli(capsys, "replay", uri("s3"), *args)
    assert code == ExitCode.OK, err
    remote = json.loads(out)
    assert len(remote["windows"]) == 3 and remote == local


@pytest.mark.parametrize("missing", ["s3a://{bucket}/flights/1999-01/", "s3a://no-such-bucket-{bucket}/flights/"])
def test_a_missing_remote_trace_exits_2_naming_it(s3, tmp_path, capsys, missing):
    trace = missing.format(bucket=BUCKET)
    code, out, err = run_cli(capsys, *optimize_args(trace, tmp_path / "store"))
    assert code == ExitCode.BAD_INPUT and json.loads(out)["exit_code"] == ExitCode.BAD_INPUT  # --json: one document
    assert f"no trace file at {trace!r}" in err
    code, _, err = run_cli(capsys, "replay", trace, "--keys", ",".join(KEYS), "--servers", "4")
    assert code == ExitCode.BAD_INPUT and f"no trace file at {trace!r}" in err


def test_a_hadoop_trace_without_spark_is_refused_by_replay_naming_it():
    """Only Spark's Hadoop file system lists hdfs://, and the replay starts no Spark: exit 2, saying what to do."""
    trace = "hdfs://namenode:8020/traces/2026-11-21/"
    done = subprocess.run(
        [sys.executable, "-m", "locality.cli", "replay", trace, "--keys", "a,b", "--servers", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == ExitCode.BAD_INPUT
    assert f"cannot list {trace!r} without Spark" in done.stderr and "copy the trace" in done.stderr
