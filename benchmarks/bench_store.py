"""Publishing and loading a version with 1e6 table entries: a local directory against an S3 bucket.

For one configuration of ``--entries`` table entries (two operators, string keys), the script
measures, in one run and in alternation (so that the machine's load falls on both alike):

- **publish**: ``ConfigStore.publish`` into a fresh store (lease, fence, claim, files, manifest,
  ``CURRENT``, history), beside the baseline of writing the same files' bytes with plain puts and
  nothing else (the floor any store pays);
- **first load, Python**: ``ConfigStore.get().config`` on a store it has never read (``CURRENT``, the
  manifest, every file read checked against its SHA-256, the tables decoded into pandas, their keys
  checked unique), beside the baseline of reading the same Parquet bytes alone (``get`` of each table
  object from the same backend, decoded into the same Series of key -> instance), and beside Arrow's
  decode alone (no Python object per key: the floor); and ``Router(store)``, which also builds the
  lookups before it serves (a dict of a million keys);
- **first load, Java** (with ``--java``): ``ConfigStore.open(uri).load()`` in a fresh JVM
  (``configuration.json`` checked and parsed), beside reading and parsing the same bytes alone.

Backends: a local directory on this machine's disk, and a bucket of a real S3 server on loopback
(the Versity S3 Gateway, ``testbed/s3server.py``). Wall-clock seconds, median of ``--repeat`` runs.

Usage::

    python benchmarks/bench_store.py [--entries 1000000] [--repeat 5] [--java]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # testbed/ is not installed: run from a checkout

from locality.hashing import make_fallback  # noqa: E402
from locality.router import Router  # noqa: E402
from locality.routing import RoutingConfiguration, RoutingTable  # noqa: E402
from locality.storage import open_objects  # noqa: E402
from locality.store import ConfigStore  # noqa: E402
from locality.topology import Topology  # noqa: E402
from testbed.s3server import S3Server  # noqa: E402

OPERATORS = ("location", "hashtag")
INSTANCES = 48


def configuration(entries: int, seed: int = 0) -> RoutingConfiguration:
    """``entries`` table entries over two operators: hashtag-like string keys, each off its fallback instance."""
    rng = np.random.default_rng(seed)
    topology = Topology.uniform(list(OPERATORS), INSTANCES)
    fallback = make_fallback("kafka", INSTANCES)
    tables = {}
    for i, op in enumerate(OPERATORS):
        keys = np.array([f"#{op[0]}{i}-{k:x}-{rng.integers(1 << 30):x}" for k in range(entries // 2)], dtype=object)
        instances = (fallback.instances_of(keys) + 1) % INSTANCES
        tables[op] = RoutingTable(op, fallback, pd.Series(instances, index=pd.Index(keys, dtype=object)))
    return RoutingConfiguration(topology, tables, {"bench": "store"})


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def plain_puts(location: str, files: dict[str, bytes]) -> None:
    objects = open_objects(location)
    for name, data in files.items():
        objects.put(f"plain/{name}", data)


def parquet_alone(location: str, version_prefix: str, table_names: list[str], *, series: bool = True) -> None:
    """The same tables' bytes got from the same backend and decoded, into the same Series of key -> instance.

    Without ``series``, decoded into Arrow only (no Python object per key): the floor of any reader.
    """
    objects = open_objects(location)
    for name in table_names:
        data = objects.get(f"{version_prefix}/configuration/{name}").data
        table = pq.read_table(pa.BufferReader(data), columns=["key", "instance"])
        if series:
            keys = table.column("key").combine_chunks().to_numpy(zero_copy_only=False)
            pd.Series(table.column("instance").to_numpy(), index=pd.Index(keys, dtype=object))


def java_load(location: str, env: dict[str, str]) -> tuple[float, float]:
    """Seconds of ``ConfigStore.open(uri).load()`` and of reading the same JSON bytes alone, in a fresh JVM."""
    from testbed.jvm import run_java

    main_class = "io.locality.store.StoreLoadTimer"
    done = run_java(["examples/locality-core-examples"], main_class, location, timeout=600, env=env)
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    figures = dict(line.split("=") for line in done.stdout.split() if "=" in line)
    return float(figures["load"]), float(figures["bytes_alone"])


def measure(location: str, config: RoutingConfiguration, files: dict[str, bytes], run: str, java_env) -> dict:
    """Seconds of each operation on a new store at ``location`` (the Java reader's too, given its environment)."""
    tables = [name for name in files if name.startswith("tables/")]
    figures = {
        "publish": timed(lambda: ConfigStore(location).publish(config, fingerprint=run)),
        "plain puts": timed(lambda: plain_puts(location, files)),
        "load (Router)": timed(lambda: Router(location)),
        "load (config)": timed(lambda: ConfigStore(location).get().config),
        "Parquet alone": timed(lambda: parquet_alone(location, "versions/000001", tables)),
        "Arrow alone": timed(lambda: parquet_alone(location, "versions/000001", tables, series=False)),
    }
    if java_env is not None:
        figures["Java load"], figures["Java bytes alone"] = java_load(location, java_env)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--java", action="store_true", help="also time the Java reader (needs `make jvm`)")
    args = parser.parse_args()

    config = configuration(args.entries)
    files = config.to_files()
    size = sum(len(data) for data in files.values())
    print(f"a version of {args.entries:,} entries: {len(files)} files, {size / 1e6:.1f} MB")
    with S3Server() as server, tempfile.TemporaryDirectory(prefix="bench-store-") as work:
        os.environ.update(server.env)
        backends = {
            "directory": lambda: os.path.join(work, uuid.uuid4().hex),
            "s3": lambda: f"s3://locality/{uuid.uuid4().hex}",
        }
        rows: dict[str, dict[str, list[float]]] = {b: {} for b in backends}
        for run in range(args.repeat):
            for backend, fresh in backends.items():
                figures = measure(fresh(), config, files, f"run{run}", server.env if args.java else None)
                for what, seconds in figures.items():
                    rows[backend].setdefault(what, []).append(seconds)
                print(
                    f"run {run + 1}/{args.repeat} {backend}: " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items())
                )
    print(f"\nmedian seconds of {args.repeat} runs, {args.entries:,} entries")
    print(f"{'':<18}" + "".join(f"{b:>12}" for b in backends) + f"{'s3 / dir':>10}")
    for what in rows["directory"]:
        med = {b: statistics.median(rows[b][what]) for b in backends}
        print(f"{what:<18}" + "".join(f"{med[b]:>12.2f}" for b in backends) + f"{med['s3'] / med['directory']:>10.2f}")
    for backend in backends:
        med = {what: statistics.median(v) for what, v in rows[backend].items()}
        print(
            f"{backend}: publish / plain puts {med['publish'] / med['plain puts']:.2f}; "
            f"load (config) / Parquet alone {med['load (config)'] / med['Parquet alone']:.2f} "
            f"(/ Arrow alone {med['load (config)'] / med['Arrow alone']:.2f}); "
            f"Router / Parquet alone {med['load (Router)'] / med['Parquet alone']:.2f}"
            + (f"; Java load / bytes alone {med['Java load'] / med['Java bytes alone']:.2f}" if args.java else "")
        )


if __name__ == "__main__":
    main()
