"""One set of damaged stores, read by both readers: Java refuses what Python refuses, naming the same file.

The damage is :data:`tests.test_store_damage.CASES` (CURRENT, the history, the lease, the schedule, a
version's manifest and files, each damaged in the ways a disk, a hand edit or a stray tool does). For each,
Python's :class:`~locality.router.Router` and Java's ``RouteKeys`` (the loader of ``locality-core``) read the
store's current version: where Python refuses, Java exits 2 naming the same file; where Python routes, Java
routes every key alike. Two readers of one store can never route a key differently without an error.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from locality.errors import StoreError
from locality.router import Router
from tests.jvm.conftest import CORE_EXAMPLES, run_java
from tests.test_store_damage import CASES, _store

KEYS = [f"k2-{i}" for i in range(10)] + ["k1-0", "unknown", ""]


@pytest.mark.parametrize("case", sorted(CASES))
def test_java_refuses_what_python_refuses_and_routes_the_rest_alike(case, tmp_path):
    damage, culprit, _, _ = CASES[case]
    root = _store(tmp_path / "store")
    damage(root)
    keys_file, out = tmp_path / "keys.jsonl", tmp_path / "routes.txt"
    keys_file.write_text("".join(json.dumps(k) + "\n" for k in KEYS))
    done = run_java(
        [CORE_EXAMPLES, "locality-kafka-streams"], "io.locality.routing.RouteKeys", root, "a", keys_file, out
    )
    try:
        with Router(root) as router:
            python = [router.route("a", key) for key in KEYS]
    except StoreError as refused:
        assert culprit in str(refused)
        assert done.returncode == 2, f"Java routed a store Python refuses ({refused}); stderr: {done.stderr[-2000:]}"
        assert culprit in done.stderr and "Exception" not in done.stderr.splitlines()[0], done.stderr[-2000:]
        assert not out.exists()
        return
    assert done.returncode == 0, f"Java refused a store Python routes: {done.stderr[-2000:]}"
    assert np.loadtxt(out, dtype=np.int64, ndmin=1).tolist() == python


@pytest.mark.parametrize("bad", ["{not json", '{"a": 1}', "1.5", ""])
def test_a_bad_key_is_named_with_its_file_and_line_and_leaves_no_output(bad, tmp_path):
    root = _store(tmp_path / "store")
    keys_file, out = tmp_path / "keys.jsonl", tmp_path / "routes.txt"
    keys_file.write_text(f'"k2-1"\n"k2-2"\n{bad}\n"k2-3"\n')
    done = run_java(
        [CORE_EXAMPLES, "locality-kafka-streams"], "io.locality.routing.RouteKeys", root, "a", keys_file, out
    )
    assert done.returncode == 2
    assert f"{keys_file}, line 3: a table key must be a JSON string or a 64-bit integer" in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys.jsonl", "store"]  # no routes, whole or partial
