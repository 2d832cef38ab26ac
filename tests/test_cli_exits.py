"""How the CLI ends: one exit code per outcome, one line on stderr, tracebacks only in a log file or with --debug."""

from __future__ import annotations

import ast
import json
import logging
import subprocess
import sys

import click
import pytest

import locality.cli as cli
from locality.cli import ExitCode, main
from locality.errors import InvalidParameterError
from locality.store import ConfigStore
from tests._store_children import make_config
from tests.conftest import REPO


@pytest.fixture
def store(tmp_path):
    ConfigStore(tmp_path / "store").publish(make_config(0, 10), fingerprint="f0")
    return tmp_path / "store"


def test_exit_codes_are_defined_once():
    assert {code.name: int(code) for code in ExitCode} == {
        "OK": 0,
        "INFEASIBLE": 1,
        "BAD_INPUT": 2,
        "CRASH": 70,
        "BUSY": 75,
        "INTERRUPTED": 130,
    }


def test_an_unexpected_failure_is_one_line_naming_its_log(store, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LOCALITY_LOG_DIR", str(tmp_path / "logs"))

    def broken(self):
        raise KeyError("a bug")

    monkeypatch.setattr(ConfigStore, "survey", broken)
    assert main(["show", "--store", str(store)]) == ExitCode.CRASH
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("locality: unexpected failure: KeyError: 'a bug' (traceback in ")
    log = err.split("traceback in ")[1].split(";")[0]
    assert log.startswith(str(tmp_path / "logs" / "locality-"))
    text = open(log).read()
    assert "Traceback (most recent call last)" in text and "KeyError: 'a bug'" in text
    # --debug prints the traceback instead of writing a log
    assert main(["show", "--store", str(store), "--debug"]) == ExitCode.CRASH
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "traceback in " not in err


def test_bad_input_is_one_line_without_traceback_and_with_debug_a_traceback(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["show", "--store", str(tmp_path / "file")]) == ExitCode.BAD_INPUT
    assert capsys.readouterr().err == f"error: the store {tmp_path / 'file'} is a file, not a directory\n"
    assert main(["show", "--store", str(tmp_path / "file"), "--debug"]) == ExitCode.BAD_INPUT
    assert "Traceback" in capsys.readouterr().err


def test_interrupted(store, capsys, monkeypatch):
    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(ConfigStore, "survey", interrupted)
    assert main(["show", "--store", str(store)]) == ExitCode.INTERRUPTED
    assert capsys.readouterr().err.strip() == "locality: interrupted"  # click adds a newline first


def test_an_error_raised_while_handling_an_interrupt_is_the_interrupt(store, capsys, monkeypatch):
    """py4j, cleaning up the call Ctrl-C cut, asks a socket the dying JVM already closed for its peer."""

    def interrupted_then_broken(self):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise OSError(107, "Transport endpoint is not connected")  # noqa: B904 - raised while handling

    monkeypatch.setattr(ConfigStore, "survey", interrupted_then_broken)
    assert main(["show", "--store", str(store)]) == ExitCode.INTERRUPTED
    assert capsys.readouterr().err.strip() == "locality: interrupted"


def _record_of(error: BaseException) -> logging.LogRecord:
    return logging.LogRecord(
        "py4j.clientserver", logging.ERROR, __file__, 1, "shutting down", (), (type(error), error, None)
    )


def test_the_log_drops_what_an_interrupt_broke_and_keeps_other_errors():
    """py4j logs the Ctrl-C of the call it was making, then the broken pipe of the connection it shuts after it."""
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise BrokenPipeError(32, "Broken pipe")  # noqa: B904 - raised while handling, as py4j's is
    except BrokenPipeError as broken:
        after_interrupt = broken
    assert not cli._not_an_interrupt(_record_of(KeyboardInterrupt()))
    assert not cli._not_an_interrupt(_record_of(after_interrupt))
    assert cli._not_an_interrupt(_record_of(BrokenPipeError(32, "Broken pipe")))
    assert cli._not_an_interrupt(logging.LogRecord("locality", logging.WARNING, __file__, 1, "no error", (), None))


def _leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command of the CLI, a group's subcommands included (``switch flink``)."""
    found = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _leaf_commands(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


def test_every_command_takes_debug_and_json(store, capsys):
    commands = _leaf_commands(cli.cli)
    assert {("optimize",), ("generate",), ("switch", "flink"), ("export",)} <= set(commands)
    for words in commands:
        command = " ".join(words)
        assert main([*words, "--help"]) == ExitCode.OK
        usage = capsys.readouterr().out
        assert "--debug" in usage and "--json" in usage, command
        if command in ("optimize", "evaluate", "reconfigure", "replay", "demo"):  # the long ones show progress
            assert "-q, --quiet" in usage, command
        if command in ("optimize", "reconfigure", "rollback"):
            assert "--lock-timeout" in usage, command
        if command in ("optimize", "evaluate", "reconfigure"):
            assert "--encoding" in usage, command


def test_the_jobs_never_import_the_cli():
    for path in (REPO / "pipelines").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {
            *(alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names),
            *(node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module),
        }
        assert "locality.cli" not in imported, path


def test_the_spark_submit_script_runs_the_one_parser(store):
    done = subprocess.run(
        [sys.executable, "locality_job.py", "show", "--store", str(store), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert '"current": 1' in done.stdout
    done = subprocess.run(
        [sys.executable, "locality_job.py", "rollback", "--store", str(store), "--to", "4"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == ExitCode.BAD_INPUT and "has no version 4" in done.stderr


def test_a_check_that_finds_a_problem_does_not_exit_0(tmp_path, capsys, monkeypatch):
    """``locality datasets`` lists every card; a shared trace missing or altered makes it exit 2, naming the card."""
    monkeypatch.setenv("LOCALITY_SHARED_DATA", str(tmp_path))  # no shared trace here
    assert main(["datasets", "--json"]) == ExitCode.BAD_INPUT
    out, err = capsys.readouterr()
    rows = {row["name"]: row["status"] for row in json.loads(out)}
    assert rows["ira_troll_hashtags"].startswith("NOT OK") and rows["twitter_like"].startswith("recipes")
    assert "fail their check" in err and "ira_troll_hashtags" in err


@pytest.mark.parametrize(
    "args, code, says",
    [
        (["show", "--store", "{tmp}/file"], ExitCode.BAD_INPUT, "is a file, not a directory"),
        (["show", "--store", "hdfs:///stores/x"], ExitCode.BAD_INPUT, "is not served"),
        (["optimize", "{tmp}/trace.parquet", "--store", "{tmp}/store"], ExitCode.BAD_INPUT, "Missing option"),
        (["datasets", "no-such-dataset"], ExitCode.BAD_INPUT, "no-such-dataset"),
    ],
)
def test_json_on_failure_is_one_document_naming_the_error_and_the_exit(tmp_path, capsys, args, code, says):
    """A scheduler that parses stdout gets one JSON document whatever happened."""
    (tmp_path / "file").write_text("x")
    assert main([a.format(tmp=tmp_path) for a in args] + ["--json"]) == code
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert document["exit_code"] == code and says in document["error"] and says in err
    assert out.count("\n") == 1


@pytest.mark.parametrize(
    "command, parameter, options",
    [
        ("optimize", "max_entries", ["--max-entries"]),
        ("replay", "rebalance.every", ["--rebalance-every"]),
        ("replay", "rebalance.method", ["--rebalance"]),
        ("replay", "history", ["--history"]),
        ("replay", "rebalance.history", ["--rebalance-history"]),
        ("replay", "forecast.decay", ["--forecast"]),
        ("replay", "rebalance.forecast.decay", ["--rebalance-forecast"]),
        ("reconfigure", "rebalance.theta_max", ["--theta-max"]),
        ("reconfigure", "topology", ["--servers", "--instances-per-server", "--topology"]),
        ("reconfigure", "newest", ["--newest-files"]),
        ("rollback", "store.location", ["--store"]),
        ("switch flink", "from_version", ["--from"]),
        ("generate", "overrides", ["--param"]),
        ("reconfigure", "rebalance.table_cap", ["--rebalance"]),  # no option of its own: the object's
        ("replay", None, []),
    ],
)
def test_the_option_of_a_library_parameter_is_the_one_named_after_it(command, parameter, options):
    """An error about a parameter names the options that set it, found from how the options are named."""
    assert cli._options_of(parameter, cli._command_of(command.split())) == options


def test_an_error_names_its_option_from_its_parameter_not_its_text():
    error = InvalidParameterError("the window is too short; got 0", parameter="rebalance.every")
    assert (
        cli._with_options(error, ["replay", "t.parquet"]) == "the window is too short; got 0 (option --rebalance-every)"
    )
    assert cli._with_options(error, ["optimize", "t.parquet"]) == "the window is too short; got 0"
