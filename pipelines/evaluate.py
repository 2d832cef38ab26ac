"""Replaying a trace through a routing configuration with Spark.

Each partition replays its Arrow batches with :func:`locality.evaluation.replay`
(routing each distinct key once per batch) and ships the additive totals; the
driver adds them up. The configuration travels to the executors as JSON in
the task closure, not as Python objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa

from locality.errors import TraceError
from locality.evaluation import EvaluationReport, ReplayTotals, replay, report_from_totals
from locality.routing import RoutingConfiguration

__all__ = ["evaluate_trace", "replay_totals"]


def _replay_partition(config_json: str, columns: dict[str, str], weight: str | None) -> Callable:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        config = RoutingConfiguration.from_json(config_json)
        optimized = hashed = None
        for batch in batches:
            o, h = replay(batch, config, weight=weight, columns=columns)
            optimized = o if optimized is None else optimized + o
            hashed = h if hashed is None else hashed + h
        if optimized is not None:
            payload = json.dumps({"optimized": optimized.to_dict(), "hash": hashed.to_dict()})
            yield pa.RecordBatch.from_arrays([pa.array([payload])], names=["totals"])

    return run


def replay_totals(
    df, config: RoutingConfiguration, keys: Sequence[str] | None = None, *, weight: str | None = None
) -> tuple[ReplayTotals | None, ReplayTotals | None]:
    """The totals of replaying the Spark DataFrame ``df`` through ``config`` and through its hash baseline.

    ``keys`` are the trace's key columns in operator order (default: the
    operators' names). ``(None, None)`` when ``df`` has no rows.
    """
    ops = list(config.topology.operators)
    keys = list(keys or ops)
    if len(keys) != len(ops):
        raise ValueError(f"got {len(keys)} key columns for the {len(ops)} operators {ops}")
    columns = dict(zip(ops, keys))
    _check_key_kinds(df, config, columns)
    rows = df.mapInArrow(_replay_partition(config.to_json(), columns, weight), "totals string").collect()
    optimized = hashed = None
    for row in rows:
        doc = json.loads(row.totals)
        o, h = ReplayTotals.from_dict(doc["optimized"]), ReplayTotals.from_dict(doc["hash"])
        optimized = o if optimized is None else optimized + o
        hashed = h if hashed is None else hashed + h
    return optimized, hashed


def _check_key_kinds(df, config: RoutingConfiguration, columns: dict[str, str]) -> None:
    """Raise unless each key column holds the kind of key (string or integer) its operator's table holds.

    The engines hash ``42`` and ``"42"`` apart, so a trace whose keys have
    another type than the tables' would find none of its entries: every key
    would fall back to the hash, and the figures would say the tables buy
    nothing, with exit code 0.
    """
    from pipelines.trace import _spark_kind

    types = dict(df.dtypes)
    for op, column in columns.items():
        table_kind = config.tables[op].key_kind
        trace_kind = _spark_kind(df.schema[column].dataType)
        if table_kind is not None and trace_kind in ("string", "integer") and trace_kind != table_kind:
            raise TraceError(
                f"key column {column!r} holds {trace_kind} keys ({types[column]}) but the table of operator {op!r} "
                f"holds {table_kind} keys: the engine hashes 42 and '42' apart, so no key would find its entry; "
                "read the column as the tables were learned (e.g. CSV digits are integers, Parquet strings are not)"
            )


def evaluate_trace(
    df,
    config: RoutingConfiguration,
    keys: Sequence[str] | None = None,
    *,
    weight: str | None = None,
) -> EvaluationReport:
    """Replay the Spark DataFrame ``df`` through ``config`` and its hash baseline.

    ``keys`` are the trace's key columns in operator order (default: the
    operators' names).
    """
    optimized, hashed = replay_totals(df, config, keys, weight=weight)
    if optimized is None or optimized.weight <= 0:
        dropped = 0 if optimized is None else optimized.dropped
        raise TraceError(f"the trace to evaluate is empty (no usable rows; {dropped} dropped for null or empty keys)")
    return report_from_totals(config, optimized, hashed)
