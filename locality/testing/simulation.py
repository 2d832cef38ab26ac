"""A simulated cluster that applies migration plans to live keyed state while tuples keep flowing.

:class:`SimulatedCluster` replays a trace through a chain of stateful
operators whose instances each keep a count per key, and applies
reconfigurations (a new :class:`~locality.routing.RoutingConfiguration` and the
:class:`~locality.migration.MigrationPlan` that leads to it) in the middle of
the stream with the progressive protocol of Caneill et al. [1]_ (section 3.4,
Algorithm 1). :meth:`SimulationResult.check_against` then compares every
instance's final state with the exact counts of the trace.

Model
-----
A discrete-event simulation on a logical clock of integer ticks, deterministic
given ``seed`` (one numpy Generator draws every delay).

*Nodes.* A manager; ``n_sources`` stateless sources (the stage before the
first stateful operator, e.g. Kafka consumers or Storm spouts); and every
instance ``(operator, index)`` of the topology. As in the paper, a node's
*router* is the routing table of the operator **after** it: sources hold the
table of operator 0, instances of operator ``i`` hold the table of operator
``i + 1``, instances of the last operator hold none.

*Tuples.* Trace row ``t`` is emitted at tick ``t`` by source ``t mod
n_sources`` and routed with that source's router *at that tick*. An instance
processes a tuple when it arrives (no service time): ``state[key] += 1``, then
it routes the tuple to the next operator with its own router *at that tick*.
Events due at tick ``t`` are handled before row ``t`` is emitted.

*Channels.* Every message (tuple, control message or state transfer) takes a
delay drawn uniformly from ``[min_delay, max_delay]`` ticks, but each
(sender, receiver) channel is FIFO: a message never overtakes an earlier one
on its channel. Messages on different channels race freely, which is what
lets tuples routed by a new table reach a key's new owner before its state.
A MIGRATE takes one such delay whatever the state it carries (no bandwidth
model).

*Reconfiguration* (Algorithm 1, steps 3 to 6). When the trace reaches row
``at``, the manager sends every source and instance its reconfiguration
message (the new router; for an instance, the keys it sends and to whom and
the keys it receives and from whom, from :meth:`MigrationPlan.messages`) and
waits for all acknowledgements. Then it sends PROPAGATE to the nodes without
predecessors, the sources. Each node, once it has PROPAGATE from **all** its
predecessors (sources: from the manager; instances of operator 0: from every
source; instances of operator ``i``: from every instance of ``i - 1``):

1. switches its router to the new table of the next operator;
2. sends a MIGRATE to every instance in its send list, with the state of
   those keys (possibly empty: a moved key may never have been seen), and
   from then on holds none of them;
3. waits for a MIGRATE from every instance in its receive list, adding the
   state it carries and processing the tuples buffered for those keys, in
   their arrival order;
4. forwards PROPAGATE to every instance of the next operator (the last
   operator reports DONE to the manager instead).

FIFO channels make step 2 safe: PROPAGATE from a predecessor comes after every
tuple that predecessor routed with the old table, so once an instance has it
from all predecessors no old-routed tuple can still reach it.

*In-flight tuples.* From the moment an instance holds its reconfiguration
message, a tuple for a key in its receive list whose state has not arrived
is buffered and processed when the MIGRATE arrives. A tuple for a key the
instance has sent away is an invariant violation: it is counted
(:attr:`SimulationResult.misrouted`), logged and **not** processed.

*Back-to-back reconfigurations* are queued: the manager starts one only when
the previous one has completed at every operator (DONE from every instance
of the last operator), as the paper's manager runs one reconfiguration at a
time. A plan must therefore go from the configuration in force when the
previous queued one ends, which :meth:`SimulatedCluster.run` checks up front.

Invariants checked
------------------
During the run: no tuple reaches an instance for a key it has sent away; no
MIGRATE brings a key's state to an instance that already holds state for it
(it would have processed tuples before the state arrived); no tuple is left in
a buffer and every reconfiguration completes. Against the trace
(:meth:`SimulationResult.check_against`): per operator, every key is held by
exactly one instance, that instance is the key's owner in the final
configuration, its count equals the key's exact count in the trace (nothing
lost, nothing counted twice), no instance holds a key absent from the trace,
and the per-operator totals equal the number of rows.

The ``protocol`` argument exists to prove that these checks bite; only
``"algorithm1"`` is correct. ``"no-migration"`` switches routers but never
moves state; ``"migrate-early"`` sends state as soon as the reconfiguration
message arrives, before upstream routers switch; ``"no-buffer"`` processes
tuples for an expected key before its state arrives.

Why one module: a discrete-event simulator is one state
machine (nodes, channels, Algorithm 1's messages, the checks), and about a
quarter of the module is the model's specification above.

References
----------
.. [1] Caneill, El Rheddane, Leroy, De Palma. "Locality-aware routing in
   stateful streaming applications." Middleware 2016, section 3.4 and
   Algorithm 1. https://doi.org/10.1145/2988336.2988340

Examples
--------
>>> import pandas as pd
>>> from locality.hashing import make_fallback
>>> from locality.migration import plan_migration
>>> from locality.routing import RoutingConfiguration, RoutingTable
>>> from locality.topology import Topology
>>> topo = Topology.uniform(["region", "tag"], 2)
>>> def config(entries):
...     return RoutingConfiguration(
...         topo, {op: RoutingTable(op, make_fallback("kafka", 2), entries.get(op)) for op in topo.operators}
...     )
>>> old = config({})
>>> new = config({"region": {"eu": 1 - old.route("region", "eu")}})
>>> trace = pd.DataFrame({"region": ["eu", "us"] * 100, "tag": ["a", "b", "c", "d"] * 50})
>>> plan = plan_migration(old, new, {"region": trace["region"].iloc[:50].value_counts()})
>>> result = SimulatedCluster(old, seed=0, max_delay=5).run(trace, [(50, new, plan)])
>>> result.check_against(trace)
[]
>>> result.state[("region", new.route("region", "eu"))]["eu"]
100
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from locality._validation import check_columns, check_integer, check_option, check_random_state
from locality.defaults import DEFAULT_SEED
from locality.errors import InvalidParameterError, TraceError
from locality.migration import MigrationPlan
from locality.routing import RoutingConfiguration

__all__ = [
    "PROTOCOLS",
    "Reconfiguration",
    "ReconfigurationRecord",
    "SimulationResult",
    "SimulatedCluster",
    "verify",
]

logger = logging.getLogger(__name__)

#: Reconfiguration protocols; only ``"algorithm1"`` is correct, the others exist to test the checker.
PROTOCOLS = ("algorithm1", "no-migration", "migrate-early", "no-buffer")

# Event kinds (small ints: heap entries are plain tuples, compared on (tick, sequence) only).
_TUPLE, _CONFIG, _ACK, _PROPAGATE, _MIGRATE, _DONE = range(6)
_MANAGER = 0
#: Delays are drawn this many at a time (one numpy call per block, not per message).
_DELAY_BLOCK = 1 << 16
#: Invariant violations kept as text (all are counted).
_MAX_RECORDED = 50


class Reconfiguration(NamedTuple):
    """A reconfiguration to inject: before row ``at`` is emitted, start moving to ``config`` with ``plan``."""

    at: int
    config: RoutingConfiguration
    plan: MigrationPlan


@dataclass
class ReconfigurationRecord:
    """What one reconfiguration did, with its tick span.

    ``injected_tick`` is when the trace reached ``at``; ``started_tick`` when
    the manager sent the messages (later when queued behind another);
    ``propagate_tick`` when every acknowledgement was in and PROPAGATE left;
    ``operator_done_ticks[op]`` when the last instance of ``op`` finished;
    ``completed_tick`` when the manager had DONE from the last operator.
    ``moved_state`` is the state actually carried by MIGRATE messages and
    ``empty_keys`` the moved keys that carried none.
    """

    index: int
    at: int
    injected_tick: int
    moved_keys: int
    started_tick: int | None = None
    propagate_tick: int | None = None
    operator_done_ticks: dict[str, int] = field(default_factory=dict)
    completed_tick: int | None = None
    moved_state: int = 0
    empty_keys: int = 0
    migrate_messages: int = 0
    buffered: int = 0

    @property
    def completed(self) -> bool:
        return self.completed_tick is not None

    @property
    def span(self) -> int | None:
        """Ticks from injection to completion (includes time queued behind a previous reconfiguration)."""
        return None if self.completed_tick is None else self.completed_tick - self.injected_tick

    def to_dict(self) -> dict:
        return {
            "index": self.index,
            "at": self.at,
            "injected_tick": self.injected_tick,
            "started_tick": self.started_tick,
            "propagate_tick": self.propagate_tick,
            "operator_done_ticks": dict(self.operator_done_ticks),
            "completed_tick": self.completed_tick,
            "span": self.span,
            "moved_keys": self.moved_keys,
            "moved_state": self.moved_state,
            "empty_keys": self.empty_keys,
            "migrate_messages": self.migrate_messages,
            "buffered": self.buffered,
        }


@dataclass
class SimulationResult:
    """Final state and counters of one replay.

    Attributes
    ----------
    state : dict of (operator, instance) -> {key: count}
        Final state of every instance (keys with a zero count are absent).
    processed : dict of (operator, instance) -> int
        Tuples each instance processed.
    buffered : int
        Tuples that waited in a buffer for their key's state.
    buffered_per_instance : dict of (operator, instance) -> int
    max_buffer : int
        Largest buffer any instance held at any tick.
    misrouted : int
        Tuples that reached an instance for a key it had sent away (dropped).
    invariant_violations : list of str
        The run-time violations (at most 50 recorded as text).
    violation_count : int
        Every run-time violation, recorded or not.
    reconfigurations : list of ReconfigurationRecord
        In the order they ran.
    final_config : RoutingConfiguration
        The configuration in force at the end.
    ticks : int
        Logical clock when the last message was delivered.
    seconds : float
        Wall time of the replay.
    """

    operators: tuple[str, ...]
    n_tuples: int
    protocol: str
    state: dict[tuple[str, int], dict[Any, int]]
    processed: dict[tuple[str, int], int]
    buffered: int
    buffered_per_instance: dict[tuple[str, int], int]
    max_buffer: int
    misrouted: int
    invariant_violations: list[str]
    violation_count: int
    reconfigurations: list[ReconfigurationRecord]
    final_config: RoutingConfiguration
    ticks: int
    seconds: float

    def check_against(self, trace: pd.DataFrame | Mapping[str, Sequence]) -> list[str]:
        """Every way the final state differs from the exact per-key counts of ``trace`` (empty when none).

        Parameters
        ----------
        trace : DataFrame or mapping of operator -> sequence of keys
            The trace that was replayed, in the same row order.

        Returns
        -------
        list of str
            Run-time invariant violations first, then per operator: keys held
            by several instances, keys held by an instance other than their
            final owner, counts that differ from the trace, keys lost, keys
            held that the trace never had, and wrong totals.
        """
        columns = _trace_columns(trace, self.operators, "check_against")
        problems = list(self.invariant_violations)
        if self.violation_count > len(self.invariant_violations):
            problems.append(f"... and {self.violation_count - len(self.invariant_violations)} more run-time violations")
        for record in self.reconfigurations:
            if not record.completed:
                problems.append(f"reconfiguration #{record.index} (at row {record.at}) never completed")
        n_rows = len(next(iter(columns.values())))
        if n_rows != self.n_tuples:
            problems.append(f"the trace has {n_rows} rows but the simulation replayed {self.n_tuples}")
        for op in self.operators:
            problems.extend(self._check_operator(op, columns[op]))
        return problems

    def _check_operator(self, op: str, keys: np.ndarray) -> list[str]:
        exact = pd.Series(keys).value_counts()
        rows = [(key, index, count) for (o, index), st in self.state.items() if o == op for key, count in st.items()]
        held = pd.DataFrame(rows, columns=["key", "instance", "count"]).astype({"instance": "int64", "count": "int64"})
        problems = []
        shared = held[held["key"].duplicated(keep=False)]  # only these need a per-key list (rare, and slow in pandas)
        for key, instances in shared.groupby("key", sort=False)["instance"]:
            problems.append(f"{op}: key {key!r} is held by {len(instances)} instances {sorted(instances.tolist())}")
        if len(held):
            owner = self.final_config.route_many(op, held["key"].to_numpy(dtype=object))
            for row in held[held["instance"].to_numpy() != owner].itertuples(index=False):
                problems.append(
                    f"{op}: key {row.key!r} is held by instance {row.instance} but its final owner is "
                    f"{self.final_config.route(op, row.key)}"
                )
        counted = held.groupby("key", sort=False)["count"].sum()
        joined = pd.concat([exact.rename("exact"), counted.rename("held")], axis=1).fillna(0).astype("int64")
        for key, row in joined[joined["exact"] != joined["held"]].iterrows():
            if row["held"] == 0:
                problems.append(f"{op}: key {key!r} lost: the trace has {row['exact']}, no instance holds it")
            elif row["exact"] == 0:
                problems.append(f"{op}: key {key!r} is not in the trace but instances hold {row['held']}")
            else:
                problems.append(f"{op}: key {key!r} counts {row['held']} but the trace has {row['exact']}")
        total = int(counted.sum())
        if total != len(keys):
            problems.append(f"{op}: the instances hold {total} tuples in all but the trace has {len(keys)}")
        return problems

    def summary(self) -> dict:
        """JSON-ready figures (no per-key state)."""
        return {
            "protocol": self.protocol,
            "tuples": self.n_tuples,
            "ticks": self.ticks,
            "seconds": self.seconds,
            "buffered": self.buffered,
            "max_buffer": self.max_buffer,
            "misrouted": self.misrouted,
            "violations": self.violation_count,
            "processed": {f"{op}[{i}]": n for (op, i), n in self.processed.items()},
            "reconfigurations": [r.to_dict() for r in self.reconfigurations],
        }


def verify(result: SimulationResult, trace: pd.DataFrame | Mapping[str, Sequence], *, limit: int = 10) -> None:
    """Raise ``AssertionError`` listing the first ``limit`` violations when ``result`` does not match ``trace``.

    Parameters
    ----------
    result : SimulationResult
    trace : DataFrame or mapping of operator -> sequence of keys
    limit : int, default 10
        How many violations the message lists.

    Raises
    ------
    AssertionError
        With the number of violations and the first ``limit`` of them.
    """
    problems = result.check_against(trace)
    if problems:
        shown = "\n  ".join(problems[:limit])
        more = f"\n  ... and {len(problems) - limit} more" if len(problems) > limit else ""
        raise AssertionError(
            f"the simulated state differs from the trace ({len(problems)} violations, protocol "
            f"{result.protocol!r}):\n  {shown}{more}"
        )


def _trace_columns(trace: pd.DataFrame | Mapping[str, Sequence], operators: Sequence[str], owner: str) -> dict:
    """The operators' key columns as object arrays of equal length, without nulls."""
    present = list(trace.columns) if isinstance(trace, pd.DataFrame) else list(trace)
    check_columns(present, operators, f"the trace given to {owner}")
    columns = {op: np.asarray(trace[op], dtype=object) for op in operators}
    lengths = {len(c) for c in columns.values()}
    if len(lengths) != 1:
        raise TraceError(f"the key columns given to {owner} have different lengths: {sorted(lengths)}")
    for op, column in columns.items():
        if pd.isna(column).any():
            raise TraceError(f"column {op!r} of the trace given to {owner} has null keys")
    return columns


