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
import re
from fnmatch import fnmatch
from pathlib import Path

import networkx as nx
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


def test_the_wheel_leaves_out_the_testing_code():
    """``locality.testing`` serves the tests and benchmarks: the packages ``pyproject.toml`` ships leave it out.

    The packages are found as setuptools' ``packages.find`` finds them: dotted names matched against its
    ``include`` and ``exclude`` patterns.
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the dependency the dataset catalog reads TOML with
        import tomli as tomllib

    found = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    tops = [top for top in REPO.iterdir() if (top / "__init__.py").is_file()]
    packages = {".".join(p.parent.relative_to(REPO).parts) for top in tops for p in top.glob("**/__init__.py")}
    shipped = {
        name
        for name in packages
        if any(fnmatch(name, pattern) for pattern in found["include"])
        and not any(fnmatch(name, pattern) for pattern in found.get("exclude", ()))
    }
    assert {"locality", "locality.rebalance", "locality.hashing", "pipelines"} <= shipped
    assert "locality.testing" in packages and not {p for p in shipped if p.startswith("locality.testing")}


JAVA_CORE = REPO / "jvm/locality-core/src/main/java/io/locality"
#: One concept, one name on both sides: a Python name and the Java class (a method: its camelCase) of the
#: same name, an error's ``Error`` being Java's ``Exception``.
TWINS = [
    "locality.store:ConfigStore",
    "locality.schedule:SwitchSchedule.version_at",
    "locality.errors:StoreDamagedError",
    "locality.errors:StoreUnavailableError",
    "locality.errors:ScheduleExpiredError",
    "locality.routing:RoutingConfiguration",
    "locality.routing:RoutingTable.route",
    "locality.hashing.ring:ConsistentHashRing",
    "locality.hashing.kafka:KafkaPartitioner",
    "locality.hashing.storm:StormFieldsGrouping",
    "locality.engines.flink:RoutingKeySelector",
    "locality.engines.kafka:TablePartitioner",
]


def _java_packages() -> dict[str, set[str]]:
    """Each package of locality-core and the others of locality-core it imports."""
    imports: dict[str, set[str]] = {}
    for package in (p for p in JAVA_CORE.iterdir() if p.is_dir()):
        found = {
            m for f in package.glob("*.java") for m in re.findall(r"^import io\.locality\.(\w+)\.", f.read_text(), re.M)
        }
        imports[package.name] = found - {package.name}
    return imports


def test_the_java_core_has_the_librarys_homes_and_imports_one_way():
    """locality-core's packages are the library's modules of the same names; none imports one that imports it
    back, and ``hashing`` is at the bottom, as ``locality.hashing`` is."""
    imports = _java_packages()
    assert set(imports) == {"hashing", "routing", "schedule", "sketch", "storage", "store"}
    for package in imports:
        assert (LOCALITY / f"{package}.py").is_file() or (LOCALITY / package / "__init__.py").is_file(), package
    assert not imports["hashing"], imports["hashing"]
    graph = nx.DiGraph([(package, other) for package, others in imports.items() for other in others])
    assert nx.is_directed_acyclic_graph(graph), list(nx.simple_cycles(graph))


@pytest.mark.parametrize("twin", TWINS)
def test_python_and_java_name_a_concept_alike(twin):
    module, _, name = twin.partition(":")
    owner, _, method = name.partition(".")
    python = getattr(importlib.import_module(module), owner)
    assert method == "" or callable(getattr(python, method)), twin
    java_name = re.sub(r"Error$", "Exception", owner)
    sources = [f for f in (REPO / "jvm").glob(f"*/src/main/java/**/{java_name}.java")]
    assert len(sources) == 1, f"{twin}: Java class {java_name} in {sources}"
    if method:
        camel = re.sub(r"_(\w)", lambda m: m.group(1).upper(), method)
        assert re.search(rf"\bpublic [\w<>\[\], ]+ {camel}\(", sources[0].read_text()), f"{java_name}.{camel}"
