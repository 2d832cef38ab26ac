"""What the engines' sketching pieces' tests check of the sketches a run published (``locality.engine_sketches``).

Both engines' tests (``tests/jvm/test_flink_sketcher.py``, ``tests/kafka/test_streams_sketcher.py``) replay real
records through two keyed operators with a sketcher between them, then read the window back with
:func:`~locality.engine_sketches.read_sketches` and set it beside the records' exact counts.
"""

from __future__ import annotations

import pandas as pd

from locality.engine_sketches import SketchWindow


def exact_counts(records: pd.DataFrame, operators: list[str]) -> tuple[pd.Series, dict[str, pd.Series]]:
    """The records' pairs of the two operators' keys, and each operator's keys, counted exactly."""
    return records.groupby(operators).size(), {op: records[op].value_counts() for op in operators}


def assert_exact(window: SketchWindow, records: pd.DataFrame, operators: list[str]) -> None:
    """Every pair's and every key's count is its exact count (the capacity held every distinct pair)."""
    assert max(window.error_bound.values()) == 0
    pairs, loads = exact_counts(records, operators)
    got = window.counts.pair_counts[0].set_index(["key0", "key1"])["weight"]
    assert len(got) == len(pairs) and (got.loc[pairs.index].to_numpy() == pairs.to_numpy()).all()
    for op in operators:
        load = window.counts.key_load(op)
        assert len(load) == len(loads[op]) and (load.loc[loads[op].index].to_numpy() == loads[op].to_numpy()).all()
        assert window.counts.totals[op] == len(records)


def assert_bounded(window: SketchWindow, records: pd.DataFrame, operators: list[str]) -> float:
    """Every count within the window's error bound of its exact count (capacity below the distinct pairs).

    A monitored pair or key over-estimates by at most the bound; one not monitored weighs at most the bound.
    Returns the pairs' bound.
    """
    pairs, loads = exact_counts(records, operators)
    hop = f"{operators[0]}->{operators[1]}"
    bound = window.error_bound[hop]
    assert window.capacity < len(pairs) and 0 < bound <= window.apriori_bound[hop]
    got = window.counts.pair_counts[0].set_index(["key0", "key1"])["weight"]
    estimate, exact = got.reindex(pairs.index, fill_value=0).to_numpy(), pairs.to_numpy()
    monitored = estimate > 0
    assert (estimate[monitored] >= exact[monitored]).all() and (estimate[monitored] - exact[monitored] <= bound).all()
    assert (exact[~monitored] <= bound).all() and set(got.index) <= set(pairs.index)
    for op in operators:
        load = window.counts.key_load(op).reindex(loads[op].index, fill_value=0).to_numpy()
        seen, truth = load > 0, loads[op].to_numpy()
        assert (load[seen] >= truth[seen]).all() and (load[seen] - truth[seen] <= window.error_bound[op]).all()
        assert (truth[~seen] <= window.error_bound[op]).all() and window.counts.totals[op] == len(records)
    return bound
