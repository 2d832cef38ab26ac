"""The Java Space-Saving sketch (``io.locality.sketch``) and the Python one write the same bytes and read each other's.

On the real traces (tweets: location -> hashtag pairs and tweet_seq -> hashtag pairs with integer keys; flights:
tailnum -> dest pairs, tail numbers alone and flight numbers alone), Java's ``SketchTool`` (in
``jvm/examples/locality-core-examples``) updates a sketch with every record, reads sketches and merges them; the
test does the same with :class:`~locality.sketch.SpaceSaving` and compares bytes, estimates and bounds, and checks
the bounds against exact counts.

Merges give identical bytes too: both sides keep the merged counters in the same order (this sketch's, then the
other's new keys in the other's slot order) and cut ties alike.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from locality.sketch import SpaceSaving
from tests.conftest import trace_keys
from tests.jvm.conftest import CORE_EXAMPLES, run_java

SKETCH_TOOL = "io.locality.sketch.SketchTool"
#: Each run is a second or two: C2's compile threads would cost more CPU than they save.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1",)

#: name -> (trace fixture, key columns, rows read from the start: all if None); the pairs are two consecutive
#: operators' keys. The flights stop at 150,000 records (January 1 to mid-June 2013), to keep the file fast.
STREAMS = {
    "tweet_pairs": ("geotweets", trace_keys("geotweets"), None),
    "tweet_seq_pairs": ("geotweets", ["tweet_seq", "hashtag"], None),
    "flight_pairs": ("flights", trace_keys("flights"), 150_000),
    "tail_numbers": ("flights", ["tailnum"], 150_000),
    "flight_numbers": ("flights", ["flight"], 150_000),
}


class Stream:
    """One stream of a trace: its key rows (scalars or tuples) in trace order, their columns' kinds, exact counts."""

    def __init__(self, frame, columns: list[str]) -> None:
        self.arity = len(columns)
        self.ints = [i for i, c in enumerate(columns) if frame[c].dtype.kind == "i"]
        parts = [frame[c].tolist() for c in columns]
        self.rows = parts[0] if self.arity == 1 else list(zip(*parts))
        self.frame = frame[columns]
        self.exact = Counter(self.rows)

    def sketch(self, capacity: int, rows=None, weights=None) -> SpaceSaving:
        """A Python sketch of ``rows`` (all by default) through :meth:`SpaceSaving.update`, one record at a time."""
        sketch = SpaceSaving(capacity, self.arity)
        rows = self.rows if rows is None else rows
        for key, weight in zip(rows, weights if weights is not None else [1.0] * len(rows)):
            sketch.update(key, weight)
        return sketch

    def flags(self) -> list[str]:
        """SketchTool's options for this stream's keys: the arity and the integer columns."""
        return ["--arity", str(self.arity), *(["--ints", ",".join(map(str, self.ints))] if self.ints else [])]


@pytest.fixture(scope="module")
def streams(request):
    return {
        name: Stream(request.getfixturevalue(trace).iloc[:rows], columns)
        for name, (trace, columns, rows) in STREAMS.items()
    }


def _field(value) -> str:
    """A TSV field as SketchTool reads it: backslash, tab, line feed and carriage return escaped."""
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def write_rows(path: Path, rows, arity: int, weights=None) -> Path:
    """Key rows (and weights) as the TSV file SketchTool reads with ``--keys`` and ``--query``."""
    lines = []
    for i, key in enumerate(rows):
        fields = [key] if arity == 1 else list(key)
        if weights is not None:
            fields.append(repr(weights[i]))
        lines.append("\t".join(map(_field, fields)) + "\n")
    path.write_text("".join(lines), encoding="utf-8", newline="\n")
    return path


