"""A corpus of bad and odd inputs: every case ends with its documented exit code and a message naming the culprit.

Each case builds its files in a fresh directory and returns the command line,
the exit code it must end with, and the strings stderr must hold (the file,
column, option or store at fault). Most cases must fail before Spark starts:
for those, starting a session fails the test. The others share the one Spark
session. A few library calls complete the corpus at the end.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import locality.cli as cli
from locality.cli import ExitCode, main
from locality.errors import InvalidParameterError, SerializationError, StoreError, TraceError
from locality.store import ConfigStore
from pipelines.counting import sketch_trace
from pipelines.params import OfflineParams, OnlineParams
from pipelines.trace import TraceSpec, check_trace, read_trace, read_trace_frame

Case = Callable[[Path], tuple[list[str], int, list[str]]]
BEFORE_SPARK: dict[str, Case] = {}
WITH_SPARK: dict[str, Case] = {}


def before_spark(case: Case) -> Case:
    BEFORE_SPARK[case.__name__] = case
    return case


def with_spark(case: Case) -> Case:
    WITH_SPARK[case.__name__] = case
    return case


def frame(rows: int = 60) -> pd.DataFrame:
    """A small good trace: users, tags, a weight, a timestamp."""
    return pd.DataFrame(
        {
            "user": [f"u{i % 7}" for i in range(rows)],
            "tag": [f"t{i % 5}" for i in range(rows)],
            "n": np.ones(rows),
            "ts": pd.date_range("2024-01-01", periods=rows, freq="h", tz="UTC"),
        }
    )


def parquet(tmp: Path, data: pd.DataFrame | pa.Table, name: str = "trace.parquet") -> str:
    table = data if isinstance(data, pa.Table) else pa.Table.from_pandas(data, preserve_index=False)
    pq.write_table(table, tmp / name, coerce_timestamps="us")  # Spark does not read nanoseconds
    return str(tmp / name)


def optimize(trace: str, tmp: Path, *extra: str, keys: str = "user,tag") -> list[str]:
    return ["optimize", trace, "--keys", keys, "--servers", "2", "--store", str(tmp / "store"), "-q", *extra]


LATIN1_CSV = "user,tag\nZ\xfcrich,alps\nBern,alps\nGen\xe8ve,lac\n".encode("latin-1")


# ---------------------------------------------------------------------- trace files
@before_spark
def missing_trace(tmp):
    return optimize(str(tmp / "nope.parquet"), tmp), ExitCode.BAD_INPUT, [f"no trace file at '{tmp / 'nope.parquet'}'"]


@before_spark
def empty_directory(tmp):
    (tmp / "trace").mkdir()
    return optimize(str(tmp / "trace"), tmp), ExitCode.BAD_INPUT, [f"no trace file at '{tmp / 'trace'}'"]


@before_spark
def glob_matching_nothing(tmp):
    return optimize(str(tmp / "*.parquet"), tmp), ExitCode.BAD_INPUT, ["no trace file at", "*.parquet"]


@before_spark
def zero_byte_parquet(tmp):
    (tmp / "t.parquet").write_bytes(b"")
    return optimize(str(tmp / "t.parquet"), tmp), ExitCode.BAD_INPUT, [str(tmp / "t.parquet"), "is empty (0 bytes)"]


@before_spark
def zero_byte_file_among_good_ones(tmp):
    (tmp / "trace").mkdir()
    parquet(tmp / "trace", frame(), "part-0.parquet")
    (tmp / "trace" / "part-1.parquet").write_bytes(b"")
    path = tmp / "trace" / "part-1.parquet"
    return optimize(str(tmp / "trace"), tmp), ExitCode.BAD_INPUT, [str(path), "is empty"]


@before_spark
def corrupt_parquet(tmp):
    (tmp / "t.parquet").write_bytes(b"PAR1" + bytes(range(256)) * 4)
    return optimize(str(tmp / "t.parquet"), tmp), ExitCode.BAD_INPUT, [str(tmp / "t.parquet"), "not a Parquet file"]


@before_spark
def truncated_parquet(tmp):
    path = parquet(tmp, frame(500))
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])
    return optimize(path, tmp), ExitCode.BAD_INPUT, [path, "truncated"]


@before_spark
def unknown_extension(tmp):
    (tmp / "trace.txt").write_text("user,tag\na,b\n")
    return optimize(str(tmp / "trace.txt"), tmp), ExitCode.BAD_INPUT, ["cannot tell the format", "trace.txt"]


@before_spark
def missing_key_column(tmp):
    path = parquet(tmp, frame())
    return optimize(path, tmp, keys="user,hashtag"), ExitCode.BAD_INPUT, [path, "no column 'hashtag'", "'tag'"]


@before_spark
def missing_weight_column(tmp):
    path = parquet(tmp, frame())
    return optimize(path, tmp, "--weight", "bytes"), ExitCode.BAD_INPUT, ["no column 'bytes'"]


@before_spark
def float_key_column(tmp):
    path = parquet(tmp, frame().assign(lat=0.5))
    return optimize(path, tmp, keys="user,lat"), ExitCode.BAD_INPUT, ["key column 'lat' has type double", path]


@before_spark
def boolean_key_column(tmp):
    path = parquet(tmp, frame().assign(flag=True))
    return optimize(path, tmp, keys="flag,tag"), ExitCode.BAD_INPUT, ["key column 'flag' has type bool"]


@before_spark
def string_weight_column(tmp):
    path = parquet(tmp, frame().assign(n="one"))
    return optimize(path, tmp, "--weight", "n"), ExitCode.BAD_INPUT, ["weight column 'n' has type string", "numeric"]


@before_spark
def string_timestamp_column(tmp):
    path = parquet(tmp, frame().assign(ts="yesterday"))
    args = optimize(path, tmp, "--ts", "ts", "--start", "2024-01-01")
    return args, ExitCode.BAD_INPUT, ["timestamp column 'ts' has type string"]


@before_spark
def duplicate_csv_column(tmp):
    (tmp / "t.csv").write_text("user,tag,user\na,b,c\n")
    return optimize(str(tmp / "t.csv"), tmp), ExitCode.BAD_INPUT, [str(tmp / "t.csv"), "column 'user' more than once"]


@before_spark
def duplicate_parquet_column(tmp):
    table = pa.table([pa.array(["a"]), pa.array(["b"]), pa.array(["c"])], names=["user", "tag", "tag"])
    path = parquet(tmp, table)
    return optimize(path, tmp), ExitCode.BAD_INPUT, [path, "column 'tag' more than once"]


@before_spark
def key_types_differ_between_files(tmp):
    (tmp / "trace").mkdir()
    parquet(tmp / "trace", frame(), "a.parquet")
    parquet(tmp / "trace", frame().assign(user=7), "b.parquet")
    return (
        optimize(str(tmp / "trace"), tmp),
        ExitCode.BAD_INPUT,
        ["column 'user' is string in", "but int64 in", "b.parquet"],
    )


@before_spark
def csv_without_header(tmp):
    (tmp / "t.csv").write_text("\n\n")
    return optimize(str(tmp / "t.csv"), tmp), ExitCode.BAD_INPUT, [str(tmp / "t.csv"), "no header row"]


@before_spark
def latin1_csv_read_as_utf8(tmp):
    (tmp / "t.csv").write_bytes(LATIN1_CSV)
    culprits = ["key column 'user'", str(tmp / "t.csv"), "Z\ufffdrich", "line 2", "--encoding"]
    return optimize(str(tmp / "t.csv"), tmp), ExitCode.BAD_INPUT, culprits


@before_spark
def latin1_json_read_as_utf8(tmp):
    (tmp / "t.json").write_bytes('{"user": "Z\xfcrich", "tag": "alps"}\n'.encode("latin-1"))
    return optimize(str(tmp / "t.json"), tmp), ExitCode.BAD_INPUT, [str(tmp / "t.json"), "'user'", "--encoding"]


@before_spark
def json_line_not_an_object(tmp):
    (tmp / "t.json").write_text('{"user": "a", "tag": "b"}\n[1, 2]\n')
    return (
        optimize(str(tmp / "t.json"), tmp),
        ExitCode.BAD_INPUT,
        ["line 2 of", str(tmp / "t.json"), "not a JSON object"],
    )


@before_spark
def json_mixed_key_types(tmp):
    (tmp / "t.json").write_text('{"user": 42, "tag": "b"}\n{"user": "42", "tag": "b"}\n')
    return (
        optimize(str(tmp / "t.json"), tmp),
        ExitCode.BAD_INPUT,
        ["key column 'user'", "int on line 1", "string on line 2"],
    )


# ---------------------------------------------------------------------- options
@before_spark
def encoding_spark_cannot_read(tmp):
    (tmp / "t.csv").write_bytes(LATIN1_CSV)
    args = optimize(str(tmp / "t.csv"), tmp, "--encoding", "cp1252")
    return args, ExitCode.BAD_INPUT, ["'encoding' parameter must be one of", "got 'cp1252' (option --encoding)"]


@before_spark
def unknown_encoding(tmp):
    (tmp / "t.csv").write_bytes(LATIN1_CSV)
    return optimize(str(tmp / "t.csv"), tmp, "--encoding", "klingon"), ExitCode.BAD_INPUT, ["--encoding", "'klingon'"]


@before_spark
def encoding_for_parquet(tmp):
    args = optimize(parquet(tmp, frame()), tmp, "--encoding", "latin-1")
    return args, ExitCode.BAD_INPUT, ["--encoding", "applies to CSV and JSON"]


def _option_case(option: str, value: str, culprit: str) -> Case:
    def case(tmp):
        return optimize(parquet(tmp, frame()), tmp, option, value), ExitCode.BAD_INPUT, [culprit]

    case.__name__ = f"option_{option.strip('-').replace('-', '_')}_{value}"
    return case


for _option, _value, _culprit in [
    ("--alpha", "0.9", "'alpha' parameter of the offline job must be a float >= 1.0 and <= 1000000.0; got 0.9"),
    ("--alpha", "nan", "'alpha' parameter of the offline job"),
    ("--servers", "0", "'servers' parameter of locality optimize must be an int >= 1; got 0"),
    ("--instances-per-server", "0", "'instances_per_server' parameter"),
    ("--capacity", "0", "'capacity' parameter of the offline job must be an int >= 1; got 0"),
    ("--top-pairs", "0", "'top_pairs' parameter of the offline job"),
    ("--max-entries", "-1", "'max_entries' parameter of the offline job"),
    ("--seed", "-1", "'seed' parameter of the offline job"),
    ("--lock-timeout", "-1", "'lock_timeout' parameter of the offline job"),
    ("--hash", "murmur", "'hash' parameter of the offline job must be one of"),
    ("--capacity", "many", "Invalid value for '--capacity'"),
]:
    before_spark(_option_case(_option, _value, _culprit))


@before_spark
def start_not_a_date(tmp):
    args = optimize(parquet(tmp, frame()), tmp, "--ts", "ts", "--start", "yesterday")
    return args, ExitCode.BAD_INPUT, ["start time 'yesterday' is not an ISO 8601"]


@before_spark
def start_without_ts(tmp):
    return (
        optimize(parquet(tmp, frame()), tmp, "--start", "2024-01-01"),
        ExitCode.BAD_INPUT,
        ["needs the timestamp column"],
    )


@before_spark
def one_key_column(tmp):
    return optimize(parquet(tmp, frame()), tmp, keys="user"), ExitCode.BAD_INPUT, ["--keys", "at least two"]


@before_spark
def repeated_key_column(tmp):
    return optimize(parquet(tmp, frame()), tmp, keys="user,user"), ExitCode.BAD_INPUT, ["key columns must be distinct"]


@before_spark
def servers_and_topology(tmp):
    (tmp / "topo.json").write_text("{}")
    args = optimize(parquet(tmp, frame()), tmp, "--topology", str(tmp / "topo.json"))
    return args, ExitCode.BAD_INPUT, ["either --servers", "or --topology"]


@before_spark
def topology_file_missing(tmp):
    args = ["optimize", parquet(tmp, frame()), "--keys", "user,tag", "--topology", str(tmp / "t.json")]
    return (
        [*args, "--store", str(tmp / "s")],
        ExitCode.BAD_INPUT,
        ["cannot read the topology file", str(tmp / "t.json")],
    )


@before_spark
def topology_file_holding_a_list(tmp):
    (tmp / "t.json").write_text("[1, 2]")
    args = ["optimize", parquet(tmp, frame()), "--keys", "user,tag", "--topology", str(tmp / "t.json")]
    return [*args, "--store", str(tmp / "s")], ExitCode.BAD_INPUT, [str(tmp / "t.json"), "a topology is a JSON object"]


#: Topology documents of the wrong shape, and the field each message must name.
TOPOLOGY_SHAPES = {
    "servers_a_string": ({"servers": "s0s1", "placement": {"user": ["s0"], "tag": ["s0"]}}, "'servers' must be a list"),
    "placement_a_string": (
        {"servers": ["s0", "s1"], "placement": {"user": "s0", "tag": ["s0", "s1"]}},
        "placement['user']",
    ),
    "placement_a_list": ({"servers": ["s0"], "placement": ["s0"]}, "'placement' must be a JSON object"),
    "capacities_a_list": (
        {"servers": ["s0"], "placement": {"user": ["s0"], "tag": ["s0"]}, "capacities": [1]},
        "'capacities'",
    ),
    "counts_as_text": ({"instances": {"s0": "3", "s1": 2}}, "instances['s0'] must be an instance count"),
    "counts_of_other_operators": (
        {"instances": {"a": {"s0": 1}, "b": {"s0": 1}}},
        "'instances' names operators ['a', 'b']",
    ),
    "an_unknown_field": (
        {"servers": ["s0"], "placement": {"user": ["s0"], "tag": ["s0"]}, "server": 1},
        "unknown fields ['server']",
    ),
}


@pytest.mark.parametrize("shape", sorted(TOPOLOGY_SHAPES))
def test_a_topology_file_of_the_wrong_shape_is_refused_naming_the_field(shape, tmp_path, capsys):
    doc, field = TOPOLOGY_SHAPES[shape]
    (tmp_path / "t.json").write_text(json.dumps(doc))
    args = ["optimize", parquet(tmp_path, frame()), "--keys", "user,tag", "--topology", str(tmp_path / "t.json")]
    assert main([*args, "--store", str(tmp_path / "s")]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert str(tmp_path / "t.json") in err and field in err and "Traceback" not in err, err


@before_spark
def reconfigure_bad_window(tmp):
    args = ["reconfigure", parquet(tmp, frame()), "--keys", "user,tag", "--ts", "ts", "--servers", "2"]
    return [*args, "--store", str(tmp / "s"), "--window", "soon"], ExitCode.BAD_INPUT, ["--window", "'soon'"]


@before_spark
def reconfigure_decay_above_one(tmp):
    args = ["reconfigure", parquet(tmp, frame()), "--keys", "user,tag", "--servers", "2", "--store", str(tmp / "s")]
    return [*args, "--decay", "1.5"], ExitCode.BAD_INPUT, ["'decay' parameter of the online job"]


@before_spark
def reconfigure_newest_files_zero(tmp):
    args = ["reconfigure", parquet(tmp, frame()), "--keys", "user,tag", "--servers", "2", "--store", str(tmp / "s")]
    return [*args, "--newest-files", "0"], ExitCode.BAD_INPUT, ["'newest' parameter", "got 0"]


@before_spark
def replay_missing_trace(tmp):
    args = ["replay", str(tmp / "nope.parquet"), "--keys", "user,tag", "--servers", "2", "-q"]
    return args, ExitCode.BAD_INPUT, [str(tmp / "nope.parquet")]


# ---------------------------------------------------------------------- numbers: finite, in range and in scale
def _scale_case(command: str, option: str, value: str, culprit: str, extra: tuple[str, ...] = ()) -> Case:
    """A number out of range, not finite or beyond what the code below can hold: refused, naming the option."""

    def case(tmp):
        path = parquet(tmp, frame())
        if command == "optimize":
            args = optimize(path, tmp, option, value, *extra)
        elif command == "reconfigure":
            args = [
                "reconfigure",
                path,
                "--keys",
                "user,tag",
                "--ts",
                "ts",
                "--servers",
                "2",
                "--store",
                str(tmp / "s"),
            ]
            args += [option, value, *extra]
        else:
            args = ["replay", path, "--keys", "user,tag", "--servers", "2", "-q", option, value, *extra]
        return args, ExitCode.BAD_INPUT, [culprit, option]

    case.__name__ = f"{command}_{option.strip('-').replace('-', '_')}_{value.replace('.', '_').replace('-', 'minus')}"
    return case


for _command, _option, _value, _culprit, _extra in [
    ("optimize", "--alpha", "inf", "'alpha' parameter of the offline job must be a finite float", ()),
    ("optimize", "--alpha", "1e999", "must be a finite float >= 1.0 and <= 1000000.0; got inf", ()),
    ("optimize", "--lock-timeout", "1e20", "'lock_timeout' parameter of the offline job", ()),
    ("optimize", "--seed", str(2**31), "'seed' parameter of the offline job", ()),
    ("optimize", "--servers", str(2**31), "2,147,483,648 instances per operator", ()),
    ("optimize", "--instances-per-server", str(2**20), "x --instances-per-server 1,048,576 make 2,097,152", ()),
    ("optimize", "--instances-per-server", "0", "(option --instances-per-server)", ()),
    ("reconfigure", "--min-gain", "inf", "'min_gain' parameter of the online job", ()),
    ("reconfigure", "--max-imbalance", "nan", "'max_imbalance' parameter of the online job", ()),
    ("reconfigure", "--theta-max", "inf", "'theta_max' parameter", ("--rebalance", "local")),
    ("reconfigure", "--state-weight", "-inf", "'state_weight' parameter", ("--rebalance", "local")),
    ("reconfigure", "--newest-files", "0", "(option --newest-files)", ()),
    ("replay", "--alpha", "inf", "'alpha' parameter of replay_trace", ()),
    ("replay", "--decay", "nan", "'decay' parameter of replay_trace", ()),
    ("replay", "--min-gain", "-1", "'min_gain' parameter of replay_trace", ()),
    ("replay", "--max-imbalance", "0.5", "'max_imbalance' parameter of replay_trace", ("--min-gain", "0.1")),
    ("replay", "--history", "0", "'history' parameter of replay_trace", ()),
    ("replay", "--servers", str(2**31), "at most 1,048,576", ()),
    ("replay", "--forecast", "decay:2", "'decay' parameter of the decay forecast", ()),
    ("replay", "--state-weight", "inf", "'state_weight' parameter", ("--rebalance", "local")),
]:
    before_spark(_scale_case(_command, _option, _value, _culprit, _extra))


@before_spark
def topology_file_with_ten_million_instances(tmp):
    (tmp / "t.json").write_text(json.dumps({"instances": {"s0": 10_000_000, "s1": 1}}))
    args = ["optimize", parquet(tmp, frame()), "--keys", "user,tag", "--topology", str(tmp / "t.json")]
    return [*args, "--store", str(tmp / "s")], ExitCode.BAD_INPUT, [str(tmp / "t.json"), "10,000,001 instances"]


# ---------------------------------------------------------------------- time windows
@before_spark
def replay_period_of_a_nanosecond(tmp):
    args = ["replay", parquet(tmp, frame()), "--keys", "user,tag", "--servers", "2", "--period", "1ns", "-q"]
    return (
        args,
        ExitCode.BAD_INPUT,
        ["'period' parameter of replay_trace", "at most 100,000 windows", "(option --period)"],
    )


@before_spark
def replay_period_longer_than_the_trace(tmp):
    args = ["replay", parquet(tmp, frame()), "--keys", "user,tag", "--servers", "2", "--period", "30D", "-q"]
    return args, ExitCode.BAD_INPUT, ["1 window of 30D", "needs two", "(option --period)"]


@before_spark
def replay_range_holding_no_row(tmp):
    args = ["replay", parquet(tmp, frame()), "--keys", "user,tag", "--servers", "2", "-q"]
    return [*args, "--start", "2030-01-01", "--end", "2031-01-01"], ExitCode.BAD_INPUT, ["holds no row", "2030-01-01"]


@before_spark
def replay_end_before_start(tmp):
    args = ["replay", parquet(tmp, frame()), "--keys", "user,tag", "--servers", "2", "-q"]
    return [*args, "--start", "2024-01-05", "--end", "2024-01-02"], ExitCode.BAD_INPUT, ["holds no row"]


@before_spark
def replay_rebalancing_every_second_for_weeks(tmp):
    args = ["replay", parquet(tmp, frame(2000)), "--keys", "user,tag", "--servers", "2", "--period", "1D", "-q"]
    return (
        [*args, "--rebalance", "local", "--rebalance-every", "1ms"],
        ExitCode.BAD_INPUT,
        ["--rebalance-every", "runs"],
    )


# ---------------------------------------------------------------------- traces read partly or wrongly
@before_spark
def directory_of_two_formats(tmp):
    (tmp / "trace").mkdir()
    parquet(tmp / "trace", frame(), "part-0.parquet")
    frame().drop(columns="ts").to_csv(tmp / "trace" / "part-1.csv", index=False)
    culprits = ["holds files of 2 formats", "part-0.parquet", "part-1.csv", "*.csv"]
    return optimize(str(tmp / "trace"), tmp), ExitCode.BAD_INPUT, culprits


@before_spark
def replay_directory_of_two_formats(tmp):
    (tmp / "trace").mkdir()
    parquet(tmp / "trace", frame(), "a.parquet")
    (tmp / "trace" / "b.jsonl").write_text('{"user": "u", "tag": "t", "ts": "2024-01-01T00:00:00"}\n')
    args = ["replay", str(tmp / "trace"), "--keys", "user,tag", "--servers", "2", "-q"]
    return args, ExitCode.BAD_INPUT, ["holds files of 2 formats", "a.parquet", "b.jsonl"]


@before_spark
def format_option_other_than_the_files(tmp):
    return optimize(parquet(tmp, frame()), tmp, "--format", "csv"), ExitCode.BAD_INPUT, ["--format", "are parquet"]


@before_spark
def csv_quoted_field_never_closed(tmp):
    (tmp / "t.csv").write_text('user,tag\n"open quote,t1\nu2,t2\n')
    return optimize(str(tmp / "t.csv"), tmp), ExitCode.BAD_INPUT, [str(tmp / "t.csv"), "not CSV"]


@before_spark
def gzip_csv_cut_short(tmp):
    import gzip

    data = gzip.compress(("user,tag\n" + "u1,t1\n" * 1000).encode())
    (tmp / "t.csv.gz").write_bytes(data[: len(data) // 2])
    return optimize(str(tmp / "t.csv.gz"), tmp), ExitCode.BAD_INPUT, [str(tmp / "t.csv.gz"), "cannot read"]


@before_spark
def text_timestamp_not_a_time(tmp):
    (tmp / "t.csv").write_text("user,tag,ts\nu1,t1,2024-01-01T00:00:00\nu2,t2,yesterday\n")
    args = ["replay", str(tmp / "t.csv"), "--keys", "user,tag", "--servers", "2", "-q"]
    return args, ExitCode.BAD_INPUT, ["timestamp column 'ts'", "'yesterday'", "ISO 8601"]


# ---------------------------------------------------------------------- output paths, checked before any work
@before_spark
def export_into_a_directory(tmp):
    ConfigStore(tmp / "store").publish(_config(), fingerprint="f")
    args = ["export", "--store", str(tmp / "store"), "--operator", "a", "--out", str(tmp)]
    return args, ExitCode.BAD_INPUT, [f"the output file {tmp} (--out) is a directory"]


@before_spark
def export_under_a_file(tmp):
    ConfigStore(tmp / "store").publish(_config(), fingerprint="f")
    (tmp / "f").write_text("x")
    args = ["export", "--store", str(tmp / "store"), "--operator", "a", "--out", str(tmp / "f" / "routes.txt")]
    return args, ExitCode.BAD_INPUT, ["(--out) cannot be created", f"{tmp / 'f'} is a file"]


@before_spark
def generate_under_a_file(tmp):
    (tmp / "f").write_text("x")
    args = ["generate", "twitter_like", "--out", str(tmp / "f" / "t.parquet"), "-p", "n_rows=1000"]
    return args, ExitCode.BAD_INPUT, ["(--out) cannot be created", f"{tmp / 'f'} is a file"]


@before_spark
def demo_in_a_file(tmp):
    (tmp / "f").write_text("x")
    return ["demo", "--workdir", str(tmp / "f"), "-q"], ExitCode.BAD_INPUT, [f"{tmp / 'f'} (--workdir) is a file"]


# ---------------------------------------------------------------------- stores
@before_spark
def store_is_a_file(tmp):
    (tmp / "store").write_text("I am a file")
    culprit = f"the store {tmp / 'store'} is a file, not a directory"
    return optimize(parquet(tmp, frame()), tmp), ExitCode.BAD_INPUT, [culprit]


@before_spark
def store_path_empty(tmp):
    # an unset variable in `--store $STORE`: never the working directory
    args = ["optimize", parquet(tmp, frame()), "--keys", "user,tag", "--servers", "2", "--store", ""]
    return args, ExitCode.BAD_INPUT, ["must name a directory or an s3:// URI; got '' (option --store)"]


@before_spark
def store_under_a_file(tmp):
    (tmp / "store").write_text("I am a file")
    args = ["optimize", parquet(tmp, frame()), "--keys", "user,tag", "--servers", "2"]
    return [*args, "--store", str(tmp / "store" / "sub")], ExitCode.BAD_INPUT, ["cannot be created", str(tmp / "store")]


@before_spark
def evaluate_empty_store(tmp):
    (tmp / "store").mkdir()
    args = ["evaluate", parquet(tmp, frame()), "--keys", "user,tag", "--store", str(tmp / "store"), "-q"]
    return args, ExitCode.BAD_INPUT, [f"the store {tmp / 'store'} has no published version yet"]


@before_spark
def evaluate_half_written_version(tmp):
    # A version directory without its configuration (as the two-publisher bug of issue 10 left them).
    version = tmp / "store" / "versions" / "000001"
    version.mkdir(parents=True)
    (version / "manifest.json").write_text(json.dumps({"version": 1, "created": "2026-01-01"}))
    (tmp / "store" / "CURRENT").write_text("1\n")
    args = ["evaluate", parquet(tmp, frame()), "--keys", "user,tag", "--store", str(tmp / "store"), "-q"]
    return args, ExitCode.BAD_INPUT, ["version 1 of the store is damaged", str(version / "configuration")]


@before_spark
def evaluate_damaged_manifest(tmp):
    version = tmp / "store" / "versions" / "000001"
    version.mkdir(parents=True)
    (version / "manifest.json").write_text('{"version": 1, "crea')
    (tmp / "store" / "CURRENT").write_text("1\n")
    args = ["evaluate", parquet(tmp, frame()), "--keys", "user,tag", "--store", str(tmp / "store"), "-q"]
    return args, ExitCode.BAD_INPUT, [str(version / "manifest.json"), "damaged"]


@before_spark
def show_a_file(tmp):
    (tmp / "store").write_text("x")
    return (
        ["show", "--store", str(tmp / "store")],
        ExitCode.BAD_INPUT,
        [f"the store {tmp / 'store'} is a file, not a directory"],
    )


@before_spark
def rollback_to_a_missing_version(tmp):
    ConfigStore(tmp / "store").publish(_config(), fingerprint="f")
    args = ["rollback", "--store", str(tmp / "store"), "--to", "5"]
    return args, ExitCode.BAD_INPUT, ["has no version 5; versions: [1]"]


def _config():
    from tests._store_children import make_config

    return make_config(0, 10)


# ---------------------------------------------------------------------- cases that need Spark
@with_spark
def all_null_second_key(tmp):
    table = pa.Table.from_pandas(frame(), preserve_index=False).set_column(1, "tag", pa.nulls(60, pa.string()))
    path = parquet(tmp, table)
    return optimize(path, tmp), ExitCode.BAD_INPUT, ["the trace is empty: 60 rows read", "null key in 'tag' 60"]


@before_spark
def key_column_without_a_type(tmp):
    path = parquet(tmp, frame().assign(tag=None))  # all null: Parquet stores the type "null"
    return optimize(path, tmp), ExitCode.BAD_INPUT, ["key column 'tag' has type null", path]


@before_spark
def nanosecond_timestamps(tmp):
    path = str(tmp / "t.parquet")
    pq.write_table(pa.Table.from_pandas(frame(), preserve_index=False), path)  # pandas' nanoseconds
    return optimize(path, tmp), ExitCode.BAD_INPUT, ["column 'ts'", path, "nanosecond", "coerce_timestamps"]


@with_spark
def all_empty_keys_in_json(tmp):
    (tmp / "t.json").write_text("".join(json.dumps({"user": f"u{i}", "tag": ""}) + "\n" for i in range(20)))
    return optimize(str(tmp / "t.json"), tmp), ExitCode.BAD_INPUT, ["the trace is empty", "empty key in 'tag' 20"]


@with_spark
def all_weights_zero(tmp):
    args = optimize(parquet(tmp, frame().assign(n=0.0)), tmp, "--weight", "n")
    return args, ExitCode.BAD_INPUT, ["the trace is empty", "60 with invalid weight"]


@with_spark
def csv_with_only_a_header(tmp):
    (tmp / "t.csv").write_text("user,tag\n")
    return optimize(str(tmp / "t.csv"), tmp), ExitCode.BAD_INPUT, ["the trace is empty: 0 rows read"]


@with_spark
def time_range_holding_no_row(tmp):
    args = optimize(parquet(tmp, frame()), tmp, "--ts", "ts", "--start", "2030-01-01")
    return args, ExitCode.BAD_INPUT, ["the trace is empty: 0 rows read"]


@with_spark
def latin1_beyond_the_checked_prefix(tmp):
    # The first 64 KiB are plain ASCII: only the counting pass sees the Latin-1 key, and names file and column.
    head = "".join(f"user{i % 50},tag{i % 9}\n" for i in range(8_000))
    (tmp / "t.csv").write_bytes(("user,tag\n" + head).encode() + "Z\xfcrich,alps\n".encode("latin-1"))
    return optimize(str(tmp / "t.csv"), tmp), ExitCode.BAD_INPUT, ["key column 'user'", "t.csv", "U+FFFD", "--encoding"]


@with_spark
def malformed_json_beyond_the_checked_prefix(tmp):
    lines = "".join(json.dumps({"user": f"u{i % 50}", "tag": f"t{i % 9}"}) + "\n" for i in range(3_000))
    (tmp / "t.json").write_text(lines + "{not json\n")
    return optimize(str(tmp / "t.json"), tmp), ExitCode.BAD_INPUT, ["t.json", "not a JSON object", "{not json"]


@with_spark
def evaluate_integer_keys_against_string_tables(tmp):
    ConfigStore(tmp / "tables").publish(_config(), fingerprint="f")  # keys "k0-1", ...: strings
    path = parquet(tmp, pd.DataFrame({"a": np.arange(40), "b": np.arange(40) % 3}))
    args = ["evaluate", path, "--keys", "a,b", "--store", str(tmp / "tables"), "-q"]
    return args, ExitCode.BAD_INPUT, ["key column 'a' holds integer keys", "holds string keys", "42 and '42'"]


@before_spark
def evaluate_with_other_operators(tmp):
    ConfigStore(tmp / "store").publish(_config(), fingerprint="f")
    (tmp / "t.csv").write_text("x,y,z\n1,2,3\n")
    args = ["evaluate", str(tmp / "t.csv"), "--keys", "x,y,z", "--store", str(tmp / "store"), "-q"]
    return args, ExitCode.BAD_INPUT, ["routes 2 operators", "got 3 key columns"]


@before_spark
def trace_file_with_a_colon(tmp):
    path = parquet(tmp, frame(), "2026-11-27T10:00.parquet")
    return optimize(path, tmp), ExitCode.BAD_INPUT, ["path holds ':'", path, "rename it"]


@before_spark
def column_name_with_a_dot(tmp):
    path = parquet(tmp, frame().rename(columns={"user": "user.id"}))
    return optimize(path, tmp, keys="user.id,tag"), ExitCode.BAD_INPUT, ["column 'user.id'", "rename the column"]


@before_spark
def column_name_with_a_backtick(tmp):
    path = parquet(tmp, frame().rename(columns={"tag": "t`ag"}))
    return optimize(path, tmp, keys="user,t`ag"), ExitCode.BAD_INPUT, ["column 't`ag'", "rename the column"]


@before_spark
def alpha_beyond_any_bound(tmp):
    args = optimize(parquet(tmp, frame()), tmp, "--alpha", "1e308")
    return args, ExitCode.BAD_INPUT, ["'alpha' parameter", "<= 1000000.0; got 1e+308", "--alpha"]


@before_spark
def evaluate_with_unrelated_columns(tmp):
    ConfigStore(tmp / "store").publish(_config(), fingerprint="f")  # operators a, b
    path = parquet(tmp, frame())
    args = ["evaluate", path, "--keys", "user,tag", "--store", str(tmp / "store"), "-q"]
    return args, ExitCode.BAD_INPUT, ["routes 2 operators ['a', 'b']", "--keys must name those key columns"]


@pytest.mark.parametrize("name", sorted(BEFORE_SPARK))
def test_fails_before_spark_naming_the_culprit(name, tmp_path, capsys, monkeypatch):
    def no_spark(master):
        raise AssertionError("this input should have been refused before Spark starts")

    monkeypatch.setattr(cli, "_session", no_spark)
    args, expected, culprits = BEFORE_SPARK[name](tmp_path)
    code = main(args)
    out, err = capsys.readouterr()
    assert code == expected, err
    assert "Traceback" not in err and out == ""
    for culprit in culprits:
        assert culprit in err, f"{culprit!r} not in {err!r}"


@pytest.mark.parametrize("name", sorted(WITH_SPARK))
def test_fails_in_the_job_naming_the_culprit(name, spark, tmp_path, capsys):
    args, expected, culprits = WITH_SPARK[name](tmp_path)
    code = main(args)
    _, err = capsys.readouterr()
    assert code == expected, err
    assert "Traceback" not in err
    for culprit in culprits:
        assert culprit in err, f"{culprit!r} not in {err!r}"
    assert ConfigStore(tmp_path / "store").versions() == []  # nothing published


# ---------------------------------------------------------------------- odd inputs that must work
ODD_KEYS = [
    "Zürich",
    "東京",
    "emoji 🚀",
    "comma, inside",
    'quote " inside',
    "new\nline",
    "tab\tkey",
    "nul\x00byte",
    " ",
    "0007",
    "x" * 100_000,  # a 100 kB key
]


def test_odd_keys_survive_read_count_and_store(spark, tmp_path, capsys):
    rows = [(key, f"t{j}") for i, key in enumerate(ODD_KEYS) for j in range(i + 1)]
    data = pd.DataFrame(rows, columns=["user", "tag"])
    path = parquet(tmp_path, data)
    counts = sketch_trace(read_trace(spark, TraceSpec(path, ["user", "tag"])), ["user", "tag"])
    loads = counts.key_loads["user"].set_index("key")["weight"].to_dict()
    assert loads == {key: i + 1 for i, key in enumerate(ODD_KEYS)}  # every key exactly, none mangled
    assert main([*optimize(path, tmp_path), "--json"]) == ExitCode.OK
    capsys.readouterr()
    config = ConfigStore(tmp_path / "store").get().config
    assert set(config.tables["user"].entries.index) <= set(ODD_KEYS)
    assert {config.route("user", key) for key in ODD_KEYS} <= {0, 1}


def test_latin1_with_its_encoding_reads_the_real_keys(spark, tmp_path, capsys):
    (tmp_path / "t.csv").write_bytes(LATIN1_CSV)
    (tmp_path / "t.json").write_bytes('{"user": "Z\xfcrich", "tag": "alps"}\n'.encode("latin-1"))
    for name in ("t.csv", "t.json"):
        spec = TraceSpec(str(tmp_path / name), ["user", "tag"], encoding="latin-1")
        counts = sketch_trace(read_trace(spark, spec), ["user", "tag"])
        assert "Zürich" in set(counts.key_loads["user"]["key"])
    assert main(optimize(str(tmp_path / "t.csv"), tmp_path, "--encoding", "latin-1", "--alpha", "3")) == ExitCode.OK

    capsys.readouterr()


def test_integer_keys_at_the_int64_limits(spark, tmp_path, capsys):
    limits = [-(2**63), -1, 0, 2**63 - 1]
    data = pd.DataFrame({"user": np.array(limits * 3, dtype=np.int64), "tag": ["a", "b", "c"] * 4})
    counts = sketch_trace(read_trace(spark, TraceSpec(parquet(tmp_path, data), ["user", "tag"])), ["user", "tag"])
    assert sorted(counts.key_loads["user"]["key"]) == limits


def test_a_store_left_half_written_by_the_old_publisher_takes_the_next_number(spark, tmp_path, capsys):
    version = tmp_path / "store" / "versions" / "000001"
    (version / "configuration").mkdir(parents=True)  # no manifest: never a version
    (tmp_path / "store" / "versions" / ".tmp-0123").mkdir()
    assert main(optimize(parquet(tmp_path, frame()), tmp_path)) == ExitCode.OK
    capsys.readouterr()
    store = ConfigStore(tmp_path / "store")
    assert store.versions() == [2] and store.current_version() == 2
    assert not (tmp_path / "store" / "versions" / ".tmp-0123").exists()


# ---------------------------------------------------------------------- library calls
@pytest.mark.parametrize(
    "build, error, message",
    [
        (lambda p: TraceSpec(p, ["a"]), TraceError, "at least two key columns"),
        (lambda p: TraceSpec(p, ["a", "a"]), TraceError, "key columns must be distinct"),
        (lambda p: TraceSpec(p, ["a", "b"], ts="ts", start="noon"), TraceError, "start time 'noon'"),
        (lambda p: TraceSpec(p, ["a", "b"], format="xml"), TraceError, "unknown trace format 'xml'"),
        (lambda p: TraceSpec(p, ["a", "b"], encoding="cp1252"), InvalidParameterError, "'encoding' parameter must"),
        (lambda p: TraceSpec(p, ["a", "b"], format="parquet", encoding="utf-8"), InvalidParameterError, "Parquet"),
        (lambda p: TraceSpec(p, ["a", "b"], newest=0), InvalidParameterError, "'newest' parameter"),
        (lambda p: check_trace(TraceSpec(p + "/*.csv", ["a", "b"])), TraceError, "no trace file at"),
        (lambda p: ConfigStore(p + "/f").check_writable(), StoreError, "is a file, not a directory"),
        (lambda p: ConfigStore(p + "/f").get(), StoreError, "is a file, not a directory"),
        (
            lambda p: OfflineParams(TraceSpec(p, ["a", "b"]), _topology(), p, capacity=0),
            InvalidParameterError,
            "'capacity' parameter of the offline job",
        ),
        (
            lambda p: OnlineParams(TraceSpec(p, ["a", "b"]), p, min_gain=-1.0),
            InvalidParameterError,
            "'min_gain' parameter of the online job",
        ),
    ],
)
def test_library_calls_name_the_culprit(tmp_path, build, error, message):
    (tmp_path / "f").write_text("a file")
    with pytest.raises(error, match=message.replace("(", r"\(").replace("*", r"\*")):
        build(str(tmp_path))


def test_a_damaged_table_is_named_by_the_store_reader(tmp_path):
    store = ConfigStore(tmp_path)
    store.publish(_config(), fingerprint="f")
    table = store.get().path / "configuration" / "tables" / "00.parquet"
    data = bytearray(table.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte flipped
    table.write_bytes(bytes(data))
    with pytest.raises(SerializationError, match=f"{table} does not match its manifest's SHA-256"):
        _ = store.get().config


def _topology():
    from locality.topology import Topology

    return Topology.uniform(["a", "b"], 2)


# ---------------------------------------------------------------------- CSV as spreadsheets write it, text timestamps
QUOTED_KEYS = ["line\nbreak", 'a "quoted" word', "comma, inside", "tab\tinside", "plain", "NA", "null", "0007x"]


def _spreadsheet_csv(path: Path, bom: bool = True) -> dict[str, int]:
    """A CSV as Excel and Python's csv write it (quoted newlines, doubled quotes, CRLF, a BOM); the expected loads."""
    import csv

    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as fh:
        writer = csv.writer(fh)  # lineterminator \r\n, doubled quotes, quoting when needed
        writer.writerow(["user", "tag", "ts"])
        for i, key in enumerate(QUOTED_KEYS):
            for j in range(i + 1):
                writer.writerow([key, f"t{j}", f"2024-01-0{1 + j % 7}T0{j % 10}:00:00"])
    return {key: i + 1 for i, key in enumerate(QUOTED_KEYS)}


