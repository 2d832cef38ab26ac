"""One store read by Python and by the JVM gives the same route for every key; a damaged version is refused by both.

The stores are real optimizer output on the IRA trace (user -> hashtag, ~101k distinct keys)
and on the tweet trace keyed by an integer (tweet_seq -> hashtag), published with
:class:`~locality.store.ConfigStore`. Java routes them with ``RouteKeys`` (the loader of
``locality-core`` and the fallback of the engine's module, computed by the engine's own
code); Python with :class:`~locality.router.Router`.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from locality.counts import count_keys
from locality.errors import StoreError
from locality.optimizer import make_fallbacks, optimize
from locality.router import Router
from locality.store import ConfigStore
from locality.topology import Topology
from tests.conftest import read_trace
from tests.jvm.conftest import CORE_EXAMPLES, run_java

#: engine -> the JVM modules whose fallback computes its hash
ENGINE_MODULES = {
    "ring": [CORE_EXAMPLES],
    "flink": [CORE_EXAMPLES, "locality-flink"],
    "kafka": [CORE_EXAMPLES, "locality-kafka-streams"],
    "storm": [CORE_EXAMPLES, "locality-storm"],
}

#: keys no trace holds, beside every key of the traces: empty, non-ASCII, non-BMP, long, reserved-looking
ODD_STRINGS = ["", " ", "é", "中文", "🙂x", "a\tb", 'quote"', "x" * 300, "\u0000locality:7"]
ODD_INTEGERS = [0, 1, -1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63)]


@pytest.fixture(scope="module")
def traces(geotweets):
    """Per trace: (operators, counts, distinct keys of each operator + odd keys)."""
    shapes = {"ira": (read_trace("ira"), ["user", "hashtag"]), "tweets_by_seq": (geotweets, ["tweet_seq", "hashtag"])}
    out = {}
    for name, (frame, operators) in shapes.items():
        counts = count_keys(frame, operators)
        keys = {}
        for op in operators:
            odd = ODD_INTEGERS if frame[op].dtype.kind == "i" else ODD_STRINGS
            keys[op] = list(dict.fromkeys([*frame[op].unique().tolist(), *odd]))
        out[name] = operators, counts, keys
    return out


def publish(store_root, operators, counts, engine: str) -> ConfigStore:
    topology = Topology.uniform(operators, 6)
    result = optimize(counts.graph(), topology, make_fallbacks(topology, engine))
    store = ConfigStore(store_root)
    store.publish(result.config, fingerprint=f"{engine}-{'-'.join(operators)}")
    return store


def java_routes(engine: str, store: ConfigStore, operator: str, keys: list, tmp_path) -> np.ndarray:
    keys_file, out = tmp_path / f"{operator}.keys.jsonl", tmp_path / f"{operator}.routes.txt"
    keys_file.write_text("".join(json.dumps(k) + "\n" for k in keys), encoding="utf-8")
    done = run_java(ENGINE_MODULES[engine], "io.locality.routing.RouteKeys", store.root, operator, keys_file, out)
    assert done.returncode == 0, done.stderr[-3000:]
    return np.loadtxt(out, dtype=np.int64, ndmin=1)


@pytest.mark.parametrize("engine", sorted(ENGINE_MODULES))
@pytest.mark.parametrize("trace", ["ira", "tweets_by_seq"])
def test_python_and_java_route_every_key_alike(traces, trace, engine, tmp_path):
    operators, counts, keys = traces[trace]
    store = publish(tmp_path / "store", operators, counts, engine)
    with Router(store.root) as router:
        snapshot = router.snapshot()
        for op in operators:
            python = snapshot.route_many(op, keys[op])
            java = java_routes(engine, store, op, keys[op], tmp_path)
            entries = snapshot.table(op).entries
            assert len(entries) > 0 and len(java) == len(keys[op])
            mismatched = [(k, p, j) for k, p, j in zip(keys[op], python, java) if p != j]
            assert not mismatched, f"{len(mismatched)} of {len(keys[op])} keys of {op} differ: {mismatched[:5]}"
    if trace == "ira":
        assert sum(len(v) for v in keys.values()) > 100_000


@pytest.mark.parametrize("damage", ["truncate", "alter"])
def test_a_damaged_version_is_refused_by_python_and_java(traces, damage, tmp_path):
    operators, counts, keys = traces["tweets_by_seq"]
    store = publish(tmp_path / "store", operators, counts, "ring")
    table = store.get().path / "configuration" / "tables" / "01.parquet"
    data = table.read_bytes()
    table.write_bytes(data[: len(data) // 2] if damage == "truncate" else data[:-9] + b"X" + data[-8:])

    wanted = "truncated or rewritten" if damage == "truncate" else "does not match its manifest's SHA-256"
    with pytest.raises(StoreError) as refused:
        Router(store.root)
    assert str(table) in str(refused.value) and wanted in str(refused.value)
    done = run_java([CORE_EXAMPLES], "io.locality.routing.RouteKeys", store.root, "hashtag", "/dev/null", "/dev/null")
    assert done.returncode == 2
    assert str(table) in done.stderr and wanted in done.stderr


def test_a_copied_store_routes_alike_from_its_new_place(traces, tmp_path):
    """Nothing in a store depends on where it lives: a copy (a shared filesystem mount, say) reads the same."""
    operators, counts, keys = traces["tweets_by_seq"]
    store = publish(tmp_path / "store", operators, counts, "ring")
    moved = ConfigStore(shutil.copytree(store.root, tmp_path / "elsewhere"))
    python = Router(store.root).snapshot().route_many("hashtag", keys["hashtag"])
    assert (java_routes("ring", moved, "hashtag", keys["hashtag"], tmp_path) == python).all()
