"""A testbed run that a test kills: builds 2 servers (private files), starts a process in each, prints their pids.

``python _hold_testbed.py`` prints one line ``<run name> <pid> <pid> ...`` once everything is up,
then sleeps until it is killed (at most 120 s). The test sends SIGKILL (nothing runs: the next run
cleans up) or SIGTERM (the testbed's own teardown runs).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from testbed import Testbed  # noqa: E402

if __name__ == "__main__":
    log = Path(sys.argv[1])
    with Testbed(2, rate_mbit=50, private_files=True) as bed:
        for server in bed.servers:
            # A shell whose child outlives it: teardown must find it by its namespace, not by its parent.
            bed.spawn(server, ["sh", "-c", "sleep 300 & sleep 300"], log=log)
        deadline = time.monotonic() + 10
        while sum(len(bed.pids(s)) for s in bed.servers) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = [pid for server in bed.servers for pid in bed.pids(server)]
        print(bed.name, *pids, flush=True)
        time.sleep(120)
