"""The ``locality`` command line as a ``spark-submit`` application.

Under ``spark-submit`` the jobs take the session it starts (master, memory,
executors) instead of building a ``local[*]`` one; this script hands its
arguments to the one parser, :func:`locality.cli.main`::

    spark-submit --master yarn --py-files dist/locality-0.1.0-py3-none-any.whl \\
        locality_job.py optimize hdfs:///traces/2026-11-21/ --keys location,hashtag --servers 48 --store /mnt/store

It lives outside the ``locality`` and ``pipelines`` packages on purpose: the
jobs in ``pipelines/`` never import the CLI (the CLI imports them), and a
script's directory goes first on ``sys.path``, where ``pipelines/trace.py``
would hide the standard library's ``trace`` module.
"""

import sys

from locality.cli import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
