"""The traces the project is judged on: dataset cards, their loader, and seeded trace generators.

- :mod:`locality.datasets.catalog`: the cards of the top-level ``datasets/`` folder and
  :func:`load`, which returns a trace by its card's name with its columns named;
- :mod:`locality.datasets.generate`: ``locality generate``, a generated trace written bit for bit;
- :mod:`locality.datasets.check`: the figures each card shows (``locality datasets --check``);
- :mod:`locality.datasets.synthetic` and :mod:`locality.datasets.skew`: the generators.
"""

from locality.datasets.catalog import Trace, card, catalog, load

__all__ = ["Trace", "card", "catalog", "load"]
