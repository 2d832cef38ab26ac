"""Tests of the engines' hashes and the adapters built on them."""


def key_group_range(fallback, subtask: int) -> range:
    """The key groups Flink gives ``subtask``: those whose ``group * p // M`` is it (KeyGroupRangeAssignment)."""
    p, m = fallback.n_instances, fallback.max_parallelism
    groups = [g for g in range(m) if g * p // m == subtask]
    return range(groups[0], groups[-1] + 1)
