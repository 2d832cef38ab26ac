"""locality: locality-aware routing for stateful stream processing.

Learn which keys of consecutive stateful operators travel together, partition
the weighted key graph under a balance bound, and emit server-aware routing
tables with engine-exact hash fallbacks.
"""

__version__ = "0.1.0"
