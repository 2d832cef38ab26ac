"""Key counts of a trace window: pair counts of consecutive operators, key loads, totals.

:class:`KeyCounts` is what every path produces (pandas group-by, Space-Saving
sketches, Spark aggregations) and what the key graph is built from. Counts of
several windows blend into one (:func:`blend`), either the last ``windows``
windows with equal weight or every window with exponentially decaying weight,
so that an online reconfiguration can remember earlier windows instead of
resetting its statistics each time as the paper does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from locality._arrow_files import table_bytes, table_from_bytes
from locality._validation import check_integer, check_interval
from locality.errors import InvalidParameterError, SerializationError
from locality.graph import KeyGraph, build_key_graph
from locality.sketch import SpaceSaving

__all__ = ["KeyCounts", "count_keys", "blend", "sketch_error_bounds"]


@dataclass
class KeyCounts:
    """Counts of one window (or a blend of windows).

    ``pair_counts[i]`` has columns ``key0, key1, weight`` (operators ``i`` and
    ``i + 1``); ``key_loads[op]`` has ``key, weight``; ``totals[op]`` is the
    operator's whole load, including keys the counts do not list.
    """

    operators: list[str]
    pair_counts: list[pd.DataFrame]
    key_loads: dict[str, pd.DataFrame]
    totals: dict[str, float]

    @property
    def total_weight(self) -> float:
        return float(self.totals[self.operators[0]])

    def key_load(self, op: str) -> pd.Series:
        """Each counted key's load on operator ``op`` (its weight, indexed by key)."""
        return self.key_loads[op].set_index("key")["weight"]

    def graph(self, top_pairs: int | None = None) -> KeyGraph:
        """The key graph of these counts."""
        return build_key_graph(
            self.operators, self.pair_counts, self.key_loads, totals=self.totals, top_pairs=top_pairs
        )

    # ------------------------------------------------------------------ files
    def to_files(self) -> dict[str, bytes]:
        """``pairs_<i>.parquet``, ``loads_<i>.parquet`` (typed keys) and ``counts.json``, by name."""
        files = {
            f"pairs_{i}.parquet": table_bytes(pa.Table.from_pandas(pairs, preserve_index=False))
            for i, pairs in enumerate(self.pair_counts)
        }
        for i, op in enumerate(self.operators):
            files[f"loads_{i}.parquet"] = table_bytes(pa.Table.from_pandas(self.key_loads[op], preserve_index=False))
        files["counts.json"] = json.dumps({"operators": self.operators, "totals": self.totals}).encode()
        return files

    def write(self, directory: str | Path) -> None:
        """Write :meth:`to_files` into ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in self.to_files().items():
            (directory / name).write_bytes(data)

    @classmethod
    def from_files(cls, read: Callable[[str], bytes], where: str = "") -> KeyCounts:
        """Read what :meth:`to_files` wrote; ``read(name)`` gives a file's bytes, ``where`` names them in messages."""
        try:
            meta = json.loads(read("counts.json"))
            ops = meta["operators"]
            pairs = [table_from_bytes(read(f"pairs_{i}.parquet")).to_pandas() for i in range(len(ops) - 1)]
            loads = {op: table_from_bytes(read(f"loads_{i}.parquet")).to_pandas() for i, op in enumerate(ops)}
            totals = {op: float(v) for op, v in meta["totals"].items()}
        except (OSError, KeyError, TypeError, AttributeError, ValueError, pa.ArrowException) as exc:
            raise SerializationError(f"cannot read key counts in {where}: {exc!r}") from None
        return cls(ops, pairs, loads, totals)

    @classmethod
    def read(cls, directory: str | Path) -> KeyCounts:
        directory = Path(directory)
        return cls.from_files(lambda name: (directory / name).read_bytes(), str(directory))

    @classmethod
    def from_sketches(
        cls,
        operators: Sequence[str],
        pair_sketches: Sequence[SpaceSaving],
        load_sketches: Sequence[SpaceSaving],
        *,
        top_pairs: int | None = None,
        totals: Mapping[str, float] | None = None,
    ) -> KeyCounts:
        """Counts of merged sketches: each hop's pairs and each operator's keys with their estimates.

        ``pair_sketches[i]`` (arity 2) counts the hop from ``operators[i]`` to
        ``operators[i + 1]``, ``load_sketches[i]`` (arity 1) the keys of
        ``operators[i]``; ``top_pairs`` keeps the heaviest pairs of each hop.
        ``totals`` defaults to each load sketch's total weight.
        """
        operators = list(operators)
        pair_counts = [
            sketch.top_k(top_pairs)[["key0", "key1", "estimate"]].rename(columns={"estimate": "weight"})
            for sketch in pair_sketches
        ]
        key_loads = {
            op: sketch.top_k()[["key", "estimate"]].rename(columns={"estimate": "weight"})
            for op, sketch in zip(operators, load_sketches)
        }
        if totals is None:
            totals = {op: float(sketch.total_weight) for op, sketch in zip(operators, load_sketches)}
        return cls(operators, pair_counts, key_loads, dict(totals))


