"""Which pair weighting carries over to unseen data: tweets, tables from the first half by seq, judged on the second.

The tables fit the first half's co-occurrences (69% in-sample) but keep 33.8%
on the second half. Each variant reweighs the first half's pair counts before
the graph is built (vertex loads unchanged), then METIS (seed 0), placement
and tables as ``locality optimize`` does, 6 servers, alpha 1.03:

- dropping the pairs seen once, or discounting them;
- smoothing each pair toward its key's marginal, ``w = n_a (c_ab + beta P(b)) / (n_a + beta)``
  (a key seen few times trusts its few pairs less; from either side);
- recency: each row weighs ``0.5 ** (age / half_life)`` (age in rows of the half);
- a looser balance bound (alpha 1.10, 1.20), to see whether balance is what cuts.

Then where the second half's locality comes from, by class of tuple (pair
seen in the first half, both keys seen, hashtag new): what limits it. Last,
what splitting would carry for associative state (hashtag counts): the ``N``
heaviest hashtags of the first half split by neighbour server, each tuple
going to the hashtag's part on its location's server (as a split key of the
replay's ``--split-hot-keys`` routes when every part has room), with the
balance that leaves. Last, the same first-half tables kept current while the
second half streams by the ``follow`` rebalancer (any state), run every ``N``
tuples (the trace has no time: ``seq`` stands for seconds): a new hashtag
joins its location's server once it has been seen, as the running job would
place it, using only the tuples already past.

    .venv/bin/python benchmarks/bench_generalization.py
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locality.counts import KeyCounts, count_keys  # noqa: E402
from locality.datasets.catalog import load  # noqa: E402
from locality.evaluation import evaluate  # noqa: E402
from locality.optimizer import make_fallbacks, optimize  # noqa: E402
from locality.rebalance.window import RebalancePolicy, WindowRouter  # noqa: E402
from locality.topology import Topology  # noqa: E402

KEYS = ["location", "hashtag"]


def with_pairs(counts: KeyCounts, pairs: pd.DataFrame) -> KeyCounts:
    return KeyCounts(counts.operators, [pairs], counts.key_loads, counts.totals)


def smoothed(counts: KeyCounts, beta: float, side: str) -> KeyCounts:
    """Pairs shrunk toward the marginal of the other side's keys, from ``side``'s point of view."""
    pairs = counts.pair_counts[0]
    loads = {op: counts.key_load(op) for op in KEYS}
    own, other = ("key0", "key1") if side == "location" else ("key1", "key0")
    other_op = "hashtag" if side == "location" else "location"
    n_own = loads[side].reindex(pairs[own]).to_numpy()
    p_other = loads[other_op].reindex(pairs[other]).to_numpy() / counts.total_weight
    return with_pairs(counts, pairs.assign(weight=n_own * (pairs["weight"] + beta * p_other) / (n_own + beta)))


def variants(first: pd.DataFrame) -> dict[str, tuple[KeyCounts, float]]:
    base = count_keys(first, KEYS)
    pairs = base.pair_counts[0]
    out = {"exact counts (today)": (base, 1.03)}
    out["pairs seen once dropped"] = (with_pairs(base, pairs[pairs["weight"] > 1]), 1.03)
    for factor in (0.25, 0.5):
        weight = np.where(pairs["weight"] > 1, pairs["weight"], factor)
        out[f"pairs seen once x {factor}"] = (with_pairs(base, pairs.assign(weight=weight)), 1.03)
    for side in ("location", "hashtag"):
        for beta in (1.0, 5.0, 20.0):
            out[f"smoothed toward the marginal ({side} side, beta {beta:g})"] = (smoothed(base, beta, side), 1.03)
    n = len(first)
    for half_life in (0.25, 0.5):
        weight = 0.5 ** ((n - 1 - np.arange(n)) / (half_life * n))
        out[f"recency, half-life {half_life:g} of the half"] = (
            count_keys(first.assign(w=weight), KEYS, weight="w"),
            1.03,
        )
    for alpha in (1.10, 1.20):
        out[f"alpha {alpha:.2f}"] = (base, alpha)
    return out


def breakdown(first: pd.DataFrame, second: pd.DataFrame, config) -> pd.DataFrame:
    """Share of the second half and locality by class of tuple."""
    topo = config.topology
    servers = {op: topo.instance_servers(op)[config.route_many(op, second[op].to_numpy(dtype=object))] for op in KEYS}
    local = servers["location"] == servers["hashtag"]
    seen_pair = pd.MultiIndex.from_frame(second[KEYS]).isin(pd.MultiIndex.from_frame(first[KEYS]))
    seen = {op: second[op].isin(set(first[op])).to_numpy() for op in KEYS}
    cls = np.select(
        [seen_pair, seen["location"] & seen["hashtag"], seen["hashtag"]],
        ["pair seen in the first half", "both keys seen, pair new", "hashtag seen, location new"],
        "hashtag new",
    )
    frame = pd.DataFrame({"class": cls, "local": local})
    table = frame.groupby("class")["local"].agg(share="size", locality="mean")
    table["share"] /= len(frame)
    table["contribution"] = table["share"] * table["locality"]
    return table


def split_by_location(second: pd.DataFrame, config, split: set) -> tuple[float, float]:
    """Locality and worst imbalance when the hashtags in ``split`` go to their part on the location's server."""
    topo = config.topology
    routes = {op: config.route_many(op, second[op].to_numpy(dtype=object)) for op in KEYS}
    location_server = topo.instance_servers("location")[routes["location"]]
    on_server = {
        int(s): int(np.flatnonzero(topo.instance_servers("hashtag") == s)[0]) for s in range(len(topo.servers))
    }
    rows = second["hashtag"].isin(split).to_numpy()
    routes["hashtag"][rows] = [on_server[s] for s in location_server[rows]]
    local = location_server == topo.instance_servers("hashtag")[routes["hashtag"]]
    worst = max((np.bincount(r, minlength=6) / (len(second) / 6)).max() for r in routes.values())
    return float(local.mean()), float(worst)


