"""The package's layers: imports go one way, from the command line down to the engines' hashes.

From the bottom: ``locality.hashing`` (each engine's own hash, what the tables
are built on), the library (tables, optimizer, store, router...), the
engines' adapters (``locality.engines``: how a table takes effect in Kafka,
Flink, Spark), the jobs (``pipelines``) and the command line. A module never
imports one of a layer above it, function-local imports and type hints
included; code the tests use (``locality.testing``) is imported by no module of
the library.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from tests.conftest import REPO

LOCALITY = REPO / "locality"
#: What the bottom layer may import from the package besides itself.
HASHING_MAY_IMPORT = ("locality.hashing", "locality.errors", "locality._validation")
#: The modules above the engines' adapters: the command line (``switch`` apart) and the adapters themselves.
TOP = ("locality/cli.py", "locality/cli_switch.py", "locality/engines/")


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, wherever the import statement is (functions, ``if TYPE_CHECKING``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def modules(*folders: Path) -> list[Path]:
    return sorted(p for folder in folders for p in folder.rglob("*.py"))


def relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_the_hashes_import_nothing_above_them():
    for path in modules(LOCALITY / "hashing"):
        above = {n for n in imported(path) if n.split(".")[0] == "locality" and not n.startswith(HASHING_MAY_IMPORT)}
        assert not above, f"{relative(path)} imports {sorted(above)}"


def test_only_the_command_line_imports_the_engines_adapters():
    for path in modules(LOCALITY, REPO / "pipelines"):
        if not relative(path).startswith(TOP):
            adapters = {n for n in imported(path) if n == "locality.engines" or n.startswith("locality.engines.")}
            assert not adapters, f"{relative(path)} imports {sorted(adapters)}: the hashes are locality.hashing"


def test_the_library_imports_neither_the_jobs_nor_its_testing_code():
    for path in modules(LOCALITY):
        if relative(path).startswith(("locality/cli.py", "locality/cli_switch.py", "locality/testing/")):
            continue
        wrong = {n for n in imported(path) if n.split(".")[0] == "pipelines" or n.startswith("locality.testing")}
        assert not wrong, f"{relative(path)} imports {sorted(wrong)}"


def test_the_jobs_and_the_library_import_nothing_above_them():
    """Neither imports the command line, nor the testbed, benchmarks or tests, which drive them from outside."""
    for path in modules(LOCALITY, REPO / "pipelines"):
        if relative(path).startswith(("locality/cli.py", "locality/cli_switch.py", "locality/cli_datasets.py")):
            continue
        above = {
            n
            for n in imported(path)
            if n.split(".")[0] in ("testbed", "benchmarks", "tests") or n.startswith("locality.cli")
        }
        assert not above, f"{relative(path)} imports {sorted(above)}"


@pytest.mark.parametrize("engine", ["kafka", "flink", "spark"])
def test_an_engines_hash_has_one_home_below_its_adapters(engine):
    """``locality.hashing.<engine>`` holds the hash; ``locality.engines.<engine>`` exports only its adapters."""
    adapters, hashes = (importlib.import_module(f"locality.{layer}.{engine}") for layer in ("engines", "hashing"))
    defined_elsewhere = [
        name
        for name in adapters.__all__
        if inspect.isclass(getattr(adapters, name)) or inspect.isfunction(getattr(adapters, name))
        if getattr(adapters, name).__module__ != adapters.__name__
    ]
    assert not defined_elsewhere, f"{adapters.__name__} exports what it does not define"
    assert not set(adapters.__all__) & set(hashes.__all__)


def test_the_engines_package_reexports_nothing_of_the_hashes():
    """One import path per name: ``from locality.hashing import make_fallback``, not from the adapters' package."""
    import locality.engines
    import locality.hashing

    for name in locality.hashing.__all__:
        assert not hasattr(locality.engines, name), f"locality.engines re-exports {name}"


def test_the_routing_tables_know_nothing_of_how_they_were_made():
    """``locality.routing`` holds tables and their I/O; building them from a placement is the optimizer's."""
    made_by = {"locality.graph", "locality.placement", "locality.partition", "locality.optimizer"}
    assert not imported(LOCALITY / "routing.py") & made_by
