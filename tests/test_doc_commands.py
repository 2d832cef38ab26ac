"""Every ``locality`` command the README and the docs show is accepted as written.

The commands are read from the code blocks of ``README.md`` and ``docs/`` (a line that starts with
``locality``, continued lines joined), their placeholders replaced by real things: a trace path by the
shared trace that has the command's key columns, a store by a directory of this test holding versions
of those operators. Each command then runs through the CLI up to the point where its Spark job would
start (the checks of every option and of the store happen before it), or to its end when it needs no
Spark (``show``, ``seal``, ``rollback``; ``reconfigure --sketches``, on sketches this test publishes into
the store). A documented command that its own checks refuse (as ``docs/switch.md``'s
``reconfigure --window 2D --switch-after 1h`` once was) fails here.

Commands that need what this test does not start are left out, and named: ``switch flink`` needs a
Flink cluster (``tests/jvm/test_flink_switch.py`` runs it), a command on ``s3://`` or ``s3a://`` an
object store (``tests/spark/test_s3_traces.py``). The jobs themselves run in ``tests/spark``.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pandas as pd
import pytest

import locality.cli as cli
from locality.cli import ExitCode, main
from locality.hashing import make_fallback
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore
from locality.topology import Topology
from tests.conftest import REPO, trace_path

#: The shared trace that has each documented pair of key columns.
TRACE_OF_KEYS = {("location", "hashtag"): "geotweets", ("user", "hashtag"): "ira", ("tailnum", "dest"): "flights"}
#: Placeholders and example paths of the docs, as the test replaces them.
TRACE_WORDS = {"TRACE", "/data/trace/"}
STORE_WORDS = re.compile(r"^(STORE|/data/[\w.-]*store[\w.-]*)$")
LEFT_OUT = ("locality switch flink", "s3://", "s3a://")


def documented_commands() -> list[tuple[str, str]]:
    """(file, command) for every ``locality ...`` line of a code block (``.venv/bin/locality`` too), continued
    lines joined, comments dropped."""
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        in_block, pending = False, None
        for line in path.read_text().splitlines():
            text = line.strip()
            if text.startswith("```"):
                in_block, pending = not in_block, None
                continue
            if not in_block:
                continue
            if pending is not None:
                pending += " " + text.rstrip("\\")
            elif re.match(r"^(\$ )?(\.venv/bin/)?locality [a-z]", text):
                pending = re.sub(r"^(\$ )?(\.venv/bin/)?", "", text).rstrip("\\")
            else:
                continue
            if not text.endswith("\\"):
                found.append((str(path.relative_to(REPO)), shlex.split(pending, comments=True)))
                pending = None
    return [(where, " ".join(shlex.quote(w) for w in words)) for where, words in found]


COMMANDS = documented_commands()


def test_the_docs_show_commands_of_every_kind():
    shown = {shlex.split(command)[1] for _, command in COMMANDS}
    assert {"optimize", "reconfigure", "evaluate", "replay", "show", "seal", "rollback", "switch"} <= shown


def _store_with_versions(root: Path, keys: tuple[str, str], versions: int = 4) -> None:
    topology = Topology.uniform(list(keys), 6)
    fallback = make_fallback("kafka", 6)
    store = ConfigStore(root)
    for version in range(1, versions + 1):
        tables = {op: RoutingTable(op, fallback) for op in keys}
        store.publish(RoutingConfiguration(topology, tables), fingerprint=f"docs-{version}")


def _publish_sketches(root: Path, keys: tuple[str, str]) -> None:
    """A day of sketches of the operators ``keys`` (the shared trace's first 2,000 records) for ``--sketches``."""
    from locality.engine_sketches import Interval, publish_sketches
    from locality.sketch import SpaceSaving

    records = pd.read_parquet(trace_path(TRACE_OF_KEYS[keys]), columns=list(keys)).head(2_000)
    pairs, loads = SpaceSaving(10_000, arity=2), {op: SpaceSaving(10_000) for op in keys}
    pairs.update_batch([records[keys[0]].to_numpy(object), records[keys[1]].to_numpy(object)])
    for op, sketch in loads.items():
        sketch.update_batch(records[op].to_numpy(object))
    publish_sketches(root, Interval.between("2026-11-20", "2026-11-21"), "docs", pairs={keys: pairs}, loads=loads)


class _SparkWouldStart(BaseException):  # not an Exception: the CLI would report it as a crash
    """Raised where the command's Spark job would start: every check before it passed."""


@pytest.mark.parametrize("where, command", [c for c in COMMANDS if not any(w in c[1] for w in LEFT_OUT)])
def test_a_documented_command_runs_as_written(where, command, tmp_path, monkeypatch, capsys):
    words = shlex.split(command)[1:]
    keys = tuple(words[words.index("--keys") + 1].split(",")) if "--keys" in words else ("location", "hashtag")
    trace = trace_path(TRACE_OF_KEYS[keys])
    args = []
    for word in words:
        if word in TRACE_WORDS:
            word = str(trace)
        elif STORE_WORDS.match(word):
            word = str(tmp_path / "store")
        elif word == "placement.json":
            (tmp_path / word).write_text('{"instances": {"s0": 2, "s1": 2, "s2": 2}}')
            word = str(tmp_path / word)
        args.append(word)
    _store_with_versions(tmp_path / "store", keys)
    if "--sketches" in words:  # it reads the engines' sketches from the store, and runs to its end (no Spark)
        _publish_sketches(tmp_path / "store", keys)

    def spark_would_start(master):
        raise _SparkWouldStart

    monkeypatch.setattr(cli, "_session", spark_would_start)
    monkeypatch.chdir(REPO)  # the README's paths are relative to the checkout
    try:
        code = main(args)
    except _SparkWouldStart:
        return
    assert code == ExitCode.OK, f"{where}: `{command}` was refused: {capsys.readouterr().err}"
