"""Bounded-memory counting of the heaviest keys and key pairs: the Space-Saving sketch.

:class:`SpaceSaving` is the sketch (``locality.sketch.space_saving``); beside it
live its input conversion (``columns``), the exact grouping of batches with
the sketch's keys (``grouping``) and its byte layout (``serde``).
"""

from locality.sketch.space_saving import SpaceSaving

__all__ = ["SpaceSaving"]