def sketch_tool(*args) -> dict:
    """SketchTool's JSON summary, after it succeeded."""
    done = run_java([CORE_EXAMPLES], SKETCH_TOOL, *args, jvm_options=JVM_OPTIONS)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def answers(sketch: SpaceSaving, keys) -> list[list[float]]:
    """Python's answers as SketchTool prints ``estimates``: [estimate, lower, upper] per key."""
    return [[sketch.estimate(k), sketch.lower_bound(k), sketch.upper_bound(k)] for k in keys]


def some_keys(stream: Stream, sketch: SpaceSaving) -> list:
    """The keys whose answers are compared: the sketch's 300 heaviest and about 2,000 others of the stream."""
    distinct = list(stream.exact)
    return list(
        dict.fromkeys([*(as_key(row[0]) for row in top_rows(sketch, 300)), *distinct[:: len(distinct) // 2_000]])
    )


def as_key(components: list):
    """A key as Python's sketch takes it: the component, or a tuple of them."""
    return components[0] if len(components) == 1 else tuple(components)


def top_rows(sketch: SpaceSaving, k: int | None = None) -> list[list]:
    """:meth:`SpaceSaving.top_k` as SketchTool prints ``top``: [[components], estimate, lower, upper]."""
    frame = sketch.top_k(k)
    keys = frame.iloc[:, : sketch.arity].to_numpy(dtype=object).tolist()
    bounds = frame[["estimate", "lower", "upper"]].to_numpy().tolist()
    return [[[v if isinstance(v, str) else int(v) for v in key], *row] for key, row in zip(keys, bounds)]


def assert_bounds(sketch: SpaceSaving, exact: Counter, *, rel: float = 0.0) -> None:
    """Every statement of the Accuracy section, for every key of the stream (``rel``: float rounding allowed)."""
    w, m, mu = sketch.total_weight, sketch.capacity, sketch.min_count
    slack = rel * w
    assert w == pytest.approx(sum(exact.values()), rel=1e-12)
    assert mu <= w / m + slack
    rows = top_rows(sketch)
    assert sum(row[1] for row in rows) <= w + slack
    monitored = {}
    for key, estimate, lower, _ in rows:
        assert estimate - lower <= mu + slack
        monitored[as_key(key)] = (lower, estimate)
    for key, f in exact.items():
        lower, upper = monitored.get(key, (0.0, mu))
        assert lower - slack <= f <= upper + slack, (key, f, lower, upper)
        assert key in monitored or f <= w / m + slack, (key, f, w / m)


CASES = [  # (stream, capacity, weighted)
    ("tweet_pairs", 1_000, False),
    ("tweet_pairs", 65_536, False),  # 60,957 distinct pairs: no eviction
    ("tweet_seq_pairs", 2_000, False),
    ("tail_numbers", 500, False),
    ("tail_numbers", 4_096, False),  # 3,800 tail numbers: no eviction
    ("flight_numbers", 300, False),
    ("flight_pairs", 3_000, True),
]


@pytest.mark.parametrize(("name", "capacity", "weighted"), CASES)
def test_java_and_python_updates_write_the_same_bytes(streams, name, capacity, weighted, tmp_path):
    """(a) and (d): the same records through Java's and Python's update give identical bytes, estimates, bounds
    and top keys, and the bounds hold against exact counts (exact counts when the distinct keys fit)."""
    stream = streams[name]
    weights = [0.1 * (1 + i % 7) for i in range(len(stream.rows))] if weighted else None
    python = stream.sketch(capacity, weights=weights)
    keys = write_rows(tmp_path / "keys.tsv", stream.rows, stream.arity, weights)
    asked = some_keys(stream, python)
    query = write_rows(tmp_path / "query.tsv", asked, stream.arity)
    out = tmp_path / "java.bin"
    args = ["--capacity", capacity, *stream.flags(), "--keys", keys, "--out", out, "--query", query, "--top", 25]
    summary = sketch_tool(*args, *(["--weighted"] if weighted else []))
    assert out.read_bytes() == python.to_bytes()
    assert (summary["total"], summary["minCount"]) == (python.total_weight, python.min_count)
    assert summary["size"] == len(python) == min(capacity, len(stream.exact))
    assert summary["estimates"] == answers(python, asked)
    assert summary["top"] == top_rows(python, 25)
    java = SpaceSaving.from_bytes(out.read_bytes())
    if weighted:
        exact = Counter()
        for key, weight in zip(stream.rows, weights):
            exact[key] += weight
        assert_bounds(java, exact, rel=1e-12)
    elif capacity >= len(stream.exact):
        assert summary["minCount"] == 0
        assert {as_key(key): (e, lo, up) for key, e, lo, up in top_rows(java)} == {
            key: (f, f, f) for key, f in stream.exact.items()
        }
    else:
        assert summary["minCount"] > 0  # evictions happened
        assert_bounds(java, stream.exact)


@pytest.mark.parametrize(("name", "capacity"), [("tweet_pairs", 1_000), ("flight_numbers", 300)])
def test_java_reads_python_batch_bytes_and_writes_them_back(streams, name, capacity, tmp_path):
    """(b): the bytes of Python's update_batch (its own counters and order) read in Java and written back unchanged,
    with Python's estimates and bounds."""
    stream = streams[name]
    python = SpaceSaving(capacity, stream.arity)
    for start in range(0, len(stream.frame), 25_000):
        python.update_batch(stream.frame.iloc[start : start + 25_000])
    source, out = tmp_path / "python.bin", tmp_path / "java.bin"
    source.write_bytes(python.to_bytes())
    asked = some_keys(stream, python)
    query = write_rows(tmp_path / "query.tsv", asked, stream.arity)
    summary = sketch_tool("--read", source, *stream.flags(), "--out", out, "--query", query, "--top", 25)
    assert out.read_bytes() == source.read_bytes()
    assert [summary[k] for k in ("total", "minCount", "size")] == [python.total_weight, python.min_count, len(python)]
    assert summary["estimates"] == answers(python, asked)
    assert summary["top"] == top_rows(python, 25)
    assert_bounds(python, stream.exact)


@pytest.mark.parametrize(
    ("name", "capacity"),
    [("flight_numbers", 300), ("tweet_pairs", 1_500), ("tweet_seq_pairs", 1_500), ("flight_pairs", 1_500)],
)
def test_merges_on_either_side(streams, name, capacity, tmp_path):
    """(c) and (d): a trace in thirds, the first sketched by Python's update, the second by Java's, the third by
    Python's update_batch; Java merges Python's two into its own, Python merges its two into Java's: the same
    bytes."""
    stream = streams[name]
    third = len(stream.rows) // 3
    a = stream.sketch(capacity, stream.rows[:third])
    c = SpaceSaving(capacity, stream.arity)
    c.update_batch(stream.frame.iloc[2 * third :])
    (tmp_path / "a.bin").write_bytes(a.to_bytes())
    (tmp_path / "c.bin").write_bytes(c.to_bytes())
    keys = write_rows(tmp_path / "b.tsv", stream.rows[third : 2 * third], stream.arity)
    built = sketch_tool("--capacity", capacity, *stream.flags(), "--keys", keys, "--out", tmp_path / "b.bin")
    assert built["size"] == capacity  # each third fills the sketch alone: the merges drop keys
    parts = ["--merge", tmp_path / "a.bin", "--merge", tmp_path / "c.bin", "--out", tmp_path / "java.bin"]
    merged = sketch_tool("--capacity", capacity, *stream.flags(), "--keys", keys, *parts)
    java_bytes = (tmp_path / "java.bin").read_bytes()
    java = SpaceSaving.from_bytes(java_bytes)
    python = SpaceSaving.from_bytes((tmp_path / "b.bin").read_bytes()).merge(a).merge(c)
    assert (merged["total"], merged["minCount"]) == (python.total_weight, python.min_count)
    assert_bounds(java, stream.exact)
    assert_bounds(python, stream.exact)
    assert java_bytes == python.to_bytes()
