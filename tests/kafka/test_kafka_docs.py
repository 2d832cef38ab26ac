"""Every Java block of the Kafka page is copied from the tested sources of ``jvm/locality-kafka-streams`` and its
examples (``jvm/examples/locality-kafka-streams-examples``)."""

from __future__ import annotations

import re

from tests.jvm.conftest import JVM, KAFKA_EXAMPLES

DOC = JVM.parent / "docs" / "engines" / "kafka.md"
SOURCES = [JVM / module / "src" / "main" / "java" for module in ("locality-kafka-streams", KAFKA_EXAMPLES)]


def test_every_java_block_is_in_the_module_sources():
    blocks = re.findall(r"```java\n(.*?)```", DOC.read_text(), flags=re.S)
    sources = [path.read_text() for folder in SOURCES for path in folder.rglob("*.java")]
    assert len(blocks) >= 3
    for block in blocks:
        assert any(block in source for source in sources), f"not in the sources of {SOURCES}:\n{block}"
