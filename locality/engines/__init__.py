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

from locality.hashing import (
    ENGINES,
    ConsistentHashRing,
    FallbackHash,
    FlinkKeyGroups,
    KafkaPartitioner,
    PyFlinkKeyGroups,
    SparkHashPartitioning,
    StormFieldsGrouping,
    fallback_from_dict,
    java_hash_code,
    kafka_murmur2,
    make_fallback,
    registered_engines,
)

__all__ = [
    "ENGINES",
    "FallbackHash",
    "KafkaPartitioner",
    "StormFieldsGrouping",
    "FlinkKeyGroups",
    "PyFlinkKeyGroups",
    "SparkHashPartitioning",
    "ConsistentHashRing",
    "make_fallback",
    "fallback_from_dict",
    "registered_engines",
    "java_hash_code",
    "kafka_murmur2",
]
