"""What a Flink switch decides without a cluster: Flink's S3 settings, where the rewrite may run, its cleanup.

The switch itself runs against real clusters (``tests/jvm/test_flink_switch.py``, ``tests/testbed/``);
these are the parts a wrong setting would break silently: the ``s3.*`` keys that point Flink's S3 plugin
at the store's server, the refusal of a local rewrite that could not reach ``s3://`` savepoints (before
anything stops), and the removal of a half-written rewrite, in a directory and in a bucket.
"""

from __future__ import annotations

import pytest

from locality.engines.flink_rewrite import LocalRewrite, RewriteRequest, counts_of_accumulators
from locality.engines.flink_s3 import flink_s3_configuration, s3_plugins, write_flink_conf
from locality.engines.flink_switch import _remove_partial
from locality.errors import InvalidParameterError


def test_flinks_s3_keys_point_at_the_stores_server(s3_env):
    keys = flink_s3_configuration()
    assert keys["s3.endpoint"] == s3_env["AWS_ENDPOINT_URL"] and keys["s3.path.style.access"] == "true"
    assert keys["s3.endpoint.region"] == s3_env["AWS_REGION"]
    assert keys["s3.aws.credentials.provider"] == "com.amazonaws.auth.DefaultAWSCredentialsProviderChain"
    assert keys["s3.directory.marker.retention"] == "keep"
    assert not any("secret" in key or "access-key" in key for key in keys)  # no key copied into a file


def test_without_an_endpoint_flink_reaches_aws_s3_itself(monkeypatch):
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    keys = flink_s3_configuration()
    assert "s3.endpoint" not in keys and "s3.path.style.access" not in keys
    assert keys["s3.endpoint.region"] == "eu-west-3"


def test_the_configuration_is_a_flink_conf_dir(tmp_path):
    folder = write_flink_conf(tmp_path / "conf", {"s3.endpoint": "http://h:9000", "rest.port": 8081})
    text = (folder / "config.yaml").read_text()
    assert '"s3.endpoint": "http://h:9000"' in text and '"rest.port": 8081' in text


@pytest.fixture
def distribution(tmp_path):
    """A Flink distribution's shape: lib/flink-dist-*.jar, and plugins/ without an S3 plugin."""
    home = tmp_path / "flink"
    (home / "lib").mkdir(parents=True)
    (home / "lib" / "flink-dist-2.3.0.jar").write_bytes(b"PK")
    (home / "plugins" / "metrics-jmx").mkdir(parents=True)
    tool = tmp_path / "tool.jar"
    tool.write_bytes(b"PK")
    return home, tool


def test_a_local_rewrite_of_s3_savepoints_needs_the_s3_plugin(distribution):
    home, tool = distribution
    with pytest.raises(InvalidParameterError, match="no S3 file system plugin: copy flink-s3-fs-hadoop"):
        LocalRewrite(home, tool).check("s3://bucket/savepoints")
    LocalRewrite(home, tool).check("file:///data/savepoints")  # a local savepoint needs no plugin
    (home / "plugins" / "s3-fs-hadoop").mkdir()
    (home / "plugins" / "s3-fs-hadoop" / "flink-s3-fs-hadoop-2.3.0.jar").write_bytes(b"PK")
    assert [jar.name for jar in s3_plugins(home)] == ["flink-s3-fs-hadoop-2.3.0.jar"]
    LocalRewrite(home, tool).check("s3a://bucket/savepoints")


def test_a_local_rewrite_needs_a_flink_distribution(tmp_path):
    with pytest.raises(InvalidParameterError, match="is not a Flink distribution"):
        LocalRewrite(tmp_path, tmp_path / "tool.jar").check("file:///sp")


def test_the_rewrites_arguments_and_counts():
    request = RewriteRequest("s3://b/sp/savepoint-1", "s3://b/sp/savepoint-1-v3", "s3://b/store", 2, 3,
                             ("location=count-per-location", "hashtag=count-per-hashtag,state=c"),
                             ("location", "hashtag"), 6)  # fmt: skip
    assert request.args() == [
        "--savepoint", "s3://b/sp/savepoint-1", "--output", "s3://b/sp/savepoint-1-v3", "--store", "s3://b/store",
        "--from", "2", "--to", "3", "--parallelism", "6",
        "--operator", "location=count-per-location", "--operator", "hashtag=count-per-hashtag,state=c",
    ]  # fmt: skip
    counts = counts_of_accumulators({"locality-rewrite/hashtag/moved": "7", "other": "1"}, ["location", "hashtag"])
    assert counts["hashtag"] == {"entries": 0, "bytes": 0, "moved": 7, "moved_bytes": 0, "rekeyed": 0}
    assert counts["location"]["moved"] == 0  # an operator without state: zeros, not missing


def test_a_half_written_rewrite_is_removed_from_a_directory(tmp_path):
    rewritten = tmp_path / "savepoint-ab-12-v2"
    (rewritten / "op").mkdir(parents=True)
    (rewritten / "op" / "state").write_bytes(b"x")
    keep = tmp_path / "savepoint-ab-12"
    keep.mkdir()
    _remove_partial(f"file:{rewritten}")  # as Flink names a local savepoint
    assert not rewritten.exists() and keep.is_dir()


def test_a_half_written_rewrite_is_removed_from_a_bucket(s3_server, s3_store):
    s3 = s3_server.client()
    bucket, _, prefix = s3_store.removeprefix("s3://").partition("/")
    for key in ("savepoint-ab-12/_metadata", "savepoint-ab-12-v2/op/state", "savepoint-ab-12-v2/x"):
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=b"x")
    _remove_partial(f"{s3_store}/savepoint-ab-12-v2")
    left = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/").get("Contents", [])}
    assert left == {f"{prefix}/savepoint-ab-12/_metadata"}  # the original savepoint stays
