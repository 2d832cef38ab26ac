"""Tests of locality.hashing: engine vectors, oracles, vectorized == scalar, round trips, errors."""

from __future__ import annotations

import json
import os
import pickle
import struct
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from locality.errors import InvalidParameterError, SerializationError
from locality.hashing import (
    ENGINES,
    ConsistentHashRing,
    FallbackHash,
    FlinkKeyGroups,
    KafkaPartitioner,
    SparkHashPartitioning,
    StormFieldsGrouping,
    fallback_from_dict,
    java_hash_code,
    kafka_murmur2,
    make_fallback,
)

with warnings.catch_warnings():  # kafka-python's import warns about importlib.resources
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

# Code points to draw random keys from: ASCII, Latin-1, Cyrillic, CJK, the BMP edge, and non-BMP
# (emoji, musical symbols, the last code point), which Java stores as surrogate pairs.
POOLS = [
    [chr(c) for c in range(0x20, 0x7F)],
    ["\x00", "é", "ü", "ß", "Ж", "я", "中", "文", "日", "\ufffd", "\uffff"],
    ["🙂", "🚀", "👍🏽", "𝄞", "\U0010ffff", "\U00010000"],
]


def random_strings(rng: np.random.Generator, n: int, lengths: list[int]) -> list[str]:
    out = []
    for _ in range(n):
        length = int(rng.choice(lengths))
        pool = POOLS[int(rng.choice(3, p=[0.6, 0.25, 0.15]))]
        out.append("".join(pool[i] for i in rng.integers(0, len(pool), length)))
    return out


def random_ints(rng: np.random.Generator, n: int, low: int = INT64_MIN, high: int = INT64_MAX) -> np.ndarray:
    edges = [low, high, -1, 0, 1, 42, -7, max(low, INT32_MIN), min(high, INT32_MAX), min(high, 2**32)]
    edges = [v for v in edges if low <= v <= high]
    body = rng.integers(low, high, size=n, dtype=np.int64, endpoint=True)
    small = rng.integers(-1000, 1000, size=n // 4)
    return np.concatenate([np.array(edges, dtype=np.int64), body, small])


def all_fallbacks() -> list[FallbackHash]:
    return [
        KafkaPartitioner(12),
        KafkaPartitioner(7, int_type="int"),
        StormFieldsGrouping(5),
        StormFieldsGrouping(9, int_type="int"),
        FlinkKeyGroups(6),
        FlinkKeyGroups(300, max_parallelism=1000, int_type="int"),
        SparkHashPartitioning(200),
        SparkHashPartitioning(13, int_type="int"),
        ConsistentHashRing(10),
        ConsistentHashRing(3, virtual_nodes=5),
    ]


def int_range(fb: FallbackHash) -> tuple[int, int]:
    return (INT32_MIN, INT32_MAX) if getattr(fb, "int_type", "long") == "int" else (INT64_MIN, INT64_MAX)


# ---------------------------------------------------------------------------------------------
# Vectors published by, or generated from, the engines.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # apache/kafka clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java#testMurmur2
        ("21", -973932308),
        ("foobar", -790332482),
        ("a-little-bit-long-string", -985981536),
        ("a-little-bit-longer-string", -1486304829),
        ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        ("abc", 479470107),
        ("", 275646681),  # other ports' extra vector
    ],
)
def test_kafka_murmur2_matches_kafka_utils_test(text, expected):
    assert kafka_murmur2(text.encode("utf-8")) == expected
    assert KafkaPartitioner(1000).instance_of(text) == (expected & 0x7FFFFFFF) % 1000


