"""A running Flink job across servers switches from hash routing to the tables and loses or repeats no record.

The small version of the benchmark's online switch (``bench_testbed.py --experiment switch``,
``testbed/switch.py``): a JobManager and three TaskManager servers, links at 8 Mbit/s so that the
replay of the tweets (twice, 1 kB of padding) is still running when the switch comes. The job starts
on a store version with no entries (Flink's hash); version 2 is the online job's reconfiguration
from it (published here with the library, as ``locality reconfigure`` does); ``locality switch
flink`` runs in the JobManager's server against its REST address, as a user runs it. The source
subtasks resume from the savepoint on version 2's partition of the trace, which differs from
version 1's for most keys.

Checked: the switch came while records were still flowing (both versions' sinks counted records);
at the end, read from a last savepoint, every location's and every hashtag's count is exactly twice
its number of records (nothing lost, nothing counted twice, the moved keys' state moved with them)
and the sinks counted every record once.
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
from testbed.switch import run_switch
from testbed.workload import write_replay_trace
from tests.conftest import trace_keys
from tests.flink.conftest import ensure_flink_env

TASKMANAGERS = 3
PASSES = 2
RATE_MBIT = 8
MAX_PARALLELISM = 128


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


def test_no_record_is_lost_or_counted_twice_across_an_online_switch(tmp_path, geotweets):
    keys = trace_keys("geotweets")
    tsv, _ = write_replay_trace(geotweets, keys, tmp_path)
    store = ConfigStore(tmp_path / "store")
    online_job = publish_versions(geotweets, keys, store)
    try:
        home = flink_home_of(ensure_flink_env().root)
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    with Testbed(TASKMANAGERS + 1, rate_mbit=RATE_MBIT) as bed:
        flink = FlinkCluster(bed, bed.servers[0], bed.servers[1:], tmp_path / "cluster", home).start()
        run = run_switch(
            bed,
            flink,
            tsv=tsv,
            publish=online_job,
            frame=geotweets,
            keys=keys,
            store=store.root,
            padding=1024,
            passes=PASSES,
            warmup=1,
            duration=2,
            work=tmp_path / "run",
        )
    assert run.before.records > 0 and run.after.records > 0  # the switch came mid-stream
    assert run.switch["from_version"] == 1 and run.switch["to_version"] == 2
    assert sum(o["moved"] for o in run.switch["operators"].values()) > 1000  # keys whose state changed server
    counts = run.counts
    assert counts.keys == {k: geotweets[k].nunique() for k in keys}
    assert counts.wrong_keys == {k: 0 for k in keys}, counts
    assert counts.lost == counts.duplicated == 0
    assert counts.sink_records == counts.expected_records == PASSES * len(geotweets)
