"""The Router: current tables of a store, atomic refresh, damaged versions refused, a writer racing readers."""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from locality.errors import InvalidParameterError, StoreError
from locality.hashing import make_fallback
from locality.migration import plan_migration
from locality.optimizer import LocalityOptimizer
from locality.router import Router
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore
from locality.topology import Topology
from tests.conftest import trace_keys

OPS = ["word", "user"]
N = 64  # instances per operator: more than the versions the race publishes, so any two versions differ on every key
TABLE_WORDS = [f"w{i}-é🙂" if i % 3 == 0 else f"w{i}" for i in range(N)]
TABLE_USERS = [10**12 + 7 * i for i in range(N)]
OTHER_WORDS = [f"other{i}-中" for i in range(16)]
OTHER_USERS = list(range(-8, 8))
WORD_BATCH = TABLE_WORDS + OTHER_WORDS
USER_BATCH = TABLE_USERS + OTHER_USERS
FALLBACK = make_fallback("kafka", N)


def wanted(version: int) -> dict[str, dict]:
    """The entries of ``version``: key i of a table -> (version + i) mod N (word), (version + 3i) mod N (user)."""
    return {
        "word": {k: (version + i) % N for i, k in enumerate(TABLE_WORDS)},
        "user": {k: (version + 3 * i) % N for i, k in enumerate(TABLE_USERS)},
    }