# anchors.md section 1.1: Flink M=128 p=4, Kafka 12 partitions, Storm 4 tasks.
ANCHORS = [
    # key, String.hashCode, Flink key group, Flink subtask, Kafka partition, Storm task index
    ("hello", 99162322, 35, 1, 9, 1),
    ("#bigdata", 754126631, 86, 2, 4, 2),
    ("paris", 106437003, 91, 2, 11, 2),
    ("", 0, 94, 2, 9, 3),
    ("a", 97, 81, 2, 4, 0),
    ("user_42", -147134606, 42, 1, 10, 1),
    ("Grenoble", 278222720, 98, 3, 7, 3),
]


@pytest.mark.parametrize(("key", "hash_code", "group", "subtask", "partition", "task"), ANCHORS)
def test_anchor_vectors(key, hash_code, group, subtask, partition, task):
    flink = FlinkKeyGroups(4)
    assert flink.max_parallelism == 128
    assert java_hash_code(key) == hash_code
    assert flink.key_group(key) == group
    assert flink.instance_of(key) == subtask
    assert KafkaPartitioner(12).instance_of(key) == partition
    assert StormFieldsGrouping(4).instance_of(key) == task


def test_anchor_long_key():
    assert java_hash_code(1234567890123) == 1912276436
    assert FlinkKeyGroups(4).key_group(1234567890123) == 92
    assert FlinkKeyGroups(4).instance_of(1234567890123) == 2


# feasibility.md section 5: Flink maxParallelism 128, parallelism 6. The int rows 0, 1, 42, -7 are
# Java Integer keys; 123456789 is a Long.
FLINK_M128_P6 = [
    ("abc", "long", 96354, 115, 5),
    ("foobar", "long", -1268878963, 114, 5),
    ("user42", "long", -836031607, 74, 3),
    ("", "long", 0, 94, 4),
    (0, "int", 0, 94, 4),
    (1, "int", 1, 86, 4),
    (42, "int", 42, 29, 1),
    (-7, "int", -7, 33, 1),
    (123456789, "long", 123456789, 81, 3),
]


@pytest.mark.parametrize(("key", "int_type", "hash_code", "group", "subtask"), FLINK_M128_P6)
def test_flink_feasibility_vectors(key, int_type, hash_code, group, subtask):
    flink = FlinkKeyGroups(6, max_parallelism=128, int_type=int_type)
    assert java_hash_code(key, int_type=int_type) == hash_code
    assert flink.key_group(key) == group
    assert flink.instance_of(key) == subtask


def test_python_int_is_java_long_by_default():
    # Long.hashCode == Integer.hashCode on 0 .. 2**31 - 1; they differ on negatives (~v for Long)
    for v in (0, 1, 42, INT32_MAX):
        assert java_hash_code(v) == java_hash_code(v, int_type="int") == v
        assert FlinkKeyGroups(6, 128).instance_of(v) == FlinkKeyGroups(6, 128, int_type="int").instance_of(v)
    assert java_hash_code(-7) == 6
    assert FlinkKeyGroups(6, 128).key_group(-7) == FlinkKeyGroups(6, 128).key_group(6) != 33


