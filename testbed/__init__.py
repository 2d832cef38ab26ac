"""A testbed of emulated servers on one machine, and the engines run across them.

- :mod:`testbed.network`: servers as network namespaces on a bridge, links shaped by ``tc``,
  link counters, a mount namespace per server (with ``private_files``, servers that share nothing
  but the network), teardown that leaves nothing behind;
- :mod:`testbed.s3server`: an S3 server, on loopback or on a server of its own;
- :mod:`testbed.spark`: a Spark standalone cluster across the servers;
- :mod:`testbed.flink`: a Flink standalone cluster across the servers and its jobs' measurements;
- :mod:`testbed.kafka`: a Kafka broker in one of the servers.

``python -m testbed clean`` removes what killed runs left behind. Root only (``ip netns``, ``tc``, ``mount``).
"""

from testbed.network import HEADER_BYTES, LinkCounters, Server, Testbed, TestbedError, clean_leftovers, leftovers

__all__ = ["HEADER_BYTES", "LinkCounters", "Server", "Testbed", "TestbedError", "clean_leftovers", "leftovers"]