class _Plan:
    """One reconfiguration, translated to key codes and node numbers."""

    __slots__ = ("record", "config", "routes", "send", "receive")

    def __init__(self, record, config, routes, send, receive) -> None:
        self.record: ReconfigurationRecord = record
        self.config: RoutingConfiguration = config
        self.routes: list[list[int]] = routes  # per operator: instance of each key code
        self.send: dict[int, dict[int, list[int]]] = send  # node -> target node -> key codes
        self.receive: dict[int, dict[int, list[int]]] = receive  # node -> source node -> key codes


class SimulatedCluster:
    """A cluster of keyed counters that replays a trace and applies reconfigurations on the fly.

    Parameters
    ----------
    config : RoutingConfiguration
        The configuration in force when the replay starts (its topology gives
        the operators and instances).
    seed : int or numpy Generator, default 0
        Draws every message delay. An int makes every :meth:`run` replay the
        same delays; a Generator carries on from run to run.
    max_delay : int, default 20
        Largest delay of a message, in ticks (one row is emitted per tick).
    min_delay : int, default 1
        Smallest delay of a message (``min_delay == max_delay`` makes every
        delay fixed).
    n_sources : int, optional
        Stateless sources feeding the first operator (default: one per server).
    protocol : {"algorithm1", "no-migration", "migrate-early", "no-buffer"}, default "algorithm1"
        Only ``"algorithm1"`` is correct; the others are broken on purpose (see
        the module docstring) to show that the checks catch them.

    Raises
    ------
    InvalidParameterError
        On a bad seed, delay bound, source count or protocol.
    """

    def __init__(
        self,
        config: RoutingConfiguration,
        *,
        seed: int | np.random.Generator = DEFAULT_SEED,
        max_delay: int = 20,
        min_delay: int = 1,
        n_sources: int | None = None,
        protocol: str = "algorithm1",
    ) -> None:
        owner = "SimulatedCluster"
        if not isinstance(config, RoutingConfiguration):
            raise InvalidParameterError(
                f"the 'config' parameter of {owner} must be a RoutingConfiguration; got {type(config).__name__}",
                parameter="config",
            )
        self.config = config
        self.seed = seed
        check_random_state(seed, "seed", owner)
        self.min_delay = check_integer(min_delay, "min_delay", owner, lower=0)
        self.max_delay = check_integer(max_delay, "max_delay", owner, lower=max(self.min_delay, 1))
        self.n_sources = (
            len(config.topology.servers) if n_sources is None else check_integer(n_sources, "n_sources", owner, lower=1)
        )
        self.protocol = check_option(protocol, "protocol", owner, PROTOCOLS)

    # ------------------------------------------------------------------ public
    def run(
        self,
        trace: pd.DataFrame | Mapping[str, Sequence],
        reconfigurations: Sequence[Reconfiguration | tuple[int, RoutingConfiguration, MigrationPlan]] = (),
    ) -> SimulationResult:
        """Replay ``trace`` row by row, injecting ``reconfigurations``.

        Parameters
        ----------
        trace : DataFrame or mapping of operator -> sequence of keys
            One key column per operator of the topology; rows are emitted in
            the order given.
        reconfigurations : sequence of ``(at, new_config, plan)``
            Start the reconfiguration to ``new_config`` when row ``at`` is
            about to be emitted (``0 <= at <= len(trace)``). Sorted by ``at``
            (stable); each ``plan`` must lead from the previous configuration
            (the initial one for the first) to ``new_config``.

        Returns
        -------
        SimulationResult

        Raises
        ------
        TraceError
            A key column is missing, has nulls, or columns differ in length.
        InvalidParameterError
            A reconfiguration's index is out of range, its configuration has
            another topology, or its plan does not move exactly the keys whose
            instance changes.
        """
        started = time.perf_counter()
        topology = self.config.topology
        operators = tuple(topology.operators)
        columns = _trace_columns(trace, operators, "SimulatedCluster.run")
        n = len(columns[operators[0]])
        try:
            items = sorted((Reconfiguration(*r) for r in reconfigurations), key=lambda r: r.at)
        except TypeError:
            raise InvalidParameterError(
                "the 'reconfigurations' parameter of SimulatedCluster.run must be a sequence of "
                "(at, new_config, plan) triples",
                parameter="reconfigurations",
            ) from None
        for r in items:
            if not isinstance(r.plan, MigrationPlan):
                raise InvalidParameterError(
                    f"the reconfiguration at row {r.at} needs a MigrationPlan; got {type(r.plan).__name__}"
                )
            check_integer(r.at, "at", "SimulatedCluster.run", lower=0, upper=n)
            if not isinstance(r.config, RoutingConfiguration) or r.config.topology != topology:
                raise InvalidParameterError(
                    f"the reconfiguration at row {r.at} must be a RoutingConfiguration of the simulated topology"
                )
        engine = _Engine(self, operators, columns, items)
        engine.loop(rng=check_random_state(self.seed, "seed", "SimulatedCluster"))
        result = engine.result(time.perf_counter() - started)
        logger.info(
            "replayed %d tuples with %d reconfigurations (%s) in %.2f s: %d buffered (max %d), %d violations",
            n,
            len(items),
            self.protocol,
            result.seconds,
            result.buffered,
            result.max_buffer,
            result.violation_count,
        )
        return result


