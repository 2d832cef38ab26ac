"""Tests of locality.sketch.SpaceSaving against exact counts of seeded Zipf streams."""

from __future__ import annotations

import doctest
import math
import struct
import zlib
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import locality.sketch.space_saving as sketch_module
from locality.errors import InvalidParameterError, LocalityError, SerializationError
from locality.sketch import SpaceSaving, grouping
from locality.sketch.columns import STR

N_ITEMS = 500_000
N_KEYS = 50_000


# ---------------------------------------------------------------------- streams


def zipf_ids(rng: np.random.Generator, s: float, n_keys: int, size: int) -> np.ndarray:
    """Truncated Zipf(s) over ``n_keys`` ids, ranks shuffled so heavy ids are not the small ones."""
    cdf = np.cumsum(1.0 / np.arange(1, n_keys + 1) ** s)
    cdf /= cdf[-1]
    return rng.permutation(n_keys)[np.searchsorted(cdf, rng.random(size))]


def string_pool(n: int) -> np.ndarray:
    """Key strings of mixed lengths (0 to ~40 bytes), with multi-byte UTF-8 among them."""
    shapes = ["#t{}", "città_{}", "東京-{}", "🎉{}", "location/north/district/{}/block", "x" * 15 + "{}"]
    pool = np.array([shapes[i % len(shapes)].format(i) for i in range(n)], dtype=object)
    pool[1] = ""  # the empty string is a key like any other
    return pool


@pytest.fixture(scope="module")
def int_stream() -> np.ndarray:
    return zipf_ids(np.random.default_rng(11), 1.1, N_KEYS, N_ITEMS).astype(np.int64)


@pytest.fixture(scope="module")
def str_stream(int_stream: np.ndarray) -> np.ndarray:
    return string_pool(N_KEYS)[int_stream]


@pytest.fixture(scope="module")
def pair_stream() -> tuple[np.ndarray, np.ndarray]:
    """Correlated pairs: k1 Zipf over 5k locations, k2 = f(k1, Zipf offset) over 50k tags."""
    rng = np.random.default_rng(12)
    k1 = zipf_ids(rng, 1.1, 5_000, N_ITEMS)
    k2 = (k1 * 10 + zipf_ids(rng, 1.3, 200, N_ITEMS)) % N_KEYS
    return string_pool(5_000)[k1], np.array([f"tag{i}" for i in range(N_KEYS)], dtype=object)[k2]


def exact(keys, weights=None) -> Counter:
    counts: Counter = Counter()
    if weights is None:
        counts.update(keys)
    else:
        for key, weight in zip(keys, weights, strict=True):
            counts[key] += weight
    return counts


def rows(columns) -> list:
    return list(zip(*[list(c) for c in columns], strict=True))


def fed_in_batches(sketch: SpaceSaving, keys, batch: int, weights=None) -> SpaceSaving:
    for start in range(0, len(keys[0]) if sketch.arity > 1 else len(keys), batch):
        part = [c[start : start + batch] for c in keys] if sketch.arity > 1 else keys[start : start + batch]
        sketch.update_batch(part, None if weights is None else weights[start : start + batch])
    return sketch


def monitored(sketch: SpaceSaving) -> dict:
    top = sketch.top_k()
    names = ["key"] if sketch.arity == 1 else [f"key{i}" for i in range(sketch.arity)]
    keys = top[names[0]].tolist() if sketch.arity == 1 else rows([top[n] for n in names])
    return {k: (e, lo, up) for k, e, lo, up in zip(keys, top.estimate, top.lower, top.upper, strict=True)}


def assert_space_saving_bounds(sketch: SpaceSaving, truth: Counter) -> None:
    """Every guarantee of the Accuracy section, checked key by key against exact counts."""
    total = sketch.total_weight
    assert total == pytest.approx(sum(truth.values()), rel=1e-12)
    bound = total / sketch.capacity
    mu = sketch.min_count
    assert mu <= bound + 1e-9
    assert mu == (min(monitored(sketch).values())[0] if len(sketch) == sketch.capacity else 0.0)
    seen = monitored(sketch)
    assert len(seen) == len(sketch) <= sketch.capacity
    assert sum(e for e, _, _ in seen.values()) <= total * (1 + 1e-12)
    for key, (est, low, up) in seen.items():
        true = truth.get(key, 0)
        assert low - 1e-9 <= true <= up + 1e-9, (key, low, true, up)
        assert est == up
        assert est - true <= bound + 1e-9
        assert up - low <= mu + 1e-9
    for key, true in truth.items():
        if key not in seen:
            assert true <= mu + 1e-9, (key, true, mu)
            assert true <= bound + 1e-9
    heavy = [k for k, v in truth.items() if v > bound]
    assert heavy, "the stream should have keys above W/m, or the test proves nothing"
    assert all(k in seen for k in heavy)


def assert_same_sketch(a: SpaceSaving, b: SpaceSaving) -> None:
    """Same counters (as a set: internal order may differ), bounds, total and minimum."""
    key_cols = ["key"] if a.arity == 1 else [f"key{i}" for i in range(a.arity)]
    ta = a.top_k().sort_values(key_cols).reset_index(drop=True)
    tb = b.top_k().sort_values(key_cols).reset_index(drop=True)
    pd.testing.assert_frame_equal(ta, tb)
    assert (a.total_weight, a.min_count, len(a)) == (b.total_weight, b.min_count, len(b))


# ---------------------------------------------------------------------- exactness


@pytest.mark.parametrize("kind", ["int", "str", "pair"])
@pytest.mark.parametrize("path", ["update", "update_batch"])
def test_exact_while_distinct_keys_fit(kind, path, int_stream, str_stream, pair_stream):
    n = 60_000
    if kind == "pair":
        keys, arity = [c[:n] for c in pair_stream], 2
        truth = exact(rows(keys))
    else:
        keys, arity = (int_stream if kind == "int" else str_stream)[:n], 1
        truth = exact(keys.tolist())
    sketch = SpaceSaving(len(truth), arity=arity)
    if path == "update":
        for key in rows(keys) if arity > 1 else keys.tolist():
            sketch.update(key)
    else:
        fed_in_batches(sketch, keys, 7_919)
    seen = monitored(sketch)
    assert len(sketch) == len(truth) == sketch.capacity
    assert {k: e for k, (e, _, _) in seen.items()} == truth
    assert all(lo == up for _, lo, up in seen.values())
    assert sketch.total_weight == n


