"""What the store's fault tests run in child processes: real publishes through the real ConfigStore.

Children start from a forkserver that has imported this module (and with it
numpy, pandas, pyarrow and locality) once, so each child starts in
milliseconds and without the test process's threads (the Spark session).
Every function here is a child's whole life; results come back through a
``multiprocessing`` queue or the exit code. Each takes the store's location
and the environment that reaches it (a bucket needs the S3 server's AWS
variables: the forkserver's own environment is the one it started with).
"""

from __future__ import annotations

import contextlib
import io
import os
import resource
import signal
import sys

import numpy as np
import pandas as pd

from locality.datasets.catalog import card
from locality.errors import StoreBusyError, StoreError, StoreUnavailableError
from locality.hashing import make_fallback
from locality.routing import RoutingConfiguration, RoutingTable
from locality.store import ConfigStore
from locality.topology import Topology

OPS = ["a", "b"]
INSTANCES = 4
NOBODY = 65534


def make_config(index: int, entries: int) -> RoutingConfiguration:
    """A configuration unique to ``index``: ``entries`` keys per operator, each off its fallback instance."""
    topology = Topology.uniform(OPS, INSTANCES)
    fallback = make_fallback("kafka", INSTANCES)
    keys = np.array([f"k{index}-{i}" for i in range(entries)], dtype=object)
    instances = (fallback.instances_of(keys) + 1) % INSTANCES
    series = pd.Series(instances, index=pd.Index(keys, dtype=object))
    return RoutingConfiguration(topology, {op: RoutingTable(op, fallback, series) for op in OPS}, {"index": index})


def publish_range(root: str, env: dict, first: int, count: int, entries: int) -> None:
    """Publish configurations ``first .. first + count - 1`` (fingerprint ``f<i>``)."""
    os.environ.update(env)
    store = ConfigStore(root, lock_timeout=120, job=f"child {os.getpid()}")
    for index in range(first, first + count):
        store.publish(make_config(index, entries), fingerprint=f"f{index}", artifacts={"report.json": {"i": index}})


def publish_once(root: str, env: dict, index: int, entries: int, start) -> None:
    """Publish configuration ``index`` once, when ``start`` is set; exit 0 (published) or 75 (busy, unreachable)."""
    os.environ.update(env)
    store = ConfigStore(root, lock_timeout=300, job=f"child {os.getpid()}")
    store.current_version()  # the store's client made before the race, as a long-running job has it
    config = make_config(index, entries)
    start.wait(60)
    try:
        store.publish(config, fingerprint=f"f{index}", artifacts={"report.json": {"i": index}})
    except (StoreBusyError, StoreUnavailableError) as exc:
        print(f"child {index}: {exc}", file=sys.stderr)
        os._exit(75)


def publish_forever(root: str, env: dict, index: int, entries: int, ready, results=None) -> None:
    """Publish configuration ``index`` again and again (fingerprints ``f<index>:<n>``) until killed.

    ``ready`` is set once the configuration is built: from then on the child
    spends its time publishing, so a kill lands at a random moment of one.
    ``results``, when given, receives what stopped it (the error's type and message) if it ever stops.
    """
    os.environ.update(env)
    store = ConfigStore(root, lock_timeout=120, job=f"child {os.getpid()}")
    config = make_config(index, entries)
    ready.set()
    n = 0
    try:
        while True:
            store.publish(config, fingerprint=f"f{index}:{n}", artifacts={"report.json": {"i": index}})
            n += 1
    except StoreError as exc:
        if results is None:
            raise
        results.put((type(exc).__name__, str(exc), n))


def publish_under_file_size_limit(root: str, index: int, entries: int, limit: int, results) -> None:
    """Publish with files capped at ``limit`` bytes (RLIMIT_FSIZE); report what was raised."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        ConfigStore(root).publish(make_config(index, entries), fingerprint=f"f{index}")
        results.put(("published", ""))
    except StoreError as exc:
        results.put((type(exc).__name__, str(exc)))


def _drop_write_access() -> None:
    """As root, become ``nobody`` (root writes anywhere); otherwise rely on the directory's mode.

    ``nobody`` may not read the interpreter's standard library (pyenv keeps it
    under /root), so what the CLI imports lazily is imported first.
    """
    import difflib  # noqa: F401 -- click's messages for unknown options

    import pipelines.offline  # noqa: F401
    import pipelines.progress  # noqa: F401

    if os.geteuid() == 0:
        os.setgid(NOBODY)
        os.setuid(NOBODY)


def publish_read_only(root: str, index: int, trace: str, results) -> None:
    """Try to check, publish into, and run ``locality optimize`` against a store this process cannot write."""
    from locality.cli import main

    _drop_write_access()
    outcomes = []
    for attempt in (
        lambda: ConfigStore(root).check_writable(),
        lambda: ConfigStore(root).publish(make_config(index, 10), fingerprint=f"f{index}"),
    ):
        try:
            attempt()
            outcomes.append(("ok", ""))
        except StoreError as exc:
            outcomes.append((type(exc).__name__, str(exc)))
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        keys = ",".join(card("geotweets_hashtags_2015").keys)
        code = main(["optimize", trace, "--keys", keys, "--servers", "2", "--store", root, "-q"])
    outcomes.append((int(code), stderr.getvalue()))
    results.put(outcomes)


def hold_lock(root: str, env: dict, ready, release) -> None:
    """Hold the store's lease (as ``locality optimize``) until ``release`` is set."""
    os.environ.update(env)
    with ConfigStore(root, job="locality optimize").lock():
        ready.set()
        release.wait(60)


def publish_after_a_stall(root: str, env: dict, index: int, lease_seconds: float, ready, resume, results) -> None:
    """Take the lease, wait for ``resume`` (the parent stops this process meanwhile, past the lease), then publish.

    The lease's own check is switched off, as if the stall fell between the check and the write (a GC pause):
    what must stop this writer is the conditional write of ``CURRENT``, refused by the store itself.
    """
    os.environ.update(env)
    store = ConfigStore(root, lock_timeout=30, job="stalled writer", lease_seconds=lease_seconds)
    store._lease.check = lambda: None
    try:
        with store.lock():
            ready.set()
            resume.wait(120)
            store.publish(make_config(index, 100), fingerprint=f"f{index}")
        results.put(("published", ""))
    except StoreError as exc:
        results.put((type(exc).__name__, str(exc)))
