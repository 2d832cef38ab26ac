"""Storm: the routing file and the JDK-only loader a custom grouping calls, checked against the JDK.

``LocalityRoutes.java`` (``docs/engines/storm/``) is compiled with javac; its
``chooseTaskIndex`` runs the JDK's own ``Arrays.deepHashCode`` and
``Math.floorMod``, which is what Storm's fields grouping calls
(``TupleUtils.chooseTaskIndex``), for keys without an entry. Every probe key must
get the task index locality's table says: its entry, or the Storm fallback.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locality.engines import StormFieldsGrouping, make_fallback
from locality.engines.storm import read_grouping_file, write_grouping_file
from locality.errors import InvalidParameterError, SerializationError
from locality.routing import RoutingTable
from tests.test_hashing import random_ints, random_strings

REPO = Path(__file__).resolve().parents[2]
SOURCES = [REPO / "docs" / "engines" / "storm" / "LocalityRoutes.java", Path(__file__).parent / "StormHarness.java"]
ODD = ["tab\there", "new\nline", "back\\slash", "cr\rlf", "\\t literally", "", "#jazz", "Zürich", "🙂🚀"]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """Compile the loader and the harness; return a function routing keys through them."""
    if shutil.which("javac") is None:
        pytest.fail("javac (JDK 17+) is needed to check the Storm loader")
    classes = tmp_path_factory.mktemp("storm-classes")
    compiled = subprocess.run(["javac", "-d", str(classes), *map(str, SOURCES)], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr

    def run(routing_file: Path, keys: list, key_type: str) -> list[int]:
        lines = [k.encode("utf-8").hex() if key_type == "string" else str(k) for k in keys]
        keys_file = routing_file.with_suffix(".keys")
        keys_file.write_text("\n".join(lines) + "\n")
        done = subprocess.run(
            ["java", "-cp", str(classes), "StormHarness", str(routing_file), str(keys_file), key_type],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return [int(x) for x in done.stdout.split()]

    return run


def probe_table(keys: list, tasks: int, rng: np.random.Generator, **fallback) -> RoutingTable:
    """Entries for a third of ``keys``, to a random task (entries equal to the hash are dropped)."""
    chosen = keys[: len(keys) // 3]
    entries = pd.Series(rng.integers(0, tasks, len(chosen)), index=pd.Index(chosen, dtype=object))
    return RoutingTable("op", make_fallback("storm", tasks, **fallback), entries)


@pytest.mark.parametrize("tasks", [1, 6, 48])
def test_java_loader_routes_every_key_as_the_table(harness, tmp_path, tasks):
    rng = np.random.default_rng(tasks)
    strings = list(dict.fromkeys(ODD + random_strings(rng, 3000, [0, 1, 2, 3, 5, 8, 13, 40])))
    longs = list(dict.fromkeys(random_ints(rng, 3000).tolist()))
    ints = list(dict.fromkeys(random_ints(rng, 3000, -(2**31), 2**31 - 1).tolist()))
    for keys, key_type, fallback in ((strings, "string", {}), (longs, "long", {}), (ints, "int", {"int_type": "int"})):
        table = probe_table(keys, tasks, rng, **fallback)
        path = write_grouping_file(table, tmp_path / f"{key_type}.routes")
        expected = table.route_many(np.array(keys, dtype=object)).tolist()
        assert harness(path, keys, key_type) == expected
        if tasks > 1:
            assert len(table) > 0  # the check covered entries, not only the fallback


def test_file_round_trips_and_is_refused_when_damaged(tmp_path):
    table = RoutingTable("hash\ttag", StormFieldsGrouping(6), pd.Series({k: i % 6 for i, k in enumerate(ODD)}))
    path = write_grouping_file(table, tmp_path / "t.routes")
    assert read_grouping_file(path) == table
    ints = RoutingTable("user", StormFieldsGrouping(4, int_type="int"), pd.Series({-5: 1, 7: 2, 2**31 - 1: 3}))
    assert read_grouping_file(write_grouping_file(ints, tmp_path / "i.routes")) == ints

    lines = path.read_text(encoding="utf-8").split("\n")
    path.write_text("\n".join(lines[:-3]) + "\n", encoding="utf-8")  # entries lost: the header disagrees
    with pytest.raises(SerializationError, match="damaged Storm routing file.*entries for"):
        read_grouping_file(path)
    (tmp_path / "other").write_text("key,instance\na,1\n")
    with pytest.raises(SerializationError, match="is not a Storm routing file"):
        read_grouping_file(tmp_path / "other")
    with pytest.raises(InvalidParameterError, match="falls back to KafkaPartitioner.*--hash storm"):
        write_grouping_file(RoutingTable("t", make_fallback("kafka", 4), {"a": 1}), tmp_path / "k.routes")
