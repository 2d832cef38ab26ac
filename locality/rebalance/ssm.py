"""Optimal state migration for contiguous key-group ranges: SSM (one step) and OMS (a known sequence).

Engines such as Flink give each instance one contiguous range of key groups
(tasks), so the routing table is ``n`` interval bounds. When the load drifts
or the parallelism changes from ``n`` to ``n'``, Ding et al. [1]_ choose the
new ranges, each carrying at most ``max_load``, and which instance takes each
range, so that the state moved is minimal. Two facts make this a dynamic
program: ranges that overlap old ranges can be matched to them only in order
(positive overlaps of intervals never cross), and the state kept by a node is
its overlap with its old range.

Why one module of about 800 lines: SSM and OMS are the same dynamic program
(OMS chains SSM's per-step tables), with their reconstruction notes and
doctested examples; half the module is their documentation.

References
----------
.. [1] J. Ding, T. Z. J. Fu, R. T. B. Ma, M. Winslett, Y. Yang, Z. Zhang,
   H. Chao. "Optimal operator state migration for elastic data stream
   processing." arXiv:1501.03619, 2015.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from locality._validation import check_integer, check_interval, check_option
from locality.errors import InvalidParameterError
from locality.rebalance._base import RebalanceProblem, RebalanceResult, finish

__all__ = ["ContiguousPlan", "optimal_single_step", "oms", "min_max_load", "ssm", "ALGORITHMS"]

logger = logging.getLogger(__name__)

ALGORITHMS = ("reference", "lemmas")
"""Solvers of :func:`optimal_single_step`: the O(m^2 n n') reference DP and the paper's Lemmas 4.2-4.5."""

# Interval loads are differences of prefix sums; an interval within the cap up
# to rounding counts as within it.
_REL_TOL = 1e-12
_NO_COVER = 1 << 40  # "cannot be covered": larger than any interval count


@dataclass(frozen=True)
class ContiguousPlan:
    """A contiguous assignment of ``m`` tasks to nodes, and what reaching it migrates.

    ``nodes[i]`` owns tasks ``bounds[i]:bounds[i + 1]``; nodes are listed in
    range order, the ones with an empty range last. ``cost`` is the total
    state of the tasks whose node changed.
    """

    nodes: np.ndarray
    bounds: np.ndarray
    cost: float

    def assignment(self) -> np.ndarray:
        """Node of every task, shape ``(m,)``."""
        return np.repeat(self.nodes, np.diff(self.bounds))

    def intervals(self) -> dict[int, tuple[int, int]]:
        """``{node: (lb, ub)}``, empty ranges included."""
        return {int(v): (int(a), int(b)) for v, a, b in zip(self.nodes, self.bounds[:-1], self.bounds[1:], strict=True)}


@dataclass(frozen=True)
class _Instance:
    """Prefix sums and the non-empty old ranges, in range order: what both solvers read."""

    pw: np.ndarray  # (m+1,) prefix sums of loads
    ps: np.ndarray  # (m+1,) prefix sums of state sizes
    lb: np.ndarray  # (n,) old range starts
    ub: np.ndarray  # (n,) old range ends
    cap: float  # max_load with the rounding slack

    @property
    def m(self) -> int:
        return self.pw.shape[0] - 1

    def leftmost(self) -> np.ndarray:
        """``leftmost[x]``: smallest ``t`` with ``load(t, x) <= cap``, for ``x = 0..m``."""
        return np.searchsorted(self.pw, self.pw - self.cap, side="left")

    def reach(self) -> np.ndarray:
        """``reach[a]``: largest ``b`` with ``load(a, b) <= cap``, for ``a = 0..m``."""
        return _reach(self.pw, self.cap)

    def overlap(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """State of tasks ``[a, b)`` inside each old range: shape ``a.shape + (n,)``."""
        return _overlap(self.ps, self.lb, self.ub, a, b)


def _reach(pw: np.ndarray, cap: float) -> np.ndarray:
    """Largest ``b`` with ``pw[b] - pw[a] <= cap`` for every ``a`` (``a`` itself when task ``a`` exceeds ``cap``)."""
    return np.searchsorted(pw, pw + cap, side="right") - 1


def _overlap(ps: np.ndarray, lb: np.ndarray, ub: np.ndarray, a: object, b: object) -> np.ndarray:
    """State (prefix sums ``ps``) of tasks ``[a, b)`` inside each range ``[lb, ub)``: shape ``a.shape + lb.shape``."""
    lo = np.maximum(np.asarray(a)[..., None], lb)
    hi = np.minimum(np.asarray(b)[..., None], ub)
    return np.where(lo < hi, ps[np.maximum(hi, lo)] - ps[lo], 0.0)


def _greedy_cover(reach: np.ndarray, a: int, b: int) -> list[tuple[int, int]]:
    """Fewest ranges within the cap covering ``[a, b)``: each as long as the cap allows (caller ensures it exists)."""
    out = []
    while a < b:
        e = min(int(reach[a]), b)
        out.append((a, e))
        a = e
    return out


# -- solvers: both return (gain, [(lb, ub, old position or -1)]) or None ---------------------------


def _solve_reference(inst: _Instance, n_new: int) -> tuple[float, list[tuple[int, int, int]]] | None:
    """The reference DP of seeds-algorithms.md §1.3.2, O(m^2 n n'), vectorised over the last range's start.

    ``G[x, k, j]``: best gain covering tasks ``[0, x)`` with at most ``k``
    ranges, matching only old ranges among the first ``j``. The last range
    ``[t, x)`` is free (zero gain) or matched to old range ``j - 1``; old range
    ``j - 1`` may also be skipped.
    """
    m, n = inst.m, inst.lb.shape[0]
    left = inst.leftmost()
    g = np.full((m + 1, n_new + 1, n + 1), -np.inf)
    g[0] = 0.0
    for x in range(1, m + 1):
        if left[x] >= x:  # task x-1 alone exceeds the cap
            continue
        ts = np.arange(left[x], x)
        s = inst.overlap(ts, np.full(ts.shape, x))  # (T, n)
        prev = g[ts, :n_new, :]  # G[t, k-1, :] for k = 1..n'
        best = prev.max(axis=0)
        matched = np.where(s[:, None, :] > 0, prev[:, :, :n] + s[:, None, :], -np.inf).max(axis=0)
        best[:, 1:] = np.maximum(best[:, 1:], matched)
        g[x, 1:, :] = np.maximum.accumulate(best, axis=1)
    if g[m, n_new, n] == -np.inf:
        return None
    ranges = []
    x, k, j = m, n_new, n
    while x > 0:
        if j > 0 and g[x, k, j] == g[x, k, j - 1]:
            j -= 1
            continue
        target = g[x, k, j]
        for t in range(x - 1, int(left[x]) - 1, -1):
            gain = float(inst.overlap(np.asarray(t), np.asarray(x))[j - 1]) if j > 0 else 0.0
            if gain > 0 and g[t, k - 1, j - 1] + gain == target:
                ranges.append((t, x, j - 1))
                x, k, j = t, k - 1, j - 1
                break
            if g[t, k - 1, j] == target:
                ranges.append((t, x, -1))
                x, k = t, k - 1
                break
        else:  # pragma: no cover - the values above were computed by these very expressions
            raise RuntimeError("SSM traceback lost its way")
    return float(g[m, n_new, n]), ranges[::-1]


def _solve_lemmas(inst: _Instance, n_new: int) -> tuple[float, list[tuple[int, int, int]]] | None:
    """The paper's SSM (Figs. 6-7, Lemmas 4.2-4.5), bottom-up, vectorised over the split point ``x``.

    Sub-problem ``(start, gamma, k)``: cover tasks ``[start, m)`` with ``k``
    ranges using old ranges ``gamma..n-1``; only two ``gamma`` per ``start``
    matter (the range holding ``start`` and the next, Lemma 4.3). The first
    matched range is the longest feasible ``[lb, x)`` ending at ``x``
    (Lemma 4.2), preceded by the fewest free ranges covering
    ``[start, lb)`` (Lemma 4.4), and goes to the old range holding ``x - 1``
    or to the best one not holding ``x`` (Lemma 4.5). With the two verified
    fixes of seeds-algorithms.md §1.3.2: ``x`` may equal ``m``, and a
    sub-problem coverable by ``k`` free ranges starts at gain 0, not -inf.
    Time O(m^2 (n + n')) in numpy.
    """
    m, n = inst.m, inst.lb.shape[0]
    left, reach = inst.leftmost(), inst.reach()
    node_of = np.append(np.repeat(np.arange(n), inst.ub - inst.lb), n)  # old range holding each task; n past the end
    g = np.full((m + 1, 2, n_new + 1), -np.inf)
    g[m] = 0.0
    # choice[start, c, k] = (kind, x, y, nmin); kind 0: infeasible, 1: free cover, 2: one range, 3: split at x
    choice = np.zeros((m + 1, 2, n_new + 1, 4), dtype=np.int64)
    ks = np.arange(2, n_new + 1)
    for start in range(m - 1, -1, -1):
        cover = np.full(m - start + 1, _NO_COVER, dtype=np.int64)  # cover[b - start] = fewest ranges for [start, b)
        cover[0], a, count = 0, start, 0
        while a < m and reach[a] > a:
            cover[a + 1 - start : reach[a] + 1 - start] = count + 1
            a, count = int(reach[a]), count + 1
        xs = np.arange(start + 1, m + 1)
        rows = np.arange(xs.shape[0])
        lb = np.maximum(start, left[xs])
        nmin = 1 + cover[lb - start]
        s = inst.overlap(lb, xs)  # (X, n)
        y1 = node_of[xs - 1]
        holds_x = node_of[xs]
        whole = inst.overlap(np.asarray(start), np.asarray(m))  # base case: [start, m) on one old range
        for c in (0, 1):
            gamma = int(node_of[start]) + c
            if gamma > n:
                continue
            if whole.shape[0] and cover[m - start] <= 1:
                j = gamma + int(np.argmax(whole[gamma:])) if gamma < n else -1
                if j >= 0 and whole[j] > 0:
                    g[start, c, 1], choice[start, c, 1] = whole[j], (2, m, j, 1)
                else:
                    g[start, c, 1], choice[start, c, 1] = 0.0, (1, 0, 0, 0)
            if n_new < 2:
                continue
            sz = s.copy()
            sz[:, :gamma] = 0.0
            inside = holds_x < n
            sz[rows[inside], holds_x[inside]] = 0.0  # Lemma 4.5 (ii): a range not holding x
            z = np.argmax(sz, axis=1)
            cands = [(y1, np.where(y1 >= gamma, s[rows, y1], 0.0)), (z, sz[rows, z])]
            best = np.where(cover[m - start] <= ks, 0.0, -np.inf)
            kind = np.where(best == 0.0, 1, 0)
            bx = np.zeros(ks.shape[0], dtype=np.int64)
            by, bn = bx.copy(), bx.copy()
            for y, gain in cands:
                nxt_c = np.where(xs < m, np.clip(y + 1 - holds_x, 0, 1), 0)
                rest = ks[None, :] - nmin[:, None]  # (X, K)
                ok = (rest >= 0) & (gain[:, None] > 0)
                val = np.where(ok, gain[:, None] + g[xs[:, None], nxt_c[:, None], np.clip(rest, 0, n_new)], -np.inf)
                at = np.argmax(val, axis=0)
                top = val[at, np.arange(ks.shape[0])]
                better = top > best
                best = np.where(better, top, best)
                kind = np.where(better, 3, kind)
                bx = np.where(better, xs[at], bx)
                by = np.where(better, y[at], by)
                bn = np.where(better, nmin[at], bn)
            g[start, c, 2:] = best
            choice[start, c, 2:] = np.stack([kind, bx, by, bn], axis=1)
    if g[0, 0, n_new] == -np.inf:
        return None
    ranges: list[tuple[int, int, int]] = []
    start, c, k = 0, 0, n_new
    while start < m:
        kind, x, y, nmin = (int(v) for v in choice[start, c, k])
        if kind == 1:
            ranges += [(a, b, -1) for a, b in _greedy_cover(reach, start, m)]
            break
        if kind == 2:
            ranges.append((start, m, y))
            break
        lb = max(start, int(left[x]))
        ranges += [(a, b, -1) for a, b in _greedy_cover(reach, start, lb)]
        ranges.append((lb, x, y))
        c = int(np.clip(y + 1 - node_of[x], 0, 1)) if x < m else 0
        start, k = x, k - nmin
    return float(g[0, 0, n_new]), ranges


_SOLVERS = {"reference": _solve_reference, "lemmas": _solve_lemmas}


# -- labelling: which node takes each new range -----------------------------------------------------


def _label(
    inst: _Instance,
    ranges: list[tuple[int, int, int]],
    bounds: np.ndarray,
    nodes: np.ndarray,
    spare: Iterator[int],
    n_new: int,
    state: np.ndarray,
) -> ContiguousPlan:
    """Give matched ranges their old node, free ranges the free nodes, and pad to ``n_new`` nodes.

    ``ranges`` lists ``(lb, ub, position)``, the position among the non-empty
    old ranges, or -1 for a free range. Free ranges take the unmatched old node
    they overlap most (ties: range order), then old nodes that held nothing,
    then ids from ``spare``. With ``n' < n`` the old nodes left over are the
    ones removed.
    """
    old_nodes = nodes[bounds[1:] > bounds[:-1]]
    spare = itertools.chain(nodes[bounds[1:] == bounds[:-1]].tolist(), spare)
    old_assignment = np.repeat(nodes, np.diff(bounds))
    used = {pos for _, _, pos in ranges if pos >= 0}
    unmatched = [p for p in range(inst.lb.shape[0]) if p not in used]
    new_nodes, new_bounds = [], []
    for a, b, pos in ranges:
        if pos < 0 and unmatched:
            gains = inst.overlap(np.asarray(a), np.asarray(b))[unmatched]
            pos = unmatched.pop(int(np.argmax(gains)))
        new_nodes.append(int(old_nodes[pos]) if pos >= 0 else next(spare))
        new_bounds.append(a)
    while len(new_nodes) < n_new:
        new_nodes.append(int(old_nodes[unmatched.pop(0)]) if unmatched else next(spare))
        new_bounds.append(inst.m)
    new_bounds.append(inst.m)
    plan_nodes, plan_bounds = np.asarray(new_nodes, dtype=np.int64), np.asarray(new_bounds, dtype=np.int64)
    moved = np.repeat(plan_nodes, np.diff(plan_bounds)) != old_assignment
    return ContiguousPlan(plan_nodes, plan_bounds, float(state[moved].sum()))


# -- validation ----------------------------------------------------------------------------------


def _check_task_arrays(loads: object, state_sizes: object, owner: str) -> tuple[np.ndarray, np.ndarray]:
    arrays = []
    for name, value in (("loads", loads), ("state_sizes", state_sizes)):
        arr = np.asarray(value, dtype=float)
        if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise InvalidParameterError(f"the {name!r} parameter of {owner} must be a 1-d array of finite values >= 0")
        arrays.append(arr)
    if arrays[0].shape != arrays[1].shape:
        raise InvalidParameterError(
            f"the 'state_sizes' parameter of {owner} must have one value per task ({arrays[0].shape[0]}); "
            f"got {arrays[1].shape[0]}"
        )
    return arrays[0], arrays[1]


def _check_layout(bounds: object, nodes: object, m: int, owner: str) -> tuple[np.ndarray, np.ndarray]:
    b = np.asarray(bounds)
    if (
        b.ndim != 1
        or b.shape[0] < 2
        or not np.issubdtype(b.dtype, np.integer)
        or b[0] != 0
        or b[-1] != m
        or np.any(np.diff(b) < 0)
    ):
        raise InvalidParameterError(
            f"the 'current_bounds' parameter of {owner} must be non-decreasing ints from 0 to {m} "
            f"(node i owns tasks bounds[i]:bounds[i+1]); got {bounds!r}"
        )
    n = b.shape[0] - 1
    v = np.arange(n) if nodes is None else np.asarray(nodes)
    if (
        v.shape != (n,)
        or (n and not np.issubdtype(v.dtype, np.integer))
        or np.unique(v).shape[0] != n
        or (n and v.min() < 0)
    ):
        raise InvalidParameterError(
            f"the 'current_nodes' parameter of {owner} must be {n} distinct ints >= 0; got {nodes!r}"
        )
    return b.astype(np.int64), v.astype(np.int64)


def _fresh_ids(taken: np.ndarray) -> Iterator[int]:
    """The smallest non-negative ints not in ``taken``, in order."""
    taken_set = set(taken.tolist())
    i = 0
    while True:
        if i not in taken_set:
            yield i
        i += 1


def _instance(loads: np.ndarray, state: np.ndarray, bounds: np.ndarray, cap: float) -> _Instance:
    """The solver input: prefix sums, the non-empty old ranges, the cap with its rounding slack."""
    keep = bounds[1:] > bounds[:-1]
    return _Instance(
        pw=np.concatenate([[0.0], np.cumsum(loads)]),
        ps=np.concatenate([[0.0], np.cumsum(state)]),
        lb=bounds[:-1][keep],
        ub=bounds[1:][keep],
        cap=cap * (1.0 + _REL_TOL),
    )


def _parts_needed(reach: np.ndarray) -> int:
    """Fewest contiguous ranges covering all tasks given ``reach`` (``_NO_COVER`` if a task exceeds the cap)."""
    m, a, count = reach.shape[0] - 1, 0, 0
    while a < m:
        if reach[a] <= a:
            return _NO_COVER
        a, count = int(reach[a]), count + 1
    return count


def min_max_load(loads: Sequence[float] | np.ndarray, n_parts: int) -> float:
    """Smallest ``max_load`` with which ``n_parts`` contiguous ranges can cover the tasks.

    Bisection on the greedy cover count, then snapped to the heaviest range of
    the greedy cover it finds (an actual range load).

    >>> min_max_load([3, 3, 2, 2, 2], 2)
    6.0
    """
    owner = "min_max_load"
    w, _ = _check_task_arrays(loads, np.zeros(np.shape(loads)), owner)
    n = check_integer(n_parts, "n_parts", owner, lower=1)
    if w.shape[0] == 0:
        return 0.0
    pw = np.concatenate([[0.0], np.cumsum(w)])
    lo, hi = float(w.max()), float(pw[-1])
    if _parts_needed(_reach(pw, lo * (1.0 + _REL_TOL))) > n:
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if _parts_needed(_reach(pw, mid * (1.0 + _REL_TOL))) <= n:
                hi = mid
            else:
                lo = mid
            if hi - lo <= _REL_TOL * hi:
                break
    else:
        hi = lo
    cover = _greedy_cover(_reach(pw, hi * (1.0 + _REL_TOL)), 0, w.shape[0])
    return float(max(pw[b] - pw[a] for a, b in cover))


def _infeasible(loads: np.ndarray, n_new: int, max_load: float, owner: str, step: str = "") -> InvalidParameterError:
    need = min_max_load(loads, n_new)
    return InvalidParameterError(
        f"the 'max_load' parameter of {owner}{step} must be >= {need:g} (the smallest load "
        f"{n_new} contiguous ranges can cover the tasks with); got {max_load!r}"
    )


def _single_step(
    loads: np.ndarray,
    state: np.ndarray,
    bounds: np.ndarray,
    nodes: np.ndarray,
    spare: Iterator[int],
    n_new: int,
    max_load: float,
    algorithm: str,
) -> ContiguousPlan | None:
    inst = _instance(loads, state, bounds, max_load)
    solved = _SOLVERS[algorithm](inst, n_new) if inst.m else (0.0, [])
    if solved is None:
        return None
    gain, ranges = solved
    plan = _label(inst, ranges, bounds, nodes, spare, n_new, state)
    logger.debug("SSM (%s): gain %.6g, cost %.6g over %d ranges", algorithm, gain, plan.cost, len(ranges))
    return plan


def optimal_single_step(
    loads: Sequence[float] | np.ndarray,
    state_sizes: Sequence[float] | np.ndarray,
    current_bounds: Sequence[int] | np.ndarray,
    n_new: int,
    max_load: float,
    *,
    current_nodes: Sequence[int] | np.ndarray | None = None,
    algorithm: str = "reference",
) -> ContiguousPlan:
    """Optimal single-step migration (SSM): the contiguous ranges within ``max_load`` that move the least state.

    Problem (Definition 4.1 of [1]_): tasks ``0..m-1`` with loads ``w`` and
    state sizes ``s``; node ``current_nodes[i]`` owns tasks
    ``current_bounds[i]:current_bounds[i+1]``. Find ``n_new`` contiguous
    ranges covering all tasks, each with load ``<= max_load``, and a distinct
    node for each, minimising the state of the tasks whose node changes. New
    nodes (``n_new > n``) get the smallest ids not in use; with ``n_new < n``
    the old nodes absent from the plan are the ones removed. Each range's
    load is compared with ``max_load`` up to a relative 1e-12 (rounding).

    Parameters
    ----------
    loads, state_sizes : array_like of float, shape (m,)
        Work ``w_j`` and state size ``|s_j|`` of each task, ``>= 0``.
    current_bounds : array_like of int, shape (n + 1,)
        Non-decreasing, from 0 to ``m``; empty ranges allowed.
    n_new : int
        Number of nodes ``n'`` after the migration.
    max_load : float
        Most load a node may carry, e.g. ``(1 + theta) * sum(loads) / n_new``.
    current_nodes : array_like of int, shape (n,), optional
        Node id of each current range (default ``0..n-1``).
    algorithm : {"reference", "lemmas"}
        ``"reference"``: the simple DP of seeds-algorithms.md §1.3.2,
        O(m^2 n n') time, O(m n n') space (the test oracle; verified against
        exhaustive search). ``"lemmas"``: the paper's faster SSM built on
        Lemmas 4.2-4.5, O(m^2 (n + n')) here. Both are exact.

    Returns
    -------
    ContiguousPlan
        ``nodes`` and ``bounds`` of the new layout, ``cost`` the migrated state.

    Raises
    ------
    InvalidParameterError
        On malformed input, or when ``max_load`` is below the smallest load
        ``n_new`` contiguous ranges can achieve (:func:`min_max_load`).

    Notes
    -----
    The positive overlaps of old and new ranges never cross, so the best
    assignment is an order-preserving partial matching; the DP covers the
    tasks left to right and, for the last range ``[t, x)``, either leaves it
    free (a new or unmatched node takes it later) or matches it to the next
    old range. The paper's Simple_SSM (Fig. 5) is O(m^3 n^3 n'^2) and not
    implemented. Reconstruction of the garbled Fig. 7 follows
    seeds-algorithms.md §1.3.2 (lost Greek letters, the ``<=`` in Lemma 4.3's
    redundancy test, the two fixes noted for ``algorithm="lemmas"``).

    References
    ----------
    .. [1] J. Ding, T. Z. J. Fu, R. T. B. Ma, M. Winslett, Y. Yang, Z. Zhang,
       H. Chao. "Optimal operator state migration for elastic data stream
       processing." arXiv:1501.03619, 2015.

    Examples
    --------
    20 equal tasks on 2 nodes (13, 7); a third node and at most 9 tasks each:

    >>> plan = optimal_single_step([1] * 20, [1] * 20, [0, 13, 20], 3, 9)
    >>> plan.cost
    4.0
    """
    owner = "optimal_single_step"
    w, s = _check_task_arrays(loads, state_sizes, owner)
    bounds, nodes = _check_layout(current_bounds, current_nodes, w.shape[0], owner)
    n_new = check_integer(n_new, "n_new", owner, lower=1)
    max_load = check_interval(max_load, "max_load", owner, lower=0.0)
    check_option(algorithm, "algorithm", owner, ALGORITHMS)
    plan = _single_step(w, s, bounds, nodes, _fresh_ids(nodes), n_new, max_load, algorithm)
    if plan is None:
        raise _infeasible(w, n_new, max_load, owner)
    return plan


# -- OMS -----------------------------------------------------------------------------------------


def _partitions(pw: np.ndarray, n_parts: int, cap: float, limit: int, owner: str) -> list[tuple[int, ...]]:
    """Every split of the tasks into at most ``n_parts`` non-empty ranges within ``cap``, as bound tuples."""
    m = pw.shape[0] - 1
    reach = _reach(pw, cap)
    need = np.zeros(m + 1, dtype=np.int64)  # fewest ranges covering [a, m)
    for a in range(m - 1, -1, -1):
        need[a] = _NO_COVER if reach[a] <= a else 1 + need[reach[a]]
    out: list[tuple[int, ...]] = []

    def walk(a: int, left: int, prefix: tuple[int, ...]) -> None:
        if a == m:
            out.append(prefix)
            if len(out) > limit:
                raise InvalidParameterError(
                    f"the 'max_partitions' parameter of {owner} must be larger: a step has more than {limit} "
                    f"feasible partitionings (OMS enumerates them all); got {limit}"
                )
            return
        for e in range(a + 1, int(reach[a]) + 1):
            if need[e] <= left - 1:
                walk(e, left - 1, (*prefix, e))

    if need[0] <= n_parts:
        walk(0, n_parts, (0,))
    return out


def _matching(gains: np.ndarray) -> tuple[float, dict[int, int]]:
    """Best order-preserving matching of new ranges (rows) to old ones (columns), LCS-like (§1.3.3).

    Returns the state kept and ``{row: column}`` of the matched pairs (positive gain only).
    """
    n_q, n_p = gains.shape
    best = np.zeros((n_q + 1, n_p + 1))
    for i in range(1, n_q + 1):
        for j in range(1, n_p + 1):
            best[i, j] = max(best[i - 1, j], best[i, j - 1], best[i - 1, j - 1] + gains[i - 1, j - 1])
    pairs, i, j = {}, n_q, n_p
    while i > 0 and j > 0:
        if gains[i - 1, j - 1] > 0 and best[i, j] == best[i - 1, j - 1] + gains[i - 1, j - 1]:
            pairs[i - 1] = j - 1
            i, j = i - 1, j - 1
        elif best[i, j] == best[i, j - 1]:
            j -= 1
        else:
            i -= 1
    return float(best[-1, -1]), pairs


def _match_gain(ps: np.ndarray, p: tuple[int, ...], q: tuple[int, ...]) -> float:
    """Largest state kept when the ranges of partitioning ``q`` take over those of ``p``."""
    a, b = np.asarray(p), np.asarray(q)
    return _matching(_overlap(ps, a[:-1], a[1:], b[:-1], b[1:]))[0]


def oms(
    loads: Sequence[float] | np.ndarray,
    state_sizes: Sequence[float] | np.ndarray,
    current_bounds: Sequence[int] | np.ndarray,
    steps: Sequence[tuple[int, float]],
    *,
    current_nodes: Sequence[int] | np.ndarray | None = None,
    max_partitions: int = 100_000,
) -> list[ContiguousPlan]:
    """Optimal migration sequence (OMS): the plans for a known sequence of scale changes with least total cost.

    Problem (Section 5.1 of [1]_): from the current ranges, perform the
    migrations ``steps = [(n_1, max_load_1), ..., (n_p, max_load_p)]`` in
    turn (loads and states unchanged), each a contiguous layout within its
    ``max_load``, minimising the total migrated state. Single-step optimal
    choices can be short-sighted (Table 3 of the paper).

    Method. The cost of later steps depends only on the partitioning, not on
    which node holds which range (Lemma 5.1), so instead of the paper's
    recursion over all partitionings of every step (Fig. 8, exponential in
    ``p``) this runs a shortest path over layers: every feasible partitioning
    of step ``i`` keeps its cheapest cost from the start, each edge costing
    the state an order-preserving matching cannot keep (seeds-algorithms.md
    §1.3.3); the last step is solved by SSM from each partitioning of step
    ``p - 1``, as in the paper. Same optimum, cost
    O(sum_i |P_i| |P_{i+1}| n^2) for ``|P_i|`` feasible partitionings of
    step ``i``, which is still exponential in ``m``: use small ``m``.

    Parameters
    ----------
    loads, state_sizes, current_bounds, current_nodes
        As for :func:`optimal_single_step`.
    steps : sequence of (int, float)
        ``(n_new, max_load)`` of each migration, in order.
    max_partitions : int
        Refuse a step with more feasible partitionings than this.

    Returns
    -------
    list of ContiguousPlan
        One plan per step; each starts from the previous one. The total cost
        is ``sum(plan.cost for plan in plans)``.

    Raises
    ------
    InvalidParameterError
        On malformed input, a step whose ``max_load`` admits no layout, or
        more than ``max_partitions`` partitionings in a step.

    References
    ----------
    .. [1] J. Ding et al. "Optimal operator state migration for elastic data
       stream processing." arXiv:1501.03619, 2015.

    Examples
    --------
    >>> plans = oms([1] * 20, [1] * 20, [0, 13, 20], [(3, 9), (4, 7)])
    >>> sum(p.cost for p in plans)
    6.0
    """
    owner = "oms"
    w, s = _check_task_arrays(loads, state_sizes, owner)
    bounds, nodes = _check_layout(current_bounds, current_nodes, w.shape[0], owner)
    limit = check_integer(max_partitions, "max_partitions", owner, lower=1)
    if not isinstance(steps, Sequence) or not steps:
        raise InvalidParameterError(
            f"the 'steps' parameter of {owner} must be a non-empty sequence of (n_new, max_load)"
        )
    checked = []
    for i, step in enumerate(steps):
        if not isinstance(step, Sequence) or len(step) != 2:
            raise InvalidParameterError(
                f"the 'steps' parameter of {owner} must hold (n_new, max_load) pairs; got {step!r}"
            )
        checked.append(
            (
                check_integer(step[0], f"steps[{i}][0]", owner, lower=1),
                check_interval(step[1], f"steps[{i}][1]", owner, lower=0.0),
            )
        )
    total = float(s.sum())
    inst = _instance(w, s, bounds, 0.0)
    # Layered shortest path over partitionings (bounds tuples of non-empty ranges).
    start = tuple(int(b) for b in np.unique(bounds))
    layers: list[dict[tuple[int, ...], tuple[float, tuple[int, ...] | None]]] = [{start: (0.0, None)}]
    for i, (n_i, cap_i) in enumerate(checked[:-1]):
        parts = _partitions(inst.pw, n_i, cap_i * (1.0 + _REL_TOL), limit, owner)
        if not parts:
            raise _infeasible(w, n_i, cap_i, owner, f" (step {i})")
        layer = {}
        for q in parts:
            layer[q] = min(((c + total - _match_gain(inst.ps, p, q), p) for p, (c, _) in layers[-1].items()))
        layers.append(layer)
        logger.debug("OMS step %d: %d feasible partitionings", i, len(parts))
    n_last, cap_last = checked[-1]
    best: tuple[float, tuple[int, ...]] | None = None
    for p, (c, _) in layers[-1].items():
        p_bounds = np.asarray(p, dtype=np.int64)
        p_nodes = np.arange(p_bounds.shape[0] - 1)  # labels do not change the cost (Lemma 5.1)
        plan = _single_step(w, s, p_bounds, p_nodes, _fresh_ids(p_nodes), n_last, cap_last, "reference")
        if plan is not None and (best is None or c + plan.cost < best[0]):
            best = (c + plan.cost, p)
    if best is None:
        raise _infeasible(w, n_last, cap_last, owner, f" (step {len(checked) - 1})")
    chain = [best[1]]
    for layer in layers[:0:-1]:
        chain.append(layer[chain[-1]][1])
    chain = chain[::-1][1:]  # the partitioning after each step but the last
    plans = []
    cur_bounds, cur_nodes = bounds, nodes
    for (n_i, _), q in zip(checked[:-1], chain, strict=True):
        plan = _fixed_target(w, s, cur_bounds, cur_nodes, q, n_i)
        plans.append(plan)
        cur_bounds, cur_nodes = plan.bounds, plan.nodes
    plan = _single_step(w, s, cur_bounds, cur_nodes, _fresh_ids(cur_nodes), n_last, cap_last, "reference")
    plans.append(plan)
    logger.debug("OMS: total cost %.6g over %d steps", sum(p.cost for p in plans), len(plans))
    return plans


def _fixed_target(
    w: np.ndarray, s: np.ndarray, bounds: np.ndarray, nodes: np.ndarray, target: tuple[int, ...], n_new: int
) -> ContiguousPlan:
    """Label the ranges of a fixed partitioning ``target`` so that the most state stays (matching traceback)."""
    inst = _instance(w, s, bounds, 0.0)
    t = np.asarray(target)
    _, pairs = _matching(inst.overlap(t[:-1], t[1:]))
    ranges = [(int(t[i]), int(t[i + 1]), pairs.get(i, -1)) for i in range(t.shape[0] - 1)]
    return _label(inst, ranges, bounds, nodes, _fresh_ids(nodes), n_new, s)


# -- the registry rebalancer ---------------------------------------------------------------------


def ssm(problem: RebalanceProblem, *, algorithm: str = "reference") -> RebalanceResult:
    """Rebalance key-group ranges (Flink-style) with the least state migration: SSM on a RebalanceProblem.

    Problem: the ``K`` keys are key groups in range order and
    ``problem.current`` gives every instance one contiguous range (or none).
    Return a contiguous assignment in which every instance carries at most
    ``(1 + theta_max) * mean`` load and the migrated state is minimal
    (:func:`optimal_single_step` with ``n_new = n_instances``). Instances
    that hold no key group now are the new nodes. ``problem.fallback`` and
    ``table_cap`` play no part (the table is the ``n`` range bounds).

    Parameters
    ----------
    problem : RebalanceProblem
        Loads and state sizes per key group; ``current`` contiguous.
    algorithm : {"reference", "lemmas"}
        Solver, see :func:`optimal_single_step` (both exact).

    Returns
    -------
    RebalanceResult
        When no contiguous layout meets the bound (a hot key group, or
        ranges that cannot be cut finely enough), ``feasible`` is False,
        ``hot_keys`` lists the key groups heavier than the bound, and the
        assignment is the least-migration layout under the smallest bound
        that is achievable (:func:`min_max_load`).

    Raises
    ------
    InvalidParameterError
        If ``current`` gives an instance more than one range, ``algorithm`` is
        unknown, or the instances have unequal ``shares`` (the model's nodes are equal).

    Notes
    -----
    Only the high side of the balance is bounded (the paper's constraint);
    ``theta_after`` also reports how far below the mean the lightest instance is.
    Time O(K^2 N^2): meant for key groups (Flink's default is 128), not for
    millions of keys.

    References
    ----------
    .. [1] J. Ding et al. "Optimal operator state migration for elastic data
       stream processing." arXiv:1501.03619, 2015.

    Examples
    --------
    >>> import numpy as np
    >>> p = RebalanceProblem(np.ones(6), np.ones(6), np.array([0, 0, 0, 0, 1, 1]), np.zeros(6, int), 3, theta_max=0.0)
    >>> ssm(p).assignment.tolist()
    [2, 2, 0, 0, 1, 1]
    """
    started = time.perf_counter()
    owner = "ssm"
    if not isinstance(problem, RebalanceProblem):
        raise InvalidParameterError(f"the 'problem' parameter of {owner} must be a RebalanceProblem; got {problem!r}")
    check_option(algorithm, "algorithm", owner, ALGORITHMS)
    if problem.shares is not None:
        raise InvalidParameterError(
            f"{owner} plans key-group ranges over equal nodes (Ding et al.'s model); the problem's instances "
            "have unequal shares: use mixed or local on servers of different capacities"
        )
    cur = problem.current
    k, n = problem.n_keys, problem.n_instances
    starts = np.concatenate([[0], np.flatnonzero(cur[1:] != cur[:-1]) + 1]) if k else np.empty(0, dtype=np.int64)
    run_nodes = cur[starts]
    values, counts = np.unique(run_nodes, return_counts=True)
    if np.any(counts > 1):
        raise InvalidParameterError(
            f"the 'current' assignment of {owner} must give each instance one contiguous range of keys "
            f"(key groups in range order); instances {values[counts > 1].tolist()} hold several"
        )
    bounds = np.append(starts, k).astype(np.int64)
    spare = iter(np.setdiff1d(np.arange(n), run_nodes).tolist())
    cap = (1.0 + problem.theta_max) * float(problem.loads.sum()) / n
    hot = problem.hot_keys()
    plan = _single_step(problem.loads, problem.state_sizes, bounds, run_nodes, spare, n, cap, algorithm)
    feasible = plan is not None
    if plan is None:
        relaxed = max(cap, min_max_load(problem.loads, n))
        logger.info("ssm: no contiguous layout within %.6g; relaxing the bound to %.6g", cap, relaxed)
        spare = iter(np.setdiff1d(np.arange(n), run_nodes).tolist())
        plan = _single_step(problem.loads, problem.state_sizes, bounds, run_nodes, spare, n, relaxed, algorithm)
    return finish(problem, plan.assignment(), owner, started, feasible=feasible, hot_keys=hot)
