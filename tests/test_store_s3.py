"""A store in an S3 bucket, on a real S3 server the tests start: its URIs, its errors, and its outages.

The protocol's conditional writes must be refused by the server itself (HTTP 412), or the tests
would check only our client: the first test asks the server directly. The outage tests run a server
of their own, killed mid-publish and mid-read, then restarted on the same data.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import uuid

import botocore.exceptions
import pytest

from locality.cli import ExitCode, main
from locality.errors import InvalidParameterError, StoreError, StoreUnavailableError
from locality.router import Router
from locality.store import ConfigStore
from testbed.s3server import S3Server
from tests._store_children import make_config, publish_forever


def test_the_server_itself_refuses_a_second_create_and_a_stale_replace(s3_server):
    s3 = s3_server.client()
    key = f"probe/{uuid.uuid4().hex}"
    first = s3.put_object(Bucket="locality", Key=key, Body=b"1\n", IfNoneMatch="*")
    for conditions in ({"IfNoneMatch": "*"}, {"IfMatch": '"0123456789abcdef0123456789abcdef"'}):
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            s3.put_object(Bucket="locality", Key=key, Body=b"2\n", **conditions)
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert s3.put_object(Bucket="locality", Key=key, Body=b"3\n", IfMatch=first["ETag"])["ETag"] != first["ETag"]
    assert s3.get_object(Bucket="locality", Key=key)["Body"].read() == b"3\n"


def test_a_store_in_a_bucket_is_published_and_read_under_either_scheme(s3_store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    as_hadoop_writes_it = s3_store.replace("s3://", "s3a://")
    ConfigStore(as_hadoop_writes_it).publish(make_config(1, 100), fingerprint="f1")
    assert ConfigStore(s3_store).get().config.tables == make_config(1, 100).tables
    assert list(tmp_path.iterdir()) == []  # nothing local: pathlib would have made "s3a:/locality/..."
    with Router(s3_store) as router:
        assert router.version == 1
    assert main(["show", "--store", s3_store, "--json"]) == ExitCode.OK


@pytest.mark.parametrize("uri", ["hdfs:///stores/tables", "gs://bucket/tables", "http://host/tables"])
def test_a_scheme_not_served_is_refused_and_nothing_is_created(uri, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidParameterError, match="s3://BUCKET/PREFIX"):
        ConfigStore(uri)
    assert main(["rollback", "--store", uri, "--to", "1"]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "is not served" in err and "(option --store)" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_missing_bucket_or_wrong_credentials_name_the_store(s3_env, monkeypatch, capsys):
    missing = f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/tables"
    with pytest.raises(StoreError, match="no-such-bucket"):
        ConfigStore(missing).check_writable()
    assert main(["show", "--store", missing]) == ExitCode.BAD_INPUT
    assert "no-such-bucket" in capsys.readouterr().err
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    store = f"s3://locality/{uuid.uuid4().hex}"
    with pytest.raises(StoreError, match=f"the store {store} refused"):
        ConfigStore(store).publish(make_config(1, 10), fingerprint="f1")


@pytest.fixture
def own_server(monkeypatch):
    """An S3 server of this test's own (the test stops it), with this process pointed at it."""
    with S3Server() as server:
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        yield server


def test_a_server_stopped_mid_publish_fails_the_writer_with_75_and_leaves_the_store_whole(own_server, capsys):
    store_uri = f"s3://locality/{uuid.uuid4().hex}"
    store = ConfigStore(store_uri, lock_timeout=5)
    store.publish(make_config(0, 1000), fingerprint="f0")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests._store_children"])
    ready, results = context.Event(), context.Queue()
    writer = context.Process(target=publish_forever, args=(store_uri, own_server.env, 1, 200_000, ready, results))
    writer.start()
    assert ready.wait(60)
    time.sleep(1.0)  # into a publish of 200,000 entries a table
    own_server.kill()
    kind, message, published = results.get(timeout=120)
    writer.join(30)
    assert kind == "StoreUnavailableError" and store_uri in message, message
    # the jobs' exit for an unreachable store: 75, retry later, naming it
    assert main(["seal", "--store", store_uri, "--until", "5", "--lock-timeout", "1"]) == ExitCode.BUSY
    err = capsys.readouterr().err
    assert store_uri in err and "Traceback" not in err
    own_server.restart()
    assert store.current_version() == published + 1  # what was current stays current, and whole
    store.get().verify()
    result = ConfigStore(store_uri, lock_timeout=30).publish(make_config(2, 1000), fingerprint="f2")
    assert result.created and store.current_version() == result.version
    assert [e["version"] for e in store.history()] == list(range(1, result.version + 1))


