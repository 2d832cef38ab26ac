"""``python -m testbed clean``: remove what killed runs left behind; ``list``: every run's namespaces, links, mounts."""

from __future__ import annotations

import argparse
import logging
import sys

from testbed.network import clean_leftovers, leftovers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed", description=__doc__)
    parser.add_argument("action", choices=["clean", "list"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if args.action == "clean":
        runs = clean_leftovers()
        print(f"removed {len(runs)} dead run(s): {' '.join(runs) or '-'}", file=sys.stderr)
    else:
        for kind, names in leftovers(dead_only=False).items():
            print(f"{kind}: {' '.join(names) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