def test_estimate_lower_upper_of_unmonitored_keys(int_stream):
    sketch = SpaceSaving(100)
    sketch.update_batch(int_stream)
    seen = monitored(sketch)
    absent = next(k for k in range(N_KEYS) if k not in seen)
    assert sketch.estimate(absent) == 0.0
    assert sketch.lower_bound(absent) == 0.0
    assert sketch.upper_bound(absent) == sketch.min_count > 0
    fresh = SpaceSaving(100)
    fresh.update(7)
    assert (fresh.estimate(8), fresh.upper_bound(8), fresh.estimate(7)) == (0.0, 0.0, 1.0)


# ---------------------------------------------------------------------- bounds


@pytest.mark.parametrize("kind", ["int", "str"])
@pytest.mark.parametrize("capacity", [200, 2_000])
def test_bounds_hold_for_single_updates(kind, capacity, int_stream, str_stream):
    keys = (int_stream if kind == "int" else str_stream)[:200_000].tolist()
    sketch = SpaceSaving(capacity)
    for key in keys:
        sketch.update(key)
    assert_space_saving_bounds(sketch, exact(keys))


@pytest.mark.parametrize("kind", ["int", "str", "pair"])
@pytest.mark.parametrize("batch", [100_000, 4_093, N_ITEMS])
def test_bounds_hold_for_batches_of_any_size(kind, batch, int_stream, str_stream, pair_stream):
    if kind == "pair":
        keys, arity, truth = list(pair_stream), 2, exact(rows(pair_stream))
    else:
        keys, arity = (int_stream if kind == "int" else str_stream), 1
        truth = exact(keys.tolist())
    sketch = fed_in_batches(SpaceSaving(1_000, arity=arity), keys, batch)
    assert_space_saving_bounds(sketch, truth)


def test_weighted_updates_keep_the_bounds(int_stream):
    rng = np.random.default_rng(13)
    keys = int_stream[:200_000]
    weights = rng.integers(1, 6, len(keys)).astype(np.float64)
    truth = exact(keys.tolist(), weights.tolist())
    batched = fed_in_batches(SpaceSaving(500), keys, 50_000, weights)
    single = SpaceSaving(500)
    for key, weight in zip(keys.tolist(), weights.tolist(), strict=True):
        single.update(key, weight)
    assert_space_saving_bounds(batched, truth)
    assert_space_saving_bounds(single, truth)
    assert batched.total_weight == single.total_weight == weights.sum()


def test_batch_path_is_tighter_than_single_updates_on_a_skewed_stream(int_stream):
    """Not a guarantee, a regression guard: the batch pays the minimum once per new key and batch."""
    truth = exact(int_stream.tolist())
    batched = fed_in_batches(SpaceSaving(1_000), int_stream, 100_000)
    single = SpaceSaving(1_000)
    for key in int_stream.tolist():
        single.update(key)

    def worst(sk):
        return max(e - truth[k] for k, (e, _, _) in monitored(sk).items())

    assert worst(batched) < worst(single)


# ---------------------------------------------------------------------- batch == single updates


@pytest.mark.parametrize("kind", ["int", "str", "pair"])
def test_batch_equals_single_updates_while_nothing_is_evicted(kind, int_stream, str_stream, pair_stream):
    """Documented: identical whenever len(sketch) + new batch keys <= capacity."""
    if kind == "pair":
        keys, arity = [c[:30_000] for c in pair_stream], 2
        seq = rows(keys)
    else:
        keys, arity = (int_stream if kind == "int" else str_stream)[:30_000], 1
        seq = keys.tolist()
    capacity = len(set(seq))
    single, batched = SpaceSaving(capacity, arity), SpaceSaving(capacity, arity)
    for key in seq:
        single.update(key)
    fed_in_batches(batched, keys, 10_000)
    assert_same_sketch(single, batched)


@pytest.mark.parametrize("kind", ["int", "str", "pair"])
def test_batch_of_monitored_keys_equals_single_updates_on_a_full_sketch(kind, int_stream, str_stream, pair_stream):
    if kind == "pair":
        keys, arity = list(pair_stream), 2
    else:
        keys, arity = (int_stream if kind == "int" else str_stream), 1
    base = fed_in_batches(SpaceSaving(1_000, arity), keys, 100_000)
    assert len(base) == base.capacity and base.min_count > 0
    top = base.top_k()
    names = list(top.columns[:arity])
    rng = np.random.default_rng(14)
    pick = rng.integers(0, len(top), 20_000)
    weights = rng.integers(1, 4, len(pick)).astype(np.float64)
    batch = [top[n].to_numpy()[pick] for n in names]
    single = SpaceSaving.from_bytes(base.to_bytes())
    for key, weight in zip(rows(batch) if arity > 1 else batch[0].tolist(), weights.tolist(), strict=True):
        single.update(key, weight)
    batched = SpaceSaving.from_bytes(base.to_bytes())
    batched.update_batch(batch if arity > 1 else batch[0], weights)
    assert_same_sketch(single, batched)


def test_batch_with_new_keys_into_a_full_sketch_may_differ_but_keeps_bounds(int_stream):
    """The other side of the documented rule: no equality promised once keys are evicted."""
    keys = int_stream[:100_000]
    single, batched = SpaceSaving(300), SpaceSaving(300)
    for key in keys.tolist():
        single.update(key)
    batched.update_batch(keys)
    truth = exact(keys.tolist())
    assert monitored(single) != monitored(batched)
    assert_space_saving_bounds(single, truth)
    assert_space_saving_bounds(batched, truth)


# ---------------------------------------------------------------------- merge


@pytest.mark.parametrize("parts", [16, 64])
@pytest.mark.parametrize("kind", ["int", "str", "pair"])
def test_merging_partition_sketches_keeps_the_bound_for_the_merged_weight(
    parts, kind, int_stream, str_stream, pair_stream
):
    if kind == "pair":
        keys, arity, truth = list(pair_stream), 2, exact(rows(pair_stream))
        chunks = [[c[i::parts] for c in keys] for i in range(parts)]  # round-robin, like a shuffle
    else:
        keys, arity = (int_stream if kind == "int" else str_stream), 1
        truth = exact(keys.tolist())
        chunks = np.array_split(keys, parts)  # contiguous, like input splits
    sketches = []
    for chunk in chunks:
        sk = SpaceSaving(1_000, arity)
        sk.update_batch(chunk)
        sketches.append(sk)
    # A tree of merges, as a driver would reduce them.
    while len(sketches) > 1:
        sketches = [a.merge(b) for a, b in zip(sketches[::2], sketches[1::2], strict=True)]
    merged = sketches[0]
    assert merged.total_weight == N_ITEMS
    assert_space_saving_bounds(merged, truth)