def versioned_config(version: int) -> RoutingConfiguration:
    topology = Topology.uniform(OPS, 4, N // 4)
    tables = {op: RoutingTable(op, FALLBACK, entries) for op, entries in wanted(version).items()}
    return RoutingConfiguration(topology, tables, {"version": version})


def expected_answer(version: int, op: str) -> tuple[int, ...]:
    """Instances of the operator's batch under ``version``, from the definition (not through any lookup code)."""
    table, others = (TABLE_WORDS, OTHER_WORDS) if op == "word" else (TABLE_USERS, OTHER_USERS)
    entries = wanted(version)[op]
    return tuple([entries[k] for k in table] + FALLBACK.instances_of(others).tolist())


def publish(store: ConfigStore, version: int, **kwargs) -> int:
    return store.publish(versioned_config(version), fingerprint=f"v{version}", **kwargs).version


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


@pytest.fixture
def store(tmp_path):
    store = ConfigStore(tmp_path / "store")
    publish(store, 1)
    return store


# ---------------------------------------------------------------------------------------------
# Lookups
# ---------------------------------------------------------------------------------------------


def test_routes_table_keys_to_entries_and_other_keys_by_fallback(store):
    router = Router(store.root)
    assert router.version == 1 and router.snapshot().operators == tuple(OPS)
    for op, batch in (("word", WORD_BATCH), ("user", USER_BATCH)):
        expected = list(expected_answer(1, op))
        assert [router.route(op, k) for k in batch] == expected
        # every container the fallbacks take
        containers = [batch, np.array(batch, dtype=object), pd.Series(batch), pa.array(batch)]
        if op == "word":
            containers += [np.array(batch), pa.array(batch, pa.large_string()), pa.array(batch).dictionary_encode()]
            containers += [pa.chunked_array([batch[:10], batch[10:]]), pd.Series(batch, dtype="string[pyarrow]")]
        else:
            containers += [np.array(batch, dtype=np.int64), pa.array(batch, pa.int64())]
        for keys in containers:
            assert router.route_many(op, keys).tolist() == expected, type(keys)
        cfg = store.get().config
        assert router.route_many(op, batch).tolist() == cfg.route_many(op, batch).tolist()
        assert [router.server_of(op, k) for k in batch] == [cfg.server_of(op, k) for k in batch]
    # keys of the other kind never match an entry: they go by the fallback
    mixed = ["w1", 5, TABLE_USERS[0], TABLE_WORDS[2]]
    assert router.route_many("word", mixed).tolist() == [1 + 1, *FALLBACK.instances_of([5, TABLE_USERS[0]]), 1 + 2]
    assert router.route_many("word", []).tolist() == []


def test_routes_a_real_optimized_configuration(tmp_path, geotweets):
    """Tables learned from the tweet trace, published, served: every key of the trace as the tables say."""
    config = LocalityOptimizer(Topology.uniform(trace_keys("geotweets"), 6)).fit(geotweets).config_
    store = ConfigStore(tmp_path / "store")
    store.publish(config, fingerprint="tweets")
    router = Router(store.root)
    for op in trace_keys("geotweets"):
        table = config.tables[op]
        keys = pd.unique(geotweets[op])
        entries = table.entries.to_dict()
        expected = [entries.get(k, -1) for k in keys]
        expected = np.where(np.array(expected) >= 0, expected, table.fallback.instances_of(keys))
        assert len(entries) > 500
        assert router.route_many(op, keys).tolist() == expected.tolist()
        assert router.route_many(op, pa.array(keys)).tolist() == expected.tolist()
        assert [router.route(op, k) for k in keys[:3000]] == expected[:3000].tolist()


def test_bad_arguments_are_named(store):
    router = Router(store.root)
    with pytest.raises(InvalidParameterError, match=r"'operator' parameter must be one of \['word', 'user'\]"):
        router.route("nope", "w1")
    with pytest.raises(InvalidParameterError, match="must be a str or an int; got bool"):
        router.route("user", True)
    with pytest.raises(InvalidParameterError, match="got float"):
        router.route_many("user", [TABLE_USERS[0], 1.5])
    with pytest.raises(InvalidParameterError, match="'poll_interval' parameter of Router"):
        Router(store.root, poll_interval=0)
    with pytest.raises(InvalidParameterError, match="'on_change' parameter of Router must be callable"):
        Router(store.root, on_change="print")
    with pytest.raises(StoreError, match="has no published version yet"):
        Router(store.root.parent / "empty")


# ---------------------------------------------------------------------------------------------
# Refresh, migration plans, damaged versions
# ---------------------------------------------------------------------------------------------


def test_refresh_swaps_to_the_new_version_and_hands_over_the_plan(store):
    changes = []
    router = Router(store.root, on_change=lambda old, new: changes.append((old.version, new.version)))
    assert router.refresh() is False and router.version == 1
    old_cfg, new_cfg = versioned_config(1), versioned_config(2)
    sizes = {"word": pd.Series(1.5, index=TABLE_WORDS)}
    plan = plan_migration(old_cfg, new_cfg, sizes, from_version=1, to_version=2)
    publish(store, 2, artifacts={"migration_plan.json": plan.to_dict(new_cfg)})
    old = router.snapshot()
    assert router.refresh() is True and router.version == 2 and changes == [(1, 2)]
    assert router.route_many("word", WORD_BATCH).tolist() == list(expected_answer(2, "word"))
    # the old snapshot still answers for version 1: multi-operator work keeps one version
    assert old.route_many("word", WORD_BATCH).tolist() == list(expected_answer(1, "word"))
    # the plan published with the version: every table key moved by one instance, with its state
    stored = router.migration_plan
    assert stored.from_version == 1 and stored.moved_keys == 2 * N and stored.cost == pytest.approx(1.5 * N)
    moves = stored.moves_of("word").set_index("key")
    assert moves.loc[TABLE_WORDS[5], ["source", "target"]].tolist() == [6, 7]
    assert router.snapshot().plan_from(old) is stored
    # a skipped version: the plan comes from the two versions' tables (state unknown)
    publish(store, 3)
    publish(store, 4)
    assert router.refresh() is True and router.version == 4 and changes[-1] == (2, 4)
    computed = router.snapshot().plan_from(old)
    assert router.migration_plan is None
    assert (computed.from_version, computed.to_version, computed.moved_keys, computed.cost) == (1, 4, 2 * N, 0.0)
    assert computed.moves_of("user").set_index("key").loc[TABLE_USERS[2], "target"] == (4 + 6) % N
    # reading never writes into the store: not a file added, changed or touched
    before = tree(store.root)
    again = Router(store.root)
    assert (
        again.refresh() is False and router.refresh() is False and again.snapshot().plan_from(old).moved_keys == 2 * N
    )
    assert tree(store.root) == before


def test_damaged_versions_are_never_served(store, caplog):
    router = Router(store.root)
    publish(store, 2)
    table = store.root / "versions" / "000002" / "configuration" / "tables" / "00.parquet"
    table.write_bytes(table.read_bytes()[:40])  # a half-copied table
    with caplog.at_level(logging.DEBUG, logger="locality.router"):
        assert router.refresh() is False
        assert router.refresh() is False
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "keeps serving version 1" in errors[0].getMessage()
    assert "00.parquet" in str(router.last_error) and "version 2" in str(router.last_error)
    assert router.version == 1
    assert router.route_many("word", WORD_BATCH).tolist() == list(expected_answer(1, "word"))
    with pytest.raises(StoreError, match="00.parquet"):
        router.refresh(strict=True)
    # a new process cannot start on it either, and says which file
    with pytest.raises(StoreError, match=r"cannot load version 2 .*00.parquet"):
        Router(store.root)

    damages = {
        3: lambda d: (d / "manifest.json").write_text('{"version": 3, '),  # a manifest cut short
        4: lambda d: (d / "migration_plan.json").write_text("[1, 2"),  # a damaged migration plan
        5: lambda d: (d / "configuration" / "header.json").write_text('{"format_version": 1}'),  # no tables
    }
    plan = {"order": OPS, "moves": [], "total_state": 0}
    for number in (3, 4, 5, 6):
        publish(store, number, artifacts={"migration_plan.json": plan})
    for number, damage in damages.items():
        damage(store.root / "versions" / f"{number:06d}")
        (store.root / "CURRENT").write_text(f"{number}\n")
        assert router.refresh() is False and router.version == 1, number
        assert f"version {number}" in str(router.last_error)
    (store.root / "CURRENT").write_text("garbage\n")
    assert router.refresh() is False and "garbage" in str(router.last_error)
    (store.root / "CURRENT").write_text("99\n")
    assert router.refresh() is False and "no version 99" in str(router.last_error)
    assert router.version == 1
    # a good version afterwards is picked up, and the error is cleared
    (store.root / "CURRENT").write_text("6\n")
    assert router.refresh() is True and router.version == 6 and router.last_error is None
    assert router.route_many("user", USER_BATCH).tolist() == list(expected_answer(6, "user"))


def test_background_watch_follows_the_store_and_stops(store):
    seen = []
    thread_names = lambda: {t.name for t in threading.enumerate() if t.name.startswith("locality-router")}  # noqa: E731
    with Router(store.root, poll_interval=0.01, on_change=lambda old, new: seen.append(new.version)) as router:
        assert len(thread_names()) == 1
        publish(store, 2)
        deadline = time.monotonic() + 30
        while router.version != 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert router.version == 2 and seen == [2]
        assert router.route("word", TABLE_WORDS[0]) == 2
    assert thread_names() == set()
    publish(store, 3)
    time.sleep(0.1)
    assert router.version == 2  # stopped: no more refreshes behind the caller's back


# ---------------------------------------------------------------------------------------------
# A writer process publishing in a loop while reader threads route
# ---------------------------------------------------------------------------------------------

VERSIONS = 24


def _publish_versions(root: str, first: int, last: int, pause: float) -> None:
    store = ConfigStore(root)
    for version in range(first, last + 1):
        publish(store, version)
        time.sleep(pause)


def test_refresh_during_lookups_never_mixes_two_versions(store):
    words = {expected_answer(v, "word"): v for v in range(1, VERSIONS + 1)}
    users = {expected_answer(v, "user"): v for v in range(1, VERSIONS + 1)}
    assert len(words) == len(users) == VERSIONS  # every version answers differently on the batches
    router = Router(store.root, poll_interval=0.002)
    stop = threading.Event()
    seen: list[set[int]] = []
    failures: list[str] = []

    def reader(word_keys, user_keys) -> None:
        versions: set[int] = set()
        while not stop.is_set():
            answer = tuple(router.route_many("word", word_keys).tolist())
            if answer not in words:
                failures.append(f"route_many answered a mixture: {answer}")
            snapshot = router.snapshot()  # two operators, one version
            w = words.get(tuple(snapshot.route_many("word", word_keys).tolist()))
            u = users.get(tuple(snapshot.route_many("user", user_keys).tolist()))
            if w is None or w != u or w != snapshot.version:
                failures.append(f"snapshot {snapshot.version} answered word {w}, user {u}")
            versions.add(words.get(answer, -1))
            time.sleep(0.0005)  # leave the (shared) cores to the writer too
        seen.append(versions)

    def refresher() -> None:  # concurrent refreshes on top of the watch thread
        while not stop.is_set():
            router.refresh()
            time.sleep(0.001)

    batches = [
        (WORD_BATCH, USER_BATCH),
        (pa.array(WORD_BATCH), np.array(USER_BATCH)),
        (WORD_BATCH, pa.array(USER_BATCH)),
    ]
    threads = [threading.Thread(target=reader, args=b) for b in batches] + [threading.Thread(target=refresher)]
    writer = multiprocessing.get_context("spawn").Process(
        target=_publish_versions, args=(str(store.root), 2, VERSIONS, 0.02)
    )
    try:
        for t in threads:
            t.start()
        writer.start()
        writer.join(timeout=300)
    finally:
        stop.set()
        for t in threads:
            t.join()
        router.close()
    assert writer.exitcode == 0
    assert failures == []
    # the readers really ran across refreshes: each saw several versions
    assert all(len(v) >= 5 for v in seen), [sorted(v) for v in seen]
    router.refresh()
    assert router.version == VERSIONS