# Generated once with javac 17: the JDK's own String/Long/Integer.hashCode, Arrays.deepHashCode and
# Math.floorMod, with Kafka's Utils.murmur2 and Flink's MathUtils.murmurHash / KeyGroupRangeAssignment
# copied from their sources. Storm: 7 tasks; Flink: parallelism 5 and 300 with the default max
# parallelism (128 and 512); Kafka: 12 partitions, String/Long/IntegerSerializer bytes.
JDK_VECTORS = [
    # key, int_type, hashCode, storm(7), flink p=5 (group, subtask), p=300 (group, subtask), murmur2, kafka(12)
    ("🙂", "long", 1772965, 1, 67, 2, 451, 264, 925250799, 3),
    ("a🙂b", "long", 57851740, 5, 1, 0, 129, 75, 854596723, 7),
    ("𝄞music", "long", 1496085755, 6, 24, 0, 280, 164, 1876597754, 2),
    ("\U0010ffff", "long", 1803232, 0, 35, 1, 35, 20, 1180403631, 3),
    ("Grüße, 中文!", "long", -854366628, 0, 55, 2, 311, 182, -775253969, 3),
    ("#日本語ハッシュタグ", "long", 1287120583, 3, 5, 0, 5, 2, -1326428986, 10),
    (-1, "long", 0, 3, 94, 3, 478, 280, 185950397, 5),
    (-7, "long", 6, 2, 18, 0, 146, 85, -2061866734, 10),
    (2**31, "long", -(2**31), 1, 108, 4, 108, 63, 394182092, 8),
    (INT64_MAX, "long", -(2**31), 1, 108, 4, 108, 63, -1236687672, 8),
    (INT64_MIN, "long", -(2**31), 1, 108, 4, 108, 63, 1290709624, 4),
    (-1234567890123, "long", 1912276437, 4, 30, 1, 30, 17, 212215969, 1),
    (-1, "int", -1, 2, 80, 3, 336, 196, 644171429, 5),
    (-7, "int", -7, 3, 33, 1, 417, 244, 1512427270, 10),
    (INT32_MAX, "int", INT32_MAX, 0, 62, 2, 190, 111, -1009756325, 3),
    (INT32_MIN, "int", INT32_MIN, 1, 108, 4, 108, 63, -65415266, 6),
]


@pytest.mark.parametrize(("key", "int_type", "hc", "storm", "g5", "s5", "g300", "s300", "mm2", "kafka"), JDK_VECTORS)
def test_jdk_generated_vectors(key, int_type, hc, storm, g5, s5, g300, s300, mm2, kafka):
    assert java_hash_code(key, int_type=int_type) == hc
    assert StormFieldsGrouping(7, int_type=int_type).instance_of(key) == storm
    flink5, flink300 = FlinkKeyGroups(5, int_type=int_type), FlinkKeyGroups(300, int_type=int_type)
    assert (flink300.max_parallelism, flink5.max_parallelism) == (512, 128)
    assert (flink5.key_group(key), flink5.instance_of(key)) == (g5, s5)
    assert (flink300.key_group(key), flink300.instance_of(key)) == (g300, s300)
    if isinstance(key, str):
        data = key.encode("utf-8")
    else:
        data = key.to_bytes(4 if int_type == "int" else 8, "big", signed=True)
    assert kafka_murmur2(data) == mm2
    assert KafkaPartitioner(12, int_type=int_type).instance_of(key) == kafka


@pytest.mark.parametrize(
    ("p", "expected"), [(1, 128), (4, 128), (85, 128), (86, 256), (1000, 2048), (21845, 32768), (32768, 32768)]
)
def test_flink_default_max_parallelism(p, expected):
    assert FlinkKeyGroups(p).max_parallelism == expected