def test_merge_in_a_fold_of_single_update_sketches(str_stream):
    keys = str_stream[:120_000].tolist()
    merged = SpaceSaving(400)
    for start in range(0, len(keys), 15_000):
        part = SpaceSaving(400)
        for key in keys[start : start + 15_000]:
            part.update(key, 2.0)
        assert merged.merge(part) is merged
    assert_space_saving_bounds(merged, Counter({k: 2.0 * v for k, v in exact(keys).items()}))


def test_merge_adds_total_weight_exactly_and_leaves_other_alone(int_stream):
    a, b = SpaceSaving(64), SpaceSaving(64)
    a.update_batch(int_stream[:1_000], np.full(1_000, 0.1))
    b.update_batch(int_stream[1_000:3_000], np.full(2_000, 0.3))
    b_bytes, wa, wb = b.to_bytes(), a.total_weight, b.total_weight
    a.merge(b)
    assert a.total_weight == wa + wb
    assert b.to_bytes() == b_bytes
    empty = SpaceSaving(64)
    before = a.to_bytes()
    assert a.merge(empty).to_bytes() == before
    assert empty.merge(a).to_bytes() == before


def test_merge_is_exact_when_the_union_fits():
    a, b = SpaceSaving(10, arity=2), SpaceSaving(10, arity=2)
    a.update_batch([["x", "x", "y"], [1, 1, 2]])
    b.update_batch([["x", "z"], [1, 3]], [4.0, 5.0])
    a.merge(b)
    assert monitored(a) == {("x", 1): (6.0, 6.0, 6.0), ("y", 2): (1.0, 1.0, 1.0), ("z", 3): (5.0, 5.0, 5.0)}


def test_merge_with_itself_doubles_every_counter(int_stream):
    sk = SpaceSaving(50)
    sk.update_batch(int_stream[:10_000])
    before = monitored(sk)
    sk.merge(sk)
    assert monitored(sk) == {k: (2 * e, 2 * lo, 2 * up) for k, (e, lo, up) in before.items()}
    assert sk.total_weight == 20_000


# ---------------------------------------------------------------------- input forms


def test_every_int_column_form_gives_the_same_sketch(int_stream):
    keys = int_stream[:50_000]
    forms = [
        keys,
        keys.astype(np.int32),
        keys.astype(np.uint16),
        pd.Series(keys),
        pd.Series(keys, dtype="Int64"),
        pa.array(keys),
        pa.chunked_array([keys[:20_000], keys[20_000:]]),
        keys.tolist(),
        keys.astype(object),
    ]
    images = set()
    for form in forms:
        sk = SpaceSaving(500)
        sk.update_batch(form)
        images.add(sk.to_bytes())
    assert len(images) == 1


def test_every_string_column_form_gives_the_same_sketch(str_stream):
    keys = str_stream[:50_000]
    forms = [
        keys,
        keys.astype(str),  # numpy unicode
        pd.Series(keys),
        pd.Series(keys, dtype="string[pyarrow]"),
        pd.Series(keys, dtype="category"),
        pa.array(keys),
        pa.array(keys, type=pa.large_string()),
        pa.array(keys).dictionary_encode(),
        pa.chunked_array([pa.array(keys[:20_000]), pa.array(keys[20_000:])]),
        keys.tolist(),
    ]
    images = set()
    for form in forms:
        sk = SpaceSaving(500)
        sk.update_batch(form)
        images.add(sk.to_bytes())
    assert len(images) == 1


def test_pairs_from_frames_tables_and_column_lists(pair_stream):
    k1, k2 = (c[:30_000] for c in pair_stream)
    frame = pd.DataFrame({"loc": k1, "tag": k2})
    images = set()
    for keys in (
        [k1, k2],
        frame,
        pa.Table.from_pandas(frame),
        pa.RecordBatch.from_pandas(frame),
        (pa.array(k1), pd.Series(k2)),
    ):
        sk = SpaceSaving(800, arity=2)
        sk.update_batch(keys)
        images.add(sk.to_bytes())
    assert len(images) == 1


def test_arity_three_with_mixed_component_types():
    rng = np.random.default_rng(15)
    a = zipf_ids(rng, 1.2, 300, 60_000)
    cols = [np.array([f"op{i}" for i in range(300)], dtype=object)[a], a % 7, (a * 3) % 11]
    sk = fed_in_batches(SpaceSaving(200, arity=3), cols, 20_000)
    assert_space_saving_bounds(sk, exact(rows(cols)))
    top = sk.top_k(5)
    assert list(top.columns) == ["key0", "key1", "key2", "estimate", "lower", "upper"]
    assert top.key0.dtype == object and top.key1.dtype == np.int64


def test_int64_extremes_are_keys_like_any_other():
    sk = SpaceSaving(4)
    extremes = np.array([-(2**63), 2**63 - 1, 0, 2**63 - 1])
    sk.update_batch(extremes)
    sk.update(2**63 - 1)
    assert sk.estimate(2**63 - 1) == 3.0 and sk.estimate(-(2**63)) == 1.0
    assert SpaceSaving.from_bytes(sk.to_bytes()).estimate(-(2**63)) == 1.0


# ---------------------------------------------------------------------- exact grouping


def test_near_identical_keys_are_counted_apart():
    """Grouping compares whole keys: no hash, no separator, so look-alike keys never merge."""
    words = ["", "a", "a\0", "ab", "ba", "abcdefgh", "abcdefgh\0", "abcdefghi", "abcdefgi", "é", "e\u0301"]
    sk = SpaceSaving(len(words))
    sk.update_batch(pa.array(words * 3 + words[:4]))
    assert monitored(sk) == {w: (3.0 + (i < 4), 3.0 + (i < 4), 3.0 + (i < 4)) for i, w in enumerate(words)}
    # Pairs whose concatenations coincide, with and without a separator-like byte.
    first = ["a", "ab", "", "abc", "a\x1f", "a"]
    second = ["bc", "c", "abc", "", "b", "\x1fb"]
    pairs = SpaceSaving(len(first), arity=2)
    pairs.update_batch([pa.array(first * 2), pa.array(second * 2)])
    assert monitored(pairs) == {(a, b): (2.0, 2.0, 2.0) for a, b in zip(first, second, strict=True)}


