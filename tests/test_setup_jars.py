"""``make graphframes``: Maven's jar, else the one in ../shared/jars, and never a jar of a folder it did not fill.

Maven is replaced by ``false`` (it fails at once, as the Maven Central reachable
from the project's machines does for every ``io.graphframes`` artifact), so the
target's other paths run here without the network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

JAR = "graphframes-spark4_2.13-0.11.0-11-ge49a655b.jar"


def make_graphframes(jars: Path, shared: Path) -> str:
    """What ``make graphframes`` into ``jars`` (``shared`` its fallback) says on stderr; the venv taken as built."""
    if shutil.which("make") is None:
        pytest.fail("the set-up needs `make`")
    command = ["make", "-s", "-o", ".venv/.installed", "graphframes", "MVN=false"]
    command += [f"LOCALITY_SPARK_JARS={jars}", f"LOCALITY_SHARED_JARS={shared}"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert done.returncode == 0, done.stderr  # a set-up step that cannot fetch says so and goes on
    return done.stderr


@pytest.fixture
def jars(tmp_path) -> Path:
    folder = tmp_path / "jars"
    folder.mkdir()
    return folder


@pytest.fixture
def shared(tmp_path) -> Path:
    folder = tmp_path / "shared-jars"
    folder.mkdir()
    (folder / JAR).write_bytes(b"built from source")
    return folder


def test_without_maven_the_shared_jar_is_copied_and_listed(jars, shared):
    (jars / "theirs.jar").write_bytes(b"the user's")
    assert f"GraphFrames: copied {JAR} from {shared} instead" in make_graphframes(jars, shared)
    assert (jars / JAR).read_bytes() == b"built from source"
    assert (jars / "graphframes.stamp").read_text().split() == [JAR]
    # a new fetch (the pom changed) removes what the stamp lists, and only that
    os.utime(jars / "graphframes.stamp", (0, 0))
    (shared / JAR).unlink()
    said = make_graphframes(jars, shared)
    assert sorted(p.name for p in jars.glob("*.jar")) == ["theirs.jar"]
    assert not (jars / "graphframes.stamp").exists()  # nothing to use: the next set-up tries again
    assert "the jobs compute the graph statistics on the driver, and the GraphFrames test skips" in said


def test_graphframes_jars_the_user_put_there_are_kept_and_used(jars, shared):
    (jars / "graphframes-mine.jar").write_bytes(b"the user's GraphFrames")
    said = make_graphframes(jars, shared)
    assert "using the jars already in" in said and "graphframes-mine.jar" in said
    assert sorted(p.name for p in jars.glob("*.jar")) == ["graphframes-mine.jar"]  # no second GraphFrames
    assert (jars / "graphframes-mine.jar").read_bytes() == b"the user's GraphFrames"
    assert (jars / "graphframes.stamp").read_text() == ""  # it copied nothing, so it will remove nothing
