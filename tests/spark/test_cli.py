"""The ``locality`` CLI in-process: exit codes, JSON on stdout, messages on stderr."""

import json

import pytest

from locality.cli import ExitCode, main
from tests.conftest import trace_keys, trace_path


def run_cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_optimize_evaluate_show_json(spark, tmp_path, capsys):
    trace = trace_path("flights")
    store = tmp_path / "store"
    common = ["--keys", ",".join(trace_keys("flights")), "--ts", "ts", "--quiet"]
    code, out, _ = run_cli(
        capsys,
        "optimize",
        trace,
        *common,
        "--start",
        "2013-03-01",
        "--end",
        "2013-04-01",
        "--servers",
        3,
        "--instances-per-server",
        2,
        "--hash",
        "flink",
        "--store",
        store,
        "--json",
        "--no-graph-stats",
    )
    assert code == ExitCode.OK
    report = json.loads(out)
    assert report["version"] == 1 and report["in_sample"]["locality"] > 2 * report["in_sample"]["hash_locality"]

    code, out, _ = run_cli(
        capsys, "evaluate", trace, *common, "--start", "2013-04-01", "--end", "2013-05-01", "--store", store, "--json"
    )
    assert code == ExitCode.OK
    figures = json.loads(out)
    assert {"locality", "hash_locality", "imbalance", "hash_imbalance", "table_entries", "tuples"} <= set(figures)
    assert set(figures["imbalance"]) == {"tailnum", "dest"} and figures["tuples"] > 20_000
    assert figures["locality"] > 1.5 * figures["hash_locality"]

    reversed_keys = ["--keys", ",".join(reversed(trace_keys("flights"))), "--ts", "ts", "--quiet"]
    april = ["--start", "2013-04-01", "--end", "2013-05-01"]
    code, out, _ = run_cli(capsys, "evaluate", trace, *reversed_keys, *april, "--store", store, "--json")
    assert code == ExitCode.OK and json.loads(out) == figures  # the columns matched to the operators by name

    code, out, _ = run_cli(capsys, "show", "--store", store, "--json")
    shown = json.loads(out)
    assert code == ExitCode.OK and shown["current"] == 1 and shown["versions"][0]["summary"]["locality"] > 0.3
    code, out, _ = run_cli(capsys, "show", "--store", store)
    assert "* " in out and "locality" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--alpha", "0.9"], "'alpha' parameter of the offline job must be a float >= 1.0 and <= 1000000.0; got 0.9"),
        (["--servers", "0"], "'servers' parameter of locality optimize must be an int >= 1; got 0"),
        (["--instances-per-server", "0"], "'instances_per_server' parameter of locality optimize must be an int >= 1"),
        (["--hash", "murmur"], "'hash' parameter of the offline job must be one of"),
        (["--keys", "tailnum,nope"], "has no column 'nope'"),
    ],
)
def test_bad_parameters_exit_2_with_a_message(spark, tmp_path, capsys, args, message):
    base = {"--keys": ",".join(trace_keys("flights")), "--servers": "6", "--store": str(tmp_path)}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value
    flat = [item for pair in base.items() for item in pair]
    code, out, err = run_cli(capsys, "optimize", trace_path("flights"), *flat, "--quiet")
    assert code == ExitCode.BAD_INPUT
    assert message in err and out == ""


def test_infeasible_alpha_exits_1_and_names_the_key(spark, tmp_path, capsys):
    code, out, _ = run_cli(
        capsys,
        "optimize",
        trace_path("flights"),
        "--keys",
        ",".join(trace_keys("flights")),
        "--servers",
        24,
        "--store",
        tmp_path,
        "--quiet",
        "--no-graph-stats",
    )
    assert code == ExitCode.INFEASIBLE
    assert "INFEASIBLE: key 'ORD' of 'dest'" in out


def test_demo_prints_locality_against_hash(spark, tmp_path, capsys):
    code, out, _ = run_cli(capsys, "demo", "--workdir", tmp_path, "--rows", 60_000, "--quiet", "--json")
    assert code == ExitCode.OK
    demo = json.loads(out)
    assert demo["next_week"]["locality"] > 2 * demo["next_week"]["hash_locality"]
    code, out, _ = run_cli(capsys, "demo", "--workdir", tmp_path, "--rows", 60_000, "--quiet")
    assert "week 2 (not seen by the optimizer)" in out and "(hash " in out
