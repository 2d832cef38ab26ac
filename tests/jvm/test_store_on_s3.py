"""Java reads a store in an S3 bucket as Python reads it: the same route for every key, damage refused by name.

A real S3 server (:class:`~testbed.s3server.S3Server`) serves a store published with
:class:`~locality.store.ConfigStore` into a local directory and uploaded under a prefix of its
bucket (the object layout is the directory's). Java's ``RouteKeys`` reads it through
``ConfigStore.open("s3://...")`` with nothing but the server's standard AWS variables; Python's
:class:`~locality.router.Router` routes the local copy.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from locality.router import Router, load_snapshot
from locality.store import ConfigStore
from testbed.s3server import S3Server
from tests._store_children import OPS, make_config
from tests.jvm.conftest import CORE_EXAMPLES, KAFKA_EXAMPLES, run_java

ROUTE_KEYS = "io.locality.routing.RouteKeys"
#: make_config's tables fall back on Kafka's partitioner: RouteKeys runs on the Kafka Streams drop-in jar (first on
#: the classpath, so the store is read through its relocated AWS SDK), which holds that partitioner's provider
MODULES = [KAFKA_EXAMPLES, CORE_EXAMPLES]
BUCKET = "locality"
ENTRIES = 500
#: keys no table holds (routed by the fallback), beside every key the tables hold
OTHER_KEYS = [f"other-{i}" for i in range(300)] + ["", "é", "🙂x", "a\tb"]
#: the line the protocol's writers add to CURRENT (docs/store-protocol.md, Fencing)
WRITER_LINE = b"writer 0123456789abcdef0123456789abcdef\n"


@pytest.fixture(scope="module")
def s3():
    with S3Server(buckets=(BUCKET,)) as server:
        yield server


@pytest.fixture(scope="module")
def local_store(tmp_path_factory) -> ConfigStore:
    """Two versions published locally: version 2 is current."""
    store = ConfigStore(tmp_path_factory.mktemp("published") / "store")
    for index in (1, 2):
        store.publish(make_config(index, ENTRIES), fingerprint=f"f{index}")
    return store


def upload(s3, root: Path, prefix: str) -> str:
    """Every file under ``root`` as an object under ``prefix/``; the store's ``s3://`` URI."""
    client = s3.client()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/{path.relative_to(root).as_posix()}", Body=path.read_bytes())
    return f"s3://{BUCKET}/{prefix}"


def java_routes(s3, uri: str, operator: str, keys: list[str], tmp_path: Path, *version: int) -> np.ndarray:
    keys_file, out = tmp_path / f"{operator}.keys.jsonl", tmp_path / f"{operator}.routes.txt"
    keys_file.write_text("".join(json.dumps(k) + "\n" for k in keys), encoding="utf-8")
    done = run_java(MODULES, ROUTE_KEYS, uri, operator, keys_file, out, *version, env=s3.env)
    assert done.returncode == 0, done.stderr[-3000:]
    return np.loadtxt(out, dtype=np.int64, ndmin=1)


def test_java_routes_every_key_of_a_store_in_s3_as_python_does(s3, local_store, tmp_path):
    uri = upload(s3, local_store.root, "routes")
    # CURRENT as the protocol's writers leave it: the number, then the writer's token
    s3.client().put_object(Bucket=BUCKET, Key="routes/CURRENT", Body=b"2\n" + WRITER_LINE)
    with Router(local_store.root) as router:
        snapshot = router.snapshot()
        assert snapshot.version == 2
        for op, scheme in zip(OPS, ["s3", "s3a"]):  # s3a:// is read as s3://, as Hadoop users write it
            keys = [*snapshot.table(op).entries.index, *OTHER_KEYS]
            python = snapshot.route_many(op, keys)
            java = java_routes(s3, uri.replace("s3://", f"{scheme}://"), op, keys, tmp_path)
            assert len(java) == len(keys) and len(snapshot.table(op).entries) == ENTRIES
            mismatched = [(k, p, j) for k, p, j in zip(keys, python, java) if p != j]
            assert not mismatched, f"{len(mismatched)} of {len(keys)} keys of {op} differ: {mismatched[:5]}"
    old = load_snapshot(local_store, 1)
    keys = [*old.table("a").entries.index, *OTHER_KEYS]
    assert (java_routes(s3, uri, "a", keys, tmp_path, 1) == old.route_many("a", keys)).all(), "a version by number"


@pytest.mark.parametrize("damage", ["truncate", "alter"])
def test_a_version_whose_table_object_was_changed_is_refused_by_java_naming_it(s3, local_store, damage):
    prefix = f"damaged-{damage}"
    uri = upload(s3, local_store.root, prefix)
    key = f"{prefix}/versions/000002/configuration/tables/01.parquet"
    client = s3.client()
    data = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    client.put_object(
        Bucket=BUCKET, Key=key, Body=data[: len(data) // 2] if damage == "truncate" else data[:-9] + b"X" + data[-8:]
    )

    done = run_java(MODULES, ROUTE_KEYS, uri, "a", "/dev/null", "/dev/null", env=s3.env)
    assert done.returncode == 2, done.stderr[-3000:]
    wanted = "truncated or rewritten" if damage == "truncate" else "does not match its manifest's SHA-256"
    assert f"s3://{BUCKET}/{key}" in done.stderr and wanted in done.stderr, done.stderr[-3000:]
    assert "version 2 of the store is damaged" in done.stderr
    older = run_java(MODULES, ROUTE_KEYS, uri, "a", "/dev/null", "/dev/null", 1, env=s3.env)
    assert older.returncode == 0, older.stderr[-3000:]


def test_stores_that_are_not_there_and_unserved_schemes_are_named(s3, tmp_path):
    def refused(uri: str) -> str:
        done = run_java(MODULES, ROUTE_KEYS, uri, "a", "/dev/null", "/dev/null", env=s3.env)
        assert done.returncode == 2, done.stderr[-3000:]
        return done.stderr

    empty = f"s3://{BUCKET}/nothing-here"
    assert f"the store {empty} has no published version yet" in refused(empty)
    assert "S3 has no bucket 'no-such-bucket'" in refused("s3://no-such-bucket/store")
    for uri in ["gs://locality/store", "hdfs://namenode/store"]:
        stderr = refused(uri)
        assert f"the store {uri} has the scheme" in stderr and "s3://" in stderr and "file://" in stderr, stderr
    assert not (tmp_path / "gs:").exists() and not Path("gs:").exists(), "a URI is never a relative path"