def test_short_strings_without_nul_are_grouped_as_padded_bytes_and_come_back_whole(monkeypatch):
    """Look-alikes that pad to the same width stay apart, and the kept keys are the strings given."""
    words = ["", "a", "ab", "abcdefgh", "abcdefghi", "é", "e\u0301", "東京", "🎉", "x" * 32]
    blocks = [[pa.array(words)], [pa.array(words[::-1] + ["a"])]]
    groups = grouping.group([STR], blocks, located=1)
    assert isinstance(groups.keys[0], grouping.PackedStrings)
    kept = groups.keys[0].take(groups.at[0]).to_pylist()
    assert kept == words and groups.rows[groups.at[0]].tolist() == [2, 3] + [2] * 8
    # One NUL byte or one string over the width in any block: the component is grouped as strings.
    for odd in ("a\0", "y" * 33):
        groups = grouping.group([STR], [[pa.array(words)], [pa.array([odd])]], located=1)
        assert isinstance(groups.keys[0], pa.ChunkedArray) and len(groups.rows) == len(words) + 1
    # A block whose padded bytes would overflow Arrow's 32-bit offsets: strings too.
    monkeypatch.setattr(grouping, "_MAX_STRING_BYTES", 32 * len(words) - 1)
    groups = grouping.group([STR], blocks, located=1)
    assert isinstance(groups.keys[0], pa.ChunkedArray) and groups.rows[groups.at[0]].tolist() == [2, 3] + [2] * 8


@pytest.mark.parametrize("arity", [1, 2])
def test_padded_bytes_and_strings_give_the_same_sketch(monkeypatch, arity, str_stream, pair_stream):
    """Short keys (all but the pool's 30-35 byte paths) through both groupings: the same exact counts.

    With evictions the two may keep different keys among those tied at the threshold (new keys
    tie in group order, and Arrow orders the groups of the two key types differently); both hold
    every bound.
    """
    column = str_stream if arity == 1 else pair_stream[0]
    short = np.array([len(s.encode()) <= 32 for s in column])
    keys = column[short][:100_000] if arity == 1 else [c[short][:100_000] for c in pair_stream]
    truth = exact(keys.tolist() if arity == 1 else rows(keys))
    padded = fed_in_batches(SpaceSaving(len(truth), arity), keys, 7_919)
    assert {k: e for k, (e, _, _) in monitored(padded).items()} == truth
    small = fed_in_batches(SpaceSaving(700, arity), keys, 7_919)
    monkeypatch.setattr(grouping, "_PACKED_MAX_BYTES", -1)  # every string grouped as a string
    assert_same_sketch(padded, fed_in_batches(SpaceSaving(len(truth), arity), keys, 7_919))
    assert_space_saving_bounds(small, truth)
    assert_space_saving_bounds(fed_in_batches(SpaceSaving(700, arity), keys, 7_919), truth)


@pytest.mark.parametrize("kind", ["int", "str", "pair"])
def test_the_grouping_path_does_not_change_exact_counts(monkeypatch, kind, int_stream, str_stream, pair_stream):
    """Single int keys group with pandas up to a size, with Arrow beyond: both count exactly."""
    if kind == "pair":
        keys, arity, truth = [c[:60_000] for c in pair_stream], 2, exact(rows([c[:60_000] for c in pair_stream]))
    else:
        keys, arity = (int_stream if kind == "int" else str_stream)[:60_000], 1
        truth = exact(keys.tolist())
    default = fed_in_batches(SpaceSaving(len(truth), arity), keys, 7_919)
    monkeypatch.setattr(grouping, "_PANDAS_MAX_ROWS", 0)
    arrow = fed_in_batches(SpaceSaving(len(truth), arity), keys, 7_919)
    assert {k: e for k, (e, _, _) in monitored(arrow).items()} == truth
    assert_same_sketch(default, arrow)
    small = fed_in_batches(SpaceSaving(500, arity), keys, 7_919)
    assert_space_saving_bounds(small, truth)


def test_keys_seen_once_are_set_aside_with_their_exact_counts(monkeypatch):
    """Rows whose key no other row holds skip Arrow's aggregation and come back as groups of one.

    Checked against the plain grouping on the same rows (same groups, counts, sums and located
    rows), for string pairs and an int + string pair, with rows that repeat a sketch key once,
    a key repeated only across blocks, and look-alikes that differ in one padded byte; and when
    every fingerprint collides (all rows in one bucket) nothing is set aside and nothing changes.
    """
    rng = np.random.default_rng(5)
    words = np.array([f"w{i}" for i in range(3_000)], dtype=object)
    look_alikes = [("abcdefgh", "abcdefg"), ("abcdefgh\x01", "abcdefg"), ("abcdefg", "abcdefgh")]

    def by_key(groups):
        keys = [
            k.tolist() if isinstance(k, np.ndarray) else k.take(np.arange(len(groups.rows))).to_pylist()
            for k in groups.keys
        ]
        table = {key: (int(n), float(v)) for key, n, v in zip(zip(*keys), groups.rows, groups.sums[0])}
        return table, [tuple(k[i] for k in keys) for i in groups.at[0]]

    def grouped(kinds, blocks, values, singles_from):
        monkeypatch.setattr(grouping, "_SINGLES_MIN_ROWS", singles_from)
        return by_key(grouping.group(kinds, blocks, values, located=1))

    seen = []
    real, real_odd = grouping._seen_once, grouping._odd
    monkeypatch.setattr(grouping, "_seen_once", lambda *a: seen.append(found := real(*a)) or found)
    for kinds in ([STR, STR], [sketch_module.INT, STR]):
        first = words if kinds[0] == STR else np.arange(len(words), dtype=np.int64)
        column = (lambda v: pa.array(v)) if kinds[0] == STR else (lambda v: np.asarray(v, dtype=np.int64))
        blocks, values = [[column(first[:50]), pa.array(words[:50])]], [[np.full(50, 10.0)]]
        extras = [list(zip(first[:5], words[:5]))]  # each sketch key once more, in the first block after it
        if kinds[0] == STR:
            extras += [[look_alikes[0], look_alikes[1]], [look_alikes[0], look_alikes[2]]]
        for extra in extras + [[]] * (3 - len(extras)):
            pick, other = rng.integers(0, len(words), 1_000), rng.integers(0, len(words), 1_000)
            ones = [*first[pick], *(a for a, _ in extra)], [*words[other], *(b for _, b in extra)]
            blocks.append([column(ones[0]), pa.array(ones[1])])
            values[0].append(rng.random(len(ones[0])) + 0.5)
        expected = grouped(kinds, blocks, values, 1 << 62)
        assert all(expected[0][(first[i], words[i])][0] == 2 for i in range(5))
        if kinds[0] == STR:
            assert [expected[0][k][0] for k in look_alikes] == [2, 1, 1]
        seen.clear()
        assert grouped(kinds, blocks, values, 0) == expected
        assert sum(int(mask.sum()) for mask in seen[0].values()) > 1_000, "many rows hold a key seen once"
        monkeypatch.setattr(grouping, "_odd", lambda position: np.uint64(0))  # every row in one bucket
        seen.clear()
        assert grouped(kinds, blocks, values, 0) == expected
        assert sum(int(mask.sum()) for mask in seen[0].values()) == 0
        monkeypatch.setattr(grouping, "_odd", real_odd)


