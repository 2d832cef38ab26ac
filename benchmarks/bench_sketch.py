"""Speed and top-k accuracy of SpaceSaving.update_batch against DataSketches' frequent items sketch,
and its time against Arrow's exact hash count of the same batches.

Both sketches see the same seeded stream in the same run and keep the same number of
counters (ours: capacity = 0.75 * 2**lg, the most items ``frequent_items_sketch(lg)`` keeps).
Ours is fed Arrow (strings) or numpy (ints) batches, as inside a Spark ``mapInArrow``;
DataSketches gets one Python ``update`` per item, from ready-made Python objects (building
those objects is not timed, which favours DataSketches). The floor is Arrow's
``Table.group_by(keys, use_threads=False).aggregate([([], "count_all")])`` over the same
batches (tables built beforehand, not timed): the exact count any batch sketch performs at
least once; it keeps no top-k across batches, so it has no accuracy columns.

Streams:
  (a) int64 keys, truncated Zipf(1.1) over 1M ids;
  (b) string pairs ("u<k1>", "item<k2>"): k1 truncated Zipf(1.1) over 100k ids,
      k2 = (10 * k1 + off) mod 1M with off truncated Zipf(1.3) over 0..999 (k2 correlated
      with k1, as in research/feasibility.md).

Run: ``python benchmarks/bench_sketch.py`` (defaults below); ``--help`` for sizes.
Speed is the best of ``--repeats`` interleaved runs (the machine's cores are shared);
the ratios to Arrow are the median of the per-round ratios (each round times ours and
Arrow back to back).
"""

from __future__ import annotations

import argparse
import gc
import platform
import time
from collections.abc import Callable, Iterable
from functools import partial
from importlib.metadata import version

import datasketches as ds
import numpy as np
import pandas as pd
import pyarrow as pa

from locality.sketch import SpaceSaving

ARROW = "arrow group_by count_all (exact, per batch)"


def zipf_ids(rng: np.random.Generator, s: float, n_ids: int, size: int, permute: bool = True) -> np.ndarray:
    """Truncated Zipf(s) over ``n_ids`` ids by inverse CDF; ranks optionally shuffled."""
    cdf = np.cumsum(1.0 / np.arange(1, n_ids + 1) ** s)
    cdf /= cdf[-1]
    ids = np.searchsorted(cdf, rng.random(size))
    return rng.permutation(n_ids)[ids] if permute else ids


class Stream:
    """One benchmark stream: the batches we feed, the items DataSketches gets, the exact counts."""

    def __init__(self, name: str, batches: list, items: dict[str, list], keys: list, counts: np.ndarray) -> None:
        self.name = name
        self.batches = batches  # per batch: one column (arity 1) or a list of columns
        self.items = items  # DataSketches variant -> one Python object per row
        order = np.lexsort((np.arange(len(counts)), -counts))  # heaviest first, ties by first appearance
        self.keys = [keys[i] for i in order]  # distinct keys, heaviest first (in our key form)
        self.counts = counts[order].astype(np.float64)
        self.rows = int(counts.sum())
        # The same batches as Arrow tables, for the floor (built here, not timed).
        parts = [[part] if not isinstance(part, list) else part for part in batches]
        self.tables = [pa.table({f"k{i}": col for i, col in enumerate(cols)}) for cols in parts]


def int_stream(rows: int, batch: int, seed: int) -> Stream:
    rng = np.random.default_rng(seed)
    ids = zipf_ids(rng, 1.1, 1_000_000, rows).astype(np.int64)
    uniques, first, counts = np.unique(ids, return_index=True, return_counts=True)
    order = np.argsort(first)  # distinct keys in order of first appearance
    batches = [ids[i : i + batch] for i in range(0, rows, batch)]
    return Stream(
        "int64, Zipf(1.1) over 1M ids", batches, {"items": ids.tolist()}, uniques[order].tolist(), counts[order]
    )