def test_flink_subtasks_own_contiguous_key_group_ranges():
    p, m = 6, 128
    flink = FlinkKeyGroups(p, max_parallelism=m)
    owner = [group * p // m for group in range(m)]
    for i in range(p):
        start, end = (i * m + p - 1) // p, ((i + 1) * m - 1) // p  # KeyGroupRangeAssignment
        assert [g for g in range(m) if owner[g] == i] == list(range(start, end + 1))
    keys = [f"key{i}" for i in range(2000)]
    assert [owner[flink.key_group(k)] for k in keys] == flink.instances_of(keys).tolist()


def test_storm_int_keys_go_round_robin():
    # fields grouping does not mix bits: floorMod(31 + v, n) for small Long keys
    assert StormFieldsGrouping(4).instances_of(np.arange(8)).tolist() == [3, 0, 1, 2, 3, 0, 1, 2]


# ---------------------------------------------------------------------------------------------
# Oracles: kafka-python and Spark itself.
# ---------------------------------------------------------------------------------------------


def test_kafka_matches_kafka_python():
    rng = np.random.default_rng(11)
    strings = random_strings(rng, 3000, [0, 1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 100])
    longs = random_ints(rng, 1000)
    ints = random_ints(rng, 500, INT32_MIN, INT32_MAX)
    for fb, keys, data in [
        (KafkaPartitioner(1000), strings, [s.encode("utf-8") for s in strings]),
        (KafkaPartitioner(1000), longs, [struct.pack(">q", v) for v in longs.tolist()]),
        (KafkaPartitioner(1000, int_type="int"), ints, [struct.pack(">i", v) for v in ints.tolist()]),
    ]:
        expected = [(kafka_python_murmur2(b) & 0x7FFFFFFF) % 1000 for b in data]
        assert fb.instances_of(keys).tolist() == expected
        assert [kafka_murmur2(b) & 0xFFFFFFFF for b in data[:300]] == [kafka_python_murmur2(b) for b in data[:300]]


# ---------------------------------------------------------------------------------------------
# Determinism, vectorized == scalar, input containers.
# ---------------------------------------------------------------------------------------------

PROBE_KEYS = ["hello", "", "Grüße", "🙂🚀", "x" * 1000, 0, -1, INT64_MAX, INT64_MIN, 123456789]
PROBE_FALLBACKS = [
    {"engine": e, "n_instances": 7, "parameters": {}} for e in ("kafka", "storm", "flink", "spark", "ring")
]
PROBE_SCRIPT = """
import json, sys
from locality.hashing import fallback_from_dict
keys, dicts = json.loads(sys.stdin.read())
print(json.dumps([fallback_from_dict(d).instances_of(keys).tolist() for d in dicts]
                 + [[fallback_from_dict(d).instance_of(k) for k in keys] for d in dicts]))
"""


def test_same_instances_in_processes_with_other_hash_seeds():
    expected = [fallback_from_dict(d).instances_of(PROBE_KEYS).tolist() for d in PROBE_FALLBACKS] * 2
    payload = json.dumps([PROBE_KEYS, PROBE_FALLBACKS])
    runs = []
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        cmd = [sys.executable, "-c", PROBE_SCRIPT]
        runs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for run in runs:
        out, _ = run.communicate(payload, timeout=60)
        assert run.returncode == 0
        assert json.loads(out) == expected


@pytest.fixture(scope="module")
def mixed_keys():
    rng = np.random.default_rng(2024)
    strings = random_strings(rng, 1500, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 16, 17, 24, 30, 64, 257])
    strings += random_strings(rng, 40, [1000, 3001, 5000])  # long keys, hashed with numpy rounds
    return strings, random_ints(rng, 1500)


@pytest.mark.parametrize("fb", all_fallbacks(), ids=repr)
def test_vectorized_equals_scalar(fb, mixed_keys):
    strings, ints = mixed_keys
    low, high = int_range(fb)
    ints = ints[(ints >= low) & (ints <= high)]
    assert fb.instances_of(strings).tolist() == [fb.instance_of(k) for k in strings]
    assert fb.instances_of(ints).tolist() == [fb.instance_of(k) for k in ints.tolist()]
    mixed = strings[:500] + ints[:500].tolist()
    order = np.random.default_rng(3).permutation(len(mixed))
    mixed = [mixed[i] for i in order]
    assert fb.instances_of(mixed).tolist() == [fb.instance_of(k) for k in mixed]
    # a few very long keys among many short ones: the longest are finished one by one
    outliers = strings[:300] + ["€" * 20000, "🙂" * 7001, "a" * 40001]
    assert fb.instances_of(outliers).tolist() == [fb.instance_of(k) for k in outliers]
    assert fb.instances_of([]).tolist() == []
    assert fb.instances_of(np.array([], dtype=np.int64)).dtype == np.int64
    result = fb.instances_of(strings)
    assert result.dtype == np.int64 and result.min() >= 0 and result.max() < fb.n_instances


