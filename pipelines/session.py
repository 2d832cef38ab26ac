"""Building a SparkSession that works here and under ``spark-submit``.

Only entry points call :func:`build_session`; everything else takes the
session as an argument. Under ``spark-submit`` the master, memory, jars and
Hadoop settings come from the submit command and ``getOrCreate`` returns that
session unchanged. An embedded session loads the jars the set-up fetched
(GraphFrames, Hadoop's ``s3a`` connector: :mod:`pipelines.jars`) and points
``s3a`` where the AWS SDKs' standard variables point (:func:`s3a_options`).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from pipelines.jars import spark_jars, spark_jars_dir

__all__ = ["build_session", "interrupt_quietly", "s3a_options", "DEFAULT_MASTER"]

logger = logging.getLogger(__name__)

#: Master used when none is configured (no ``spark-submit``, no ``--master``).
DEFAULT_MASTER = "local[*]"


def build_session(
    app_name: str = "locality", master: str | None = None, driver_memory: str = "2g", log_level: str = "ERROR"
):
    """Return the active SparkSession, or build an embedded one.

    Parameters
    ----------
    app_name : str
    master : str, optional
        Spark master URL; default: what ``spark-submit`` set, else ``local[*]``.
    driver_memory : str, default "2g"
        Driver heap for an embedded session (in local mode the executors live
        in the driver JVM; 512m can hang a job instead of failing it).
    log_level : str, default "ERROR"
        Spark's log level for a session this call builds (the CLI passes
        "OFF" unless ``--debug``: Spark logs a failed task's stack traces).

    Notes
    -----
    Python workers must run the driver's interpreter (not ``python3`` from
    PATH, which may lack the dependencies), so ``PYSPARK_PYTHON`` defaults to
    ``sys.executable``; ``SPARK_LOCAL_IP`` defaults to loopback for an
    embedded session. The console progress bar and the UI are off: the CLI
    shows its own progress on stderr. An embedded session puts the jars of
    :func:`pipelines.jars.spark_jars` (GraphFrames, ``s3a``, fetched by the
    set-up) on ``spark.jars`` and configures ``s3a`` with :func:`s3a_options`;
    under ``spark-submit``, ``--jars`` / ``--packages`` / ``--conf`` do.
    """
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The session of this thread, or the one another thread built: never the builder on an existing
    # session, whose getOrCreate would overwrite its runtime SQL settings (shuffle partitions...).
    try:
        return SparkSession.active()
    except PySparkRuntimeError:  # no session yet: build the embedded one
        pass
    submitted = "SPARK_SUBMIT_OPTS" in os.environ or os.environ.get("PYSPARK_GATEWAY_PORT")
    builder = SparkSession.builder.appName(app_name)
    if master or not submitted:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            builder.master(master or DEFAULT_MASTER)
            .config("spark.driver.memory", driver_memory)
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.ui.enabled", "false")
        )
        jars = spark_jars()
        if jars:
            builder = builder.config("spark.jars", ",".join(jars))
        logger.debug("jars of the embedded session (from %s): %s", spark_jars_dir(), jars or "none")
        for name, value in s3a_options().items():
            builder = builder.config(f"spark.hadoop.{name}", value)
    spark = (
        builder.config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel(log_level)
    logger.info("Spark %s, master %s", spark.version, spark.sparkContext.master)
    return spark


def interrupt_quietly(spark) -> None:
    """On Ctrl-C (SIGINT) in the main thread: cancel the session's jobs from a thread of their own, and stop.

    PySpark's own handler cancels the jobs inside the signal handler, with a py4j call made while the main
    thread is in another one; that call fails and both tracebacks reach the terminal. Here the handler only
    raises KeyboardInterrupt in the main thread (the CLI turns it into one line and exit 130), and the
    cancelling happens beside it, its failures ignored: the JVM may be going away already.
    """
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers belong to the main thread

    def cancel() -> None:
        try:
            spark.sparkContext.cancelAllJobs()
        except Exception:  # noqa: BLE001 - the session may be stopping: nothing more to cancel
            logger.debug("cancelling the Spark jobs after Ctrl-C failed", exc_info=True)

    def handler(_signum, _frame) -> None:
        threading.Thread(target=cancel, name="locality-cancel-jobs", daemon=True).start()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)


def s3a_options() -> dict[str, str]:
    """Hadoop's ``s3a`` settings that reach the S3 the AWS SDKs' standard variables name (:mod:`locality._aws`).

    ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` give the endpoint, with
    buckets addressed by path; the region is always given, as ``s3a`` signs for
    ``us-east-2`` when it has an endpoint and no region; credentials come from
    the AWS SDK's default chain (variables, profiles, web identity, the
    instance's role), where ``s3a``'s own list has no profiles. ``s3://`` is
    served by ``s3a`` too: traces and stores take either scheme.
    """
    from locality._aws import s3_settings

    settings = s3_settings()
    options = {
        "fs.s3a.endpoint.region": settings.region,
        "fs.s3a.aws.credentials.provider": "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider",
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
    }
    if settings.endpoint is not None:
        options |= {"fs.s3a.endpoint": settings.endpoint, "fs.s3a.path.style.access": "true"}
    return options