def ceilings(first: pd.DataFrame, second: pd.DataFrame, config) -> tuple[float, float]:
    """Second-half locality if each seen hashtag sat on the location server it is used most from (no balance).

    With the locations where ``config`` puts them and new hashtags where the hash does: placed by the
    second half's own tuples (knowing the future), then by the first half's (what a static table can know).
    """
    topo = config.topology

    def location_servers(frame: pd.DataFrame) -> np.ndarray:
        return topo.instance_servers("location")[
            config.route_many("location", frame["location"].to_numpy(dtype=object))
        ]

    def busiest(frame: pd.DataFrame) -> pd.Series:
        used = pd.DataFrame({"tag": frame["hashtag"].to_numpy(), "server": location_servers(frame)})
        by = (
            used.groupby(["tag", "server"])
            .size()
            .reset_index(name="n")
            .sort_values("n", ascending=False, kind="stable")
        )
        return by.drop_duplicates("tag").set_index("tag")["server"]

    servers = location_servers(second)
    hashed = topo.instance_servers("hashtag")[config.route_many("hashtag", second["hashtag"].to_numpy(dtype=object))]
    seen = second["hashtag"].isin(set(first["hashtag"])).to_numpy()
    out = []
    for source in (second, first):
        placed = busiest(source).reindex(second["hashtag"]).to_numpy()
        out.append(float(np.mean(np.where(seen, placed == servers, hashed == servers))))
    return out[0], out[1]


def followed(first: pd.DataFrame, second: pd.DataFrame, config, graph, every: int) -> tuple[float, float, float]:
    """Second-half locality, worst imbalance and state moved (share) with ``follow`` every ``every`` tuples."""
    second_ts = pd.Timestamp("2015-04-28", tz="UTC") + pd.to_timedelta(np.arange(len(second)), unit="s")
    frame = second[KEYS].reset_index(drop=True).assign(ts=second_ts)
    router = WindowRouter(
        config,
        frame,
        ts="ts",
        start=second_ts[0],
        end=second_ts[-1] + pd.Timedelta("1s"),
        graph=graph,
        previous={op: first[op].value_counts().astype(float) for op in KEYS},
    )
    routed = router.route(RebalancePolicy(method="follow", every=f"{every}s", history=f"{10 * every}s"))
    topo = config.topology
    servers = [topo.instance_servers(op)[routed.routes[op]] for op in KEYS]
    worst = max((np.bincount(routed.routes[op], minlength=6) / (len(second) / 6)).max() for op in KEYS)
    return float(np.mean(servers[0] == servers[1])), float(worst), routed.moved_state / (len(second) * len(KEYS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="geotweets_hashtags_2015", help="a dataset card's name or a path")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    trace = load(args.trace, KEYS, order="seq").frame
    half = len(trace) // 2
    first, second = trace.iloc[:half], trace.iloc[half:]
    topology = Topology.uniform(KEYS, 6)
    fallbacks = make_fallbacks(topology, "kafka")
    print(f"tweets: {len(trace):,} rows; tables from the first half, judged on the second; 6 servers, METIS seed 0")
    today = None
    for name, (counts, alpha) in variants(first).items():
        result = optimize(counts.graph(), topology, fallbacks, alpha=alpha, seed=0)
        report = evaluate(second, result.config)
        today = today or result.config
        print(
            f"  {name:<52} next half {report.optimized.locality:.4f} "
            f"(worst imbalance {max(report.optimized.imbalance.values()):.3f}; hash {report.hash.locality:.4f})"
        )
    print("\nwhere today's next-half locality comes from:")
    print(breakdown(first, second, today).round(4).to_string())
    print("\nthe N heaviest hashtags of the first half split by location server (associative state only):")
    heaviest = first["hashtag"].value_counts()
    for n in (5, 10, 20):
        locality, worst = split_by_location(second, today, set(heaviest.index[:n]))
        print(f"  N = {n:<3} next half {locality:.4f} (worst imbalance {worst:.3f})")
    future, past = ceilings(first, second, today)
    print(
        "\nceilings of a static table (locations as placed, each seen hashtag on the location server it is used"
        f" most from, no balance): from the second half {future:.4f}, from the first half {past:.4f}"
    )
    print("\nthe first half's tables kept current by the follow rebalancer every N tuples of the second half:")
    graph = count_keys(first, KEYS).graph()
    for every in (5000, 1000, 200):
        locality, worst, moved = followed(first, second, today, graph, every)
        print(f"  N = {every:<5} next half {locality:.4f} (worst imbalance {worst:.3f}; state moved {moved:.3f})")


if __name__ == "__main__":
    main()
