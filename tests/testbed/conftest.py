"""The testbed's tests build real network namespaces, veths, a bridge and ``tc`` shapers: they need root.

Without root they fail with that reason (never skip), as a missing trace does.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _needs_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("the testbed tests create network namespaces and tc shapers: run them as root", pytrace=False)