@pytest.mark.parametrize("arity", [1, 2])
def test_setting_keys_seen_once_aside_keeps_the_sketch(monkeypatch, arity, str_stream, pair_stream):
    """The sketch fed through both groupings: the same exact counts, and every bound with evictions."""
    keys = str_stream[:200_000] if arity == 1 else [c[:200_000] for c in pair_stream]
    truth = exact(keys.tolist() if arity == 1 else rows(keys))
    weights = np.random.default_rng(3).random(200_000) + 0.5
    monkeypatch.setattr(grouping, "_SINGLES_MIN_ROWS", 0)
    aside = fed_in_batches(SpaceSaving(len(truth), arity), keys, 7_919)
    assert {k: e for k, (e, _, _) in monitored(aside).items()} == truth
    small = fed_in_batches(SpaceSaving(700, arity), keys, 7_919)
    weighted = fed_in_batches(SpaceSaving(700, arity), keys, 7_919, weights)
    monkeypatch.setattr(grouping, "_SINGLES_MIN_ROWS", 1 << 62)
    assert_same_sketch(aside, fed_in_batches(SpaceSaving(len(truth), arity), keys, 7_919))
    assert_space_saving_bounds(small, truth)
    assert_space_saving_bounds(weighted, exact(keys.tolist() if arity == 1 else rows(keys), weights))


# ---------------------------------------------------------------------- buffered batches


@pytest.mark.parametrize("kind", ["int", "str", "pair"])
def test_queries_between_small_batches_see_every_batch(kind, int_stream, str_stream, pair_stream):
    """Batches smaller than the buffer: every query answers as if each batch had been merged at once."""
    n, batch = 30_000, 1_000
    if kind == "pair":
        keys, arity = [c[:n] for c in pair_stream], 2
        seq = rows(keys)
    else:
        keys, arity = (int_stream if kind == "int" else str_stream)[:n], 1
        seq = keys.tolist()
    capacity = len(set(seq))  # nothing is evicted: every answer is exact
    sk = SpaceSaving(capacity, arity)
    heavy = Counter(seq).most_common(1)[0][0]
    for start in range(0, n, batch):
        part = [c[start : start + batch] for c in keys] if arity > 1 else keys[start : start + batch]
        sk.update_batch(part)
        truth = exact(seq[: start + batch])
        assert sk.total_weight == start + batch
        assert len(sk) == len(truth) and sk.min_count == (truth and min(truth.values())) * (len(truth) == capacity)
        assert sk.estimate(heavy) == sk.lower_bound(heavy) == truth[heavy]
    assert {k: e for k, (e, _, _) in monitored(sk).items()} == exact(seq)
    assert str(len(sk)) in str(sk) and f"{n}" in repr(sk)


@pytest.mark.parametrize("batch", [1, 97, 1_000])
def test_bounds_hold_for_batches_far_smaller_than_the_capacity(batch, str_stream):
    keys = str_stream[:40_000]
    sketch = fed_in_batches(SpaceSaving(300), keys, batch)
    assert_space_saving_bounds(sketch, exact(keys.tolist()))


def test_queries_never_change_what_later_batches_give(int_stream, pair_stream):
    """Asking (len, estimate, top_k, to_bytes, str, being merged) between batches leaves the result alone."""
    for keys, arity in ((int_stream[:200_000], 1), ([c[:200_000] for c in pair_stream], 2)):
        quiet, asked = SpaceSaving(700, arity), SpaceSaving(700, arity)
        for start in range(0, 200_000, 1_500):
            part = [c[start : start + 1_500] for c in keys] if arity > 1 else keys[start : start + 1_500]
            quiet.update_batch(part)
            asked.update_batch(part)
            len(asked), asked.min_count, asked.top_k(3), asked.to_bytes(), str(asked)
            SpaceSaving(700, arity).merge(asked)
        assert asked.to_bytes() == quiet.to_bytes()
        total = 200_000
        truth = exact(keys.tolist()) if arity == 1 else exact(rows(keys))
        assert asked.total_weight == total
        assert_space_saving_bounds(asked, truth)


def test_the_buffer_stays_within_its_documented_bound(int_stream):
    sk = SpaceSaving(200)
    bound = sketch_module._BUFFER_ROWS_PER_COUNTER * sk.capacity
    for start in range(0, 99_900, 333):
        sk.update_batch(int_stream[start : start + 333])
        assert sk._pending_rows < bound  # a full buffer is merged at once
    assert_space_saving_bounds(sk, exact(int_stream[:99_900].tolist()))


def test_round_trip_after_buffered_batches(str_stream, pair_stream):
    for keys, arity in ((str_stream[:50_000], 1), ([c[:50_000] for c in pair_stream], 2)):
        sk = fed_in_batches(SpaceSaving(600, arity), keys, 1_234)
        data = sk.to_bytes()
        back = SpaceSaving.from_bytes(data)
        pd.testing.assert_frame_equal(back.top_k(), sk.top_k())
        assert (back.total_weight, back.min_count, len(back)) == (sk.total_weight, sk.min_count, len(sk))
        truth = exact(keys.tolist()) if arity == 1 else exact(rows(keys))
        assert_space_saving_bounds(back, truth)
        # The copy and the original both keep counting within the bounds.
        more = [c[:5_000] for c in keys] if arity > 1 else keys[:5_000]
        for twin in (back, sk):
            twin.update_batch(more)
            extra = exact(more.tolist()) if arity == 1 else exact(rows(more))
            assert_space_saving_bounds(twin, truth + extra)


