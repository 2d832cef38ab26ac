"""The engines' drop-in jars hold the library alone, relocated; each engine page quotes a program the build compiles.

``mvn -f jvm/pom.xml install`` builds, for Flink, Kafka Streams and Storm, the module's drop-in jar
(``target/MODULE-0.1.0-shaded.jar``): the module and locality-core, Jackson and the AWS SDK relocated under
``io.locality.shaded``, the engine left out. Every example app and test helper lives in ``jvm/examples``,
compiled against those jars. Each engine page shows a complete program on its jar as the whole of a source
file of ``jvm/examples``: the page's block must be that file, byte for byte. The Flink one also runs here, on
a MiniCluster, from the drop-in jar.
"""

from __future__ import annotations

import collections
import re
import zipfile

import pytest

from locality.counts import count_keys
from locality.optimizer import make_fallbacks, optimize
from locality.store import ConfigStore
from locality.topology import Topology
from tests.jvm.conftest import FLINK_EXAMPLES, JVM, TWEET_MAX_PARALLELISM, run_java

PAGES = {engine: JVM.parent / "docs" / "engines" / f"{engine}.md" for engine in ("flink", "kafka", "storm")}
JARS = {
    "flink": JVM / "locality-flink" / "target" / "locality-flink-0.1.0-shaded.jar",
    "kafka": JVM / "locality-kafka-streams" / "target" / "locality-kafka-streams-0.1.0-shaded.jar",
    "storm": JVM / "locality-storm" / "target" / "locality-storm-0.1.0-shaded.jar",
}
WHOLE_FILE = re.compile(r"<!-- the whole of (\S+) -->\n```java\n(.*?)```", flags=re.S)
#: The apps, jobs and helpers of ``jvm/examples``: none may be in a library jar.
NOT_LIBRARY = {
    "TwoStageJob", "TwoStageCountsApp", "TwoStageCounts", "CountByKey", "SwitchingTwoStageCounts", "KeyedChainTopology",
    "OutageTopologies", "RouteKeys", "PrintRoutingKeys", "PrintSurrogates", "ReplayJob", "HashtagCounts",
    "HashtagTopology", "Tables", "PublishSketches", "RetainedMetrics", "Sketching",
}  # fmt: skip


def built(path):
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `make test` or `mvn -f {JVM}/pom.xml install`", pytrace=False)
    return path


@pytest.mark.parametrize("engine", sorted(PAGES))
def test_each_page_shows_a_whole_program_the_build_compiles(engine):
    quoted = WHOLE_FILE.findall(PAGES[engine].read_text())
    assert len(quoted) == 1, f"{PAGES[engine]} quotes {len(quoted)} whole files"
    source, block = quoted[0]
    assert source.startswith("jvm/examples/") and "/src/main/java/" in source
    assert block == (JVM.parent / source).read_text(), f"the block of {PAGES[engine]} is not {source}"
    module = JVM.parent / source.split("/src/")[0]
    compiled = module / "target" / "classes" / source.split("/src/main/java/")[1].replace(".java", ".class")
    assert built(compiled).stat().st_mtime >= (JVM.parent / source).stat().st_mtime, f"{source} is not compiled"


@pytest.mark.parametrize("engine", sorted(JARS))
def test_a_drop_in_jar_holds_the_library_alone_its_dependencies_relocated(engine):
    with zipfile.ZipFile(built(JARS[engine])) as jar:
        names = jar.namelist()
    classes = [n for n in names if n.endswith(".class")]
    assert classes and all(n.startswith("io/locality/") for n in classes), "every class is ours or relocated"
    packages = collections.Counter(n.split("/")[3] if n.startswith("io/locality/shaded/") else "-" for n in classes)
    assert {"com", "software", "org"} <= set(packages), packages  # Jackson, the AWS SDK, reactive-streams
    assert not any(re.match(r"io/locality/shaded/org/(apache|slf4j)/", n) for n in classes), "no engine, no SLF4J"
    ours = {n.rsplit("/", 1)[1].split("$")[0].removesuffix(".class") for n in classes if "/shaded/" not in n}
    assert not ours & NOT_LIBRARY, ours & NOT_LIBRARY
    assert "io/locality/store/ConfigStore.class" in names and "io/locality/routing/RouteKeys.class" not in names
    services = [n for n in names if n.startswith("META-INF/services/")]
    assert "META-INF/services/io.locality.hashing.FallbackHashProvider" in services
    with zipfile.ZipFile(JARS[engine]) as jar:
        providers = jar.read("META-INF/services/io.locality.hashing.FallbackHashProvider").decode().split()
    assert "io.locality.hashing.RingHashProvider" in providers and len(providers) == 2, providers
    print(f"{JARS[engine].name}: {JARS[engine].stat().st_size / 1e6:.1f} MB, {len(classes):,} classes")


def test_the_flink_page_program_counts_every_hashtag_on_the_drop_in_jar(geotweets, tmp_path):
    half = len(geotweets) // 2
    topology = Topology.uniform(["location", "hashtag"], 6)
    fallbacks = make_fallbacks(topology, "flink", max_parallelism=TWEET_MAX_PARALLELISM)
    config = optimize(count_keys(geotweets.iloc[:half], ["location", "hashtag"]).graph(), topology, fallbacks).config
    store = ConfigStore(tmp_path / "store")
    store.publish(config, fingerprint="tweets-first-half-flink")
    tags = geotweets["hashtag"].iloc[half : half + 300].tolist()
    assert any(tag in config.tables["hashtag"].entries.index for tag in tags)

    done = run_java([FLINK_EXAMPLES], "io.locality.examples.flink.HashtagCounts", store.root, *tags, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    counted = collections.defaultdict(list)
    for line in done.stdout.splitlines():  # the print sink's "subtask> hashtag count"
        tag, count = line.split("> ", 1)[1].rsplit(" ", 1)
        counted[tag].append(int(count))
    sizes = collections.Counter(tags)
    assert {tag: sorted(counts) for tag, counts in counted.items()} == {
        tag: list(range(1, n + 1)) for tag, n in sizes.items()
    }
