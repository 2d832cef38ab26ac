"""The switch schedule: every router routes a record with the version in force at its point, in any interleaving."""

from __future__ import annotations

import multiprocessing
import random
import time

import numpy as np
import pytest

from locality.errors import InvalidParameterError, ScheduleExpiredError, SerializationError
from locality.router import Router
from locality.schedule import BEGINNING, SwitchSchedule
from locality.store import ConfigStore
from tests.test_router import FALLBACK, OTHER_WORDS, TABLE_WORDS, publish, versioned_config, wanted

SWITCH_EVERY = 1_000  # version k (k >= 2) is in force from k * SWITCH_EVERY
LAST_VERSION = 7
RECORDS = 6_000


def expected_instance(version: int, key: str) -> int:
    """Where version ``version`` sends a word, from the definition of its table (no lookup code)."""
    return wanted(version)["word"].get(key, FALLBACK.instance_of(key))


def version_in_force(point: int) -> int:
    """The version the publisher below schedules for ``point``."""
    return min(max(point // SWITCH_EVERY, 1), LAST_VERSION)


# ---------------------------------------------------------------------------------------------
# The schedule itself
# ---------------------------------------------------------------------------------------------


def test_a_schedule_answers_by_point_and_refuses_to_rewrite_the_sealed_past():
    schedule = SwitchSchedule().sealed(100, in_force=3)  # sealing starts a schedule with the version in force
    assert schedule.starts == (BEGINNING,) and schedule.versions == (3,) and schedule.covers(99)
    assert not schedule.covers(100)
    with pytest.raises(InvalidParameterError, match="before the schedule's seal 100"):
        schedule.scheduled(4, 99, in_force=3)
    later = schedule.scheduled(4, 150, in_force=3).sealed(120, in_force=4)  # a seal never moves back
    assert later.sealed_until == 150
    assert [later.version_at(p) for p in (BEGINNING, 0, 149, 150, 10**12)] == [3, 3, 3, 4, 4]
    assert later.versions_at(np.array([-5, 149, 150, 151])).tolist() == [3, 3, 4, 4]
    assert SwitchSchedule.from_dict(later.to_dict()) == later
    for bad in (1.5, "10", True, 2**63):
        with pytest.raises(InvalidParameterError, match="'until' point"):
            later.sealed(bad, in_force=4)


def test_the_store_keeps_the_schedule_and_names_a_damaged_one(tmp_path):
    store = ConfigStore(tmp_path / "store")
    publish(store, 1)
    assert store.schedule() == SwitchSchedule()
    store.seal(2_000)
    result = store.publish(versioned_config(2), fingerprint="v2", in_force_from=2_500)
    assert result.version == 2 and store.current_version() == 2
    assert store.schedule().versions == (1, 2) and store.schedule().starts == (BEGINNING, 2_500)
    # a rerun of the same input schedules nothing new and changes nothing
    again = store.publish(versioned_config(2), fingerprint="v2", in_force_from=9_000)
    assert again.created is False and store.schedule().starts == (BEGINNING, 2_500)
    # a version scheduled before the seal is refused before anything is written
    with pytest.raises(InvalidParameterError, match="before the schedule's seal 2500"):
        store.publish(versioned_config(3), fingerprint="v3", in_force_from=2_400)
    assert store.versions() == [1, 2] and store.current_version() == 2
    # a rollback by point schedules the old version again
    store.rollback(1, reason="v2 overloads a server", in_force_from=3_000)
    assert store.schedule().versions == (1, 2, 1) and store.current_version() == 1
    (store.root / "SCHEDULE").write_text('{"entries": [{"version": 1}]')
    with pytest.raises(SerializationError, match="SCHEDULE is damaged"):
        store.schedule()


def test_a_record_before_the_switch_keeps_its_version_after_current_moved(tmp_path):
    """What following CURRENT gets wrong: a record from before the switch, routed after the publication."""
    store = ConfigStore(tmp_path / "store")
    publish(store, 1)
    store.seal(2_000)
    router = Router(store.root)
    store.publish(versioned_config(2), fingerprint="v2", in_force_from=2_000)
    late = TABLE_WORDS[5]
    router.refresh()
    assert router.route("word", late) == expected_instance(2, late)  # CURRENT: the new version for every record
    assert router.route_at("word", late, 1_999) == expected_instance(1, late)  # by point: the version in force then
    assert expected_instance(1, late) != expected_instance(2, late)


def test_a_point_past_the_seal_waits_for_the_publisher_and_then_raises(tmp_path):
    store = ConfigStore(tmp_path / "store")
    publish(store, 1)
    store.seal(1_000)
    router = Router(store.root, schedule_wait=0.2)
    started = time.monotonic()
    with pytest.raises(ScheduleExpiredError, match="sealed until 1000, and a record at 1000 waited 0.2 s"):
        router.route_at("word", TABLE_WORDS[0], 1_000)
    assert 0.2 <= time.monotonic() - started < 5
    store.seal(5_000)
    assert router.route_at("word", TABLE_WORDS[0], 1_000) == expected_instance(1, TABLE_WORDS[0])


# ---------------------------------------------------------------------------------------------
# Routers in separate processes, each its own interleaving, while a publisher switches versions
# ---------------------------------------------------------------------------------------------


def _records(seed: int) -> tuple[list[str], np.ndarray]:
    """The same records for every router: words with event times across every switch, arriving a little out of order."""
    rng = np.random.default_rng(0)
    keys = rng.choice(np.array(TABLE_WORDS + OTHER_WORDS, dtype=object), RECORDS).tolist()
    points = np.sort(rng.integers(0, (LAST_VERSION + 1) * SWITCH_EVERY, RECORDS))
    points = points + rng.integers(-300, 300, RECORDS)  # out of order by up to 0.6 switch intervals,
    points = np.clip(points, 0, (LAST_VERSION + 1) * SWITCH_EVERY - 1)  # all before the publisher's last seal
    order = np.random.default_rng(seed).permutation(RECORDS)  # and each router sees its own arrival order...
    order = order[np.argsort(points[order] + np.random.default_rng(seed).integers(0, 400, RECORDS), kind="stable")]
    return [keys[i] for i in order], points[order], order


def _route(root: str, seed: int, batch: int, queue) -> None:
    keys, points, order = _records(seed)
    router = Router(root, schedule_wait=20)
    routes = np.empty(RECORDS, dtype=np.int64)
    for start in range(0, RECORDS, batch):  # ...in its own batches
        chunk = slice(start, start + batch)
        if batch == 1:
            routes[order[start]] = router.route_at("word", keys[start], int(points[start]))
        else:
            routes[order[chunk]] = router.route_many_at("word", keys[chunk], points[chunk])
        time.sleep(random.Random(seed + start).random() * 0.002)
    queue.put((seed, routes.tolist()))


def _switch_versions(root: str) -> None:
    store = ConfigStore(root)
    for version in range(2, LAST_VERSION + 1):
        time.sleep(0.15)
        store.publish(versioned_config(version), fingerprint=f"v{version}", in_force_from=version * SWITCH_EVERY)
        store.seal((version + 1) * SWITCH_EVERY)  # the next switch comes no earlier


def test_concurrent_routers_route_every_record_alike_while_versions_switch(tmp_path):
    store = ConfigStore(tmp_path / "store")
    publish(store, 1)
    store.seal(2 * SWITCH_EVERY)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    routers = [
        context.Process(target=_route, args=(str(store.root), seed, batch, queue))
        for seed, batch in ((1, 1), (2, 97), (3, 500))
    ]
    publisher = context.Process(target=_switch_versions, args=(str(store.root),))
    try:
        for process in [*routers, publisher]:
            process.start()
        results = dict(queue.get(timeout=120) for _ in routers)
    finally:
        for process in [*routers, publisher]:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    assert publisher.exitcode == 0 and all(r.exitcode == 0 for r in routers)
    keys, points, order = _records(1)
    by_record = dict(zip(order.tolist(), zip(keys, points.tolist())))
    expected = [expected_instance(version_in_force(p), k) for k, p in (by_record[i] for i in range(RECORDS))]
    assert results[1] == results[2] == results[3] == expected
    assert len({version_in_force(p) for _, p in by_record.values()}) == LAST_VERSION  # every version served


def test_the_command_line_takes_a_point_as_a_utc_time_or_an_integer(tmp_path, capsys):
    """``seal --until`` and ``rollback --at``: an ISO time (UTC unless it names a zone) is its epoch milliseconds."""
    from locality.cli import ExitCode, main

    store = ConfigStore(tmp_path / "store")
    publish(store, 1)
    publish(store, 2)
    june = 1_370_044_800_000  # 2013-06-01T00:00:00Z
    assert main(["seal", "--store", str(store.root), "--until", "2013-06-01"]) == ExitCode.OK
    assert store.schedule().sealed_until == june
    back = ["rollback", "--store", str(store.root), "--to", "1", "--at", "2013-06-01T03:00+02:00"]
    assert main(back) == ExitCode.OK
    assert store.schedule().starts[-1] == june + 3_600_000 and store.schedule().versions[-1] == 1
    assert main(["seal", "--store", str(store.root), "--until", str(june + 7_200_000)]) == ExitCode.OK
    assert store.schedule().sealed_until == june + 7_200_000
    capsys.readouterr()
    assert main(["seal", "--store", str(store.root), "--until", "yesterday"]) == ExitCode.BAD_INPUT
    assert "the --until time 'yesterday' is not an ISO 8601" in capsys.readouterr().err
