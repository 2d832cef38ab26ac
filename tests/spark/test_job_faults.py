"""The Spark jobs under faults: a Python worker killed mid-pass, what decides a failure's exit code, and the
IPython import race of the job's plot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from locality.cli import ExitCode, main
from locality.errors import JobError, TraceError
from locality.store import ConfigStore
from locality.topology import Topology
from pipelines.params import OfflineParams
from pipelines.trace import TraceSpec, spark_read_errors
from tests.conftest import REPO, trace_keys, trace_path


def _python_workers(parent: psutil.Process | None = None) -> list[psutil.Process]:
    """The forked PySpark workers of the JVM under ``parent`` (default: this process), not ``pyspark.daemon``."""
    workers = []
    for child in (parent or psutil.Process()).children(recursive=True):
        try:
            if "pyspark.daemon" in " ".join(child.cmdline()):
                workers += child.children()
        except psutil.NoSuchProcess:
            continue
    return workers


def test_a_python_worker_killed_during_the_sketch_pass_fails_the_job_clearly(spark, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LOCALITY_LOG_DIR", str(tmp_path / "logs"))
    store = tmp_path / "store"
    trace = str(trace_path("flights"))
    args = ["optimize", trace, "--keys", ",".join(trace_keys("flights")), "--ts", "ts", "--servers", "4"]
    args += ["--store", str(store)]
    args += ["-q", "--no-graph-stats", "--end", "2013-04-01"]
    assert main([*args, "--start", "2013-03-01"]) == ExitCode.OK
    capsys.readouterr()
    version_1 = ConfigStore(store).get(1)
    assert sum(version_1.config.table_sizes().values()) > 0  # tables that a version half-written over it would change

    outcome = {}
    job = threading.Thread(target=lambda: outcome.update(code=main(args)))
    tracker = spark.sparkContext.statusTracker()
    job.start()
    killed = 0
    while job.is_alive():  # kill the workers of every Python task while a stage runs (the sketch pass)
        if tracker.getActiveStageIds():
            for worker in _python_workers():
                try:
                    os.kill(worker.pid, signal.SIGKILL)
                except ProcessLookupError:  # it ended between the listing and the kill
                    continue
                killed += 1
        time.sleep(0.02)
    job.join()
    _, err = capsys.readouterr()
    assert killed >= 1
    assert outcome["code"] == ExitCode.CRASH
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert "Python worker exited unexpectedly" in lines[0] and repr(trace) in lines[0]
    log = lines[0].split("traceback in ")[1].split(";")[0]
    assert log.startswith(str(tmp_path / "logs")) and "Traceback" in open(log).read()
    # nothing was published: the previous version is current and whole, and the next run succeeds
    published = ConfigStore(store)
    assert published.versions() == [1] and published.current_version() == 1
    published.get().verify()  # every file of version 1 as its manifest recorded it
    assert published.get().manifest == version_1.manifest and published.get().config == version_1.config
    assert main(args) == ExitCode.OK
    assert published.versions() == [1, 2] and published.current_version() == 2


def _killed_mid_stream(rows):
    """A Python worker that dies (SIGKILL) after a few thousand rows: its socket breaks under the JVM's reader."""
    for i, row in enumerate(rows):
        if i == 5_000:
            os.kill(os.getpid(), signal.SIGKILL)
        yield row


def _raising(error: Exception):
    def task(rows):
        raise error
        yield from rows

    return task


def worker_killed(spark, tmp_path):
    spark.range(100_000).rdd.mapPartitions(_killed_mid_stream).count()


def worker_bug(spark, tmp_path):
    spark.range(10).rdd.mapPartitions(_raising(TypeError("a bug"))).count()


def value_refused_by_a_worker(spark, tmp_path):
    spark.range(10).rdd.mapPartitions(_raising(ValueError("key 'x' is odd"))).count()


def truncated_parquet(spark, tmp_path):
    path = tmp_path / "trace.parquet"
    pq.write_table(pa.table({"user": [f"u{i}" for i in range(20_000)]}), path)
    path.write_bytes(path.read_bytes()[:-300])
    spark.read.parquet(str(path)).count()


def malformed_csv_record(spark, tmp_path):
    (tmp_path / "t.csv").write_text("a,b\n1,2\n3,x,4\n")
    reader = spark.read.option("header", "true").option("mode", "FAILFAST").schema("a int, b int")
    reader.csv(str(tmp_path / "t.csv")).collect()


