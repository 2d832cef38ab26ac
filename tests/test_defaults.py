"""Every default the command line, the jobs and the library share is written once, in ``locality.defaults``.

Two ways a default comes apart, each caught here: written again as a literal
(the source scan: a parameter that takes a ``DEFAULT_*`` somewhere takes it
everywhere it has a default of that value), or an option defaulting to
another value than the library parameter it sets (the commands' options
against the jobs' parameters, the rebalance options, the replay and the
topology, option by option).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re

import click
import pytest

import locality.defaults
from locality.cli import cli
from locality.datasets.check import card_figures
from locality.engines.flink_switch import switch_flink_job
from locality.rebalance.options import RebalanceOptions
from locality.rebalance.window import RebalancePolicy
from locality.replay import replay_trace
from locality.topology import Topology
from pipelines.params import OfflineParams, OnlineParams
from pipelines.trace import TraceSpec
from tests.conftest import REPO

SHARED = {name: getattr(locality.defaults, name) for name in locality.defaults.__all__}

#: Parameters named like a shared default that are another thing, with another default (file, parameter): why.
OTHER_THINGS = {
    ("locality/forecast.py", "decay"): "the decay forecast's weight of a window, not the blended history's",
    ("pipelines/counting.py", "mode"): "how a trace was counted (exact or sketch), not the replay's routing",
    ("locality/replay.py", "history"): "the windows a replay's reconfiguration reads, not its rebalancer's forecast",
    ("locality/datasets/synthetic.py", "seed"): "a generator's own recipe seed",
    ("locality/cli.py", "servers"): "the demo's deployment, not a dataset check's",
    ("locality/cli.py", "rows"): "the demo's trace size",
    ("locality/sketch/space_saving.py", "weight"): "an update's weight in a sketch, not the state weight",
    ("locality/testing/lossy_counting.py", "weight"): "an update's weight in a counter, not the state weight",
}


def _literal(node: ast.expr):
    """The value of a literal default (a number, a string, a negative number); None for anything else."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value
    if isinstance(node, ast.Constant) and not isinstance(node.value, (bool, type(None))):
        return node.value
    return None


def _option_name(call: ast.Call) -> str | None:
    """The Python name of a ``click.option(...)``: its explicit name, else its first long option's."""
    decls = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    named = [d for d in decls if d.isidentifier()]
    if named:
        return named[0]
    longs = [d for d in decls if d.startswith("--")]
    return longs[0][2:].split("/")[0].replace("-", "_") if longs else None


def declared_defaults() -> list[tuple[str, int, str, ast.expr]]:
    """Every default declared in the package and the jobs: (file, line, parameter, default expression).

    Function and method parameters, dataclass fields and ``click.option(default=...)``.
    """
    found = []
    for path in sorted([*(REPO / "locality").rglob("*.py"), *(REPO / "pipelines").rglob("*.py")]):
        where = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                positional = node.args.posonlyargs + node.args.args
                pairs = list(zip(positional[len(positional) - len(node.args.defaults) :], node.args.defaults))
                pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
                found += [(where, d.lineno, a.arg, d) for a, d in pairs]
            elif isinstance(node, ast.ClassDef):
                found += [
                    (where, s.lineno, s.target.id, s.value)
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None
                ]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "option":
                name = _option_name(node)
                found += [(where, k.value.lineno, name, k.value) for k in node.keywords if k.arg == "default" and name]
    return found


def test_a_shared_default_is_never_written_again():
    """A literal default equal to a shared one, for a parameter that takes that shared one elsewhere, is a copy;
    a literal of another value for such a parameter is a disagreement, unless it is another thing (listed).

    A parameter and an option named after it with a prefix (``every``, ``rebalance_every``) are one.
    """
    declared = declared_defaults()
    takes = {}  # parameter -> the shared defaults it takes somewhere
    for _, _, name, node in declared:
        if isinstance(node, ast.Name) and node.id in SHARED:
            takes.setdefault(name, set()).add(node.id)
    assert "DEFAULT_ALPHA" in takes["alpha"]  # the scan sees the declarations
    wrong = set()
    for where, line, name, node in declared:
        value = _literal(node)
        if value is None or (where, name) in OTHER_THINGS:
            continue
        for shared, constants in takes.items():
            if name != shared and not name.endswith("_" + shared) and not shared.endswith("_" + name):
                continue
            for constant in constants:
                if value == SHARED[constant] or name == shared:
                    wrong.add(f"{where}:{line} {name}={value!r} (use {constant} = {SHARED[constant]!r})")
    assert not wrong, "\n".join(sorted(wrong))


def _defaults_of(target) -> dict:
    """The defaults of a dataclass's fields, or of a function's parameters."""
    if dataclasses.is_dataclass(target):
        return {
            f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
            for f in dataclasses.fields(target)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        }
    return {name: p.default for name, p in inspect.signature(target).parameters.items() if p.default is not p.empty}


#: Per command, where its options' defaults live: (prefix of the options' names, the library object that takes
#: them without it), first match first.
SETS = {
    ("optimize",): [("topology_", Topology.uniform), ("", OfflineParams), ("", TraceSpec)],
    ("reconfigure",): [("rebalance_", RebalanceOptions), ("topology_", Topology.uniform), ("", OnlineParams)],
    ("replay",): [("rebalance_", RebalancePolicy), ("topology_", Topology.uniform), ("", replay_trace)],
    ("switch", "flink"): [("", switch_flink_job)],
    ("datasets",): [("", card_figures)],
}
#: Options whose default is the command line's own choice, not the library's (command, option): why.
THE_COMMAND_LINES = {
    ("replay", "history"): "the command line's replay blends every window, decayed as the online job does "
    "(--decay's help); the library's default reads the latest window",
    ("reconfigure", "sketches"): "a flag (read the engines' sketches); the job's parameter is which of them",
}


@pytest.mark.parametrize("path", sorted(SETS), ids=" ".join)
def test_an_option_defaults_to_what_the_library_parameter_it_sets_defaults_to(path):
    command = cli
    for name in path:
        command = command.commands[name]
    given = command.make_context(path[-1], [], resilient_parsing=True).params  # what the command gets unless told
    compared = []
    for option in (p for p in command.params if isinstance(p, click.Option)):
        for prefix, target in SETS[path]:
            library = _defaults_of(target)
            field = option.name.removeprefix(prefix) if option.name.startswith(prefix) else None
            if field in library:
                if (path[-1], option.name) not in THE_COMMAND_LINES:
                    assert given[option.name] == library[field], (option.opts, target, library[field])
                    compared.append(option.name)
                break
    assert compared  # the table above matches the commands' options


def test_the_benchmarks_budget_is_the_java_sketchers_default():
    """The testbed's benchmarks name a run by its budget: their default is the one every engine's sketcher takes."""
    from testbed.measure import DEFAULT_BUDGET, EVERY_RECORD

    options = (REPO / "jvm/locality-core/src/main/java/io/locality/sketch/SketcherOptions.java").read_text()
    constants = dict(re.findall(r"public static final int (\w+) = ([\w_.]+);", options))
    assert int(constants["DEFAULT_UPDATES_PER_SECOND"].replace("_", "")) == DEFAULT_BUDGET
    assert constants["EVERY_RECORD"] == "Integer.MAX_VALUE" and EVERY_RECORD == 2**31 - 1
