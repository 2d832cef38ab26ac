"""Surrogates, routing files and raw keys checked against Flink's own ``KeyGroupRangeAssignment``.

A tiny Java harness (``SurrogateHarness.java``) is compiled with javac against the
flink-dist jar of the ``apache-flink-libraries`` wheel (and flink-python's, for
PyFlink's ``KeyByKeySelector``) and reads the files locality writes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locality.engines.flink import write_routing_file
from locality.hashing import make_fallback
from locality.hashing.flink import RESERVED_INTS, RESERVED_LONGS, flink_surrogates
from locality.routing import RoutingTable

HERE = Path(__file__).parent

#: (parallelism, max parallelism): Flink's default M (p=6 -> 128, p=300 -> 512), p = M, non-powers of two,
#: one subtask, and the largest M.
SHAPES = [(6, None), (7, 7), (5, 100), (300, None), (1, 128), (48, 1000), (1000, 32768)]
ENGINES = ["flink", "pyflink"]
KEY_TYPES = ["string", "long", "int"]


@pytest.fixture(scope="session")
def harness(flink_env, tmp_path_factory):
    """Run the compiled harness on files; returns one dict per file."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.fail("javac and java (JDK 17+) are needed to check surrogates against Flink's jars")
    classes = tmp_path_factory.mktemp("harness")
    classpath = f"{flink_env.flink_dist}:{flink_env.flink_python}"
    compiled = subprocess.run(
        ["javac", "-cp", classpath, "-d", str(classes), str(HERE / "SurrogateHarness.java")],
        capture_output=True,
        text=True,
    )
    assert compiled.returncode == 0, compiled.stderr

    def run(files: list[Path]) -> list[dict]:
        done = subprocess.run(
            ["java", "-cp", f"{classpath}:{classes}", "SurrogateHarness", *map(str, files)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return [json.loads(line) for line in done.stdout.splitlines()]

    return run


def write_lines(path: Path, fallback, key_type: str, rows: list[dict]) -> Path:
    """A file in the routing-file layout: a header, then one row per line."""
    header = {
        "format": "locality-flink-routing",
        "version": 1,
        "engine": fallback.engine,
        "key_type": key_type,
        "max_parallelism": fallback.max_parallelism,
        "parallelism": fallback.n_instances,
    }
    lines = [json.dumps(header)] + [json.dumps(row, ensure_ascii=False) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sample_keys(key_type: str, trace: pd.DataFrame, n: int = 3000) -> list:
    """Real keys: hashtags of the tweet trace, or seeded ints of the Java type outside the reserved range."""
    if key_type == "string":
        return trace["hashtag"].drop_duplicates().head(n).tolist()
    low, high = (RESERVED_INTS[1], 2**31 - 1) if key_type == "int" else (RESERVED_LONGS[1], 2**63 - 1)
    rng = np.random.default_rng(7)
    edges = [low, high, -1, 0, 1, 42, -7]
    return sorted(set(edges) | set(rng.integers(low, high, n, endpoint=True).tolist()))


def test_harness_agrees_on_every_surrogate_route_and_raw_key(harness, geotweets, tmp_path):
    files, expected = [], []
    for engine in ENGINES:
        for key_type in KEY_TYPES:
            keys = sample_keys(key_type, geotweets)
            for p, m in SHAPES:
                fallback = make_fallback(engine, p, max_parallelism=m, int_type="int" if key_type == "int" else "long")
                stem = f"{engine}-{key_type}-{p}-{fallback.max_parallelism}"
                surrogates = flink_surrogates(fallback, key_type)
                assert surrogates["subtask"].nunique() == p  # every subtask has a surrogate
                rows = [
                    {"surrogate": s, "subtask": int(i), "key_group": int(g)}
                    for g, i, s in surrogates[["subtask", "surrogate"]].itertuples()
                ]
                files.append(write_lines(tmp_path / f"{stem}.surrogates", fallback, key_type, rows))
                expected.append(fallback.max_parallelism)
                # a table sending every key to a seeded random subtask, as a Java job would load it
                targets = np.random.default_rng(p).integers(0, p, len(keys))
                table = RoutingTable("op", fallback, pd.Series(targets, index=pd.Index(keys, dtype=object)))
                files.append(write_routing_file(table, tmp_path / f"{stem}.routes", key_type=key_type))
                expected.append(len(table))
                # keys without an entry keep their own value: Flink must put them where the fallback says
                raw = [
                    {"key": k, "subtask": int(i), "key_group": int(g)}
                    for k, i, g in zip(keys, fallback.instances_of(keys), fallback.key_groups(keys))
                ]
                files.append(write_lines(tmp_path / f"{stem}.raw", fallback, key_type, raw))
                expected.append(len(keys))
    results = harness(files)
    assert [r["file"] for r in results] == [str(f) for f in files]
    assert [r["checked"] for r in results] == expected
    disagreeing = [
        (r["file"], r["agree"], r["checked"], r["first_mismatch"]) for r in results if r["agree"] != r["checked"]
    ]
    assert disagreeing == []
    for kind in ("surrogates", "routes", "raw"):
        mine = [r for r in results if r["file"].endswith(f".{kind}")]
        agree, checked = sum(r["agree"] for r in mine), sum(r["checked"] for r in mine)
        print(f"KeyGroupRangeAssignment agrees on {agree:,} of {checked:,} {kind} lines in {len(mine)} files")


def test_tweet_tables_files_agree_with_flink(harness, tweet_configuration, tmp_path):
    files = [write_routing_file(tweet_configuration, tmp_path / f"{op}.jsonl", op) for op in ("location", "hashtag")]
    results = harness(files)
    sizes = tweet_configuration.table_sizes()
    assert [(r["checked"], r["agree"]) for r in results] == [(sizes[op], sizes[op]) for op in ("location", "hashtag")]


def test_harness_catches_a_wrong_key_form(harness, tmp_path):
    """Surrogates of the plain form, declared as PyFlink's: Flink must put most of them elsewhere."""
    plain = make_fallback("flink", 6)
    surrogates = flink_surrogates(plain)
    rows = [{"surrogate": s, "subtask": int(i), "key_group": int(g)} for g, i, s in surrogates.itertuples()]
    wrong = write_lines(tmp_path / "wrong", make_fallback("pyflink", 6), "string", rows)
    (result,) = harness([wrong])
    assert result["checked"] == 128 and result["agree"] < 64 and result["first_mismatch"]
