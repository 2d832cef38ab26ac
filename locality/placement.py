"""Keys to instances: the server METIS chose, its least-loaded instance, then a per-operator repair.

METIS balances the sum of all operators' loads per server; the bound users
need is per operator and per instance: no instance may receive more than
``alpha`` times its fair share of its operator's load [1]_. This module turns a
server per key into an instance per key and enforces that bound:

1. Within its server, each key (heaviest first) goes to the instance with the
   lowest load relative to its share (longest-processing-time greedy), unless
   its *preferred* instance (the fallback's choice, so no table entry is
   needed; or its current instance, so no state moves) is on that server and
   still under its fair share.
2. Repair: while an instance is above its bound, move keys off it, cheapest
   first, where the price of a move is the locality it loses (edge weight to
   keys on the old server minus edge weight to keys on the new one) per unit
   of load moved. Moves between instances of one server cost nothing.

Load that the graph does not hold (the tail of keys the sketch did not keep)
is routed by the fallback hash and counted as spread over instances in
proportion to their shares.

References
----------
.. [1] Caneill, El Rheddane, Leroy, De Palma. "Locality-aware routing in
   stateful streaming applications." Middleware 2016 (section 3.1: the alpha bound).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from locality._stopwatch import Stopwatch
from locality.defaults import DEFAULT_ALPHA
from locality.graph import KeyGraph
from locality.imbalance import imbalance as imbalance_of
from locality.partition import HotKey
from locality.topology import Topology

__all__ = ["Placement", "place_keys", "server_connections", "server_connections_by_chunk", "connection_to"]

logger = logging.getLogger(__name__)

_EPS = 1e-9
#: Most alternating refinement passes over the operators.
_REFINE_ROUNDS = 8
#: Safety cap on repair rounds (each moves at least one key or gives an instance up).
_MAX_REPAIR_ROUNDS = 100_000
#: Heaviest keys per instance considered for a swap when no single move fits.
_SWAP_CANDIDATES = 256
#: Instances balance repair names when it gives up on them; past these, their number (thousands with many
#: instances and keys heavier than any of them).
_NAMED_STUCK = 10
#: Keys x servers cells of edge weight computed at once in refinement (32 MB of float64).
_CONNECTION_CELLS = 1 << 22


@dataclass
class Placement:
    """Instance (index within its operator) and server of every vertex, and the expected loads.

    ``instance_loads[op]`` and ``bounds[op]`` are per instance, on the graph's
    loads plus the hash-routed tail; ``imbalance[op]`` is the largest
    ``load / fair share`` (1 = perfectly balanced; the paper's alpha).
    ``stopwatch`` holds the seconds of its stages: ``assign`` (keys to the
    instances of their server), ``repair`` and ``refine``.
    """

    instance_of_vertex: np.ndarray
    server_of_vertex: np.ndarray
    instance_loads: dict[str, np.ndarray]
    bounds: dict[str, np.ndarray]
    imbalance: dict[str, float]
    moves: int
    locality: float
    stopwatch: Stopwatch = field(default_factory=Stopwatch)

    @property
    def balanced(self) -> bool:
        """True when every instance is within its bound (hot keys raise their own instance's bound)."""
        return all(np.all(self.instance_loads[op] <= self.bounds[op] * (1 + 1e-9)) for op in self.instance_loads)


def _neighbour_entries(xadj: np.ndarray, vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row (position in ``vertices``) and CSR position of every neighbour entry of ``vertices``."""
    starts, ends = xadj[vertices], xadj[vertices + 1]
    counts = ends - starts
    rows = np.repeat(np.arange(len(vertices)), counts)
    positions = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(starts, counts)
    return rows, positions


def server_connections(
    graph: KeyGraph,
    vertices: np.ndarray,
    server_of_vertex: np.ndarray,
    n_servers: int,
    csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Edge weight from each of ``vertices`` to the keys on each server, shape ``(len(vertices), n_servers)``."""
    xadj, adjncy, weights = csr if csr is not None else graph.to_csr()
    rows, positions = _neighbour_entries(xadj, vertices)
    if positions.size == 0:
        return np.zeros((len(vertices), n_servers))
    # bincount on flat (row, server) cells: the same sums as np.add.at, ~10x faster on millions of entries
    cells = rows * n_servers + server_of_vertex[adjncy[positions]]
    out = np.bincount(cells, weights=weights[positions], minlength=len(vertices) * n_servers)
    return out.reshape(len(vertices), n_servers)


def server_connections_by_chunk(
    graph: KeyGraph,
    vertices: np.ndarray,
    server_of_vertex: np.ndarray,
    n_servers: int,
    csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> Iterator[tuple[slice, np.ndarray]]:
    """:func:`server_connections` of ``vertices`` a chunk at a time: ``(rows of vertices, their matrix)``.

    All of them at once is millions x 48 float64 (1.5 GB at 1e7 edges); a
    chunk is at most ``_CONNECTION_CELLS`` cells, whatever the graph.
    """
    step = max(1, _CONNECTION_CELLS // n_servers)
    for lo in range(0, len(vertices), step):
        rows = slice(lo, min(lo + step, len(vertices)))
        yield rows, server_connections(graph, vertices[rows], server_of_vertex, n_servers, csr)


def connection_to(
    graph: KeyGraph,
    vertices: np.ndarray,
    server_of_vertex: np.ndarray,
    servers: np.ndarray,
    csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Edge weight from each of ``vertices`` to the keys on ``servers[i]`` (one server per vertex).

    One column of :func:`server_connections` per vertex, without its
    vertices x servers matrix: memory follows the vertices' edges, whatever
    the number of servers (the table cap asks this of every key).
    """
    xadj, adjncy, weights = csr if csr is not None else graph.to_csr()
    rows, positions = _neighbour_entries(xadj, vertices)
    there = server_of_vertex[adjncy[positions]] == np.asarray(servers)[rows]
    return np.bincount(rows[there], weights=weights[positions[there]], minlength=len(vertices))


def _instances_by_server(inst_server: np.ndarray, n_servers: int) -> list[np.ndarray]:
    """The instances of each server ``0 .. n_servers - 1``, ascending: one sort, not a scan per server."""
    order = np.argsort(inst_server, kind="stable")
    return np.split(order, np.searchsorted(inst_server[order], np.arange(1, n_servers)))


def _lpt_within_servers(
    weights: np.ndarray,
    servers: np.ndarray,
    preferred: np.ndarray | None,
    inst_server: np.ndarray,
    shares: np.ndarray,
    base_load: np.ndarray,
    total: float,
    pinned: np.ndarray | None,
) -> np.ndarray:
    """Instance per key: heaviest first, the least-loaded (relative to share) instance of its server.

    Pinned keys take their preferred instance first.
    """
    n_servers = int(inst_server.max()) + 1
    per_server = _instances_by_server(inst_server, n_servers)
    if all(len(group) == 1 for group in per_server):
        return np.array([g[0] for g in per_server], dtype=np.int64)[servers]
    loads = base_load.copy()
    fair = shares * total
    out = np.empty(weights.shape[0], dtype=np.int64)
    free = np.ones(weights.shape[0], dtype=bool) if pinned is None else ~pinned
    if pinned is not None:
        out[pinned] = preferred[pinned]
        loads += np.bincount(preferred[pinned], weights=weights[pinned], minlength=loads.shape[0])
    for v in np.flatnonzero(free)[np.argsort(-weights[free], kind="stable")]:
        group = per_server[servers[v]]
        choice = -1
        if preferred is not None:
            p = preferred[v]
            if inst_server[p] == servers[v] and loads[p] + weights[v] <= fair[p] + _EPS:
                choice = p
        if choice < 0:
            choice = group[np.argmin(loads[group] / shares[group])]
        out[v] = choice
        loads[choice] += weights[v]
    return out


class _OperatorState:
    """Where the keys of one operator are, and the loads and bounds of its instances (mutated by moves)."""

    def __init__(self, graph, op, instance, server_of_vertex, loads, bounds, inst_server, csr, movable):
        self.graph, self.op, self.csr = graph, op, csr
        self.offset = graph.offsets[op]
        self.weights = graph.vertex_weight[graph.operator_slice(op)]
        self.movable = movable
        self.instance, self.server_of_vertex = instance, server_of_vertex
        self.loads, self.bounds, self.inst_server = loads, bounds, inst_server
        self.n_servers = int(inst_server.max()) + 1
        self.instances_on = _instances_by_server(inst_server, self.n_servers)
        self.moves = 0
        #: Keys whose gain may have changed since this operator's last refinement pass, sorted (None: every key).
        self.pending: np.ndarray | None = None

    def connections(self, keys: np.ndarray) -> np.ndarray:
        return server_connections(self.graph, keys + self.offset, self.server_of_vertex, self.n_servers, self.csr)

    def move(self, key: int, target: int) -> None:
        w = self.weights[key]
        self.loads[self.instance[key]] -= w
        self.loads[target] += w
        self.instance[key] = target
        self.server_of_vertex[key + self.offset] = self.inst_server[target]
        self.moves += 1


def _repair(state: _OperatorState) -> None:
    """Move keys off overloaded instances, least locality lost per unit of load first.

    When no single key fits anywhere, the best swap of a key of the source
    with a lighter key of another instance is tried; failing that, the move
    that most lowers the larger of the two excesses (source and target) is
    taken and the target is repaired in turn. Instances that cannot improve
    are given up with a warning (the first :data:`_NAMED_STUCK` by name, then their number).
    """
    stuck: set[int] = set()
    try:
        _repair_rounds(state, stuck)
    finally:
        if len(stuck) > _NAMED_STUCK:
            logger.warning(
                "operator %r: %d instances in all stay above their bounds (the first %d named above)",
                state.op, len(stuck), _NAMED_STUCK,
            )  # fmt: skip


def _repair_rounds(state: _OperatorState, stuck: set[int]) -> None:
    """:func:`_repair`'s rounds; the instances it gives up on are added to ``stuck``."""
    loads, bounds, weights, instance = state.loads, state.bounds, state.weights, state.instance
    for _ in range(_MAX_REPAIR_ROUNDS):
        over = loads - bounds
        over[list(stuck)] = -np.inf
        src = int(np.argmax(over))
        if over[src] <= _EPS * max(bounds[src], 1.0):
            return
        cand = np.flatnonzero((instance == src) & (weights > 0) & state.movable)
        conn = state.connections(cand)
        # loss[c, j]: locality lost by moving candidate c to instance j
        loss = conn[:, [state.inst_server[src]]] - conn[:, state.inst_server]
        loss[:, src] = np.inf
        fits = weights[cand][:, None] <= (bounds - loads)[None, :] + _EPS
        fitting_loss = np.where(fits, loss, np.inf)
        ratio = fitting_loss.min(axis=1) / weights[cand] if cand.size else np.empty(0)
        moved = False
        for c in np.lexsort((-weights[cand], ratio)):
            if loads[src] <= bounds[src] + _EPS:
                break
            options = np.where(bounds - loads + _EPS >= weights[cand[c]], loss[c], np.inf)
            j = int(np.argmin(options))
            if np.isfinite(options[j]):
                state.move(cand[c], j)
                moved = True
        if not moved and not _swap(state, src, cand, loss) and not _overshoot(state, src, cand, loss):
            stuck.add(src)
            if len(stuck) <= _NAMED_STUCK:
                logger.warning("operator %r: instance %d stays above its bound; no key can move", state.op, src)
    logger.warning("operator %r: balance repair stopped after %d rounds", state.op, _MAX_REPAIR_ROUNDS)


def _swap(state: _OperatorState, src: int, cand: np.ndarray, loss: np.ndarray) -> bool:
    """Exchange a key of ``src`` with a lighter key elsewhere so that neither instance ends above its bound.

    Among swaps that fit, the one removing the most of the source's excess
    (then losing the least locality) is taken. Only the heaviest
    ``_SWAP_CANDIDATES`` keys on each side are tried, which bounds the cost
    on operators with many keys (where single moves rarely get stuck anyway).
    """
    weights, loads, bounds = state.weights, state.loads, state.bounds
    excess = loads[src] - bounds[src]
    order = np.argsort(-weights[cand], kind="stable")[:_SWAP_CANDIDATES]
    mine, my_loss = cand[order], loss[order]
    best, best_key = None, None
    # The movable keys grouped by instance once (in key order within each): scanning every key for every
    # instance made a call O(instances x keys), and balance repair calls this for every stuck instance.
    movable = np.flatnonzero((weights > 0) & state.movable)
    if movable.size == 0:
        return False
    grouped = movable[np.argsort(state.instance[movable], kind="stable")]
    holders, starts = np.unique(state.instance[grouped], return_index=True)
    ends = np.append(starts[1:], grouped.size)
    # A swap of one of ours (m) with a key t of j fits when eps < w_m - w_t <= room of j + eps. The instances
    # where no key t has such an m are skipped before any per-instance work: most of them when instances far
    # outnumber keys (found for all keys at once, with bounds a little looser than the test below, so that
    # rounding never skips an instance where a swap fits).
    ours = np.sort(weights[mine])
    their_weights, room = weights[grouped], (bounds - loads)[state.instance[grouped]]
    lightest_fit = np.searchsorted(ours, their_weights + _EPS / 2, side="right")
    past_heaviest_fit = np.searchsorted(ours, their_weights + room + 2 * _EPS, side="right")
    some_fit = past_heaviest_fit > lightest_fit
    hopeful = (holders != src) & np.logical_or.reduceat(some_fit, starts)
    for j, start, end in zip(holders[hopeful].tolist(), starts[hopeful].tolist(), ends[hopeful].tolist()):
        theirs = grouped[start:end]
        theirs = theirs[np.argsort(-weights[theirs], kind="stable")[:_SWAP_CANDIDATES]]
        delta = weights[mine][:, None] - weights[theirs][None, :]
        fits = (delta > _EPS) & (delta <= bounds[j] - loads[j] + _EPS)
        if not fits.any():
            continue
        back = state.connections(theirs)
        back_loss = back[:, state.inst_server[j]] - back[:, state.inst_server[src]]
        total_loss = my_loss[:, [j]] + back_loss[None, :]
        reduction = np.minimum(delta, excess)
        score = np.where(fits, reduction, -np.inf)
        a, b = np.unravel_index(np.lexsort((total_loss.ravel(), -score.ravel()))[0], score.shape)
        key = (score[a, b], -total_loss[a, b])
        if np.isfinite(score[a, b]) and (best_key is None or key > best_key):
            best, best_key = (mine[a], theirs[b], j), key
    if best is None:
        return False
    mine_key, their_key, j = best
    state.move(mine_key, j)
    state.move(their_key, src)
    return True


def _overshoot(state: _OperatorState, src: int, cand: np.ndarray, loss: np.ndarray) -> bool:
    """Move the key that most lowers max(excess of ``src``, excess of its target); False if none does."""
    if cand.size == 0:
        return False
    excess = state.loads[src] - state.bounds[src]
    w = state.weights[cand][:, None]
    after = np.maximum(excess - w, w - (state.bounds - state.loads)[None, :])
    after[:, src] = np.inf
    after[after >= excess - _EPS] = np.inf
    lowest = after.min()
    if not np.isfinite(lowest):
        return False
    # The lowest excess, then the least locality lost, then the first: one pass, no sort of cand x instances.
    tied = after == lowest
    best = np.flatnonzero(tied & (loss == np.where(tied, loss, np.inf).min()))[0]
    c, j = divmod(int(best), after.shape[1])
    state.move(cand[c], j)
    return True


def _refine(state: _OperatorState) -> np.ndarray:
    """One pass of gain moves: each key goes where its edges are, if an instance there has room.

    METIS refines under its sum-of-operators constraint; after the
    per-operator repair the slack is different, so keys whose neighbours sit
    on another server can often follow them without breaking any bound.
    Highest gain first. Only ``state.pending`` keys are weighed (the others'
    gains have not changed since a pass that left them where they are);
    afterwards the pending keys are those that wanted to move but found no
    room. Returns the vertex ids of the keys moved.
    """
    keys = np.flatnonzero(state.movable) if state.pending is None else state.pending[state.movable[state.pending]]
    best = np.empty(keys.shape[0], dtype=np.int64)
    gain = np.empty(keys.shape[0])
    vertices = keys + state.offset
    chunks = server_connections_by_chunk(state.graph, vertices, state.server_of_vertex, state.n_servers, state.csr)
    for rows, conn in chunks:
        best[rows] = np.argmax(conn, axis=1)
        at = np.arange(conn.shape[0])
        gain[rows] = conn[at, best[rows]] - conn[at, state.server_of_vertex[vertices[rows]]]
    moved, blocked = [], []
    for r in np.flatnonzero(gain > 0)[np.argsort(-gain[gain > 0], kind="stable")]:
        v = keys[r]
        group = state.instances_on[best[r]]
        room = state.bounds[group] - state.loads[group]
        if room.max() + _EPS >= state.weights[v]:
            state.move(v, group[np.argmax(room)])
            moved.append(v)
        else:
            blocked.append(v)
    state.pending = np.sort(np.asarray(blocked, dtype=np.int64))
    return np.asarray(moved, dtype=np.int64) + state.offset


def _mark_neighbours(graph: KeyGraph, states: dict, moved: np.ndarray, csr) -> None:
    """Add the neighbours of the ``moved`` vertices to their operators' pending keys (their gains changed)."""
    if moved.size == 0:
        return
    xadj, adjncy, _ = csr
    neighbours = np.unique(adjncy[_neighbour_entries(xadj, moved)[1]])
    for op, state in states.items():
        if state.pending is not None:
            sl = graph.operator_slice(op)
            mine = neighbours[(neighbours >= sl.start) & (neighbours < sl.stop)] - sl.start
            state.pending = np.union1d(state.pending, mine)


def place_keys(
    graph: KeyGraph,
    topology: Topology,
    server_of_vertex: np.ndarray,
    *,
    alpha: float = DEFAULT_ALPHA,
    preferred: np.ndarray | None = None,
    hot_keys: list[HotKey] | None = None,
    pinned: np.ndarray | None = None,
    repair: bool = True,
    csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> Placement:
    """Assign every vertex to an instance of its operator on its server, then repair per-operator balance.

    Parameters
    ----------
    graph : KeyGraph
    topology : Topology
    server_of_vertex : ndarray of int
        Server position per vertex (a :class:`~locality.partition.Partition`'s).
    alpha : float
        Per-operator, per-instance bound: load <= alpha x fair share.
    preferred : ndarray of int, optional
        Instance (within its operator) each vertex would rather keep: its
        fallback instance (no table entry) or its current one (no migration).
    hot_keys : list of HotKey, optional
        Keys heavier than the bound; the instance holding one may carry that
        key's load (its bound is raised to it) since nothing else is possible.
    pinned : ndarray of bool, optional
        Vertices that must stay on their ``preferred`` instance (keys left
        out of a capped table); repair and refinement move only the others.
    repair : bool, default True
        Run the repair; False shows what METIS alone gives.
    csr : tuple of ndarray, optional
        ``graph.to_csr()`` when the caller already has it (it is the largest
        array the optimizer holds: building it twice costs seconds at 1e7 edges).

    Returns
    -------
    Placement
    """
    server_of_vertex = np.asarray(server_of_vertex, dtype=np.int64).copy()
    if pinned is not None:
        if preferred is None:
            raise ValueError("pinned keys need a preferred instance")
        for op in graph.operators:
            sl = graph.operator_slice(op)
            stay = np.flatnonzero(pinned[sl]) + graph.offsets[op]
            server_of_vertex[stay] = topology.instance_servers(op)[preferred[stay]]
    instance_of_vertex = np.zeros(graph.n_vertices, dtype=np.int64)
    csr = graph.to_csr() if csr is None else csr
    hot_ids = {
        (h.operator, int(graph.keys[h.operator].get_loc(h.key))) for h in (hot_keys or []) if h.operator in graph.keys
    }
    loads_out, bounds_out, imbalance, moves = {}, {}, {}, 0
    states: dict[str, _OperatorState] = {}
    stopwatch = Stopwatch()
    for op in graph.operators:
        sl = graph.operator_slice(op)
        weights = graph.vertex_weight[sl]
        inst_server = topology.instance_servers(op)
        shares = topology.instance_shares(op)
        total = graph.totals[op]
        base = graph.residual(op) * shares
        pref = None if preferred is None else preferred[sl]
        pin = None if pinned is None else pinned[sl]
        with stopwatch.stage("assign"):
            instance = _lpt_within_servers(weights, server_of_vertex[sl], pref, inst_server, shares, base, total, pin)
        loads = base + np.bincount(instance, weights=weights, minlength=len(shares))
        bounds = alpha * shares * total
        for op_name, i in hot_ids:
            if op_name == op:
                bounds[instance[i]] = max(bounds[instance[i]], base[instance[i]] + weights[i])
        movable = np.ones(weights.shape[0], dtype=bool) if pin is None else ~pin
        states[op] = _OperatorState(graph, op, instance, server_of_vertex, loads, bounds, inst_server, csr, movable)
        if repair:
            with stopwatch.stage("repair"):
                _repair(states[op])
    # Refining one operator changes the gains of its neighbours, so alternate until nothing moves.
    with stopwatch.stage("refine"):
        for _ in range(_REFINE_ROUNDS if repair else 0):
            moves = 0
            for op in graph.operators:
                moved = _refine(states[op])
                _mark_neighbours(graph, states, moved, csr)
                moves += moved.size
            if moves == 0:
                break
    for op, state in states.items():
        instance_of_vertex[graph.operator_slice(op)] = state.instance
        loads_out[op], bounds_out[op] = state.loads, state.bounds
        moves += state.moves
        imbalance[op] = imbalance_of(loads_out[op], topology.instance_shares(op)) if graph.totals[op] > 0 else 1.0
    same = server_of_vertex[graph.src] == server_of_vertex[graph.dst]
    total_edges = graph.edge_weight.sum()
    locality = float(graph.edge_weight[same].sum() / total_edges) if total_edges > 0 else 1.0
    logger.info("placement: %d repair moves, graph locality %.4f, imbalance %s", moves, locality, imbalance)
    return Placement(instance_of_vertex, server_of_vertex, loads_out, bounds_out, imbalance, moves, locality, stopwatch)
