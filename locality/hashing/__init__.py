"""Each stream engine's own key -> instance hash, reproduced bit for bit: what the routing tables are built on.

A routing table lists only the keys whose placement was optimised; every other
key goes to its operator's *fallback hash*, the engine's own placement. One
module per engine (``kafka``, ``storm``, ``flink`` (with ``pyflink``),
``spark``, ``ring``) holds that hash and, where a table needs them, the
reserved keys that steer it (surrogates); they share the hash rounds of
:mod:`locality.hashing.primitives`, the key conversion of
:mod:`locality.hashing.keys` and, for JVM engines, :mod:`locality.hashing.jvm`.
This is the bottom layer: it imports nothing of ``locality`` but errors and
parameter checks. How a table takes effect in an engine is the layer above,
:mod:`locality.engines`. Every engine's hash lives here, not beside its
adapter as in ``jvm/`` (whose engine modules hold both), because the optimizer
builds tables for any engine. Adding an engine is adding a module whose
:class:`FallbackHash` subclass sets ``engine = "name"`` and listing it below.
"""

from locality.hashing import flink, kafka, ring, spark, storm  # noqa: F401  (each registers its engine)
from locality.hashing.base import FallbackHash, fallback_from_dict, make_fallback, registered_engines
from locality.hashing.flink import FlinkKeyGroups, PyFlinkKeyGroups
from locality.hashing.jvm import java_hash_code
from locality.hashing.kafka import KafkaPartitioner, kafka_murmur2
from locality.hashing.ring import ConsistentHashRing
from locality.hashing.spark import SparkHashPartitioning
from locality.hashing.storm import StormFieldsGrouping

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