def test_merge_of_buffered_sketches(int_stream, str_stream):
    keys = str_stream[:120_000]
    a = fed_in_batches(SpaceSaving(800), keys[:60_000], 999)
    b = fed_in_batches(SpaceSaving(800), keys[60_000:], 777)
    b_bytes = b.to_bytes()
    a.merge(b)
    assert a.total_weight == 120_000
    assert_space_saving_bounds(a, exact(keys.tolist()))
    assert b.to_bytes() == b_bytes
    # b's buffer was left as it was: it goes on exactly like a twin that was never merged.
    twin = fed_in_batches(SpaceSaving(800), keys[60_000:], 777)
    for sk in (b, twin):
        sk.update_batch(keys[:3_000])
    assert b.to_bytes() == twin.to_bytes()
    # Merging buffered sketches when the union fits is exact, and a buffered sketch merges with itself.
    ints = int_stream[:20_000]
    fits = len(set(ints.tolist()))
    c = fed_in_batches(SpaceSaving(fits), ints[:10_000], 500)
    c.merge(fed_in_batches(SpaceSaving(fits), ints[10_000:], 300))
    assert {k: e for k, (e, _, _) in monitored(c).items()} == exact(ints.tolist())
    d = fed_in_batches(SpaceSaving(fits), ints, 400)
    d.merge(d)
    assert {k: e for k, (e, _, _) in monitored(d).items()} == {k: 2 * v for k, v in exact(ints.tolist()).items()}


def test_single_updates_after_buffered_batches_see_them(str_stream):
    keys = str_stream[:20_000].tolist()
    sk = SpaceSaving(len(set(keys)) + 1)
    sk.update_batch(keys[:500], np.full(500, 2.0))
    sk.update_batch(keys[500:900])  # weighted and unweighted batches in one buffer
    sk.update(keys[0], 0.5)
    sk.update("never seen")
    truth = exact(keys[:500], [2.0] * 500) + exact(keys[500:900])
    truth[keys[0]] += 0.5
    truth["never seen"] += 1
    assert {k: e for k, (e, _, _) in monitored(sk).items()} == truth
    assert sk.total_weight == 1_000 + 400 + 1.5


def test_buffered_numpy_batches_are_copies(int_stream, str_stream):
    """A caller may reuse its arrays once update_batch returns."""
    sk, expected = SpaceSaving(5_000), SpaceSaving(5_000)
    reused = np.empty(1_000, dtype=np.int64)
    weights = np.empty(1_000)
    for start in range(0, 10_000, 1_000):
        reused[:] = int_stream[start : start + 1_000]
        weights[:] = 1.0 + start
        sk.update_batch(reused, weights)
        expected.update_batch(int_stream[start : start + 1_000].copy(), np.full(1_000, 1.0 + start))
    reused[:] = -1
    weights[:] = 1e9
    assert sk.to_bytes() == expected.to_bytes()
    # Object and Arrow string batches share one buffer and give the same sketch as Arrow alone.
    strs = str_stream[:20_000]
    mixed, arrow = SpaceSaving(900), SpaceSaving(900)
    for start in range(0, 20_000, 2_500):
        part = strs[start : start + 2_500]
        mixed.update_batch(part if start % 5_000 else pa.array(part))
        arrow.update_batch(pa.array(part))
    assert mixed.to_bytes() == arrow.to_bytes()


# ---------------------------------------------------------------------- serialization


def build_sketches(int_stream, str_stream, pair_stream) -> dict[str, SpaceSaving]:
    ints = fed_in_batches(SpaceSaving(1_000), int_stream, 100_000)
    strs = fed_in_batches(SpaceSaving(1_000), str_stream, 100_000)
    pairs = fed_in_batches(SpaceSaving(1_000, 2), list(pair_stream), 100_000)
    single = SpaceSaving(100, arity=2)  # still in the single-update layout
    for i, (a, _) in enumerate(rows([c[:20_000] for c in pair_stream])):
        single.update((a, i % 5), 0.5)
    unicode = SpaceSaving(8)
    unicode.update_batch(["naïve", "東京", "🎉🎉", "", "Ελλάδα", "naïve", "a\0b"])
    return {"int": ints, "str": strs, "pair": pairs, "single": single, "unicode": unicode, "empty": SpaceSaving(3)}


def test_round_trip_keeps_every_estimate_and_bound(int_stream, str_stream, pair_stream):
    for name, sk in build_sketches(int_stream, str_stream, pair_stream).items():
        data = sk.to_bytes()
        back = SpaceSaving.from_bytes(data)
        assert back.to_bytes() == data, name
        pd.testing.assert_frame_equal(back.top_k(), sk.top_k())
        assert (back.capacity, back.arity, len(back)) == (sk.capacity, sk.arity, len(sk))
        assert (back.total_weight, back.min_count, back.is_empty()) == (sk.total_weight, sk.min_count, sk.is_empty())
        for key, (est, low, up) in monitored(sk).items():
            assert (back.estimate(key), back.lower_bound(key), back.upper_bound(key)) == (est, low, up)
        # The copy keeps working: same result after the same further update.
        if sk.arity == 1 and not sk.is_empty():
            extra = int_stream[:5_000] if back.top_k().key.dtype == np.int64 else str_stream[:5_000]
            back.update_batch(extra)
            sk.update_batch(extra)
            assert back.to_bytes() == sk.to_bytes()


def test_round_trip_of_unicode_keys_is_exact():
    sk = SpaceSaving(8)
    words = ["naïve", "東京", "🎉🎉", "", "Ελλάδα", "naïve", "a\0b"]
    sk.update_batch(words)
    back = SpaceSaving.from_bytes(sk.to_bytes())
    assert dict(zip(back.top_k().key, back.top_k().estimate, strict=True)) == dict(exact(words))


def test_corrupt_bytes_raise_serialization_error(int_stream, str_stream, pair_stream):
    data = build_sketches(int_stream, str_stream, pair_stream)["pair"].to_bytes()
    for cut in (0, 3, 20, 39, 40, 100, len(data) // 2, len(data) - 1):
        with pytest.raises(SerializationError, match="truncated|checksum"):
            SpaceSaving.from_bytes(data[:cut])
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10
    with pytest.raises(SerializationError, match="checksum"):
        SpaceSaving.from_bytes(bytes(flipped))
    with pytest.raises(SerializationError, match="checksum"):
        SpaceSaving.from_bytes(data + b"\0\0\0\0")
    with pytest.raises(SerializationError, match="not a locality SpaceSaving"):
        SpaceSaving.from_bytes(b"PK\x03\x04" + data[4:])
    with pytest.raises(SerializationError, match="not a locality SpaceSaving"):
        SpaceSaving.from_bytes(b"\x80\x04\x95" + b"\0" * 60)  # a pickle header
    with pytest.raises(InvalidParameterError, match="must be bytes"):
        SpaceSaving.from_bytes("LCSS")


def reseal(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body))


