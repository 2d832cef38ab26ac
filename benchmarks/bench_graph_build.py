"""The key graph's build (pairs -> ``KeyGraph`` -> CSR) beside a baseline revision's, with identical results.

``build_key_graph`` and ``KeyGraph.to_csr`` of this checkout beside the same
two functions of ``locality/graph.py`` at a git revision (``--baseline``;
default 1eca430, the build before issue 28's speed-up), interleaved
``--repeat`` times in one process, on the power-law pairs of
``bench_partition.py`` at each size, in two forms:

- ``ints``: as generated (integer keys, one row per pair, rows in key order),
  the graph ``bench_metis_floor.py`` and ``bench_partition.py`` time;
- ``strings``: string keys, a tenth of the pairs repeated on a second row
  with another weight (to be summed), rows shuffled, as counts may come from
  Spark or a sketch merged from several windows.

Every graph (keys with their dtype, offsets, vertex and edge arrays, totals)
and every CSR must equal the baseline's, array for array: the benchmark
fails otherwise. CPU seconds are the figures to compare on a shared machine.

    .venv/bin/python benchmarks/bench_graph_build.py                            # 1e5, 1e6 edges, 3 runs
    .venv/bin/python benchmarks/bench_graph_build.py --edges 10000000 --forms ints --repeat 2
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_partition import OPS, power_law_pairs  # noqa: E402

from locality import graph as current  # noqa: E402


def baseline_module(revision: str):
    """``locality/graph.py`` as it was at ``revision``, imported beside the current one."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{revision}:locality/graph.py"], capture_output=True, text=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="graph-baseline-")) / "baseline_graph.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("baseline_graph", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_graph"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def pair_table(m: int, form: str) -> pd.DataFrame:
    """The ``m`` power-law pairs in ``form`` (see the module's docstring)."""
    pairs = power_law_pairs(m)
    if form == "ints":
        return pairs
    rng = np.random.default_rng(2)
    pairs = pairs.assign(key0="k" + pairs["key0"].astype(str), key1="h" + pairs["key1"].astype(str))
    again = pairs.sample(frac=0.1, random_state=3).assign(weight=lambda t: rng.integers(1, 100, len(t)).astype(float))
    return pd.concat([pairs, again], ignore_index=True).sample(frac=1, random_state=4).reset_index(drop=True)


def assert_same(new, old) -> None:
    """Fail unless two key graphs and their CSRs are equal, array for array."""
    assert new.operators == old.operators and new.offsets == old.offsets and new.totals == old.totals
    for op in new.operators:
        assert new.keys[op].equals(old.keys[op]) and new.keys[op].dtype == old.keys[op].dtype, op
    for name in ["vertex_weight", "src", "dst", "edge_weight"]:
        a, b = getattr(new, name), getattr(old, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for a, b in zip(new.to_csr(), old.to_csr()):
        assert a.dtype == b.dtype and np.array_equal(a, b), "csr"


def timed(function, *args) -> tuple[object, float]:
    """``function(*args)`` and the CPU seconds it took."""
    gc.collect()
    cpu = time.process_time()
    result = function(*args)
    return result, time.process_time() - cpu


def one_form(m: int, form: str, repeat: int, baseline) -> list[dict]:
    """Interleaved runs of the baseline's build and CSR and the current ones on one pair table."""
    pairs = pair_table(m, form)
    rows = []
    for run in range(repeat):
        row = {"edges": m, "form": form, "rows": len(pairs), "run": run}
        for name, module in [("baseline", baseline), ("now", current)]:
            graph, row[f"{name} build"] = timed(module.build_key_graph, OPS, [pairs])
            csr, row[f"{name} csr"] = timed(
                module.csr_from_edges, graph.src, graph.dst, graph.edge_weight, graph.n_vertices
            )
            if name == "baseline":
                reference = graph
            del csr
        assert_same(graph, reference)
        row["vertices"] = graph.n_vertices
        del graph, reference
        rows.append(row)
        print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", default="100000,1000000")
    parser.add_argument("--forms", default="ints,strings", help="comma-separated: ints, strings")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", default="1eca430", help="git revision of the build to compare with")
    args = parser.parse_args()
    forms = args.forms.split(",")
    for form in forms:
        if form not in ("ints", "strings"):
            parser.error(f"--forms: {form!r} is not one of ints, strings")
    baseline = baseline_module(args.baseline)
    rows = [
        row
        for m in [int(x) for x in args.edges.split(",")]
        for form in forms
        for row in one_form(m, form, args.repeat, baseline)
    ]
    frame = pd.DataFrame(rows)
    summary = frame.groupby(["edges", "form"], sort=False).median(numeric_only=True)
    summary["build speed-up"] = summary["baseline build"] / summary["now build"]
    summary["csr speed-up"] = summary["baseline csr"] / summary["now csr"]
    columns = [
        "rows",
        "vertices",
        "baseline build",
        "now build",
        "build speed-up",
        "baseline csr",
        "now csr",
        "csr speed-up",
    ]
    print("CPU seconds, medians; every graph and CSR equal to the baseline's")
    print(summary[columns].round(3).to_string())


if __name__ == "__main__":
    main()
