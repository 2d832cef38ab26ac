"""Routing keys of split keys checked against Flink's own ``KeyGroupRangeAssignment`` (the javac-compiled harness).

For each split key and server, the key selector's routing key must land on the
subtask the split plan names, both from :class:`RoutingKeySelector` and from the
per-server files :func:`write_routing_file` writes for a Java job.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from locality.engines.flink import RoutingKeySelector, write_routing_file
from locality.hashing import make_fallback
from locality.routing import RoutingTable

from . import test_flink_harness
from .test_flink_harness import ENGINES, KEY_TYPES, sample_keys, write_lines

harness = test_flink_harness.harness  # the javac-compiled harness (a fixture), as test_flink_harness.py uses it

#: (parallelism, max parallelism): Flink's default M, p = M, a non-power of two M.
SHAPES = [(6, None), (7, 7), (48, 1000)]
N_SERVERS = 4


def split_table(fallback, keys: list, seed: int) -> RoutingTable:
    """The first 300 keys split over ``N_SERVERS`` servers (a random subtask per server), a third of them and
    every fifth other key with an entry."""
    rng = np.random.default_rng(seed)
    p = fallback.n_instances
    split = keys[:300]
    with_entry = split[::3] + keys[300::5]
    entries = pd.Series(rng.integers(0, p, len(with_entry)), index=pd.Index(with_entry, dtype=object))
    plans = {k: rng.integers(0, p, N_SERVERS).tolist() for k in split}
    return RoutingTable("op", fallback, entries, plans)


def cases(geotweets):
    """Every (engine, key type, shape) with its split table."""
    for engine in ENGINES:
        for key_type in KEY_TYPES:
            keys = sample_keys(key_type, geotweets, 1000)
            for p, m in SHAPES:
                fallback = make_fallback(engine, p, max_parallelism=m, int_type="int" if key_type == "int" else "long")
                yield (
                    f"{engine}-{key_type}-{p}-{fallback.max_parallelism}",
                    fallback,
                    key_type,
                    split_table(fallback, keys, p),
                )


def test_flink_puts_each_split_keys_routing_key_on_its_part(harness, geotweets, tmp_path):
    files, checked = [], 0
    for stem, fallback, key_type, table in cases(geotweets):
        rows = []
        for server in range(N_SERVERS):
            select = RoutingKeySelector(table, key_type=key_type, server=server)
            for key, plan in table.splits.items():
                route = select.routing_key(key)
                # the subtask is the plan's, not one computed from the routing key: Flink must agree with the plan
                rows.append({"key": route, "subtask": plan[server], "key_group": fallback.key_group(route)})
        files.append(write_lines(tmp_path / f"{stem}.splits", fallback, key_type, rows))
        checked += len(rows)
    results = harness(files)
    assert [r["checked"] for r in results] == [300 * N_SERVERS] * len(files)
    assert [(r["file"], r["first_mismatch"]) for r in results if r["agree"] != r["checked"]] == []
    print(f"KeyGroupRangeAssignment agrees on {sum(r['agree'] for r in results):,} of {checked:,} split parts")


def test_flink_agrees_with_the_per_server_routing_files(harness, geotweets, tmp_path):
    files, plans = [], []
    for stem, _, key_type, table in cases(geotweets):
        for server in range(N_SERVERS):
            files.append(
                write_routing_file(table, tmp_path / f"{stem}.s{server}.jsonl", key_type=key_type, server=server)
            )
            plans.append((table, server))
    results = harness(files)
    assert [(r["file"], r["first_mismatch"]) for r in results if r["agree"] != r["checked"]] == []
    raw = 0
    for path, (table, server), result in zip(files, plans, results):
        lines = path.read_text().splitlines()
        assert result["checked"] == json.loads(lines[0])["entries"] == len(lines) - 1
        listed = {row["key"]: row["subtask"] for row in map(json.loads, lines[1:])}
        for key, plan in table.splits.items():
            if key in listed:
                assert listed[key] == plan[server]
            else:  # the part is where Flink's hash puts the key itself (checked by the harness in test_flink_harness)
                assert key not in table.entries.index and table.fallback.instance_of(key) == plan[server]
                raw += 1
    assert raw > 100  # and the other parts, about 25,000, have their line
    print(f"KeyGroupRangeAssignment agrees on all {sum(r['agree'] for r in results):,} lines of {len(files)} files")
