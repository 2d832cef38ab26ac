"""A Python reader of a store for ``test_store_outage.py``: a ``Router`` as a job runs it, logged as JSON lines.

``python -m tests.testbed._outage_reader ARGS_JSON`` (from the repository's root) with ``ARGS_JSON`` holding
``store``, ``poll`` (the router's ``poll_interval``, seconds), ``operator``, ``keys``, ``points``, ``waits``
and ``seconds``. Every 200 ms the main thread routes every key at every point the schedule the router knows
covers (``route_many_at``: records of points already sealed, no store read) and logs a ``routes`` line with
the version in service (``CURRENT``, followed by the router's thread) and the error of its last refresh. A
second thread asks for each point of ``waits`` in turn (``Router.at``: a record past the seal waits for the
schedule to cover it) and logs a ``settled`` line when it goes on. Any exception is logged as an ``error``
line and exits 1; after ``seconds`` it exits 0.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from locality.router import Router

_lock = threading.Lock()


def log(kind: str, **fields) -> None:
    with _lock:
        print(json.dumps({"t": time.time(), "kind": kind, **fields}), flush=True)


def main(args: dict) -> None:
    router = Router(args["store"], poll_interval=args["poll"], schedule_wait=300)
    keys, points = args["keys"], args["points"]
    router.at(points[0])  # the schedule read once: from then on the router's thread keeps it fresh
    log("started", version=router.version)

    def wait_for_points() -> None:
        try:
            for point in args["waits"]:
                log("settled", point=point, version=router.at(point).version)
        except BaseException as error:
            log("error", error=repr(error))
            os._exit(1)

    threading.Thread(target=wait_for_points, name="waiter", daemon=True).start()
    end = time.monotonic() + args["seconds"]
    while time.monotonic() < end:
        # The schedule the router holds (the one it took last; never replaced but by an extension of it).
        known = router.schedule
        covered = [p for p in points if p < known.sealed_until]
        routes = {str(p): router.route_many_at(args["operator"], keys, [p] * len(keys)).tolist() for p in covered}
        versions = {str(p): router.at(p).version for p in covered}
        error = router.last_error
        log(
            "routes",
            version=router.version,
            sealed=known.sealed_until,
            entries=len(known.versions),
            versions=versions,
            routes=routes,
            last_error=None if error is None else str(error)[:300],
        )
        time.sleep(0.2)
    router.close()


if __name__ == "__main__":
    try:
        main(json.loads(sys.argv[1]))
    except BaseException as error:
        log("error", error=repr(error))
        sys.exit(1)