@pytest.mark.parametrize("fb", [KafkaPartitioner(12), FlinkKeyGroups(6), ConsistentHashRing(5)], ids=repr)
def test_every_container_gives_the_same_instances(fb):
    words = ["hello", "", "paris", "🙂", "Grüße", "#bigdata"] * 5
    numbers = [0, -1, 42, INT64_MAX, INT64_MIN, 7] * 5
    expected_words = [fb.instance_of(k) for k in words]
    expected_numbers = [fb.instance_of(k) for k in numbers]
    word_inputs = [
        words,
        tuple(words),
        iter(words),
        np.array(words, dtype=object),
        np.array(words),
        pd.Series(words),
        pd.Series(words, dtype="string"),
        pd.Series(words, dtype="category"),
        pa.array(words),
        pa.array(words, type=pa.large_string()),
        pa.array(words, type=pa.string_view()),
        pa.chunked_array([words[:7], words[7:]]),
        pa.array(["skip"] + words)[1:],
        pa.array(words).dictionary_encode(),
        [np.str_(w) for w in words],
    ]
    for keys in word_inputs:
        assert fb.instances_of(keys).tolist() == expected_words, type(keys)
    number_inputs = [
        numbers,
        np.array(numbers, dtype=np.int64),
        np.array(numbers, dtype=object),
        [np.int64(v) for v in numbers],
        pd.Series(numbers),
        pd.Series(numbers, dtype="Int64"),
        pa.array(numbers),
        pa.array(numbers)[2:],
    ]
    for keys in number_inputs:
        assert fb.instances_of(keys).tolist() == expected_numbers[len(numbers) - len(keys) :], type(keys)
    small = np.arange(-5, 30)
    for dtype in (np.int8, np.int32, np.uint16, np.uint64):
        values = small[small >= 0] if np.dtype(dtype).kind == "u" else small
        assert fb.instances_of(values.astype(dtype)).tolist() == [fb.instance_of(int(v)) for v in values]


# ---------------------------------------------------------------------------------------------
# Serialization and construction.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fb", all_fallbacks(), ids=repr)
def test_to_dict_round_trip(fb):
    d = fb.to_dict()
    assert set(d) == {"engine", "n_instances", "parameters"} and d["engine"] in ENGINES
    again = fallback_from_dict(json.loads(json.dumps(d)))
    assert again == fb and hash(again) == hash(fb) and type(again) is type(fb)
    assert make_fallback(d["engine"], d["n_instances"], **d["parameters"]) == fb
    assert eval(repr(fb)) == fb
    assert pickle.loads(pickle.dumps(fb)) == fb  # how Spark ships a fallback to its executors
    keys = ["a", "b", "c", 1, 2, 3]
    assert again.instances_of(keys).tolist() == fb.instances_of(keys).tolist()


def test_to_dict_contents_and_equality():
    assert FlinkKeyGroups(4).to_dict() == {
        "engine": "flink",
        "n_instances": 4,
        "parameters": {"max_parallelism": 128, "int_type": "long"},
    }
    assert FlinkKeyGroups(4) == FlinkKeyGroups(4, max_parallelism=128)
    assert FlinkKeyGroups(4) != FlinkKeyGroups(4, max_parallelism=256)
    assert KafkaPartitioner(4) != KafkaPartitioner(4, int_type="int")
    assert KafkaPartitioner(4) != StormFieldsGrouping(4)
    assert ConsistentHashRing(4).to_dict() == {"engine": "ring", "n_instances": 4, "parameters": {"virtual_nodes": 128}}
    assert fallback_from_dict({"engine": "kafka", "n_instances": 3}) == KafkaPartitioner(3)
    assert {type(make_fallback(e, 2)).engine for e in ENGINES} == set(ENGINES)


# ---------------------------------------------------------------------------------------------
# Bad input.
# ---------------------------------------------------------------------------------------------