class _Engine:
    """The event loop and the per-node state of one :meth:`SimulatedCluster.run`."""

    def __init__(self, cluster: SimulatedCluster, operators, columns, items: list[Reconfiguration]) -> None:
        self.protocol = cluster.protocol
        self.min_delay, self.max_delay = cluster.min_delay, cluster.max_delay
        self.operators = operators
        topology = cluster.config.topology
        self.n_ops = len(operators)
        self.n_tuples = len(columns[operators[0]])
        self.n_sources = cluster.n_sources
        # Keys become dense int codes per operator: state dicts and routing lookups stay on small ints.
        # Keys that only plans name (never in the trace) get codes after the trace's.
        self.keys: list[pd.Index] = []
        self.codes: list[list[int]] = []
        for op in operators:
            codes, uniques = pd.factorize(columns[op])
            known = pd.Index(uniques, dtype=object)
            named = pd.Index([k for r in items for k in r.plan.moves_of(op)["key"].tolist()], dtype=object)
            self.keys.append(known.append(named.unique().difference(known, sort=False)))
            self.codes.append(codes.tolist())
        self.key_names: list[list] = [index.tolist() for index in self.keys]
        # Node numbering: manager 0, sources 1..S, then the instances of each operator in turn.
        self.n_inst = [topology.n_instances(op) for op in operators]
        self.base = []
        nxt = 1 + self.n_sources
        for count in self.n_inst:
            self.base.append(nxt)
            nxt += count
        self.n_nodes = nxt
        self.node_op: list[int] = [-1] * (1 + self.n_sources)
        self.node_index: list[int] = [-1] * (1 + self.n_sources)
        for i, count in enumerate(self.n_inst):
            self.node_op.extend([i] * count)
            self.node_index.extend(range(count))
        self.sources = list(range(1, 1 + self.n_sources))
        self.instances_of = [list(range(b, b + c)) for b, c in zip(self.base, self.n_inst)]
        self.n_preds = [self.n_sources] + self.n_inst[:-1]

        initial = self._routes(cluster.config)
        self.config = cluster.config
        # router[node]: instance of the next operator for each key code of that operator (None: no next operator)
        self.router: list[list[int] | None] = [None] * self.n_nodes
        for s in self.sources:
            self.router[s] = initial[0]
        for i in range(self.n_ops - 1):
            for m in self.instances_of[i]:
                self.router[m] = initial[i + 1]
        self.state: list[dict[int, int]] = [{} for _ in range(self.n_nodes)]
        self.expecting: list[set[int]] = [set() for _ in range(self.n_nodes)]
        self.gone: list[set[int]] = [set() for _ in range(self.n_nodes)]
        self.buffers: list[list[int]] = [[] for _ in range(self.n_nodes)]
        self.processed = [0] * self.n_nodes
        self.buffered_at = [0] * self.n_nodes
        self.max_buffer_at = [0] * self.n_nodes
        self.misrouted = 0
        self.violations: list[str] = []
        self.violation_count = 0

        self.plans = self._translate(items, initial)
        self.queue: list[_Plan] = []
        self.current: _Plan | None = None
        self.acks = 0
        self.done = 0
        self.prop_count = [0] * self.n_nodes
        self.pending = [0] * self.n_nodes  # MIGRATE messages still expected by each instance
        self.switched = [False] * self.n_nodes
        self.finished_ops: list[int] = []
        self.now = 0

    # ------------------------------------------------------------------ setup
    def _routes(self, config: RoutingConfiguration) -> list[list[int]]:
        return [
            config.route_many(op, self.keys[i].to_numpy(dtype=object)).tolist() for i, op in enumerate(self.operators)
        ]

    def _translate(self, items: list[Reconfiguration], initial: list[list[int]]) -> list[_Plan]:
        """Each plan in codes and node numbers, after checking it moves exactly the keys whose instance changes."""
        plans = []
        previous = initial
        for index, r in enumerate(items):
            routes = self._routes(r.config)
            send: dict[int, dict[int, list[int]]] = {}
            receive: dict[int, dict[int, list[int]]] = {}
            moved = 0
            for i, op in enumerate(self.operators):
                moves = r.plan.moves_of(op)
                codes = self.keys[i].get_indexer(moves["key"].to_numpy(dtype=object))
                source = moves["source"].to_numpy(dtype=np.int64)
                target = moves["target"].to_numpy(dtype=np.int64)
                old, new = np.asarray(previous[i]), np.asarray(routes[i])
                changed = np.flatnonzero(old != new)
                wrong = (source != old[codes]) | (target != new[codes])
                missing = np.setdiff1d(changed, codes)
                if wrong.any() or len(missing) or len(np.unique(codes)) != len(codes):
                    example = self.keys[i][missing[:3]].tolist() if len(missing) else moves["key"][wrong].tolist()[:3]
                    raise InvalidParameterError(
                        f"the plan of the reconfiguration at row {r.at} does not lead from the configuration in "
                        f"force to the new one for {op!r}: {len(missing)} keys change instance without a move, "
                        f"{int(wrong.sum())} moves disagree with the routes (e.g. {example})"
                    )
                moved += len(codes)
            # The paper's per-instance messages (send / receive lists), keyed by node numbers.
            for message in r.plan.messages(r.config):
                if message.operator is None:  # the sources' message: their router only, no state
                    continue
                j = self.operators.index(message.operator)
                node = self.base[j] + message.instance
                if message.send:
                    send[node] = {self.base[j] + t: self._codes(j, k) for t, k in message.send.items()}
                if message.receive:
                    receive[node] = {self.base[j] + s: self._codes(j, k) for s, k in message.receive.items()}
            record = ReconfigurationRecord(index, int(r.at), int(r.at), moved)
            plans.append(_Plan(record, r.config, routes, send, receive))
            previous = routes
        return plans

    def _codes(self, op: int, keys: list) -> list[int]:
        return self.keys[op].get_indexer(pd.Index(keys, dtype=object)).tolist()

    def _delays(self, rng: np.random.Generator) -> Iterator[int]:
        while True:
            yield from rng.integers(self.min_delay, self.max_delay + 1, size=_DELAY_BLOCK).tolist()

    # ------------------------------------------------------------------ messages
    def send(self, src: int, dst: int, kind: int, payload: Any) -> None:
        tick = self.now + next(self.delay)
        channel = src * self.n_nodes + dst
        if tick < self.last[channel]:
            tick = self.last[channel]  # FIFO: never overtake an earlier message on this channel
        self.last[channel] = tick
        heapq.heappush(self.heap, (tick, next(self.counter), kind, dst, src, payload))

    def violation(self, text: str) -> None:
        self.violation_count += 1
        if len(self.violations) < _MAX_RECORDED:
            self.violations.append(text)
            logger.warning("invariant violation: %s", text)

    # ------------------------------------------------------------------ the loop
    def loop(self, rng: np.random.Generator) -> None:
        self.heap: list[tuple] = []
        self.counter = itertools.count()
        self.delay = self._delays(rng)
        self.last = [0] * (self.n_nodes * self.n_nodes)
        # Locals: the loop body runs once per tuple hop, so attribute lookups are hoisted.
        heap, push, pop = self.heap, heapq.heappush, heapq.heappop
        counter, delay, last, n_nodes = self.counter, self.delay, self.last, self.n_nodes
        codes, router, state, expecting, gone = self.codes, self.router, self.state, self.expecting, self.gone
        buffers, processed, node_op, base = self.buffers, self.processed, self.node_op, self.base
        n, n_sources, last_op = self.n_tuples, self.n_sources, self.n_ops - 1
        first_codes, first_base = codes[0], base[0]
        injections = [p.record.at for p in self.plans] + [n + 1]
        next_injection = 0
        i = 0
        while True:
            if i <= n and (not heap or heap[0][0] > i):
                # Every event due up to tick i is handled: inject, then emit row i.
                self.now = i
                while injections[next_injection] == i:
                    self.inject(self.plans[next_injection])
                    next_injection += 1
                if i < n:
                    src = 1 + i % n_sources
                    dst = first_base + router[src][first_codes[i]]
                    tick = i + next(delay)
                    channel = src * n_nodes + dst
                    if tick < last[channel]:
                        tick = last[channel]
                    last[channel] = tick
                    push(heap, (tick, next(counter), _TUPLE, dst, src, i))
                i += 1
                continue
            if not heap:
                break
            now, _, kind, m, src, payload = pop(heap)
            self.now = now
            if kind == _TUPLE:
                batch: Sequence[int] = (payload,)
            elif kind == _MIGRATE:
                batch = self.on_migrate(m, src, payload)
            else:
                self.on_control(kind, m, src, payload)
                continue
            op = node_op[m]
            keys = codes[op]
            waiting = expecting[m]
            sent = gone[m]
            st = state[m]
            if op < last_op:
                next_keys, table, next_base = codes[op + 1], router[m], base[op + 1]
            for t in batch:
                key = keys[t]
                if waiting and key in waiting:
                    # Its state has not arrived: hold the tuple (Algorithm 1's buffer), in arrival order.
                    buffer = buffers[m]
                    buffer.append(t)
                    self.buffered_at[m] += 1
                    if self.current is not None:
                        self.current.record.buffered += 1
                    if len(buffer) > self.max_buffer_at[m]:
                        self.max_buffer_at[m] = len(buffer)
                    continue
                if sent and key in sent:
                    self.misrouted += 1
                    self.violation(
                        f"tuple {t} for key {self.key_names[op][key]!r} reached {self.operators[op]}"
                        f"[{self.node_index[m]}] after it had sent that key's state away (tick {now})"
                    )
                    continue
                st[key] = st.get(key, 0) + 1
                processed[m] += 1
                if op < last_op:
                    dst = next_base + table[next_keys[t]]
                    tick = now + next(delay)
                    channel = m * n_nodes + dst
                    if tick < last[channel]:
                        tick = last[channel]
                    last[channel] = tick
                    push(heap, (tick, next(counter), _TUPLE, dst, m, t))
            if kind == _MIGRATE:
                self.pending[m] -= 1
                self.maybe_finish(m)
        for m, buffer in enumerate(self.buffers):
            if buffer:
                self.violation(
                    f"{len(buffer)} tuples still buffered at {self.operators[node_op[m]]}[{self.node_index[m]}] "
                    "at the end (their state never arrived)"
                )

    # ------------------------------------------------------------------ protocol
    def inject(self, plan: _Plan) -> None:
        if self.current is None:
            self.start(plan)
        else:
            # One reconfiguration at a time: the next starts when the manager has DONE from the last operator.
            logger.debug("reconfiguration #%d queued at tick %d", plan.record.index, self.now)
            self.queue.append(plan)

    def start(self, plan: _Plan) -> None:
        self.current = plan
        plan.record.started_tick = self.now
        self.acks = self.done = 0
        self.finished_ops = [0] * self.n_ops
        logger.info(
            "reconfiguration #%d starts at tick %d (injected at row %d, %d keys move)",
            plan.record.index,
            self.now,
            plan.record.at,
            plan.record.moved_keys,
        )
        for node in range(1, self.n_nodes):
            self.send(_MANAGER, node, _CONFIG, plan)  # Algorithm 1, step 3

    def on_control(self, kind: int, m: int, src: int, plan: _Plan | None) -> None:
        if kind == _CONFIG:
            if self.node_op[m] >= 0:
                self.prop_count[m] = 0
                self.switched[m] = False
                receive = plan.receive.get(m, {})
                for keys in receive.values():
                    # Told to take these keys (back): tuples for them are no longer strays here.
                    self.gone[m].difference_update(keys)
                if self.protocol != "no-migration":
                    # += not =: under "migrate-early" a MIGRATE may overtake this message
                    self.pending[m] += len(receive)
                    if self.protocol != "no-buffer":
                        # From now on a tuple for an incoming key waits for that key's state.
                        for keys in receive.values():
                            self.expecting[m].update(keys)
                    if self.protocol == "migrate-early":
                        self.migrate(m, plan)
            self.send(m, _MANAGER, _ACK, None)  # step 4
        elif kind == _ACK:
            self.acks += 1
            if self.acks == self.n_nodes - 1:
                plan = self.current
                plan.record.propagate_tick = self.now
                for s in self.sources:  # step 5: the nodes without predecessors hear PROPAGATE from the manager
                    self.send(_MANAGER, s, _PROPAGATE, None)
        elif kind == _PROPAGATE:
            plan = self.current
            op = self.node_op[m]
            if op < 0:
                # A source: switch to the first operator's new table, then pass PROPAGATE on. FIFO channels put it
                # behind every tuple this source routed with the old table.
                self.router[m] = plan.routes[0]
                for dst in self.instances_of[0]:
                    self.send(m, dst, _PROPAGATE, None)
                return
            self.prop_count[m] += 1
            if self.prop_count[m] < self.n_preds[op]:
                return
            # PROPAGATE from every predecessor: no tuple routed by the old table of this operator can come any more.
            if op < self.n_ops - 1:
                self.router[m] = plan.routes[op + 1]  # update_routing(my_reconf[ROUTER])
            if self.protocol in ("algorithm1", "no-buffer"):
                self.migrate(m, plan)  # step 6
            self.switched[m] = True
            self.maybe_finish(m)
        elif kind == _DONE:
            self.done += 1
            if self.done == self.n_inst[-1]:
                self.complete()

    def migrate(self, m: int, plan: _Plan) -> None:
        """Send the state of every key in ``m``'s send list to its new owner; ``m`` holds none of them after."""
        st = self.state[m]
        record = plan.record
        for target, keys in plan.send.get(m, {}).items():
            carried = {}
            for key in keys:
                count = st.pop(key, 0)
                if count:
                    carried[key] = count
                    record.moved_state += count
                else:
                    record.empty_keys += 1  # never seen here: the MIGRATE still goes, so buffered tuples get released
            self.gone[m].update(keys)
            record.migrate_messages += 1
            self.send(m, target, _MIGRATE, (keys, carried))

    def on_migrate(self, m: int, src: int, payload: tuple[list[int], dict[int, int]]) -> list[int]:
        """Install the state a MIGRATE carries; return the buffered tuples it releases, in arrival order."""
        keys, carried = payload
        st = self.state[m]
        op = self.node_op[m]
        for key, count in carried.items():
            if key in st:
                self.violation(
                    f"the state of key {self.key_names[op][key]!r} reached {self.operators[op]}[{self.node_index[m]}], "
                    f"which had already counted {st[key]} tuples of it (tick {self.now})"
                )
                st[key] += count
            else:
                st[key] = count
        waiting = self.expecting[m]
        waiting.difference_update(keys)
        self.gone[m].difference_update(keys)  # a key can come back to an instance that sent it away earlier
        buffer = self.buffers[m]
        if not buffer:
            return []
        codes = self.codes[op]
        released = [t for t in buffer if codes[t] not in waiting]
        if released:
            self.buffers[m] = [t for t in buffer if codes[t] in waiting]
        return released

    def maybe_finish(self, m: int) -> None:
        if not self.switched[m] or self.pending[m] > 0:
            return
        self.switched[m] = False  # finish once
        op = self.node_op[m]
        record = self.current.record
        self.finished_ops[op] += 1
        if self.finished_ops[op] == self.n_inst[op]:
            record.operator_done_ticks[self.operators[op]] = self.now
        if op < self.n_ops - 1:
            for dst in self.instances_of[op + 1]:
                self.send(m, dst, _PROPAGATE, None)
        else:
            self.send(m, _MANAGER, _DONE, None)

    def complete(self) -> None:
        plan = self.current
        plan.record.completed_tick = self.now
        self.config = plan.config
        self.current = None
        logger.info(
            "reconfiguration #%d completed at tick %d (%d ticks after injection; %d state moved, %d tuples buffered)",
            plan.record.index,
            self.now,
            plan.record.span,
            plan.record.moved_state,
            plan.record.buffered,
        )
        if self.queue:
            self.start(self.queue.pop(0))

    # ------------------------------------------------------------------ result
    def result(self, seconds: float) -> SimulationResult:
        state, processed, buffered = {}, {}, {}
        for m in range(1 + self.n_sources, self.n_nodes):
            op = self.node_op[m]
            name = (self.operators[op], self.node_index[m])
            keys = self.key_names[op]
            state[name] = {keys[k]: c for k, c in self.state[m].items() if c}
            processed[name] = self.processed[m]
            buffered[name] = self.buffered_at[m]
        return SimulationResult(
            operators=self.operators,
            n_tuples=self.n_tuples,
            protocol=self.protocol,
            state=state,
            processed=processed,
            buffered=sum(buffered.values()),
            buffered_per_instance=buffered,
            max_buffer=max(self.max_buffer_at),
            misrouted=self.misrouted,
            invariant_violations=list(self.violations),
            violation_count=self.violation_count,
            reconfigurations=[p.record for p in self.plans],
            final_config=self.config,
            ticks=self.now,
            seconds=seconds,
        )
