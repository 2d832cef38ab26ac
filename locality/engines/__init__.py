"""Stream engines: each one's own key -> instance hash, and how a routing table takes effect in it.

One module per engine (``kafka``, ``storm``, ``flink`` (with ``pyflink``), ``spark``, ``ring``)
holds that engine's fallback hash, reproduced bit for bit, and what a job on
that engine needs to follow a routing table. The modules share the hash rounds
of :mod:`locality.engines.primitives`, the key conversion of
:mod:`locality.engines.keys` and, for JVM engines, :mod:`locality.engines.jvm`.
Adding an engine is adding a module whose :class:`FallbackHash` subclass sets
``engine = "name"`` and listing it below.
"""

from locality.engines import flink, kafka, ring, spark, storm  # noqa: F401  (each registers its engine)
from locality.engines.base import FallbackHash, fallback_from_dict, make_fallback, registered_engines
from locality.engines.flink import FlinkKeyGroups, PyFlinkKeyGroups
from locality.engines.jvm import java_hash_code
from locality.engines.kafka import KafkaPartitioner, kafka_murmur2
from locality.engines.ring import ConsistentHashRing
from locality.engines.spark import SparkHashPartitioning
from locality.engines.storm import StormFieldsGrouping

#: Names accepted by :func:`make_fallback`, one per engine.
ENGINES = registered_engines()

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