def test_n_instances_must_be_positive():
    with pytest.raises(InvalidParameterError) as err:
        KafkaPartitioner(0)
    assert str(err.value) == "the 'n_instances' parameter of KafkaPartitioner must be an int >= 1; got 0"
    for bad in (-3, 2.0, "4", None, True):
        with pytest.raises(InvalidParameterError, match="'n_instances' parameter of StormFieldsGrouping"):
            StormFieldsGrouping(bad)
    with pytest.raises(InvalidParameterError, match=r"of FlinkKeyGroups must be an int >= 1 and <= 32768; got 32769"):
        FlinkKeyGroups(32769)


def test_flink_max_parallelism_below_parallelism():
    with pytest.raises(InvalidParameterError) as err:
        FlinkKeyGroups(6, max_parallelism=4)
    expected = "the 'max_parallelism' parameter of FlinkKeyGroups must be an int >= 6 and <= 32768; got 4"
    assert str(err.value) == expected
    with pytest.raises(InvalidParameterError, match="<= 32768; got 40000"):
        FlinkKeyGroups(6, max_parallelism=40000)


def test_unknown_engine_and_parameters():
    with pytest.raises(InvalidParameterError) as err:
        make_fallback("pulsar", 4)
    assert str(err.value) == (
        "the 'engine' parameter of make_fallback must be one of "
        "['flink', 'kafka', 'pyflink', 'ring', 'spark', 'storm']; got 'pulsar'"
    )
    with pytest.raises(InvalidParameterError, match="'max_parallelism' parameter of make_fallback is not accepted"):
        make_fallback("kafka", 4, max_parallelism=128)
    with pytest.raises(InvalidParameterError, match="'int_type' parameter of SparkHashPartitioning must be one of"):
        SparkHashPartitioning(4, int_type="short")
    with pytest.raises(InvalidParameterError, match="'virtual_nodes' parameter of ConsistentHashRing"):
        ConsistentHashRing(4, virtual_nodes=0)
    with pytest.raises(InvalidParameterError, match="'engine' parameter of make_fallback"):
        fallback_from_dict({"engine": "pulsar", "n_instances": 4})
    for bad in ({"engine": "kafka"}, {"engine": "kafka", "n_instances": 2, "seed": 1}, ["kafka", 2]):
        with pytest.raises(SerializationError, match="a fallback dict has the fields"):
            fallback_from_dict(bad)
    with pytest.raises(SerializationError, match="'parameters' of a fallback dict must be a mapping"):
        fallback_from_dict({"engine": "kafka", "n_instances": 2, "parameters": [1]})


@pytest.mark.parametrize(
    ("key", "shown"),
    [(None, "NoneType (None)"), (1.5, "float (1.5)"), (b"ab", "bytes (b'ab')"), (True, "bool (True)"), ((1,), "tuple")],
)
def test_unsupported_key_type(key, shown):
    for fb in all_fallbacks()[::2]:
        owner = type(fb).__name__
        with pytest.raises(InvalidParameterError) as err:
            fb.instance_of(key)
        assert str(err.value).startswith(f"the 'key' parameter of {owner}.instance_of must be a str or an int; got ")
        assert shown in str(err.value)
        with pytest.raises(InvalidParameterError) as err:
            fb.instances_of(["ok", 3, key])
        expected = f"the 'keys' parameter of {owner}.instances_of must hold only str or int keys; got "
        assert str(err.value).startswith(expected) and str(err.value).endswith("at position 2")
    with pytest.raises(InvalidParameterError, match=r"FlinkKeyGroups.key_group must be a str or an int; got float"):
        FlinkKeyGroups(4).key_group(2.5)


