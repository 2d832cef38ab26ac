"""What identifying an input by its content costs: the store's fingerprint, first run and reruns.

Writes the offline benchmark's two-key Zipf trace (``zipf_pairs``, the trace of
``bench_offline_job.py``) as 8 Parquet files, then times, each ``--repeat``
times (medians): reading every byte once (the floor any content digest
pays), the fingerprint's digests on a first run (nothing remembered), on a
rerun (digests remembered beside the store), and after ``touch`` of every
file (read again: same digests, same fingerprint).

    .venv/bin/python benchmarks/bench_fingerprint.py --rows 10000000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locality.datasets.synthetic import zipf_pairs  # noqa: E402
from locality.store import fingerprint  # noqa: E402
from pipelines.trace import TraceSpec, input_identity  # noqa: E402


def _timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def _read_all(files: list[Path]) -> int:
    total = 0
    for path in files:
        with open(path, "rb") as fh:
            while block := fh.read(1 << 20):
                total += len(block)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace"
        trace.mkdir()
        table = pa.Table.from_pandas(zipf_pairs(args.rows, seed=42), preserve_index=False)
        step = -(-table.num_rows // 8)
        for i in range(8):
            pq.write_table(table.slice(i * step, step), trace / f"part-{i}.parquet")
        files = sorted(trace.iterdir())
        size = sum(f.stat().st_size for f in files)
        spec = TraceSpec(str(trace), ["k1", "k2"])
        cache = Path(tmp) / "store" / "digests.json"
        cache.parent.mkdir()
        floor, first, rerun, touched, keys = [], [], [], [], set()
        for _ in range(args.repeat):
            floor.append(_timed(lambda: _read_all(files))[0])
            cache.unlink(missing_ok=True)
            seconds, identity = _timed(lambda: input_identity(spec, cache))
            first.append(seconds)
            keys.add(fingerprint(identity, {}))
            seconds, identity = _timed(lambda: input_identity(spec, cache))
            rerun.append(seconds)
            keys.add(fingerprint(identity, {}))
            for path in files:
                os.utime(path)
            seconds, identity = _timed(lambda: input_identity(spec, cache))
            touched.append(seconds)
            keys.add(fingerprint(identity, {}))
        print(f"{args.rows:,} rows, {len(files)} Parquet files, {size / 1e6:,.1f} MB")
        for name, times in (("read every byte", floor), ("first run", first), ("rerun", rerun), ("touched", touched)):
            median = statistics.median(times)
            rate = f"{size / median / 1e6:,.0f} MB/s" if median > 0 else "-"
            print(f"  {name:16} {median * 1000:9.1f} ms  ({rate}; {' '.join(f'{t * 1000:.1f}' for t in times)})")
        print(f"  fingerprints: {len(keys)} distinct over every run (1: touching changed nothing)")


if __name__ == "__main__":
    main()
