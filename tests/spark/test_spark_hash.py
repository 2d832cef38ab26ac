"""Spark's own hash() is the oracle for the Spark fallback (pmod(murmur3_42(key), n))."""

import numpy as np
from pyspark.sql import functions as F
from pyspark.sql import types as T

from locality.hashing import SparkHashPartitioning
from tests.test_hashing import INT32_MAX, INT32_MIN, random_ints, random_strings


def test_spark_matches_pyspark_hash(spark):
    rng = np.random.default_rng(5)
    n = 300
    strings = random_strings(rng, n, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 33, 120])
    longs = random_ints(rng, n)[:n].tolist()
    ints = random_ints(rng, n, INT32_MIN, INT32_MAX)[:n].tolist()
    schema = T.StructType(
        [T.StructField("s", T.StringType()), T.StructField("l", T.LongType()), T.StructField("i", T.IntegerType())]
    )
    frame = spark.createDataFrame(list(zip(strings, longs, ints)), schema)
    sizes = (13, 2**31 - 1)  # 2**31 - 1 partitions: nearly the whole 32-bit hash
    columns = [F.pmod(F.hash(c), F.lit(size)).alias(f"{c}{size}") for c in "sli" for size in sizes]
    rows = frame.select(*columns).collect()
    for size in sizes:
        assert SparkHashPartitioning(size).instances_of(strings).tolist() == [r[f"s{size}"] for r in rows]
        assert SparkHashPartitioning(size).instances_of(longs).tolist() == [r[f"l{size}"] for r in rows]
        expected = [r[f"i{size}"] for r in rows]
        assert SparkHashPartitioning(size, int_type="int").instances_of(ints).tolist() == expected