def test_bytes_with_a_valid_checksum_but_bad_content_are_rejected(int_stream):
    sk = SpaceSaving(10)
    sk.update_batch(int_stream[:1_000])
    body = bytearray(sk.to_bytes()[:-4])
    version = bytearray(body)
    version[4:6] = struct.pack("<H", 99)
    with pytest.raises(SerializationError, match="version 99 is not supported"):
        SpaceSaving.from_bytes(reseal(bytes(version)))
    too_many = bytearray(body)
    too_many[8:12] = struct.pack("<I", 1)
    too_many[12:20] = struct.pack("<Q", 5)  # capacity 5 < 10 counters
    with pytest.raises(SerializationError, match="corrupt SpaceSaving header"):
        SpaceSaving.from_bytes(reseal(bytes(too_many)))
    negative = bytearray(body)
    negative[48:56] = struct.pack("<d", -1.0)  # first count
    with pytest.raises(SerializationError, match="counts must be finite"):
        SpaceSaving.from_bytes(reseal(bytes(negative)))
    duplicate = bytearray(body)
    keys_at = 48 + 2 * 8 * 10
    duplicate[keys_at + 8 : keys_at + 16] = duplicate[keys_at : keys_at + 8]
    with pytest.raises(SerializationError, match="appears in two counters"):
        SpaceSaving.from_bytes(reseal(bytes(duplicate)))
    with pytest.raises(SerializationError, match="unexpected bytes"):
        SpaceSaving.from_bytes(reseal(bytes(body) + b"\0" * 8))
    utf8 = SpaceSaving(2)
    utf8.update("ab")
    raw = bytearray(utf8.to_bytes()[:-4])
    raw[raw.index(b"ab")] = 0xFF
    with pytest.raises(SerializationError, match="UTF-8"):
        SpaceSaving.from_bytes(reseal(bytes(raw)))


def test_bytes_layout_is_the_documented_one():
    sk = SpaceSaving(5, arity=2)
    sk.update(("é", 7), 2.5)
    data = sk.to_bytes()
    magic, version, flags, arity, capacity, n, total = struct.unpack_from("<4sHHIQQd", data)
    assert (magic, version, flags, arity, capacity, n, total) == (b"LCSS", 1, 0, 2, 5, 1, 2.5)
    assert data[40:42] == bytes([2, 1])  # utf-8, int64
    assert struct.unpack_from("<dd", data, 48) == (2.5, 0.0)
    assert struct.unpack_from("<qq", data, 64) == (0, 2)  # offsets of "é" (2 UTF-8 bytes)
    assert data[80:82] == "é".encode()
    assert struct.unpack_from("<q", data, 88) == (7,)
    assert len(data) == 96 + 4 and b"pickle" not in data


# ---------------------------------------------------------------------- queries and summary


def test_top_k_shape_order_and_types(int_stream, str_stream):
    ints = fed_in_batches(SpaceSaving(300), int_stream, 100_000)
    top = ints.top_k(10)
    assert list(top.columns) == ["key", "estimate", "lower", "upper"]
    assert top.key.dtype == np.int64 and top.estimate.dtype == np.float64
    assert len(top) == 10 and top.estimate.is_monotonic_decreasing
    full = ints.top_k()
    assert len(full) == len(ints) == 300
    pd.testing.assert_frame_equal(full.head(10), top)
    truth = exact(int_stream.tolist())
    assert top.key.tolist() == [k for k, _ in truth.most_common(10)]
    strs = SpaceSaving(3)
    strs.update_batch(["b", "a", "c", "a"])
    assert strs.top_k().key.tolist() == ["a", "b", "c"]  # ties by key
    assert strs.top_k().key.dtype == object
    assert len(strs.top_k(0)) == 0
    empty = SpaceSaving(3, arity=2).top_k()
    assert list(empty.columns) == ["key0", "key1", "estimate", "lower", "upper"] and len(empty) == 0


def test_summary_len_empty_and_apriori_error(int_stream):
    sk = SpaceSaving(250)
    assert sk.is_empty() and len(sk) == 0 and sk.min_count == 0.0
    sk.update_batch(int_stream[:100_000])
    assert not sk.is_empty() and len(sk) == 250
    assert SpaceSaving.apriori_error(250, sk.total_weight) == 400.0
    assert sk.min_count <= SpaceSaving.apriori_error(sk.capacity, sk.total_weight)
    text = str(sk)
    assert "capacity        : 250" in text and "total weight    : 100000" in text
    assert f"min counter     : {sk.min_count:.12g}" in text and "(int)" in text
    assert "SpaceSaving(capacity=250, arity=1)" in repr(sk)


def test_docstring_examples_run():
    result = doctest.testmod(sketch_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 10 and result.failed == 0


# ---------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"capacity": 0}, "the 'capacity' parameter of SpaceSaving must be an int >= 1; got 0"),
        ({"capacity": -3}, "the 'capacity' parameter of SpaceSaving must be an int >= 1; got -3"),
        ({"capacity": 1.5}, "the 'capacity' parameter of SpaceSaving must be an int >= 1; got 1.5"),
        ({"capacity": True}, "the 'capacity' parameter of SpaceSaving must be an int >= 1; got True"),
        ({"capacity": 10, "arity": 0}, "the 'arity' parameter of SpaceSaving must be an int >= 1; got 0"),
    ],
)
def test_bad_construction(kwargs, message):
    with pytest.raises(InvalidParameterError) as info:
        SpaceSaving(**kwargs)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError) and isinstance(info.value, LocalityError)


@pytest.mark.parametrize("weight", [0, 0.0, -1.0, math.nan, math.inf, "1", None, True])
def test_bad_weight(weight):
    sk = SpaceSaving(5)
    with pytest.raises(InvalidParameterError, match="the 'weight' parameter of SpaceSaving.update must be a float > 0"):
        sk.update("a", weight)
    assert sk.is_empty() and len(sk) == 0


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([1.0, 0.0, 1.0], "must hold finite floats > 0; got 0.0 at row 1"),
        ([1.0, 1.0, math.nan], "must hold finite floats > 0; got nan at row 2"),
        ([-2.0, 1.0, 1.0], "must hold finite floats > 0; got -2.0 at row 0"),
        ([1.0, math.inf, 1.0], "must hold finite floats > 0; got inf at row 1"),
        ([1.0, 1.0], r"must hold one weight per key row \(3\); got shape \(2,\)"),
        (pa.array([1.0, None, 1.0]), "must not contain nulls"),
    ],
)
def test_bad_batch_weights(weights, message):
    sk = SpaceSaving(5)
    with pytest.raises(InvalidParameterError, match=r"the 'weights' parameter of SpaceSaving.update_batch " + message):
        sk.update_batch(["a", "b", "c"], weights)
    assert sk.is_empty()


