"""Stream engines: how a routing table takes effect in each one (the top layer, beside the router).

One module per engine a Python job runs on, each the counterpart of a
``jvm/`` module for Java jobs:

- :mod:`locality.engines.kafka`: :class:`~locality.engines.kafka.KafkaTablePartitioner`,
  a producer's partitioner that follows the tables (``jvm/locality-kafka-streams``:
  ``TableStreamPartitioner``);
- :mod:`locality.engines.flink`: :class:`~locality.engines.flink.FlinkKeySelector`,
  PyFlink's key selector on surrogates, and the routing file of a Java job
  (``jvm/locality-flink``: ``RoutingKeySelector``, which reads the store);
- :mod:`locality.engines.spark`: :func:`~locality.engines.spark.with_route`, the
  route column of a Structured Streaming query, with per-key state and the
  hand-over of moved keys (no JVM module: Spark jobs follow the store through
  :class:`locality.Router`).

Storm takes the tables in Java only (``jvm/locality-storm``: ``LocalityGrouping``).
Each engine's own hash, which the tables are built on, is a layer below, in
:mod:`locality.hashing`; its names stay importable from here
(``from locality.engines import make_fallback``), as they were before the two
layers were split.
"""

from locality import hashing
from locality.hashing import *  # noqa: F403  (the hash registry, importable from here as before the split)

__all__ = list(hashing.__all__)
