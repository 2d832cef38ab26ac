"""Where the JVM jars of the embedded Spark session live (GraphFrames, Hadoop's ``s3a``), and finding them.

The set-up (``make test`` / ``make demo``) runs ``jvm/graphframes/pom.xml`` and
``jvm/s3a/pom.xml``, whose Maven dependency plugin copies GraphFrames' jar for the
installed PySpark, ``hadoop-aws`` of its Hadoop with the AWS SDK modules ``s3a``
loads, and their runtime dependencies into one directory: ``$LOCALITY_SPARK_JARS``,
by default ``$XDG_CACHE_HOME/locality/jars`` (``~/.cache/locality/jars``). The directory is
outside the source tree and the virtualenv on purpose: an editable install and a
wheel install find it at the same place, checkouts share it, and a job never
resolves anything when its session starts. :func:`pipelines.session.build_session`
puts every jar found there on ``spark.jars``; under ``spark-submit`` the
submitter's ``--jars`` / ``--packages`` decide instead.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["JARS_ENV", "GRAPHFRAMES_JARS", "spark_jars_dir", "spark_jars"]

#: Environment variable naming the jar directory (the Makefile reads the same one).
JARS_ENV = "LOCALITY_SPARK_JARS"
#: The names of GraphFrames' jars in it (the rest is the ``s3a`` connector's).
GRAPHFRAMES_JARS = "graphframes-*.jar"


def spark_jars_dir() -> Path:
    """The directory the set-up copies the session's jars into (it may not exist)."""
    named = os.environ.get(JARS_ENV)
    if named:
        return Path(named).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "locality" / "jars"


def spark_jars(pattern: str = "*.jar") -> list[str]:
    """Paths of the jars in :func:`spark_jars_dir` whose names match ``pattern``, sorted; empty when there are none."""
    directory = spark_jars_dir()
    return sorted(str(p) for p in directory.glob(pattern)) if directory.is_dir() else []
