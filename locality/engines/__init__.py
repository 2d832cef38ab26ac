"""Stream engines: how a routing table takes effect in each one (the top layer, beside the router).

One module per engine a Python job runs on, each the counterpart of a
``jvm/`` module for Java jobs:

- :mod:`locality.engines.kafka`: :class:`~locality.engines.kafka.TablePartitioner`,
  a producer's partitioner that follows the tables (``jvm/locality-kafka-streams``:
  ``TablePartitioner``);
- :mod:`locality.engines.flink`: :class:`~locality.engines.flink.RoutingKeySelector`,
  PyFlink's key selector on surrogates, and the routing file of a Java job
  (``jvm/locality-flink``: ``RoutingKeySelector``, which reads the store);
- :mod:`locality.engines.spark`: :func:`~locality.engines.spark.with_route`, the
  route column of a Structured Streaming query, with per-key state and the
  hand-over of moved keys (no JVM module: Spark jobs follow the store through
  :class:`locality.Router`).

Storm takes the tables in Java only (``jvm/locality-storm``: ``LocalityGrouping``).
Each engine's own hash, which the tables are built on, is a layer below, in
:mod:`locality.hashing`, and is imported from there only: this package holds
adapters, so that an import says which layer it reaches into.
"""
