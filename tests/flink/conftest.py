"""The PyFlink environment of the Flink tests: its own virtual environment, created once and cached.

``apache-flink`` pins old pyarrow, cloudpickle and py4j and pulls apache-beam, so it
lives in a virtual environment of its own that never touches the main install. The
session fixture :func:`flink_env` creates it from ``requirements.txt`` beside this
file, in ``$LOCALITY_FLINK_ENV_CACHE`` (default ``$XDG_CACHE_HOME/locality``, that is
``~/.cache/locality``: outside the source tree, shared by every checkout on the
machine), in a folder named after a hash of the requirements and the Python version.
It is built aside and renamed into place only once complete, under a file lock
(two test runs at once build it once), so an interrupted creation is never reused:
its leftover is removed by the next run. Failing to create it fails the tests that
need it, with pip's message; it is never a skip.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

logger = logging.getLogger(__name__)

REQUIREMENTS = Path(__file__).with_name("requirements.txt")
READY = "locality-flink-env-ready"  # written last, inside the folder that is then renamed into place


@dataclass(frozen=True)
class FlinkEnv:
    """A ready PyFlink environment: its Python and the Flink jars the ``apache-flink-libraries`` wheel ships."""

    root: Path
    python: Path
    flink_dist: Path
    flink_python: Path


def cache_root() -> Path:
    override = os.environ.get("LOCALITY_FLINK_ENV_CACHE")
    if override:
        return Path(override)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "locality"


def env_key(requirements: Path = REQUIREMENTS) -> str:
    """Hash of the exact requirements and the interpreter (ABI and machine) the environment is for."""
    tag = f"{sys.implementation.cache_tag}-{platform.machine()}\n"
    return hashlib.sha256((tag + requirements.read_text()).encode()).hexdigest()[:16]


def ensure_flink_env(requirements: Path = REQUIREMENTS, root: Path | None = None) -> FlinkEnv:
    """The cached environment, created first if it is not there (raises RuntimeError on failure)."""
    root = root or cache_root()
    root.mkdir(parents=True, exist_ok=True)
    key = env_key(requirements)
    final = root / f"flink-env-{key}"
    if not (final / READY).is_file():
        with open(root / f"flink-env-{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another test run may be creating it: wait, then reuse it
            if not (final / READY).is_file():
                _create(final, key, requirements)
    return _describe(final)


def _create(final: Path, key: str, requirements: Path) -> None:
    # Holding the lock, anything named like ours is the leftover of an interrupted creation.
    for leftover in [*final.parent.glob(f".flink-env-{key}.*"), final]:
        shutil.rmtree(leftover, ignore_errors=True)
    aside = final.with_name(f".flink-env-{key}.{os.getpid()}")
    python = aside / "bin" / "python"
    started = time.monotonic()
    steps = [
        [sys.executable, "-m", "venv", str(aside)],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(requirements)],
    ]
    for command in steps:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(aside, ignore_errors=True)
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
            raise RuntimeError(
                f"could not create the PyFlink environment of the Flink tests from {requirements} in {aside}: "
                f"{' '.join(command)} exited with {done.returncode}:\n{tail}"
            )
    (aside / READY).write_text(requirements.read_text())
    os.rename(aside, final)  # a venv's python finds its prefix from where it is, so the rename keeps it working
    logger.warning("created the PyFlink environment %s in %.0f s", final, time.monotonic() - started)


def _describe(root: Path) -> FlinkEnv:
    found = {
        name: sorted(root.glob(f"lib/python*/site-packages/pyflink/{pattern}"))
        for name, pattern in (("flink_dist", "lib/flink-dist-*.jar"), ("flink_python", "opt/flink-python-*.jar"))
    }
    missing = [name for name, paths in found.items() if not paths]
    if missing:
        raise RuntimeError(f"the PyFlink environment {root} has no {missing}: delete it to have it created again")
    return FlinkEnv(root, root / "bin" / "python", found["flink_dist"][0], found["flink_python"][0])


@pytest.fixture(scope="session")
def flink_env() -> FlinkEnv:
    """The PyFlink environment (created on first use; a failure fails the test with pip's message)."""
    try:
        return ensure_flink_env()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)


#: Max parallelism of the tweet tables: Flink's default for parallelism 6, set explicitly by the job.
TWEET_MAX_PARALLELISM = 128


@pytest.fixture(scope="session")
def tweet_halves(geotweets):
    """The tweet trace split by ``seq`` into the half tables are learned from and the half streamed."""
    half = len(geotweets) // 2
    return geotweets.iloc[:half], geotweets.iloc[half:]


@pytest.fixture(scope="session")
def tweet_configuration(tweet_halves):
    """Tables for location -> hashtag on 6 servers, learned from the first half with PyFlink's fallback."""
    from locality.counts import count_keys
    from locality.optimizer import make_fallbacks, optimize
    from locality.topology import Topology

    topology = Topology.uniform(["location", "hashtag"], 6)
    fallbacks = make_fallbacks(topology, "pyflink", max_parallelism=TWEET_MAX_PARALLELISM)
    counts = count_keys(tweet_halves[0], list(topology.operators))
    return optimize(counts.graph(), topology, fallbacks).config