def test_one_bucket_and_prefix_on_two_servers_are_two_stores(own_server, monkeypatch):
    """A process that publishes to a server, then to another one with the same bucket and prefix (a mirror, a
    restarted test server elsewhere) writes the second one's objects, its lease included, and leaves the first alone."""
    store_uri = f"s3://locality/{uuid.uuid4().hex}"
    prefix = store_uri.removeprefix("s3://locality/")
    ConfigStore(store_uri).publish(make_config(0, 100), fingerprint="f0")
    first_lease = own_server.client().get_object(Bucket="locality", Key=f"{prefix}/LEASE")["ETag"]
    with S3Server() as other:
        for name, value in other.env.items():
            monkeypatch.setenv(name, value)
        own_server.kill()  # nothing may reach the first server now
        result = ConfigStore(store_uri, lock_timeout=5).publish(make_config(1, 100), fingerprint="f1")
        assert result.version == 1 and ConfigStore(store_uri).current_version() == 1
        assert other.client().head_object(Bucket="locality", Key=f"{prefix}/LEASE")["ContentLength"] > 0
    own_server.restart()
    assert own_server.client().get_object(Bucket="locality", Key=f"{prefix}/LEASE")["ETag"] == first_lease


def test_a_router_rides_out_an_outage_and_follows_within_one_poll_after(own_server, caplog):
    store_uri = f"s3://locality/{uuid.uuid4().hex}"
    store = ConfigStore(store_uri)
    store.publish(make_config(0, 100), fingerprint="f0")
    store.seal(1_000)
    with Router(store_uri, poll_interval=0.2, schedule_wait=1) as router:
        assert router.route_at("a", "k0-1", 10) == router.route("a", "k0-1")
        own_server.kill()
        time.sleep(1.0)  # several polls against a store that does not answer
        assert router.version == 1 and isinstance(router.last_error, StoreUnavailableError)
        assert router.route("a", "k0-1") == make_config(0, 100).route("a", "k0-1")
        assert router.route_at("a", "k0-2", 999) == router.route("a", "k0-2")  # the schedule it knows still settles
        with pytest.raises(StoreUnavailableError):
            router.refresh(strict=True)
        own_server.restart()
        store.publish(make_config(1, 100), fingerprint="f1")
        deadline = time.monotonic() + 5
        while router.version != 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert router.version == 2 and router.last_error is None


def test_a_router_never_takes_an_emptied_schedule(s3_server, s3_store):
    store = ConfigStore(s3_store)
    store.publish(make_config(0, 100), fingerprint="f0")
    store.seal(1_000)
    with Router(s3_store, schedule_wait=0.3) as router:
        assert router.at(500).version == 1
        prefix = s3_store.removeprefix("s3://locality/")
        s3_server.client().delete_object(Bucket="locality", Key=f"{prefix}/SCHEDULE")  # a restore gone wrong
        with pytest.raises(StoreError, match="sealed until 1000"):
            router.at(2_000)  # past what it knows: it waits, then says so; it never routes by an empty schedule
        assert router.at(999).version == 1


def test_credentials_from_a_profile(s3_server, s3_store, tmp_path, monkeypatch):
    """The AWS SDKs' shared files work as the variables do: a profile names the keys and the endpoint."""
    (tmp_path / "credentials").write_text(
        f"[bucket]\naws_access_key_id = {s3_server.env['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {s3_server.env['AWS_SECRET_ACCESS_KEY']}\n"
    )
    (tmp_path / "config").write_text(f"[profile bucket]\nregion = us-east-1\nendpoint_url = {s3_server.endpoint}\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_PROFILE", "bucket")
    ConfigStore(s3_store).publish(make_config(3, 10), fingerprint="f3")
    assert ConfigStore(s3_store).current_version() == 1
    assert os.environ.get("AWS_ENDPOINT_URL") is None
