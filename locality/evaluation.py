"""Replay a trace through a routing configuration and measure what it buys over hash routing.

Every figure is computed twice on the same trace: with the configuration's
tables and with its fallback hashes alone, so a report always shows the
baseline beside the result.

- **locality**: weighted share of hops between consecutive operators whose two
  instances are on one server (hash routing on n equal servers gives ~1/n);
- **imbalance** of an operator: the largest instance load divided by its fair
  share (the mean, with equal capacities): the paper's alpha;
- **theta**: the largest ``|load - fair| / fair`` (the skew rebalancers' measure);
- **network weight**: total weight of the hops that cross servers (bytes, when
  the weight column holds tuple sizes).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from locality._validation import check_columns
from locality.counts import KeyCounts
from locality.errors import TraceError
from locality.imbalance import imbalance as imbalance_of
from locality.imbalance import theta as theta_of
from locality.routing import RoutingConfiguration

__all__ = [
    "Evaluation",
    "EvaluationReport",
    "ReplayTotals",
    "evaluate",
    "replay",
    "report_from_totals",
    "estimate_from_counts",
    "hop_name",
]

logger = logging.getLogger(__name__)


def hop_name(a: str, b: str) -> str:
    """Name of the hop between consecutive operators ``a`` and ``b`` in reports."""
    return f"{a}->{b}"


@dataclass
class Evaluation:
    """The figures of one routing on one trace."""

    tuples: int
    weight: float
    locality: float
    hop_locality: dict[str, float]
    imbalance: dict[str, float]
    theta: dict[str, float]
    instance_loads: dict[str, list[float]]
    table_entries: dict[str, int]
    network_weight: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class EvaluationReport:
    """A configuration's figures beside its hash baseline's, on the same trace."""

    optimized: Evaluation
    hash: Evaluation
    dropped_rows: int = 0

    def to_dict(self) -> dict:
        """Flat JSON-ready summary: each figure and its ``hash_`` twin."""
        o, h = self.optimized, self.hash
        return {
            "tuples": o.tuples,
            "weight": o.weight,
            "dropped_rows": self.dropped_rows,
            "locality": o.locality,
            "hash_locality": h.locality,
            "hop_locality": o.hop_locality,
            "hash_hop_locality": h.hop_locality,
            "imbalance": o.imbalance,
            "hash_imbalance": h.imbalance,
            "theta": o.theta,
            "hash_theta": h.theta,
            "table_entries": o.table_entries,
            "network_weight": o.network_weight,
            "hash_network_weight": h.network_weight,
            "instance_loads": o.instance_loads,
            "hash_instance_loads": h.instance_loads,
        }


def _as_frame(trace, columns: list[str]) -> pd.DataFrame:
    if isinstance(trace, (pa.Table, pa.RecordBatch)):
        check_columns(trace.schema.names, columns, "the trace")
        return trace.select(columns).to_pandas()
    if isinstance(trace, pd.DataFrame):
        check_columns(list(trace.columns), columns, "the trace")
        return trace[columns]
    raise TraceError(f"a trace must be a pandas DataFrame or a pyarrow Table; got {type(trace).__name__}")


@dataclass
class ReplayTotals:
    """Additive sums of a replay (per batch or partition), turned into figures by :meth:`figures`.

    ``loads[op]`` is the weight each instance received; ``local[hop]`` the
    weight of the hops that stayed on one server.
    """

    rows: int
    dropped: int
    weight: float
    loads: dict[str, np.ndarray]
    local: dict[str, float]

    def __add__(self, other: ReplayTotals) -> ReplayTotals:
        return ReplayTotals(
            self.rows + other.rows,
            self.dropped + other.dropped,
            self.weight + other.weight,
            {op: self.loads[op] + other.loads[op] for op in self.loads},
            {hop: self.local[hop] + other.local[hop] for hop in self.local},
        )

    def to_dict(self) -> dict:
        return {
            "rows": self.rows,
            "dropped": self.dropped,
            "weight": self.weight,
            "loads": {op: v.tolist() for op, v in self.loads.items()},
            "local": self.local,
        }

    @classmethod
    def from_dict(cls, doc: Mapping) -> ReplayTotals:
        loads = {op: np.asarray(v, dtype=float) for op, v in doc["loads"].items()}
        return cls(int(doc["rows"]), int(doc["dropped"]), float(doc["weight"]), loads, dict(doc["local"]))

    def figures(self, config: RoutingConfiguration, table_entries: Mapping[str, int]) -> Evaluation:
        topo = config.topology
        ops = list(topo.operators)
        total = self.weight
        hop_locality = {hop: kept / total if total > 0 else 1.0 for hop, kept in self.local.items()}
        hops_total = total * (len(ops) - 1)
        kept = sum(self.local.values())
        imbalance, theta = {}, {}
        for op in ops:
            shares = topo.instance_shares(op)
            imbalance[op] = imbalance_of(self.loads[op], shares) if total > 0 else 1.0
            theta[op] = theta_of(self.loads[op], shares) if total > 0 else 0.0
        return Evaluation(
            tuples=self.rows - self.dropped,
            weight=total,
            locality=kept / hops_total if hops_total > 0 else 1.0,
            hop_locality=hop_locality,
            imbalance=imbalance,
            theta=theta,
            instance_loads={op: self.loads[op].tolist() for op in ops},
            table_entries=dict(table_entries),
            network_weight=hops_total - kept,
        )


def _totals(
    config: RoutingConfiguration, routes: Mapping[str, np.ndarray], weights: np.ndarray, rows: int, dropped: int
) -> ReplayTotals:
    topo = config.topology
    ops = list(topo.operators)
    servers = {op: topo.instance_servers(op)[routes[op]] for op in ops}
    local = {hop_name(a, b): float(weights[servers[a] == servers[b]].sum()) for a, b in zip(ops, ops[1:])}
    loads = {op: np.bincount(routes[op], weights=weights, minlength=topo.n_instances(op)) for op in ops}
    return ReplayTotals(rows, dropped, float(weights.sum()), loads, local)


def replay(
    trace: pd.DataFrame | pa.Table | pa.RecordBatch,
    config: RoutingConfiguration,
    *,
    weight: str | None = None,
    columns: Mapping[str, str] | None = None,
) -> tuple[ReplayTotals, ReplayTotals]:
    """Sums of a replay of ``trace`` through ``config`` and through its fallbacks alone.

    Rows with a null or empty key (or a negative / missing weight) are
    dropped and counted. This is the additive core of :func:`evaluate`; the
    Spark job calls it per partition and adds the results.
    """
    ops = list(config.topology.operators)
    mapping = {op: (columns or {}).get(op, op) for op in ops}
    wanted = [*mapping.values(), *([weight] if weight else [])]
    frame = _as_frame(trace, list(dict.fromkeys(wanted)))
    rows = len(frame)
    valid = frame[list(mapping.values())].notna().all(axis=1).to_numpy()
    for col in mapping.values():
        if not pd.api.types.is_numeric_dtype(frame[col].dtype):
            valid &= (frame[col] != "").to_numpy(dtype=bool, na_value=False)
    if weight:
        weights = pd.to_numeric(frame[weight], errors="coerce").to_numpy(dtype=float)
        valid &= ~np.isnan(weights) & (weights >= 0)
        weights = weights[valid]
    else:
        weights = np.ones(int(valid.sum()))
    dropped = int((~valid).sum())
    frame = frame[valid]
    optimized_routes, hash_routes = {}, {}
    for op in ops:
        codes, uniques = pd.factorize(frame[mapping[op]], sort=False)
        uniques = np.asarray(uniques, dtype=object)
        optimized_routes[op] = config.route_many(op, uniques)[codes]
        hash_routes[op] = config.tables[op].fallback.instances_of(uniques)[codes]
    split = [op for op, n in config.split_keys().items() if n]
    if split:  # split keys follow their neighbour's server, row by row
        keys = {op: frame[mapping[op]].to_numpy(dtype=object) for op in split}
        optimized_routes = config.route_rows(keys, home=optimized_routes)
    return (
        _totals(config, optimized_routes, weights, rows, dropped),
        _totals(config, hash_routes, weights, rows, dropped),
    )


def report_from_totals(config: RoutingConfiguration, optimized: ReplayTotals, hashed: ReplayTotals) -> EvaluationReport:
    """The :class:`EvaluationReport` of summed replay totals."""
    ops = list(config.topology.operators)
    if optimized.dropped:
        logger.warning("evaluation dropped %d rows with a null or empty key or a bad weight", optimized.dropped)
    return EvaluationReport(
        optimized=optimized.figures(config, config.table_sizes()),
        hash=hashed.figures(config, dict.fromkeys(ops, 0)),
        dropped_rows=optimized.dropped,
    )


def evaluate(
    trace: pd.DataFrame | pa.Table,
    config: RoutingConfiguration,
    *,
    weight: str | None = None,
    columns: Mapping[str, str] | None = None,
) -> EvaluationReport:
    """Replay ``trace`` through ``config`` and through its fallback hashes alone.

    Parameters
    ----------
    trace : pandas.DataFrame or pyarrow.Table
        One row per tuple (or per distinct key combination, with its count in
        ``weight``), one key column per operator.
    config : RoutingConfiguration
    weight : str, optional
        Column holding each row's weight (tuple count or size in bytes);
        every row weighs 1 without it.
    columns : mapping of operator -> column, optional
        Key column of each operator when it is not named like the operator.

    Returns
    -------
    EvaluationReport
        ``optimized`` and ``hash`` figures; rows with a null or empty key or
        an invalid weight are dropped and counted in ``dropped_rows``.

    Raises
    ------
    TraceError
        A key or weight column is missing.
    """
    optimized, hashed = replay(trace, config, weight=weight, columns=columns)
    return report_from_totals(config, optimized, hashed)


def _hash_local_share(config: RoutingConfiguration, a: str, b: str) -> float:
    """Chance that a hop between two keys the hash routes lands on one server (uniform hash)."""
    topo = config.topology
    n = len(topo.servers)
    share_a = np.bincount(topo.instance_servers(a), minlength=n) / topo.n_instances(a)
    share_b = np.bincount(topo.instance_servers(b), minlength=n) / topo.n_instances(b)
    return float(share_a @ share_b)


def estimate_from_counts(config: RoutingConfiguration, counts: KeyCounts, rows: int) -> EvaluationReport:
    """In-sample figures from the counts the optimizer saw, without replaying the trace.

    Pairs and keys in the counts are routed exactly; the weight the counts do
    not hold (the sketch's tail) is assumed routed by the hash: spread evenly
    over instances, and local with the hash's chance (about 1/n). Exact when
    the counts cover the whole trace (a sketch that never filled up, or exact
    counts with no top-N cut); otherwise an estimate whose error is bounded by
    the uncovered weight. ``locality evaluate`` replays a trace for exact figures.

    Split keys are routed by their neighbour's server as in
    :meth:`RoutingConfiguration.route_rows`, which a pair holds for the hop
    into a split key and for the first operator's; a split key of a middle
    operator sends from its home instance here (its upstream key is not in
    the pair). A split key's load is spread over its parts as its pairs are.
    """
    ops = list(config.topology.operators)
    total = counts.total_weight
    figures = []
    for routing in (config, config.hash_only()):
        pair_routes = [_pair_routes(routing, i, pairs) for i, pairs in enumerate(counts.pair_counts)]
        loads, local = {}, {}
        for i, op in enumerate(ops):
            table = counts.key_loads[op]
            keys = table["key"].to_numpy(dtype=object)
            weights = table["weight"].to_numpy(dtype=float)
            n = config.topology.n_instances(op)
            split = routing.tables[op].splits
            whole = ~pd.Index(keys).isin(list(split)) if split else np.ones(len(keys), dtype=bool)
            known = np.bincount(routing.route_many(op, keys[whole]), weights=weights[whole], minlength=n)
            if split and pair_routes:
                hop, side = (i - 1, 1) if i > 0 else (0, 0)
                pairs = counts.pair_counts[hop]
                known += _split_loads(
                    pairs[f"key{side}"], pair_routes[hop][side], pairs["weight"], counts.key_load(op), routing, op
                )
            loads[op] = known + max(total - known.sum(), 0.0) / n
        for (a, b), pairs, (inst_a, inst_b) in zip(zip(ops, ops[1:]), counts.pair_counts, pair_routes):
            same = config.topology.instance_servers(a)[inst_a] == config.topology.instance_servers(b)[inst_b]
            weights = pairs["weight"].to_numpy(dtype=float)
            residual = max(total - weights.sum(), 0.0)
            local[hop_name(a, b)] = float(weights[same].sum()) + residual * _hash_local_share(config, a, b)
        figures.append(ReplayTotals(rows, 0, total, loads, local).figures(config, routing.table_sizes()))
    return EvaluationReport(optimized=figures[0], hash=figures[1])


def _pair_routes(config: RoutingConfiguration, hop: int, pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Instances of both keys of each pair of hop ``hop`` (split keys by their neighbour where the pair holds it)."""
    ops = list(config.topology.operators)
    a, b = ops[hop], ops[hop + 1]
    key0, key1 = pairs["key0"].to_numpy(dtype=object), pairs["key1"].to_numpy(dtype=object)
    servers = config.topology.instance_servers
    inst_a, inst_b = config.route_many(a, key0), config.route_many(b, key1)
    if hop == 0 and config.tables[a].splits:  # the first operator's split keys follow the next key's home
        inst_a = config.route_many(a, key0, servers(b)[inst_b])
    if config.tables[b].splits:
        inst_b = config.route_many(b, key1, servers(a)[inst_a])
    return inst_a, inst_b


def _split_loads(
    pair_keys: pd.Series,
    instances: np.ndarray,
    weights: pd.Series,
    key_load: pd.Series,
    config: RoutingConfiguration,
    op: str,
) -> np.ndarray:
    """Load per instance of ``op``'s split keys: each key's load spread as its pairs go (else whole at home)."""
    n = config.topology.n_instances(op)
    keys = pd.Index(list(config.tables[op].splits))
    load = key_load.reindex(keys).fillna(0.0).to_numpy(dtype=float)
    owner = keys.get_indexer(pair_keys.to_numpy(dtype=object))
    mine = owner >= 0
    flows = np.zeros((len(keys), n))
    np.add.at(flows, (owner[mine], instances[mine]), weights.to_numpy(dtype=float)[mine])
    seen = flows.sum(axis=1)
    out = (flows * np.divide(load, seen, out=np.zeros_like(load), where=seen > 0)[:, None]).sum(axis=0)
    unseen = np.flatnonzero((seen <= 0) & (load > 0))
    if unseen.size:
        np.add.at(out, config.route_many(op, keys[unseen].to_numpy(dtype=object)), load[unseen])
    return out
