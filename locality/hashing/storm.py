"""Apache Storm: fields grouping on a single field.

:class:`StormFieldsGrouping` reproduces where Storm's fields grouping sends a
key. Storm takes a routing table natively: ``LocalityGrouping`` (the
``CustomStreamGrouping`` of ``jvm/locality-storm``) reads the store, sends a
key with an entry to its task and every other key where this grouping does,
computed by Storm's own code (``docs/engines/storm.md``).
"""

from __future__ import annotations

from typing import Any

from locality.hashing.jvm import HashCodeEngine
from locality.hashing.primitives import signed32

__all__ = ["StormFieldsGrouping"]


class StormFieldsGrouping(HashCodeEngine):
    """Storm's fields grouping on a single field.

    Parameters
    ----------
    n_instances : int
        Number of target tasks, >= 1. The result indexes the target tasks
        sorted ascending by task id.
    int_type : {"long", "int"}, default "long"
        Java type of int keys: ``Long`` or ``Integer``.

    Raises
    ------
    InvalidParameterError
        If ``n_instances`` is not an int >= 1 or ``int_type`` is unknown.

    Notes
    -----
    ``index = Math.floorMod(Arrays.deepHashCode(new Object[]{key}), numTasks)``,
    that is ``floorMod(31 + key.hashCode(), n)`` in 32-bit int arithmetic, with
    ``String.hashCode`` over UTF-16 code units (a non-BMP character counts as two)
    and ``Long.hashCode = (int)(v ^ (v >>> 32))`` (``Integer.hashCode = v``).
    There is no bit mixing: sequential int keys go round robin.

    Sources in apache/storm (2.x), and the JDK's ``Arrays.deepHashCode`` and ``String.hashCode``:

    - ``storm-client/src/jvm/org/apache/storm/daemon/GrouperFactory.java`` (``FieldsGrouper``)
    - ``storm-client/src/jvm/org/apache/storm/utils/TupleUtils.java`` (``chooseTaskIndex``)

    References
    ----------
    .. [1] Apache Storm, "Concepts: stream groupings",
       https://storm.apache.org/releases/current/Concepts.html

    Examples
    --------
    >>> StormFieldsGrouping(4).instances_of(["hello", "#bigdata", "a"]).tolist()
    [1, 2, 0]
    """

    engine = "storm"

    def _place(self, h: Any) -> Any:
        return signed32(h + 31) % self.n_instances
