"""The store's fingerprint identifies an input by its content: a touch changes nothing, a same-size rewrite does."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd

from locality._digests import file_digests
from locality.store import ConfigStore, fingerprint
from pipelines.trace import TraceSpec, input_identity


def _trace(path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    pd.DataFrame({"a": rng.choice(list("abcdef"), 500), "b": rng.choice(list("uvwxyz"), 500)}).to_parquet(path)


def _key(spec: TraceSpec, cache) -> str:
    return fingerprint(input_identity(spec, cache), {"alpha": 1.03})


def test_touching_or_moving_an_input_keeps_its_fingerprint(tmp_path):
    (tmp_path / "trace").mkdir()
    for i in range(3):
        _trace(tmp_path / "trace" / f"part-{i}.parquet", seed=i)
    spec = TraceSpec(str(tmp_path / "trace"), ["a", "b"])
    cache = ConfigStore(tmp_path / "store").digest_cache
    before = _key(spec, cache)
    for part in (tmp_path / "trace").iterdir():
        os.utime(part, ns=(1_000_000_000, 1_000_000_000))  # touched: new dates, same bytes
    assert _key(spec, cache) == before
    assert _key(spec, None) == before  # the cache only spares the reading
    (tmp_path / "trace").rename(tmp_path / "moved")
    assert _key(TraceSpec(str(tmp_path / "moved"), ["a", "b"]), cache) == before


def test_a_rewrite_with_the_same_size_and_dates_is_another_input(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b\nx,y\n")
    spec = TraceSpec(str(path), ["a", "b"])
    cache = ConfigStore(tmp_path / "store").digest_cache
    before = _key(spec, cache)
    stat = os.stat(path)
    path.write_text("a,b\ny,x\n")  # same size; the dates put back as they were
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(path).st_size == stat.st_size and os.stat(path).st_mtime_ns == stat.st_mtime_ns
    assert _key(spec, cache) != before


def test_unchanged_files_are_not_read_again(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b\nx,y\n")
    cache = ConfigStore(tmp_path / "store").digest_cache
    [(size, digest)] = file_digests([str(path)], cache)
    remembered = json.loads((tmp_path / "store" / "digests.json").read_text())["files"][str(path)]
    assert remembered[2] == size and remembered[5] == digest
    # a wrong digest remembered under the file's exact identity is what comes back: the file was not read
    (tmp_path / "store" / "digests.json").write_text(json.dumps({"files": {str(path): [*remembered[:5], "0" * 64]}}))
    assert file_digests([str(path)], cache) == [(size, "0" * 64)]
    os.utime(path)  # the change time moves: read again
    assert file_digests([str(path)], cache) == [(size, digest)]


def test_a_damaged_cache_is_rebuilt(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b\nx,y\n")
    cache = ConfigStore(tmp_path / "store").digest_cache
    (tmp_path / "store").mkdir()
    expected = file_digests([str(path)])
    for damage in (b"\xff\xfe", b"[1, 2]", b'{"files": {"x": "y"}}'):
        (tmp_path / "store" / "digests.json").write_bytes(damage)
        assert file_digests([str(path)], cache) == expected
