"""What each instance has served since a balance window began: the ledger the online job keeps in the store.

A rebalancing run between two reconfigurations can balance the whole balance
window (until the next reconfiguration), not only the load to come: an
instance that a burst loaded on Monday should take less for the rest of the
week. That needs each instance's load since the window began, as routed by
the tables in force while the rows passed, which no single window of the
trace holds (the tables changed at every run). So every run that balances a
window adds the rows since the previous run (``until``) up to the end of its
own window, replayed through the version in force (the one the previous run
left current), and writes the sums back into the store
(:meth:`~locality.store.ConfigStore.record_served_loads`).

The version in force is right for those rows as long as the runs of a balance
window are the only writers between reconfigurations; a nightly job that
publishes starts a new balance window (``--balance-since`` its time), and a
rollback in between makes the ledger count the rows since the last run with
the restored tables. Rows are counted once: a run whose window ends before
``until`` adds nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from locality.routing import RoutingConfiguration
from locality.store import ConfigStore
from pipelines.evaluate import replay_totals
from pipelines.trace import TraceSpec, read_trace, spark_read_errors

__all__ = ["ServedLoads"]


@dataclass(frozen=True)
class ServedLoads:
    """Each instance's load from ``since`` to ``until`` (weights of the rows routed to it), per operator."""

    since: datetime
    until: datetime
    loads: dict[str, np.ndarray]
    rows: int = 0

    @classmethod
    def read(cls, store: ConfigStore, since: datetime, config: RoutingConfiguration) -> ServedLoads:
        """The ledger of the balance window that began at ``since``; empty (nothing served) before its first run."""
        doc = store.served_loads(since)
        if doc is None:
            zeros = {op: np.zeros(config.topology.n_instances(op)) for op in config.topology.operators}
            return cls(since, since, zeros)
        try:
            loads = {op: np.asarray(doc["loads"][op], dtype=float) for op in config.topology.operators}
            until = datetime.fromisoformat(doc["until"])
        except (KeyError, TypeError, ValueError) as exc:
            raise store.served_loads_damaged(since, str(exc)) from None
        for op, served in loads.items():
            if served.shape != (config.topology.n_instances(op),):
                raise store.served_loads_damaged(
                    since, f"{op!r} has {served.size} loads for {config.topology.n_instances(op)} instances"
                )
        return cls(since, until, loads, doc["rows"])

    def caught_up(self, spark, trace: TraceSpec, config: RoutingConfiguration, end: datetime) -> ServedLoads:
        """The ledger with the rows of ``trace`` from ``until`` to ``end`` added, as ``config`` routes them."""
        if end <= self.until:
            return self
        interval = dataclasses.replace(trace, start=self.until.isoformat(), end=end.isoformat())
        with spark_read_errors(trace.path):
            totals, _ = replay_totals(read_trace(spark, interval), config, trace.keys, weight=trace.weight)
        if totals is None:
            return dataclasses.replace(self, until=end)
        loads = {op: self.loads[op] + totals.loads[op] for op in self.loads}
        return ServedLoads(self.since, end, loads, self.rows + totals.rows)

    def write(self, store: ConfigStore) -> None:
        """Store the ledger (under the store's lock, atomically)."""
        store.record_served_loads(self.since, self.to_dict())

    def to_dict(self) -> dict:
        return {
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "rows": self.rows,
            "loads": {op: v.tolist() for op, v in self.loads.items()},
        }
