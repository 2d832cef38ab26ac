"""Touching the nightly job's input publishes nothing new; changing it does (the fingerprint is the content's).

An online window's identity is kept across versions of its parameters' layout, so a rerun finds its decision.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from locality.cli import ExitCode, main
from locality.rebalance.options import RebalanceOptions
from locality.store import ConfigStore, fingerprint
from locality.topology import Topology
from pipelines.params import OnlineParams
from pipelines.trace import TraceSpec


def test_a_touched_input_publishes_nothing_and_a_changed_one_publishes(spark, tmp_path, capsys):
    rng = np.random.default_rng(3)
    path = tmp_path / "t.parquet"
    pd.DataFrame(
        {"user": rng.choice([f"u{i}" for i in range(30)], 2_000), "tag": rng.choice(list("abcdefg"), 2_000)}
    ).to_parquet(path)
    args = ["optimize", str(path), "--keys", "user,tag", "--servers", "3", "--store", str(tmp_path / "store"), "-q"]
    assert main(args) == ExitCode.OK
    os.utime(path, ns=(10**18, 10**18))  # touched (a copy with other dates, a restore from backup)
    assert main(args) == ExitCode.OK
    store = ConfigStore(tmp_path / "store")
    assert store.versions() == [1]
    pd.read_parquet(path).iloc[::-1].to_parquet(path)  # the same rows in another order: another file
    assert main(args) == ExitCode.OK
    assert store.versions() == [1, 2] and store.current_version() == 2
    capsys.readouterr()


#: Windows' identities (the first 32 hex digits of ``fingerprint`` over the decision parameters, no input) as
#: the online job computed them when the rebalance options were flat fields of its parameters.
WINDOW_IDENTITIES = [
    ({}, "c54b31969b720067da27385ab0a271dd"),
    ({"rebalance": RebalanceOptions("local", theta_max=0.05)}, "e069c3c25676e3c33e044add7a45d1b5"),
    ({"rebalance": RebalanceOptions("follow", state_weight=3.0), "horizon": "1D"}, "8dac654e3105a4205763278ca98017a2"),
    (
        {
            "rebalance": RebalanceOptions("local", split_hot_keys=True, split_share=0.05, split_merge="downstream"),
            "balance_since": "2024-01-01",
            "balance_until": "2024-01-15",
        },
        "8a6b8063c0060d7c46f78749840c87dd",
    ),
    (
        {
            "topology": Topology.uniform(["a", "b"], 3),
            "switch_after": "1h",
            "alpha": 1.1,
            "seed": 3,
            "incremental": True,
        },
        "9d877b5abbc720d18cec1bb06cf0d136",
    ),
]


@pytest.mark.parametrize("given, identity", WINDOW_IDENTITIES)
def test_a_window_keeps_its_identity_with_the_rebalance_options_one_object(given, identity):
    """A rerun of a window recorded before the options became one object finds its decision: the same identity."""
    trace = TraceSpec("x.parquet", ["a", "b"], ts="ts", start="2024-01-01", end="2024-01-08")
    params = OnlineParams(trace=trace, store="unused", **given)
    assert fingerprint([], params._decision_parameters())[:32] == identity
