"""``--json``: stdout carries the one JSON document and nothing else, whatever writes to descriptor 1 meanwhile."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

# What native code does (METIS, a JVM, a C library's printf): write to descriptor 1, below Python's streams.
CHILD = """
import os, sys
from locality._stdout import document_stream, one_document
with one_document():
    os.write(1, b"native bytes on descriptor 1\\n")
    print("a stray print")
    sys.stdout.write("a stray write\\n")
    sys.stdout.flush()
    document_stream().write(json_text)
os.write(1, b"")
"""


def test_only_the_document_reaches_stdout_and_the_rest_goes_to_stderr():
    document = {"version": 3, "keys": ["Zürich", "東京"]}
    code = f"json_text = {json.dumps(json.dumps(document))} + '\\n'\n" + CHILD
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == document and done.stdout.count(b"\n") == 1
    for line in (b"native bytes on descriptor 1", b"a stray print", b"a stray write"):
        assert line in done.stderr


def test_a_command_run_as_a_process_prints_one_json_document(tmp_path):
    """``locality replay --json`` with its progress bar and warnings on: stdout parses, whole."""
    from locality.datasets.synthetic import twitter_like

    twitter_like(5_000, n_locations=30, n_hashtags=300, days=14, seed=1).to_parquet(tmp_path / "t.parquet")
    args = ["-v", "replay", str(tmp_path / "t.parquet"), "--keys", "location,hashtag", "--servers", "3", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "locality.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["windows"]) == 2 and done.stdout.count("\n") == 1
    assert "INFO" in done.stderr  # -v: logs went to stderr
