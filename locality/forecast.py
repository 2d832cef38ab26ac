"""Forecast each key's load in the next window from its loads in the windows before.

Co-occurrences and loads want different memories. A pair of keys that travelled
together for months is worth keeping together next week, so the key graph's
edges blend a long, slowly decaying history (:func:`locality.counts.blend`).
Balance, on the other hand, is judged on next week's load of each key, and on
bursty traces (troll accounts, campaign hashtags) a key's load of two months
ago says little about next week. This module holds the estimators of that
next-window load, one signature for all of them, a front
:func:`forecast_loads` that picks one by name (like
:func:`locality.rebalance.rebalance`), and the error measure used to choose.

Every estimator reads a history matrix (windows x keys, oldest first; a key
absent from a window has load 0 there) and returns one load per key:

- ``last``: the latest window (a random walk forecast);
- ``decay``: the exponentially weighted mean, weight ``decay ** age`` (simple
  exponential smoothing [1]_; ``decay`` near 0 is ``last``, near 1 the plain mean);
- ``mean``: the mean of the last ``windows`` windows (default: all given);
- ``percentile``: the ``q``-th percentile of the last ``windows`` windows
  (``q=50`` the median), robust to a single burst;
- ``max``: the largest of the last ``windows`` windows (pessimistic: plans for
  every recent burst at once).

The error of a forecast is the weighted absolute percentage error, WAPE
``sum |forecast - actual| / sum actual`` over every key of either side [2]_:
scale-free (windows of different sizes compare), and it weighs a key by its
load, which is what balance cares about. Which estimator wins, and by how
much, is measured in ``benchmarks/bench_forecast.py``.

References
----------
.. [1] R. J. Hyndman, G. Athanasopoulos. "Forecasting: principles and
   practice", 3rd ed., OTexts 2021, section 8.1 (simple exponential smoothing).
.. [2] R. J. Hyndman, A. B. Koehler. "Another look at measures of forecast
   accuracy." International Journal of Forecasting 22(4), 2006.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from locality._validation import check_integer, check_interval, check_option
from locality.counts import KeyCounts
from locality.errors import InvalidParameterError, parameters_of

__all__ = [
    "FORECASTS",
    "DEFAULT_FORECAST",
    "forecast_matrix",
    "forecast_loads",
    "forecast_counts",
    "forecast_error",
    "parse_forecast",
]

logger = logging.getLogger(__name__)


def _last(history: np.ndarray) -> np.ndarray:
    return history[-1].copy()


def _decay(history: np.ndarray, *, decay: float = 0.5) -> np.ndarray:
    decay = check_interval(decay, "decay", "the decay forecast", lower=0.0, upper=1.0)
    ages = np.arange(history.shape[0] - 1, -1, -1, dtype=float)
    weights = decay**ages
    return weights @ history / weights.sum()


def _window(history: np.ndarray, windows: int | None, owner: str) -> np.ndarray:
    if windows is None:
        return history
    windows = check_integer(windows, "windows", owner, lower=1)
    return history[-windows:]


def _mean(history: np.ndarray, *, windows: int | None = None) -> np.ndarray:
    return _window(history, windows, "the mean forecast").mean(axis=0)


def _percentile(history: np.ndarray, *, windows: int | None = None, q: float = 50.0) -> np.ndarray:
    q = check_interval(q, "q", "the percentile forecast", lower=0.0, upper=100.0)
    return np.percentile(_window(history, windows, "the percentile forecast"), q, axis=0)


def _max(history: np.ndarray, *, windows: int | None = None) -> np.ndarray:
    return _window(history, windows, "the max forecast").max(axis=0)


#: name -> estimator ``f(history, **params) -> loads``; history is windows x keys, oldest first.
FORECASTS: dict[str, Callable[..., np.ndarray]] = {
    "last": _last,
    "decay": _decay,
    "mean": _mean,
    "percentile": _percentile,
    "max": _max,
}
#: ``decay`` (0.5 by default) is within 2% of the best next-week error on both timed traces
#: (IRA: decay 0.3, flights: decay 0.7; benchmarks/RESULTS.md), where the blended history's 0.85 is 10% off on IRA.
DEFAULT_FORECAST = "decay"


def forecast_matrix(history: np.ndarray, method: str = DEFAULT_FORECAST, **params) -> np.ndarray:
    """Next-window load of each key (column) of ``history`` (windows x keys, oldest first).

    Parameters
    ----------
    history : ndarray of float, shape (n_windows, n_keys)
        Load of every key in every past window, oldest first (0 where absent).
    method : str
        One of :data:`FORECASTS`.
    **params
        The estimator's parameters (``decay``; ``windows``; ``q``).

    Returns
    -------
    ndarray of float, shape (n_keys,)

    Raises
    ------
    InvalidParameterError
        Unknown ``method``, a bad parameter, or an empty or non-2-d ``history``.

    Examples
    --------
    >>> import numpy as np
    >>> h = np.array([[4.0, 0.0], [2.0, 6.0], [2.0, 0.0]])
    >>> forecast_matrix(h, "last").tolist(), forecast_matrix(h, "percentile", windows=3).tolist()
    ([2.0, 0.0], [2.0, 0.0])
    """
    check_option(method, "method", "forecast_matrix", FORECASTS)
    history = np.asarray(history, dtype=float)
    if history.ndim != 2 or history.shape[0] == 0:
        raise InvalidParameterError(
            f"the 'history' parameter of forecast_matrix must be a 2-d array with at least one window; "
            f"got shape {history.shape}",
            parameter="history",
        )
    try:
        return FORECASTS[method](history, **params)
    except InvalidParameterError:  # a parameter out of range (a TypeError too: not "does not take")
        raise
    except TypeError as exc:  # an option the estimator does not take
        raise InvalidParameterError(f"the {method!r} forecast does not take {sorted(params)}: {exc}") from None


def forecast_loads(history: Sequence[pd.Series], method: str = DEFAULT_FORECAST, **params) -> pd.Series:
    """Next-window load of every key seen in ``history`` (one Series key -> load per window, oldest first).

    Keys absent from a window count as 0 there; keys whose forecast is 0 are dropped.

    Examples
    --------
    >>> import pandas as pd
    >>> weeks = [pd.Series({"a": 10.0, "b": 2.0}), pd.Series({"b": 4.0})]
    >>> forecast_loads(weeks, "decay", decay=0.5).round(3).to_dict()
    {'a': 3.333, 'b': 3.333}
    """
    if not history:
        raise InvalidParameterError(
            "the 'history' parameter of forecast_loads must hold at least one window", parameter="history"
        )
    frame = pd.concat([pd.Series(h, dtype=float) for h in history], axis=1, sort=False).fillna(0.0)
    values = forecast_matrix(frame.to_numpy(dtype=float).T, method, **params)
    out = pd.Series(values, index=frame.index, dtype=float)
    return out[out > 0]


def forecast_counts(
    pairs: KeyCounts, history: Sequence[KeyCounts], method: str = DEFAULT_FORECAST, **params
) -> KeyCounts:
    """``pairs``'s co-occurrences with key loads (and totals) forecast from ``history``.

    The graph built from the result keeps the long memory of ``pairs`` on its
    edges, while its vertex weights, which METIS balances and the placement
    bounds, are next window's expected loads. Keys of ``pairs`` with no
    forecast load weigh 0 (they still pull their neighbours together).

    Parameters
    ----------
    pairs : KeyCounts
        Counts whose pair counts make the edges (e.g. the decayed blend).
    history : sequence of KeyCounts
        Per-window counts, oldest first, whose key loads are forecast.
    method, **params
        As for :func:`forecast_matrix`.
    """
    if not history:
        raise InvalidParameterError(
            "the 'history' parameter of forecast_counts must hold at least one window", parameter="history"
        )
    loads, totals = {}, {}
    for op in pairs.operators:
        series = [c.key_load(op) for c in history]
        forecast = forecast_loads(series, method, **params)
        known = [pairs.key_loads[op]["key"]]
        for i, (a, b) in enumerate(zip(pairs.operators, pairs.operators[1:])):
            if a == op:
                known.append(pairs.pair_counts[i]["key0"])
            if b == op:
                known.append(pairs.pair_counts[i]["key1"])
        keys = pd.Index(pd.concat(known, ignore_index=True).unique()).union(forecast.index, sort=False)
        table = forecast.reindex(keys, fill_value=0.0)
        loads[op] = pd.DataFrame({"key": table.index.to_numpy(dtype=object), "weight": table.to_numpy()})
        total = float(forecast_matrix(np.array([[c.totals[op]] for c in history]), method, **params)[0])
        totals[op] = max(total, float(table.sum()))
    return KeyCounts(list(pairs.operators), pairs.pair_counts, loads, totals)


def forecast_error(forecast: pd.Series, actual: pd.Series) -> float:
    """Weighted absolute percentage error, ``sum |forecast - actual| / sum actual`` over both key sets.

    0 is a perfect forecast; forecasting nothing scores 1.

    >>> import pandas as pd
    >>> forecast_error(pd.Series({"a": 3.0, "b": 1.0}), pd.Series({"a": 4.0, "c": 1.0}))
    0.6
    """
    both = pd.concat([pd.Series(forecast, dtype=float), pd.Series(actual, dtype=float)], axis=1).fillna(0.0)
    total = float(both.iloc[:, 1].sum())
    if total <= 0:
        raise InvalidParameterError("the 'actual' parameter of forecast_error must carry some load", parameter="actual")
    return float(np.abs(both.iloc[:, 0] - both.iloc[:, 1]).sum() / total)


def parse_forecast(spec: str) -> tuple[str, dict]:
    """``"decay:0.3"`` -> ``("decay", {"decay": 0.3})``; ``"percentile:4:50"`` -> windows 4, q 50.

    The CLI form of a forecast: the method, then its parameters in order
    (``decay``; ``mean|max:windows``; ``percentile:windows:q``).

    >>> parse_forecast("percentile:4:75")
    ('percentile', {'windows': 4, 'q': 75.0})
    """
    method, *args = str(spec).split(":")
    check_option(method, "forecast", "parse_forecast", FORECASTS)
    names = {"last": [], "decay": [("decay", float)], "mean": [("windows", int)], "max": [("windows", int)]}
    names["percentile"] = [("windows", int), ("q", float)]
    if len(args) > len(names[method]):
        raise InvalidParameterError(
            f"the 'forecast' parameter takes at most {len(names[method])} value(s) after {method!r}; got {spec!r}",
            parameter="forecast",
        )
    try:
        params = {name: kind(value) for (name, kind), value in zip(names[method], args)}
    except ValueError:
        raise InvalidParameterError(
            f"the 'forecast' parameter {spec!r} has a value that is not a number", parameter="forecast"
        ) from None
    with parameters_of("forecast"):  # its checks now, not at the first window that forecasts
        forecast_matrix(np.ones((1, 1)), method, **params)
    return method, params
