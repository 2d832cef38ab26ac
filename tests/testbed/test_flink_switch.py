"""A running Flink job across servers that share only the network switches to the tables and loses no record.

The small version of the benchmark's online switch (``bench_testbed.py --experiment switch``,
``testbed/switch.py``), on six servers with files of their own (``Testbed(private_files=True)``): a
JobManager, three TaskManagers, a gateway and an object store. Links run at 8 Mbit/s, so that the
replay of the tweets (four times, 1 kB of padding) is still running when the switch comes. The trace, the
store and every savepoint are objects in the store's bucket and nowhere else: each TaskManager fetches
the trace from the bucket, the job reads the store by its ``s3://`` URI, Flink writes its savepoints
there through its S3 plugin. The job starts on a store version with no entries (Flink's hash);
version 2 is the online job's reconfiguration from it (published from the gateway with the library,
as ``locality reconfigure`` does); ``locality switch flink`` runs in the gateway, neither JobManager
nor TaskManager, against the JobManager's REST address. The source subtasks resume from the savepoint
on version 2's partition of the trace, which differs from version 1's for most keys.

Checked: no server but the object store's sees the trace the host wrote; the switch came while records
were still flowing (both versions' sinks counted records); its savepoints are in the bucket; at the
end, read from a last savepoint in the bucket, every location's and every hashtag's count is exactly
four times its number of records (nothing lost, nothing counted twice, the moved keys' state moved with
them) and the sinks counted every record once.
"""

from __future__ import annotations

import pytest

from locality.counts import count_keys
from locality.optimizer import make_fallbacks, optimize
from locality.reconfiguration import reconfigure
from locality.store import ConfigStore
from locality.topology import Topology
from testbed import Testbed
from testbed.flink import FlinkCluster, flink_home_of
from testbed.s3server import object_store
from testbed.switch import SwitchSetup, run_switch
from testbed.workload import write_replay_trace
from tests.conftest import trace_keys
from tests.flink.conftest import ensure_flink_env

TASKMANAGERS = 3
#: Replays of the tweets: at ~2,900 records/s before the switch, 4 take 160 s, of which the job's start, the
#: interval before, the online job and the switch's checks (in the gateway, on a loaded machine) took more than 80.
PASSES = 4
RATE_MBIT = 8
MAX_PARALLELISM = 128
BUCKET = "locality"
STORE, SAVEPOINTS, TRACE = f"s3://{BUCKET}/store", f"s3://{BUCKET}/savepoints", f"s3://{BUCKET}/trace/keys.tsv"
#: Bound (seconds) of the library's optimization or reconfiguration of the tweets in the gateway.
PUBLISH_TIMEOUT = 300


def publish_versions(geotweets, keys: list[str], store: ConfigStore):
    """Version 1 (no entries: Flink's hash) now; a function publishing version 2 (the reconfiguration) later."""
    topology = Topology.uniform(keys, TASKMANAGERS)
    fallbacks = make_fallbacks(topology, "flink", max_parallelism=MAX_PARALLELISM)
    graph = count_keys(geotweets[keys], keys).graph()
    hashed = optimize(graph, topology, fallbacks, max_entries=0).config
    store.publish(hashed, fingerprint="tweets-hash")

    def online_job() -> dict:
        step = reconfigure(graph, topology, hashed, fallbacks)
        step.plan.from_version, step.plan.to_version = 1, 2
        plan = step.plan.to_dict(step.config)
        store.publish(step.config, fingerprint="tweets-tables", artifacts={"migration_plan.json": plan})
        return {"published": True, "version": 2}

    return online_job


def test_no_record_is_lost_or_counted_twice_across_an_online_switch(tmp_path, geotweets, monkeypatch):
    keys = trace_keys("geotweets")
    tsv, _ = write_replay_trace(geotweets, keys, tmp_path)  # the host's: no server sees it
    try:
        home = flink_home_of(ensure_flink_env().root)
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    with Testbed(TASKMANAGERS + 3, rate_mbit=RATE_MBIT, private_files=True) as bed:
        jobmanager, *taskmanagers, gateway, store_server = bed.servers
        with object_store(bed, store_server, tmp_path / "s3.log") as s3:
            data = tsv.read_bytes()
            bed.call_in(store_server, lambda: s3.client().put_object(Bucket=BUCKET, Key="trace/keys.tsv", Body=data))
            for name, value in s3.env.items():  # for the library, called in the gateway
                monkeypatch.setenv(name, value)
            online_job = bed.call_in(
                gateway, lambda: publish_versions(geotweets, keys, ConfigStore(STORE)), timeout=PUBLISH_TIMEOUT
            )
            flink = FlinkCluster(bed, jobmanager, taskmanagers, tmp_path / "cluster", home, s3_env=s3.env).start()
            unseen = [bed.call_in(server, tsv.exists) for server in (jobmanager, *taskmanagers, gateway)]
            setup = SwitchSetup(bed, flink, gateway, s3, TRACE, STORE, SAVEPOINTS)
            run = run_switch(
                setup,
                publish=lambda: bed.call_in(gateway, online_job, timeout=PUBLISH_TIMEOUT),
                frame=geotweets,
                keys=keys,
                padding=1024,
                passes=PASSES,
                warmup=1,
                duration=2,
            )
    assert unseen == [False] * (TASKMANAGERS + 2)  # the servers share no disk with the host
    assert run.before.records > 0 and run.after.records > 0  # the switch came mid-stream
    assert run.switch["from_version"] == 1 and run.switch["to_version"] == 2
    assert run.switch["savepoint"].startswith(f"{SAVEPOINTS}/savepoint-")
    assert run.switch["rewritten"] == f"{run.switch['savepoint']}-v2" and run.switch["rewrite_where"] == "cluster"
    assert sum(o["moved"] for o in run.switch["operators"].values()) > 1000  # keys whose state changed server
    counts = run.counts
    assert counts.keys == {k: geotweets[k].nunique() for k in keys}
    assert counts.wrong_keys == {k: 0 for k in keys}, counts
    assert counts.lost == counts.duplicated == 0
    assert counts.sink_records == counts.expected_records == PASSES * len(geotweets)