def pair_stream(rows: int, batch: int, seed: int) -> Stream:
    rng = np.random.default_rng(seed)
    k1 = zipf_ids(rng, 1.1, 100_000, rows)
    k2 = (k1 * 10 + zipf_ids(rng, 1.3, 1_000, rows, permute=False)) % 1_000_000
    codes, uniques = pd.factorize(k1.astype(np.int64) * 1_000_000 + k2)
    counts = np.bincount(codes).astype(np.float64)
    u1 = np.array([f"u{i}" for i in range(100_000)], dtype=object)
    u2 = np.array([f"item{i}" for i in range(1_000_000)], dtype=object)
    d1, d2 = u1[uniques // 1_000_000], u2[uniques % 1_000_000]  # distinct pairs, first-appearance order
    # Arrow columns for our batch path (built in C++ from the id columns).
    col1 = pa.array(u1).take(pa.array(k1))
    col2 = pa.array(u2).take(pa.array(k2))
    batches = [[col1.slice(i, batch), col2.slice(i, batch)] for i in range(0, rows, batch)]
    # DataSketches items share one Python object per distinct pair.
    tuples = list(zip(d1.tolist(), d2.tolist(), strict=True))
    joined = [f"{a}\x1f{b}" for a, b in tuples]
    items = {
        "tuples": [tuples[c] for c in codes.tolist()],
        "joined": [joined[c] for c in codes.tolist()],
    }
    stream = Stream("string pairs (u<k1>, item<k2>), correlated Zipf", batches, items, tuples, counts)
    stream.object_batches = [
        [
            col1.slice(i, batch).to_numpy(zero_copy_only=False),
            col2.slice(i, batch).to_numpy(zero_copy_only=False),
        ]
        for i in range(0, rows, batch)
    ]
    return stream


def timed(run: Callable[[], object]) -> tuple[float, float, object]:
    """Return wall seconds, process CPU seconds and the result of ``run()``."""
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    result = run()
    return time.perf_counter() - start, time.process_time() - cpu, result


def feed_ours(batches: Iterable, capacity: int, arity: int) -> SpaceSaving:
    sketch = SpaceSaving(capacity, arity=arity)
    for part in batches:
        sketch.update_batch(part)
    len(sketch)  # the timed work includes merging what the sketch still buffers
    return sketch


def count_arrow(tables: list[pa.Table]) -> None:
    """Arrow's exact hash count of each batch, single-threaded: the floor of any batch sketch."""
    for table in tables:
        table.group_by(table.column_names, use_threads=False).aggregate([([], "count_all")])


def feed_datasketches(items: list, lg: int, strings: bool):
    sketch = ds.frequent_strings_sketch(lg) if strings else ds.frequent_items_sketch(lg)
    update = sketch.update
    for item in items:
        update(item)
    return sketch


def accuracy(stream: Stream, top: list, estimate: Callable[[object], float]) -> dict[str, float]:
    """Recall of the true top-K (tie-aware) and the worst estimate error over the true top 1000."""
    truth = dict(zip(stream.keys[:100_000], stream.counts[:100_000], strict=True))
    out = {}
    for k in (100, 1000):
        kth = stream.counts[k - 1]  # a reported key counts as found if it is as heavy as the K-th
        out[f"R@{k}"] = sum(truth.get(key, 0.0) >= kth for key in top[:k]) / k
    out["maxerr"] = max(
        abs(estimate(key) - true) for key, true in zip(stream.keys[:1000], stream.counts[:1000], strict=True)
    )
    return out


def ours_accuracy(stream: Stream, sketch: SpaceSaving) -> dict[str, float]:
    top = sketch.top_k(1000)
    keys = top["key"].tolist() if sketch.arity == 1 else list(zip(top["key0"], top["key1"], strict=True))
    return accuracy(stream, keys, sketch.estimate)


def ds_accuracy(stream: Stream, sketch, joined: bool) -> dict[str, float]:
    rows = sketch.get_frequent_items(ds.frequent_items_error_type.NO_FALSE_NEGATIVES, 0)[:1000]
    keys = [tuple(r[0].split("\x1f")) for r in rows] if joined else [r[0] for r in rows]

    def estimate(key):
        return sketch.get_estimate("\x1f".join(key) if joined else key)

    return accuracy(stream, keys, estimate)


def run(args: argparse.Namespace) -> list[dict]:
    results = []
    streams = []
    if args.int_rows:
        streams.append((int_stream(args.int_rows, args.batch, args.seed), 1))
    if args.pair_rows:
        streams.append((pair_stream(args.pair_rows, args.batch, args.seed), 2))
    for stream, arity in streams:
        for lg in args.lg:
            capacity = 3 * 2**lg // 4
            ours = "ours, batch " + ("Arrow" if arity == 2 else "numpy")
            contenders = {ours: partial(feed_ours, stream.batches, capacity, arity)}
            if arity == 2:
                contenders["ours, batch numpy object"] = partial(feed_ours, stream.object_batches, capacity, arity)
                contenders["datasketches frequent_items (tuples)"] = partial(
                    feed_datasketches, stream.items["tuples"], lg, False
                )
                contenders["datasketches frequent_strings (joined)"] = partial(
                    feed_datasketches, stream.items["joined"], lg, True
                )
            else:
                contenders["datasketches frequent_items"] = partial(feed_datasketches, stream.items["items"], lg, False)
            contenders[ARROW] = partial(count_arrow, stream.tables)
            best: dict[str, float] = {}
            best_cpu: dict[str, float] = {}
            rounds: dict[str, list[tuple[float, float]]] = {}
            sketches = {}
            for _ in range(args.repeats):  # interleaved, so contention hits everyone alike
                times = {}
                for name, feed in contenders.items():
                    seconds, cpu, sketches[name] = timed(feed)
                    times[name] = (seconds, cpu)
                    best[name] = min(best.get(name, np.inf), seconds)
                    best_cpu[name] = min(best_cpu.get(name, np.inf), cpu)
                for name, (seconds, cpu) in times.items():  # this round's ratio to Arrow, wall and CPU
                    rounds.setdefault(name, []).append((seconds / times[ARROW][0], cpu / times[ARROW][1]))
            for name, sketch in sketches.items():
                if name == ARROW:
                    acc = {"R@100": np.nan, "R@1000": np.nan, "maxerr": np.nan}
                    bound = np.nan
                elif name.startswith("ours"):
                    acc = ours_accuracy(stream, sketch)
                    bound = SpaceSaving.apriori_error(capacity, stream.rows)
                else:
                    acc = ds_accuracy(stream, sketch, joined="joined" in name)
                    bound = ds.frequent_items_sketch.get_apriori_error(lg, stream.rows)
                results.append(
                    {
                        "stream": stream.name,
                        "rows": stream.rows,
                        "counters": f"{capacity} (lg {lg})",
                        "sketch": name,
                        "wall": stream.rows / best[name] / 1e6,
                        "cpu": stream.rows / best_cpu[name] / 1e6,
                        "vs_arrow_wall": float(np.median([r[0] for r in rounds[name]])),
                        "vs_arrow_cpu": float(np.median([r[1] for r in rounds[name]])),
                        **acc,
                        "a-priori bound": bound,
                    }
                )
            del sketches
    return results


def _num(value: float, spec: str) -> str:
    return "—" if np.isnan(value) else format(value, spec)


def markdown(results: list[dict]) -> str:
    """The results table, then per stream and size: ours against DataSketches, then ours against Arrow."""
    frame = pd.DataFrame(results)
    lines = [
        "| stream | rows | counters | sketch | M upd/s wall | M upd/s CPU | R@100 | R@1000 "
        "| max abs err, true top-1000 | a-priori bound |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in frame.to_dict("records"):
        lines.append(
            f"| {row['stream']} | {row['rows']:,} | {row['counters']} | {row['sketch']} | {row['wall']:.2f} "
            f"| {row['cpu']:.2f} | {_num(row['R@100'], '.3f')} | {_num(row['R@1000'], '.3f')} "
            f"| {_num(row['maxerr'], 'g')} | {_num(row['a-priori bound'], ',.0f')} |"
        )
    lines += [
        "",
        "| stream | counters | ours vs | speed ratio wall | speed ratio CPU | R@1000 ours / DS | max err ours / DS |",
        "|---|---|---|---|---|---|---|",
    ]
    for (stream, counters), group in frame.groupby(["stream", "counters"], sort=False):
        ours = group.iloc[0]  # the batch path on Arrow/numpy columns
        for _, other in group[group.sketch.str.startswith("datasketches")].iterrows():
            lines.append(
                f"| {stream} | {counters} | {other.sketch} | {ours.wall / other.wall:.2f}x "
                f"| {ours.cpu / other.cpu:.2f}x | {ours['R@1000'] / other['R@1000']:.3f} "
                f"| {ours.maxerr:g} / {other.maxerr:g} |"
            )
    lines += [
        "",
        "| stream | counters | ours | time / Arrow's exact count, wall | time / Arrow's, CPU | R@1000 | max abs err |",
        "|---|---|---|---|---|---|---|",
    ]
    for (stream, counters), group in frame.groupby(["stream", "counters"], sort=False):
        for _, ours in group[group.sketch.str.startswith("ours")].iterrows():
            lines.append(
                f"| {stream} | {counters} | {ours.sketch} | {ours.vs_arrow_wall:.2f}x | {ours.vs_arrow_cpu:.2f}x "
                f"| {ours['R@1000']:.3f} | {ours.maxerr:g} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--int-rows", type=int, default=10_000_000, help="rows of stream (a); 0 skips it")
    parser.add_argument("--pair-rows", type=int, default=5_000_000, help="rows of stream (b); 0 skips it")
    parser.add_argument("--lg", type=int, nargs="+", default=[14, 17], help="lg_max_k values (ours: 0.75 * 2**lg)")
    parser.add_argument("--batch", type=int, default=100_000, help="rows per batch of our batch path")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per contender (best is kept)")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    results = run(args)
    print(markdown(results))
    print(
        f"\nbatch {args.batch:,} rows; best of {args.repeats} interleaved runs (ratios to Arrow: median of the "
        f"per-round ratios); seed {args.seed}; "
        f"Python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}, "
        f"pyarrow {pa.__version__}, datasketches {version('datasketches')}; "
        f"total {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