def count_keys(
    trace: pd.DataFrame,
    operators: Sequence[str],
    *,
    weight: str | None = None,
    capacity: int | None = None,
) -> KeyCounts:
    """Counts of an in-memory trace: exact (pandas group-by), or Space-Saving sketches of ``capacity``.

    Rows with a null key are left out.
    """
    operators = list(operators)
    frame = trace[operators + ([weight] if weight else [])].dropna(subset=operators)
    w = frame[weight].to_numpy(dtype=float) if weight else np.ones(len(frame))
    totals = dict.fromkeys(operators, float(w.sum()))
    pair_counts, key_loads = [], {}
    if capacity is None:
        keyed = frame[operators].assign(weight=w)
        for a, b in zip(operators, operators[1:]):
            pairs = keyed.groupby([a, b], sort=False, observed=True)["weight"].sum().reset_index()
            pair_counts.append(pairs.rename(columns={a: "key0", b: "key1"}))
        for op in operators:
            loads = keyed.groupby(op, sort=False, observed=True)["weight"].sum().reset_index()
            key_loads[op] = loads.rename(columns={op: "key"})
        return KeyCounts(operators, pair_counts, key_loads, totals)
    weights = w if weight else None
    pair_sketches, load_sketches = [], []
    for a, b in zip(operators, operators[1:]):
        pair_sketches.append(SpaceSaving(capacity, arity=2))
        pair_sketches[-1].update_batch([frame[a], frame[b]], weights)
    for op in operators:
        load_sketches.append(SpaceSaving(capacity))
        load_sketches[-1].update_batch(frame[op], weights)
    return KeyCounts.from_sketches(operators, pair_sketches, load_sketches, totals=totals)


def sketch_error_bounds(
    operators: Sequence[str], pair_sketches: Sequence[SpaceSaving], load_sketches: Sequence[SpaceSaving]
) -> dict[str, float]:
    """Each sketch's ``min_count`` by name (``"a->b"`` for a hop, the operator's name for its keys).

    It is the most any count of the sketch over-estimates, and the most a key
    it does not count may weigh (0 while the sketch never filled up).
    """
    names = [f"{a}->{b}" for a, b in zip(operators, operators[1:])] + list(operators)
    return {name: float(s.min_count) for name, s in zip(names, [*pair_sketches, *load_sketches])}


def blend(
    history: Sequence[KeyCounts],
    *,
    windows: int | None = 1,
    decay: float | None = None,
    min_weight: float = 0.0,
    limit: int | None = None,
) -> KeyCounts:
    """One set of counts from a window history (oldest first, newest last).

    Parameters
    ----------
    history : sequence of KeyCounts
        Per-window counts, oldest first.
    windows : int or None, default 1
        Use only the last ``windows`` windows (None: all). ``windows=1`` with
        no decay is the paper's reset: only the latest window counts.
    decay : float in [0, 1], optional
        Weight of a window ``age`` windows old is ``decay ** age`` (newest:
        age 0); 0 keeps the newest window alone (forgets the rest). Without
        it (None) the windows kept weigh the same.
    min_weight : float, default 0
        Drop pairs and keys whose blended weight falls below this (decayed
        history would otherwise grow without bound).
    limit : int, optional
        Keep only the ``limit`` heaviest pairs of each hop and keys of each
        operator (the sketch capacity, so blended counts stay as bounded as
        a window's).
    """
    if not history:
        raise InvalidParameterError(
            "the 'history' parameter of blend must hold at least one window of counts", parameter="history"
        )
    if windows is not None:
        check_integer(windows, "windows", "blend", lower=1)
    if decay is not None:
        check_interval(decay, "decay", "blend", lower=0.0, upper=1.0)
    kept = list(history)[-windows:] if windows is not None else list(history)
    if decay == 0:  # 0 ** age: the older windows weigh nothing; leave them out rather than keep their keys at 0
        kept = kept[-1:]
    ops = kept[-1].operators
    factors = [decay ** (len(kept) - 1 - i) if decay is not None else 1.0 for i in range(len(kept))]
    pairs = [
        pd.concat([c.pair_counts[i].assign(weight=c.pair_counts[i]["weight"] * f) for c, f in zip(kept, factors)])
        .groupby(["key0", "key1"], sort=False, as_index=False)["weight"]
        .sum()
        for i in range(len(ops) - 1)
    ]
    loads = {
        op: pd.concat([c.key_loads[op].assign(weight=c.key_loads[op]["weight"] * f) for c, f in zip(kept, factors)])
        .groupby("key", sort=False, as_index=False)["weight"]
        .sum()
        for op in ops
    }
    totals = {op: float(sum(c.totals[op] * f for c, f in zip(kept, factors))) for op in ops}
    return KeyCounts(
        list(ops),
        [_prune(p, min_weight, limit) for p in pairs],
        {op: _prune(t, min_weight, limit) for op, t in loads.items()},
        totals,
    )


def _prune(table: pd.DataFrame, min_weight: float, limit: int | None) -> pd.DataFrame:
    table = table[table["weight"] >= min_weight] if min_weight > 0 else table
    return table.nlargest(limit, "weight", keep="first") if limit is not None and len(table) > limit else table
