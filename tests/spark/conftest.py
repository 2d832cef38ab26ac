"""One local SparkSession for every Spark test (local[2], few shuffle partitions).

It has the jars of Hadoop's ``s3a`` connector the set-up fetched (``make s3a``): a
session takes its jars when it starts, and the S3 tests read traces through ``s3a``
with it. It does not have GraphFrames', whose test checks the driver path on it.
"""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from pipelines.jars import GRAPHFRAMES_JARS, spark_jars

    s3a_jars = sorted(set(spark_jars()) - set(spark_jars(GRAPHFRAMES_JARS)))
    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", ",".join(s3a_jars))
        .appName("locality-tests")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