#: Spark actions that fail, the error each must become, and what its message says.
FAILURES = {
    # a worker that died, or a worker's own bug: a crash, whichever exception reached the driver first
    worker_killed: (JobError, "Python worker exited unexpectedly"),
    worker_bug: (JobError, "TypeError: a bug"),
    # the trace itself: bad input
    value_refused_by_a_worker: (TraceError, "key 'x' is odd"),
    truncated_parquet: (TraceError, "FAILED_READ_FILE"),
    malformed_csv_record: (TraceError, "FAILED_READ_FILE"),
}


@pytest.mark.parametrize("action", FAILURES, ids=lambda action: action.__name__)
def test_a_failure_is_bad_input_only_when_its_cause_is_the_trace(spark, tmp_path, action):
    error, says = FAILURES[action]
    with pytest.raises(error, match=says) as raised:
        with spark_read_errors("the-trace"):
            action(spark, tmp_path)
    assert "'the-trace'" in str(raised.value)


def test_ctrl_c_during_a_spark_job_says_so_in_one_line_and_exits_130(tmp_path):
    """SIGINT to the command's process group (a terminal's Ctrl-C) while the job counts: no traceback, nothing
    published, the JVM gone with it."""
    store = tmp_path / "store"
    command = [str(Path(sys.executable).with_name("locality")), "optimize", str(trace_path("flights")), "--ts", "ts"]
    command += ["--keys", ",".join(trace_keys("flights")), "--servers", "4", "--store", str(store)]
    job = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=REPO)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(job.stderr), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while not _python_workers(psutil.Process(job.pid)) and job.poll() is None:  # a Python task runs
            assert time.monotonic() < deadline, "the job never ran a Python task"
            time.sleep(0.05)
        os.killpg(job.pid, signal.SIGINT)
        assert job.wait(120) == ExitCode.INTERRUPTED
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
    reader.join(30)
    err = "".join(lines)
    said = [line.strip() for line in lines if line.strip()]
    assert said[-1] == "locality: interrupted" and "Traceback" not in err and "ERROR" not in err, err
    assert not store.exists() or ConfigStore(store).versions() == []
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if str(store) in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []  # the JVM ended with the command


def test_the_job_draws_only_once_its_statistics_thread_is_done(spark, tmp_path, monkeypatch):
    """The cause of the IPython race: matplotlib read sys.modules["IPython"] while the statistics thread imported it.

    matplotlib looks at ``sys.modules["IPython"]`` when it makes its first canvas (``pyplot`` also on its first
    figure) and the statistics thread's first PySpark call imports IPython; the job must not draw while that
    thread runs.
    """
    import locality.publication as publication
    import pipelines.offline as offline

    seen = []

    def drawing(fig, *args, **kwargs):
        seen.append(sorted(t.name for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor")))
        return figure_png(fig, *args, **kwargs)

    figure_png = publication.figure_png  # the job's plot is drawn where the run is published
    monkeypatch.setattr(publication, "figure_png", drawing)
    spec = TraceSpec(str(trace_path("flights")), trace_keys("flights"), ts="ts", end="2013-02-01")
    params = OfflineParams(trace=spec, topology=Topology.uniform(trace_keys("flights"), 4), store=str(tmp_path))
    result = offline.run(spark, params)
    assert result.report["graph_statistics"]["vertices"] > 0  # the statistics thread did run
    assert seen == [[]]  # and was gone when the plot was drawn
    assert (ConfigStore(tmp_path).get().path / "load.png").read_bytes().startswith(b"\x89PNG")


def test_the_offline_job_runs_repeatedly_with_ipython_importable(tmp_path):
    """Real ``locality optimize`` processes (IPython importable): every run succeeds (50 of 50 measured by hand)."""
    import IPython  # noqa: F401 -- the race needs IPython importable; a missing one fails here, not silently

    half = tmp_path / "tweets_first_half.parquet"
    import pandas as pd

    frame = pd.read_parquet(trace_path("geotweets")).sort_values("seq", kind="stable")
    frame.iloc[: len(frame) // 2].to_parquet(half, index=False)
    locality = [sys.executable, "-m", "locality.cli"]
    for run in range(2):
        store = tmp_path / f"store{run}"
        keys = ",".join(trace_keys("geotweets"))
        args = [*locality, "optimize", str(half), "--keys", keys, "--servers", "6", "--store", str(store)]
        done = subprocess.run([*args, "-q"], capture_output=True, text=True, timeout=600, cwd=REPO)
        assert done.returncode == ExitCode.OK, done.stderr
        assert "Traceback" not in done.stderr and ConfigStore(store).versions() == [1]
