"""Under ``spark-submit``, whose JVM joins the driver's stdout and stderr: ``--json`` prints one document alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from tests.conftest import REPO


def test_spark_submit_json_stdout_holds_the_document_and_progress_goes_to_stderr(tmp_path):
    rows = 400
    frame = pd.DataFrame({"user": [f"u{i % 9}" for i in range(rows)], "tag": [f"t{i % 7}" for i in range(rows)]})
    frame.assign(n=np.ones(rows)).to_parquet(tmp_path / "t.parquet", index=False)
    submit = Path(sys.executable).with_name("spark-submit")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO), "SPARK_LOCAL_IP": "127.0.0.1"}
    args = ["optimize", str(tmp_path / "t.parquet"), "--keys", "user,tag", "--servers", "2"]
    args += ["--store", str(tmp_path / "store"), "--json"]  # progress on: not -q
    done = subprocess.run(
        [str(submit), "--master", "local[2]", str(REPO / "locality_job.py"), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)  # the whole of stdout is one JSON document
    assert document["version"] == 1 and done.stdout.strip().count("\n") == 0
    assert "count keys" in done.stderr  # the progress went to spark-submit's stderr