@pytest.mark.parametrize(
    "column",
    [
        np.array(["a", None, "b"], dtype=object),
        np.array(["a", np.nan, "b"], dtype=object),
        pd.Series(["a", None, "b"]),
        pd.Series([1, None, 3], dtype="Int64"),
        pa.array(["a", None, "b"]),
        pa.chunked_array([pa.array(["a"]), pa.array([None, "b"], type=pa.string())]),
        [1, None, 3],
    ],
)
def test_null_keys_in_a_batch_are_rejected(column):
    sk = SpaceSaving(5)
    with pytest.raises(InvalidParameterError, match="must not contain nulls .drop rows with null keys first"):
        sk.update_batch(column)
    assert sk.is_empty()


def test_null_in_the_second_column_names_its_position():
    sk = SpaceSaving(5, arity=2)
    with pytest.raises(InvalidParameterError, match=r"must not contain nulls \(key position 1\)"):
        sk.update_batch([["a", "b"], pa.array([1, None])])


def test_mixed_key_types_are_rejected_with_position_and_types():
    sk = SpaceSaving(5)
    sk.update("a")
    with pytest.raises(
        InvalidParameterError,
        match=r"the 'key' parameter of SpaceSaving.update must be a str \(key position 0 of this sketch holds "
        r"str, fixed by the first update\); got int 3",
    ):
        sk.update(3)
    with pytest.raises(InvalidParameterError, match="must hold str at key position 0 .* got int"):
        sk.update_batch(np.array([1, 2]))
    with pytest.raises(InvalidParameterError, match="must hold only str or only int values; got int, str"):
        SpaceSaving(5).update_batch(np.array(["a", 1], dtype=object))
    pairs = SpaceSaving(5, arity=2)
    pairs.update_batch([["a"], [1]])
    with pytest.raises(InvalidParameterError, match="must be an int at key position 1 .*got str 'x'"):
        pairs.update(("a", "x"))
    with pytest.raises(InvalidParameterError, match="must hold int at key position 1 .* got str"):
        pairs.update_batch([["a"], ["x"]])
    with pytest.raises(InvalidParameterError, match=r"must be a tuple of 2 str or int components; got 'a'"):
        pairs.update("a")
    with pytest.raises(InvalidParameterError, match="must be a str or an int at key position 0; got 1.5"):
        pairs.update((1.5, 1))
    with pytest.raises(InvalidParameterError, match="must hold ints that fit in int64; got 9223372036854775808"):
        SpaceSaving(5).update(2**63)
    assert len(sk) == 1 and len(pairs) == 1  # nothing half-applied


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (np.array([1.5, 2.5]), "must hold str or int values; got dtype float64"),
        (np.array([True, False]), "must hold str or int values; got dtype bool"),
        (pa.array([1.5]), "must hold str or int values; got Arrow type double"),
        ("abc", "must hold columns .array, Series, Arrow array or list.; got str"),
        (np.zeros((2, 2), dtype=np.int64), r"must hold 1-D columns; got shape \(2, 2\)"),
        (np.array([2**64 - 1], dtype=np.uint64), "must hold ints that fit in int64"),
    ],
)
def test_bad_batch_columns(keys, message):
    with pytest.raises(InvalidParameterError, match="the 'keys' parameter of SpaceSaving.update_batch " + message):
        SpaceSaving(5).update_batch(keys)


def test_bad_batch_shapes_for_pairs():
    sk = SpaceSaving(5, arity=2)
    with pytest.raises(InvalidParameterError, match="must be a sequence of 2 columns; got length 3"):
        sk.update_batch([["a"], ["b"], ["c"]])
    with pytest.raises(InvalidParameterError, match=r"must have columns of one length; got lengths \[2, 1\]"):
        sk.update_batch([["a", "b"], ["c"]])
    with pytest.raises(InvalidParameterError, match="must have 2 columns; got 1"):
        sk.update_batch(pd.DataFrame({"a": ["x"]}))


def test_merge_of_mismatched_sketches_is_rejected():
    a = SpaceSaving(10)
    a.update("x")
    with pytest.raises(InvalidParameterError, match=r"must have the same capacity as this sketch \(10\); got 20"):
        a.merge(SpaceSaving(20))
    with pytest.raises(InvalidParameterError, match=r"must have the same arity as this sketch \(1\); got 2"):
        a.merge(SpaceSaving(10, arity=2))
    ints = SpaceSaving(10)
    ints.update(1)
    with pytest.raises(InvalidParameterError, match="must hold str at key position 0 .* got int"):
        a.merge(ints)
    with pytest.raises(InvalidParameterError, match="must be a SpaceSaving; got bytes"):
        a.merge(a.to_bytes())
    assert a.total_weight == 1.0 and monitored(a) == {"x": (1.0, 1.0, 1.0)}


def test_bad_query_arguments():
    sk = SpaceSaving(5)
    sk.update(1)
    with pytest.raises(
        InvalidParameterError, match="the 'k' parameter of SpaceSaving.top_k must be an int >= 0; got -1"
    ):
        sk.top_k(-1)
    with pytest.raises(InvalidParameterError, match="SpaceSaving.estimate must be an int"):
        sk.estimate("1")
    with pytest.raises(InvalidParameterError, match="the 'capacity' parameter of SpaceSaving.apriori_error"):
        SpaceSaving.apriori_error(0, 10.0)
    with pytest.raises(InvalidParameterError, match="the 'total_weight' parameter of SpaceSaving.apriori_error"):
        SpaceSaving.apriori_error(10, -1.0)


def test_empty_batches_add_nothing_whatever_their_type():
    sk = SpaceSaving(3)
    for empty in (np.array([]), pa.array([]), [], pd.Series([], dtype=object), pa.chunked_array([], type=pa.int64())):
        sk.update_batch(empty)
    sk.update_batch(np.array([], dtype=np.int64), np.array([]))
    assert sk.is_empty() and len(sk) == 0
    sk.update_batch(["a"])  # the first non-empty batch still fixes the type
    with pytest.raises(InvalidParameterError, match="must hold str at key position 0"):
        sk.update_batch([1])
    pairs = SpaceSaving(3, arity=2)
    pairs.update_batch([[], []])
    assert pairs.is_empty()
