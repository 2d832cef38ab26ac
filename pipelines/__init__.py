"""The Spark jobs of locality: thin drivers around the library.

Each job reads a trace with Spark, calls :mod:`locality` per partition
(sketching) and on the driver (partitioning, routing), and writes into the
configuration store. ``run(spark, params)`` does the work with a session it is
given; only the ``locality`` CLI builds one (``locality_job.py`` runs the CLI
under ``spark-submit``). Nothing here imports the CLI.
"""
