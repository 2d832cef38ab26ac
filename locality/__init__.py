"""locality: locality-aware routing for stateful stream processing.

Learn which keys of consecutive stateful operators travel together, partition
the weighted key graph under a balance bound, and emit server-aware routing
tables with engine-exact hash fallbacks. The names below are the public API;
each lives in its own module.
"""

from locality.counts import KeyCounts, blend, count_keys
from locality.evaluation import evaluate
from locality.graph import KeyGraph, build_key_graph
from locality.hashing import ENGINES, make_fallback
from locality.migration import MigrationPlan, plan_migration
from locality.optimizer import LocalityOptimizer, optimize
from locality.partition import partition_key_graph
from locality.placement import place_keys
from locality.reconfiguration import decide, reconfigure
from locality.replay import replay_trace
from locality.router import Router
from locality.routing import RoutingConfiguration, RoutingTable
from locality.sketch import SpaceSaving
from locality.store import ConfigStore
from locality.topology import Topology

__version__ = "0.1.0"

__all__ = [
    "ENGINES",
    "ConfigStore",
    "KeyCounts",
    "KeyGraph",
    "LocalityOptimizer",
    "MigrationPlan",
    "RoutingConfiguration",
    "RoutingTable",
    "Router",
    "SpaceSaving",
    "Topology",
    "blend",
    "build_key_graph",
    "count_keys",
    "decide",
    "evaluate",
    "make_fallback",
    "optimize",
    "partition_key_graph",
    "place_keys",
    "plan_migration",
    "reconfigure",
    "replay_trace",
]
