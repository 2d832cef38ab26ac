"""A Kafka broker in one of the testbed's servers: KRaft, one node, bound to that server's address.

The Kafka tests' broker (``tests/kafka/conftest.py``: Maven Central's ``kafka_2.13`` jars, listed by the
build in ``broker-classpath.txt``, one node acting as broker and KRaft controller, every internal topic
with one replica) run inside a server of a :class:`~testbed.network.Testbed`, as a broker runs on a
machine of its own: it listens on the server's address (:data:`PORT`, its controller on
:data:`CONTROLLER_PORT`) and advertises it, its configuration and log directory are in the server's own
files (:data:`ROOT`, under its ``/tmp``: with private files, no other server and not the host see them),
its console goes to a host file. The other servers reach it at :attr:`TestbedBroker.bootstrap`; the
host does not reach any server, so every client runs inside one (``bed.call_in(server, ...)``: a
librdkafka client made by a thread that entered a server makes its connections from there).

Use it as a context manager: :meth:`TestbedBroker.start` formats the log directory, starts the broker
and waits (bounded) until it answers a metadata request from inside its server; leaving the block stops
it (SIGTERM, then SIGKILL after a bound), also when the block failed. A broker that exits or does not
answer in time raises with the tail of its console. The testbed's own teardown kills it too.
"""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

from testbed.jvm import JVM, java
from testbed.network import Server, Testbed

logger = logging.getLogger(__name__)

__all__ = [
    "BROKER_CLASSPATH",
    "CLUSTER_ID",
    "JVM_OPTIONS",
    "PORT",
    "TestbedBroker",
    "broker_properties",
    "stop_process",
]

#: The broker's jars: Maven Central's ``kafka_2.13``, listed by the build of the Kafka Streams examples.
BROKER_CLASSPATH = JVM / "examples" / "locality-kafka-streams-examples" / "target" / "broker-classpath.txt"
#: A fixed cluster id: 16 bytes in Kafka's URL-safe base64, as ``kafka-storage random-uuid`` prints one.
CLUSTER_ID = "bG9jYWxpdHktdGVzdHMhIQ"
#: JVM options of the broker and the apps: small heaps, one GC thread (2 cores shared by everything).
JVM_OPTIONS = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]

PORT, CONTROLLER_PORT = 9092, 9093
#: The broker's folder in its server's files (``{run}``: the testbed run's name, so that runs seeing the
#: host's ``/tmp`` do not share it).
ROOT = "/tmp/locality-kafka-{run}"
#: Bounds (seconds): formatting the log directory, the broker's start until it answers, its stop.
START_TIMEOUT = 180.0
STOP_TIMEOUT = 30.0


def broker_properties(data: Path, port: int, controller_port: int, host: str = "127.0.0.1") -> str:
    """One node acting as broker and KRaft controller on ``host``, every internal topic with one replica and partition.

    ``data`` is the log directory as the broker sees its files (a testbed server's own: :mod:`testbed.kafka`).
    """
    settings = {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": f"1@{host}:{controller_port}",
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": data,
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
    }
    return "".join(f"{name}={value}\n" for name, value in settings.items())


def stop_process(process: subprocess.Popen, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM (a clean shutdown), then SIGKILL past ``timeout`` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)


class TestbedBroker:
    """A one-node KRaft broker in ``server``; its console in the host file ``log``.

    Parameters
    ----------
    bed : Testbed
    server : Server
        Where it runs and listens (``server.address``, port :data:`PORT`).
    log : Path
        A host file: the broker's console (the broker does not see it).
    """

    __test__ = False

    def __init__(self, bed: Testbed, server: Server, log: Path) -> None:
        self.bed = bed
        self.server = server
        self.log = Path(log)
        self.root = ROOT.format(run=bed.name)
        self.process = None

    @property
    def bootstrap(self) -> str:
        """``host:port`` of the broker, reachable from inside the testbed's servers."""
        return f"{self.server.address}:{PORT}"

    def start(self) -> TestbedBroker:
        """Write the configuration into the server, format the log directory, start the broker; wait for an answer."""
        if not BROKER_CLASSPATH.is_file():
            raise FileNotFoundError(f"the Kafka broker's classpath {BROKER_CLASSPATH} is missing: run `make test`")
        config = f"{self.root}/server.properties"
        properties = broker_properties(Path(self.root) / "data", PORT, CONTROLLER_PORT, host=self.server.address)
        self.bed.write_file(self.server, config, properties.encode())
        command = [java(), *JVM_OPTIONS, "-cp", BROKER_CLASSPATH.read_text().strip()]
        formatted = self.bed.run(
            self.server,
            [*command, "kafka.tools.StorageTool", "format", "-t", CLUSTER_ID, "-c", config],
            timeout=START_TIMEOUT,
            check=False,
            cwd=self.root,
        )
        if formatted.returncode != 0:
            raise RuntimeError(f"formatting the broker's storage failed:\n{formatted.stdout}{formatted.stderr}")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.process = self.bed.spawn(self.server, [*command, "kafka.Kafka", config], log=self.log, cwd=self.root)
        self._wait_until_answers()
        logger.info("Kafka broker up in %s at %s", self.server.namespace, self.bootstrap)
        return self

    def _wait_until_answers(self) -> None:
        from confluent_kafka.admin import AdminClient

        def answers() -> bool:
            admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
            try:
                return bool(admin.list_topics(timeout=5).brokers)
            except Exception:  # not listening yet, or not answering metadata yet
                return False

        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited with {self.process.returncode}:\n{self._log_tail()}")
            if self.bed.call_in(self.server, answers, timeout=30):
                return
            time.sleep(0.5)
        raise TimeoutError(f"the Kafka broker did not answer within {START_TIMEOUT:.0f} s:\n{self._log_tail()}")

    def create_topic(self, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
        """Create ``name`` with ``partitions`` partitions (one replica), from inside the broker's server."""
        from confluent_kafka.admin import AdminClient, NewTopic

        def create() -> None:
            admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
            topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})
            admin.create_topics([topic])[name].result(timeout=60)

        self.bed.call_in(self.server, create, timeout=90)

    def stop(self) -> None:
        """Stop the broker (SIGTERM, SIGKILL past :data:`STOP_TIMEOUT`); its files go with its server."""
        if self.process is not None:
            stop_process(self.process, timeout=STOP_TIMEOUT)

    def _log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.is_file() else ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> TestbedBroker:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