def test_bad_key_batches():
    kafka = KafkaPartitioner(4)
    cases = [
        (np.array([1.0, 2.0]), "a numpy array of dtype float64"),
        (np.array([b"a"]), "a numpy array of dtype |S1"),
        (pa.array([1.5]), "a pyarrow array of type double"),
        (pa.array(["a", None]), "a null key at position 1"),
        (pd.Series([1, None], dtype="Int64"), "a null key at position 1"),
        ([1, 2**64], "18446744073709551616 at position 1, outside the int64 range"),
        (["a", 2**63], "9223372036854775808 at position 1, outside the int64 range"),
        (np.array([1, 2**63], dtype=np.uint64), "9223372036854775808 at position 1, outside the int64 range"),
    ]
    for keys, message in cases:
        with pytest.raises(InvalidParameterError) as err:
            kafka.instances_of(keys)
        assert str(err.value).endswith(message), str(err.value)
    for keys in ("abc", b"abc", 5):
        with pytest.raises(InvalidParameterError, match="must be a list, numpy array, pandas Series or pyarrow Array"):
            kafka.instances_of(keys)
    with pytest.raises(InvalidParameterError, match="must be one-dimensional; got 2-d"):
        kafka.instances_of(np.zeros((2, 2), dtype=np.int64))


def test_int_keys_must_fit_the_java_type():
    with pytest.raises(InvalidParameterError) as err:
        KafkaPartitioner(4, int_type="int").instance_of(2**31)
    expected = (
        "the 'key' parameter of KafkaPartitioner.instance_of must be an int >= -2147483648 and <= 2147483647; "
        "got 2147483648"
    )
    assert str(err.value) == expected
    with pytest.raises(
        InvalidParameterError, match=r"must hold ints >= -2147483648 and <= 2147483647; got -2147483649 at position 2"
    ):
        StormFieldsGrouping(4, int_type="int").instances_of(["a", 1, -(2**31) - 1])
    with pytest.raises(InvalidParameterError, match="<= 9223372036854775807; got 9223372036854775808"):
        ConsistentHashRing(4).instance_of(2**63)
    with pytest.raises(InvalidParameterError, match="java_hash_code must be an int >= -2147483648"):
        java_hash_code(2**40, int_type="int")


def test_lone_surrogates_are_rejected():
    for fb in (KafkaPartitioner(4), FlinkKeyGroups(4), ConsistentHashRing(4)):
        with pytest.raises(
            InvalidParameterError, match="must hold valid Unicode text; got a string with a lone surrogate"
        ):
            fb.instance_of("a\ud800")
        with pytest.raises(InvalidParameterError, match="lone surrogate: 'b\\\\udfff'"):
            fb.instances_of(["ok", "b\udfff"])
    with pytest.raises(InvalidParameterError, match="'data' parameter of kafka_murmur2 must be bytes; got str"):
        kafka_murmur2("abc")


# ---------------------------------------------------------------------------------------------
# Consistent-hash ring.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 4, 8, 20])
def test_ring_growth_moves_only_keys_to_the_new_instance(n):
    rng = np.random.default_rng(n)
    keys = random_strings(rng, 12000, list(range(1, 20))) + rng.integers(INT64_MIN, INT64_MAX, 8000).tolist()
    before, after = ConsistentHashRing(n).instances_of(keys), ConsistentHashRing(n + 1).instances_of(keys)
    moved = before != after
    assert (after[moved] == n).all()  # every moved key went to the new instance...
    assert (after == n).sum() == moved.sum()  # ...and it holds nothing else
    share = moved.mean()
    assert 0.6 / (n + 1) < share < 1.4 / (n + 1)


def test_ring_spreads_keys_evenly():
    keys = [f"user{i}" for i in range(50000)]
    loads = np.bincount(ConsistentHashRing(10).instances_of(keys), minlength=10)
    assert loads.max() / loads.mean() < 1.3
    assert ConsistentHashRing(1).instances_of(keys[:100]).tolist() == [0] * 100


@pytest.mark.parametrize("module", ["base", "kafka", "storm", "flink", "spark", "ring", "jvm"])
def test_docstring_examples(module):
    import doctest
    import importlib

    results = doctest.testmod(importlib.import_module(f"locality.hashing.{module}"))
    assert results.attempted > 0 and results.failed == 0
