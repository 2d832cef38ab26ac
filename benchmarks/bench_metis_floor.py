"""METIS's own floor: the optimizer's key graph partitioned by ``gpmetis`` beside pymetis and the whole optimizer.

For each size, in a fresh process: the power-law key graph of
``bench_partition.py`` (its pairs, then ``build_key_graph`` timed apart), the
exact input METIS gets from ``partition_key_graph``
(:class:`locality.partition.MetisInput`: CSR, integer weights, ufactor from
alpha, seed, cuts) written in METIS's file format, then, interleaved
``--repeat`` times:

- ``gpmetis`` on that file with the same options (a separate process: its
  CPU seconds, the "Partitioning" CPU seconds it prints, the memory METIS
  says it used and the process's peak RSS);
- METIS through our code on the same arrays (``MetisInput.run``: pymetis);
- the whole ``optimize`` (METIS with the same cuts, placement, repair,
  refinement, tables), with its stopwatch's CPU seconds per stage and its
  peak RSS above the graph it holds (VmHWM reset before it).

CPU seconds are the figures to compare on a shared machine (wall-clock
seconds are printed too). ``gpmetis`` is Debian's package ``metis``, needed by
this benchmark only (``apt-get install metis``); ``--gpmetis`` takes other
builds as well (a comma-separated list of programs).

    .venv/bin/python benchmarks/bench_metis_floor.py                         # 1e5, 1e6 edges, 48 parts, 3 runs
    .venv/bin/python benchmarks/bench_metis_floor.py --edges 10000000 --repeat 2
    .venv/bin/python benchmarks/bench_metis_floor.py --gpmetis gpmetis,/tmp/gpmetis64   # another build beside
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_partition import OPS, _reset_peak, _vm_hwm_mb, power_law_pairs  # noqa: E402

from locality.defaults import DEFAULT_ALPHA  # noqa: E402
from locality.graph import build_key_graph  # noqa: E402
from locality.optimizer import make_fallbacks, optimize  # noqa: E402
from locality.partition import adaptive_cuts, metis_input  # noqa: E402
from locality.topology import Topology  # noqa: E402

#: The optimizer's stages outside METIS, in the order they run (``Optimization.stopwatch``).
OWN_STAGES = ["csr", "fallback", "relabel", "assign", "repair", "refine", "cap", "tables"]


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def run_gpmetis(program: str, args: list[str]) -> dict:
    """One ``gpmetis`` run: its CPU seconds, the partitioning CPU seconds and METIS memory it reports, its cut."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([program, *args], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = done.stdout
    return {
        "wall": wall,
        "cpu": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime,
        "partitioning cpu": float(re.search(r"Partitioning:\s+([\d.]+)", out).group(1)),
        "metis MB": float(re.search(r"Max memory used:\s+([\d.]+) MB", out).group(1)),
        "cut": int(re.search(r"Edgecut: (\d+)", out).group(1)),
        "idx bits": int(re.search(r"size of idx_t: (\d+)bits", out).group(1)),
        # RUSAGE_CHILDREN's peak is the largest child's so far: exact for the first run, a bound after.
        "peak MB": after.ru_maxrss / 1024,
    }


def one_size(m: int, k: int, alpha: float, repeat: int, programs: list[str], workdir: Path) -> list[dict]:
    """Every measurement of one size, in this process; one row per repetition."""
    pairs = power_law_pairs(m)
    started, cpu = time.perf_counter(), time.process_time()
    graph = build_key_graph(OPS, [pairs])
    build = {"wall": time.perf_counter() - started, "cpu": time.process_time() - cpu}
    del pairs
    topology = Topology.uniform(OPS, k)
    fallbacks = make_fallbacks(topology)
    n_cuts = adaptive_cuts(graph.n_edges)
    csr = graph.to_csr()
    csr_mb = sum(a.nbytes for a in csr) / 2**20
    given = metis_input(graph, topology, alpha=alpha, n_cuts=n_cuts, csr=csr)
    args = given.write(workdir / f"g{m}")
    print(f"{m:,} edges, {graph.n_vertices:,} vertices, {k} parts, {n_cuts} cuts; graph written", file=sys.stderr)
    rows = []
    for rep in range(repeat):
        row = {"edges": m, "vertices": graph.n_vertices, "parts": k, "cuts": n_cuts, "run": rep}
        row.update({"build cpu": build["cpu"], "CSR MB": csr_mb})
        for program in programs:
            name = Path(program).name
            result = run_gpmetis(program, args)
            row.update({f"{name} {key}": value for key, value in result.items()})
        held = _rss_mb()
        reset = _reset_peak()
        started, cpu = time.perf_counter(), time.process_time()
        parts = given.run()
        row["pymetis wall"], row["pymetis cpu"] = time.perf_counter() - started, time.process_time() - cpu
        row["pymetis MB"] = (_vm_hwm_mb() if reset else np.nan) - held  # METIS's own memory, as our process sees it
        row["pymetis cut"] = (
            int(given.eweights[parts[given.adjncy] != np.repeat(parts, np.diff(given.xadj))].sum()) // 2
        )
        held = _rss_mb()
        reset = _reset_peak()
        started, cpu = time.perf_counter(), time.process_time()
        result = optimize(graph, topology, fallbacks, alpha=alpha, n_cuts=n_cuts)
        row["optimize wall"], row["optimize cpu"] = time.perf_counter() - started, time.process_time() - cpu
        row["optimize peak MB"] = (_vm_hwm_mb() if reset else np.nan) - held
        for stage, seconds in result.stopwatch.cpu.items():
            row[f"{stage} cpu"] = seconds
        row["own cpu"] = sum(result.stopwatch.cpu.get(stage, 0.0) for stage in OWN_STAGES)
        row["locality"] = result.placement.locality
        rows.append(row)
        print(json.dumps({key: round(v, 3) if isinstance(v, float) else v for key, v in row.items()}), file=sys.stderr)
        del result
    return rows