def test_csv_is_parsed_as_csv_by_both_readers(spark, tmp_path):
    from pipelines.trace import read_trace_frame

    expected = _spreadsheet_csv(tmp_path / "t.csv")
    spec = TraceSpec(str(tmp_path / "t.csv"), ["user", "tag"], ts="ts")
    counts = sketch_trace(read_trace(spark, spec), ["user", "tag"])
    assert counts.key_loads["user"].set_index("key")["weight"].to_dict() == expected  # no key split or mangled
    frame = read_trace_frame(spec)
    assert frame["user"].value_counts().to_dict() == expected
    assert str(frame["ts"].dt.tz) == "UTC"  # text without a zone is UTC


def test_text_timestamps_and_zoned_bounds_are_read_one_way(spark, tmp_path):
    """ISO 8601 text with and without offsets, bounds with a zone: the same rows for Spark and pyarrow (instants)."""
    from pipelines.trace import read_trace_frame

    times = ["2024-01-01T23:30:00Z", "2024-01-02 00:30:00", "2024-01-02T02:30:00+02:00", "2024-01-03T00:00:00"]
    lines = "".join(json.dumps({"user": f"u{i}", "tag": "t", "ts": t}) + "\n" for i, t in enumerate(times))
    (tmp_path / "t.jsonl").write_text(lines)
    # [00:00Z, 01:00Z on Jan 2): u1 (00:30, naive = UTC) and u2 (02:30+02:00 = 00:30Z)
    spec = TraceSpec(
        str(tmp_path / "t.jsonl"), ["user", "tag"], ts="ts", start="2024-01-02T01:00+01:00", end="2024-01-02T01:00:00"
    )
    assert sorted(row.user for row in read_trace(spark, spec).collect()) == ["u1", "u2"]
    assert sorted(read_trace_frame(spec)["user"]) == ["u1", "u2"]


