"""The cached PyFlink environment: reused when ready, never reused half-made, and a failure says why."""

from __future__ import annotations

import pytest

from .conftest import READY, ensure_flink_env, env_key


def test_a_failed_creation_says_why_and_leaves_nothing_half_made(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("locality-no-such-package-anywhere==0.0.1\n")
    key = env_key(requirements)
    leftover = tmp_path / "cache" / f".flink-env-{key}.999"  # an interrupted creation's folder
    (leftover / "bin").mkdir(parents=True)
    (tmp_path / "cache" / f"flink-env-{key}" / "bin").mkdir(parents=True)  # a folder without the ready mark
    with pytest.raises(
        RuntimeError,
        match=r"could not create the PyFlink environment .* exited with 1:\n(.|\n)*"
        r"locality-no-such-package-anywhere",
    ):
        ensure_flink_env(requirements, tmp_path / "cache")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [f"flink-env-{key}.lock"]


def test_a_ready_environment_is_reused(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("apache-flink==2.3.0\n")
    final = tmp_path / f"flink-env-{env_key(requirements)}"
    pyflink = final / "lib" / "python3.11" / "site-packages" / "pyflink"
    for jar in ("lib/flink-dist-2.3.0.jar", "opt/flink-python-2.3.0.jar"):
        (pyflink / jar).parent.mkdir(parents=True, exist_ok=True)
        (pyflink / jar).touch()
    (final / READY).write_text(requirements.read_text())
    env = ensure_flink_env(requirements, tmp_path)  # no pip run: it would not finish this fast offline
    assert (env.python, env.flink_dist.name, env.flink_python.name) == (
        final / "bin" / "python",
        "flink-dist-2.3.0.jar",
        "flink-python-2.3.0.jar",
    )
    other = tmp_path / "other.txt"
    other.write_text("apache-flink==2.2.0\n")
    assert env_key(other) != env_key(requirements)