def summarize(rows: list[dict], programs: list[str]) -> pd.DataFrame:
    """Per size: medians and ranges (min-max over the runs) of the ratios the issue sets goals on."""
    frame = pd.DataFrame(rows)
    first = Path(programs[0]).name
    frame["pymetis / gpmetis"] = frame["pymetis cpu"] / frame[f"{first} partitioning cpu"]
    frame["own / METIS"] = frame["own cpu"] / frame["metis cpu"]
    frame["peak / (1.5 CSR + METIS)"] = frame["optimize peak MB"] / (1.5 * frame["CSR MB"] + frame["pymetis MB"])
    # METIS alone, seen by our process's peak RSS, reuses pages the process freed before (below METIS's own count of
    # its memory, by half at 1e6 edges): the same ratio against the count of a gpmetis built at pymetis's width.
    wide = [Path(p).name for p in programs if (frame[f"{Path(p).name} idx bits"] == 64).all()]
    if wide:
        metis_count = frame[f"{wide[0]} metis MB"]
        frame["peak / (1.5 CSR + METIS count)"] = frame["optimize peak MB"] / (1.5 * frame["CSR MB"] + metis_count)
    out = []
    for (m, k), group in frame.groupby(["edges", "parts"]):
        line = {"edges": m, "vertices": int(group["vertices"].iloc[0]), "parts": k, "cuts": int(group["cuts"].iloc[0])}
        line["graph build cpu s"] = round(group["build cpu"].median(), 2)
        for program in programs:
            name = Path(program).name
            line[f"{name} (idx {int(group[f'{name} idx bits'].iloc[0])}) METIS cpu s"] = _spread(
                group[f"{name} partitioning cpu"]
            )
            line[f"{name} METIS MB"] = round(group[f"{name} metis MB"].median())
        line["pymetis cpu s"] = _spread(group["pymetis cpu"])
        line["pymetis / gpmetis"] = _spread(group["pymetis / gpmetis"], 3)
        line["optimize cpu s"] = _spread(group["optimize cpu"])
        for stage in ["csr", "metis", *[s for s in OWN_STAGES if s != "csr"]]:
            if f"{stage} cpu" in group:
                line[f"{stage} s"] = round(group[f"{stage} cpu"].median(), 2)
        line["own / METIS"] = _spread(group["own / METIS"], 3)
        line["CSR MB"] = round(group["CSR MB"].iloc[0])
        line["METIS own MB"] = round(group["pymetis MB"].median())
        line["optimize peak MB"] = round(group["optimize peak MB"].median())
        line["peak / (1.5 CSR + METIS)"] = _spread(group["peak / (1.5 CSR + METIS)"], 2)
        if "peak / (1.5 CSR + METIS count)" in group:
            line["peak / (1.5 CSR + METIS count)"] = _spread(group["peak / (1.5 CSR + METIS count)"], 2)
        line["locality"] = round(group["locality"].median(), 4)
        out.append(line)
    return pd.DataFrame(out)


def _spread(values: pd.Series, digits: int = 2) -> str:
    """Median and range, e.g. ``1.08 (1.02-1.15)``."""
    return f"{values.median():.{digits}f} ({values.min():.{digits}f}-{values.max():.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", default="100000,1000000")
    parser.add_argument("--parts", type=int, default=48)
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gpmetis", default="gpmetis", help="comma-separated gpmetis programs (first: the floor)")
    parser.add_argument("--json", help="also write every run's figures to this file")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process of one size
    args = parser.parse_args()
    programs = args.gpmetis.split(",")
    for program in programs:
        if shutil.which(program) is None:
            parser.error(f"--gpmetis: {program!r} is not a program on PATH (Debian: apt-get install metis)")
    if args.one:
        with tempfile.TemporaryDirectory(prefix="metis-floor-") as workdir:
            rows = one_size(args.one, args.parts, args.alpha, args.repeat, programs, Path(workdir))
        print(json.dumps(rows))
        return
    rows = []
    for m in [int(x) for x in args.edges.split(",")]:
        command = [sys.executable, __file__, "--one", str(m), "--parts", str(args.parts), "--alpha", str(args.alpha)]
        command += ["--repeat", str(args.repeat), "--gpmetis", args.gpmetis]
        out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
        rows += json.loads(out.strip().splitlines()[-1])
        print(summarize(rows, programs).T.to_string(header=False), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    print()
    print(summarize(rows, programs).T.to_string(header=False))


if __name__ == "__main__":
    main()