@pytest.mark.parametrize("name", ["a[1].parquet", "b*.parquet", "c?.parquet", "d{x,y}.parquet", "e]f.csv"])
def test_a_file_whose_name_looks_like_a_pattern_is_read_as_that_file(name, spark, tmp_path, capsys):
    """Beside it, decoys a glob of its name would match: only the file named is read (its 60 rows)."""
    data = frame()
    path = tmp_path / name
    data[["user", "tag"]].to_csv(path, index=False) if name.endswith(".csv") else parquet(tmp_path, data, name)
    for decoy in ("a1.parquet", "bb.parquet", "cc.parquet", "dx.parquet", "ef.csv"):
        data.head(7)[["user", "tag"]].to_csv(tmp_path / decoy, index=False)
    spec = TraceSpec(str(path), ["user", "tag"])
    counts = sketch_trace(read_trace(spark, spec), ["user", "tag"])
    assert counts.rows == len(data)
    assert main([*optimize(str(path), tmp_path), "--json"]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["counting"]["rows"] == len(data)


#: CSV key columns and what both readers must make of them: (rows of one or more files, the keys, their kind).
CSV_KEYS = {
    "zero_padded": (["user,tag\n007,a\n7,a\n0007,b\n"], {"007", "7", "0007"}, "string"),
    "integers": (["user,tag\n7,a\n-12,a\n0,b\n"], {7, -12, 0}, "integer"),
    "decimal_text": (["user,tag\n1.5,a\n1.50,b\n"], {"1.5", "1.50"}, "string"),
    "integers_in_one_file_text_in_another": (["user,tag\n7,a\n8,b\n", "user,tag\na7,a\n"], {"7", "8", "a7"}, "string"),
}


@pytest.mark.parametrize("case", sorted(CSV_KEYS))
def test_a_csv_key_is_what_the_user_wrote_in_every_reader(case, spark, tmp_path):
    """Spark's reader (optimize, reconfigure, evaluate) and pyarrow's (replay) follow one rule: a column is
    integers only when every key of every file is written as an integer is; else its keys are the text."""
    files, keys, kind = CSV_KEYS[case]
    (tmp_path / "trace").mkdir()
    for i, text in enumerate(files):
        (tmp_path / "trace" / f"part-{i}.csv").write_text(text)
    spec = TraceSpec(str(tmp_path / "trace"), ["user", "tag"])
    with_spark = {row.user for row in read_trace(spark, spec).select("user").collect()}
    without_spark = set(read_trace_frame(spec)["user"].tolist())
    assert with_spark == without_spark == keys
    assert {type(key).__name__ for key in with_spark} == {"str" if kind == "string" else "int"}
