"""Apache Flink: ``keyBy`` places a key in a key group, and key groups on operator subtasks."""

from __future__ import annotations

from typing import Any

from locality._validation import check_integer
from locality.engines.jvm import HashCodeEngine
from locality.engines.primitives import M32, murmur3_final, murmur3_step, signed32

__all__ = ["FlinkKeyGroups"]


class FlinkKeyGroups(HashCodeEngine):
    """Flink's ``keyBy`` placement: key -> key group -> operator subtask.

    Parameters
    ----------
    n_instances : int
        Operator parallelism ``p``, 1 <= p <= 32768.
    max_parallelism : int, optional
        Number of key groups ``M``, p <= M <= 32768. Default as Flink:
        ``min(max(roundUpToPowerOfTwo(p + p // 2), 128), 32768)``.
    int_type : {"long", "int"}, default "long"
        Java type of int keys: ``Long`` or ``Integer`` (their ``hashCode`` agree
        on 0 .. 2**31 - 1 and differ on negative numbers).

    Attributes
    ----------
    max_parallelism : int
        Number of key groups in use.

    Raises
    ------
    InvalidParameterError
        If ``n_instances`` is outside 1..32768, ``max_parallelism`` outside
        ``n_instances``..32768, or ``int_type`` unknown.

    Notes
    -----
    ``keyGroup = murmurHash(key.hashCode()) % M`` and
    ``subtask = keyGroup * p / M`` (integer division), where ``murmurHash(c)`` is
    one MurmurHash3 x86_32 block round on ``c`` with seed 0 (``c1 = 0xcc9e2d51``,
    rotl 15, ``c2 = 0x1b873593``, rotl 13, ``h * 5 + 0xe6546b64``), then ``h ^= 4``,
    ``fmix32``, and the absolute value (``Integer.MIN_VALUE`` -> 0). Subtask ``i``
    owns key groups ``ceil(i*M/p) .. ((i+1)*M - 1) // p``.

    Sources in apache/flink:

    - ``flink-runtime/src/main/java/org/apache/flink/runtime/state/KeyGroupRangeAssignment.java``
      (``assignToKeyGroup``, ``computeOperatorIndexForKeyGroup``, ``computeDefaultMaxParallelism``)
    - ``flink-core/src/main/java/org/apache/flink/util/MathUtils.java`` (``murmurHash``, ``roundUpToPowerOfTwo``)

    References
    ----------
    .. [1] Apache Flink, "Working with State: key groups / max parallelism",
       https://nightlies.apache.org/flink/flink-docs-stable/docs/dev/datastream/fault-tolerance/state/

    Examples
    --------
    >>> flink = FlinkKeyGroups(4)
    >>> flink.max_parallelism, flink.key_group("hello"), flink.instance_of("hello")
    (128, 35, 1)
    """

    engine = "flink"
    _PARAMETERS = ("max_parallelism", "int_type")
    _MAX_INSTANCES = 32768

    def __init__(self, n_instances: int, max_parallelism: int | None = None, *, int_type: str = "long") -> None:
        super().__init__(n_instances, int_type=int_type)
        p = self.n_instances
        if max_parallelism is None:
            max_parallelism = min(max(1 << (p + p // 2 - 1).bit_length(), 128), 32768)
        self.max_parallelism = check_integer(max_parallelism, "max_parallelism", "FlinkKeyGroups", lower=p, upper=32768)

    def _key_group(self, h: Any) -> Any:
        mixed = signed32(murmur3_final(murmur3_step(0, h & M32), 4))
        return (abs(mixed) & 0x7FFF_FFFF) % self.max_parallelism

    def _place(self, h: Any) -> Any:
        return self._key_group(h) * self.n_instances // self.max_parallelism

    def key_group(self, key: str | int) -> int:
        """Key group of one key (``murmurHash(key.hashCode()) % max_parallelism``).

        Parameters
        ----------
        key : str or int
            The key, as for :meth:`instance_of`.

        Returns
        -------
        int
            Key group in ``0 .. max_parallelism - 1``; the subtask is
            ``key_group * n_instances // max_parallelism``.

        Raises
        ------
        InvalidParameterError
            For the same keys as :meth:`instance_of`.
        """
        return int(self._key_group(self._key_hash(key, "FlinkKeyGroups.key_group")))

    def _parameters(self) -> dict[str, Any]:
        return {"max_parallelism": self.max_parallelism, **super()._parameters()}
