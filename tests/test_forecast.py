"""Load forecasts: each estimator on a history whose answer is known, the error measure, the counts they feed."""

import numpy as np
import pandas as pd
import pytest

from locality.counts import KeyCounts, count_keys
from locality.errors import InvalidParameterError
from locality.forecast import (
    FORECASTS,
    forecast_counts,
    forecast_error,
    forecast_loads,
    forecast_matrix,
    parse_forecast,
)

# three keys over four windows, oldest first: steady, a single burst, growing
HISTORY = np.array(
    [
        [10.0, 0.0, 1.0],
        [10.0, 40.0, 2.0],
        [10.0, 0.0, 4.0],
        [10.0, 0.0, 8.0],
    ]
)


def test_each_estimator_gives_its_known_answer():
    assert forecast_matrix(HISTORY, "last").tolist() == [10.0, 0.0, 8.0]
    assert forecast_matrix(HISTORY, "mean").tolist() == [10.0, 10.0, 3.75]
    assert forecast_matrix(HISTORY, "mean", windows=2).tolist() == [10.0, 0.0, 6.0]
    assert forecast_matrix(HISTORY, "max", windows=3).tolist() == [10.0, 40.0, 8.0]
    # the median ignores the single burst
    assert forecast_matrix(HISTORY, "percentile", q=50).tolist() == [10.0, 0.0, 3.0]
    # decay 0.5: weights 1/8, 1/4, 1/2, 1 over 15/8
    expected = (np.array([1, 2, 4, 8]) / 15.0) @ HISTORY
    np.testing.assert_allclose(forecast_matrix(HISTORY, "decay", decay=0.5), expected)
    # the limits of decay: 0 is the last window, 1 the plain mean
    np.testing.assert_allclose(forecast_matrix(HISTORY, "decay", decay=0.0), HISTORY[-1])
    np.testing.assert_allclose(forecast_matrix(HISTORY, "decay", decay=1.0), HISTORY.mean(axis=0))


def test_a_steady_key_is_forecast_exactly_by_every_estimator():
    for method in FORECASTS:
        assert forecast_matrix(HISTORY[:, :1], method)[0] == pytest.approx(10.0)


def test_forecast_loads_aligns_windows_by_key_and_drops_idle_keys():
    weeks = [pd.Series({"a": 4.0, "b": 2.0}), pd.Series({"b": 6.0, "c": 1.0}), pd.Series({"c": 3.0})]
    last = forecast_loads(weeks, "last")
    assert last.to_dict() == {"c": 3.0}  # a and b were idle in the last window
    mean = forecast_loads(weeks, "mean")
    assert mean.round(6).to_dict() == {"a": round(4 / 3, 6), "b": round(8 / 3, 6), "c": round(4 / 3, 6)}


def test_forecast_error_is_the_weighted_absolute_percentage_error():
    actual = pd.Series({"a": 10.0, "b": 30.0})
    assert forecast_error(actual, actual) == 0.0
    assert forecast_error(pd.Series(dtype=float), actual) == 1.0
    # 5 too few on a, 5 too many on c that never came: 10 / 40
    assert forecast_error(pd.Series({"a": 5.0, "b": 30.0, "c": 5.0}), actual) == pytest.approx(0.25)
    with pytest.raises(InvalidParameterError, match="'actual' parameter of forecast_error"):
        forecast_error(actual, pd.Series({"a": 0.0}))


def test_forecast_counts_keep_the_pairs_and_weigh_vertices_by_the_forecast():
    ops = ["u", "h"]
    old = count_keys(pd.DataFrame({"u": ["x"] * 9 + ["y"], "h": ["p"] * 9 + ["q"]}), ops)
    new = count_keys(pd.DataFrame({"u": ["y"] * 6 + ["z"] * 2, "h": ["q"] * 6 + ["r"] * 2}), ops)
    blended = KeyCounts(ops, old.pair_counts, old.key_loads, old.totals)
    counts = forecast_counts(blended, [old, new], "last")
    assert counts.pair_counts[0].equals(blended.pair_counts[0])
    graph = counts.graph()
    weights = dict(zip(graph.keys["u"], graph.vertex_weight[graph.operator_slice("u")]))
    # x has edges but no load next window: weight 0; y and z weigh their last-window load
    assert weights == {"x": 0.0, "y": 6.0, "z": 2.0}
    assert counts.totals == {"u": 8.0, "h": 8.0}


def test_parse_forecast_and_bad_input():
    assert parse_forecast("decay:0.3") == ("decay", {"decay": 0.3})
    assert parse_forecast("mean") == ("mean", {})
    assert parse_forecast("percentile:4:75") == ("percentile", {"windows": 4, "q": 75.0})
    with pytest.raises(InvalidParameterError, match="'forecast' parameter of parse_forecast must be one of"):
        parse_forecast("median")
    with pytest.raises(InvalidParameterError, match="at most 1 value"):
        parse_forecast("decay:0.3:2")
    with pytest.raises(InvalidParameterError, match="not a number"):
        parse_forecast("decay:x")
    with pytest.raises(InvalidParameterError, match="'decay' parameter of the decay forecast"):
        forecast_matrix(HISTORY, "decay", decay=1.5)
    with pytest.raises(InvalidParameterError, match="'history' parameter of forecast_matrix"):
        forecast_matrix(np.zeros((0, 3)), "last")
    with pytest.raises(InvalidParameterError, match="does not take"):
        forecast_matrix(HISTORY, "last", decay=0.5)
