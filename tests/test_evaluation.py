import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from locality.errors import TraceError
from locality.evaluation import evaluate, replay, report_from_totals
from locality.hashing import make_fallback
from locality.routing import RoutingConfiguration, RoutingTable
from locality.topology import Topology

OPS = ["region", "tag"]


def two_server_config():
    topo = Topology.uniform(OPS, 2)
    fb = make_fallback("kafka", 2)
    # eu and #a on server 0, us and #b on server 1, whatever the hash says
    tables = {
        "region": RoutingTable("region", fb, {"eu": 0, "us": 1}),
        "tag": RoutingTable("tag", fb, {"#a": 0, "#b": 1}),
    }
    return RoutingConfiguration(topo, tables)


def test_figures_on_a_hand_made_trace():
    trace = pd.DataFrame(
        {
            "region": ["eu", "eu", "eu", "us", "us", "us"],
            "tag": ["#a", "#a", "#b", "#b", "#b", "#a"],
            "bytes": [10, 10, 10, 20, 20, 30],
        }
    )
    report = evaluate(trace, two_server_config())
    o = report.optimized
    assert o.tuples == 6 and o.locality == pytest.approx(4 / 6)
    assert o.instance_loads == {"region": [3.0, 3.0], "tag": [3.0, 3.0]}
    assert o.imbalance == {"region": 1.0, "tag": 1.0} and o.theta == {"region": 0.0, "tag": 0.0}
    weighted = evaluate(trace, two_server_config(), weight="bytes").optimized
    assert weighted.locality == pytest.approx(60 / 100) and weighted.network_weight == pytest.approx(40)
    assert weighted.imbalance["region"] == pytest.approx(70 / 50)
    # the baseline is the fallback hash alone, computed on the same rows
    baseline = evaluate(trace, two_server_config().hash_only()).optimized
    assert report.hash.locality == pytest.approx(baseline.locality)
    assert report.hash.instance_loads == baseline.instance_loads
    assert report.to_dict()["hash_locality"] == report.hash.locality


def test_totals_add_up_over_batches_and_arrow_input():
    rng = np.random.default_rng(0)
    trace = pd.DataFrame(
        {"region": rng.choice(["eu", "us", "asia"], 1000), "tag": rng.choice(["#a", "#b", "#c", "#d"], 1000)}
    )
    cfg = two_server_config()
    whole = evaluate(pa.Table.from_pandas(trace), cfg)
    parts = [replay(trace.iloc[i : i + 300], cfg) for i in range(0, 1000, 300)]
    opt, hsh = parts[0]
    for o, h in parts[1:]:
        opt, hsh = opt + o, hsh + h
    summed = report_from_totals(cfg, opt, hsh)
    assert summed.to_dict() == whole.to_dict()


def test_null_and_empty_keys_are_dropped_and_counted():
    trace = pd.DataFrame({"region": ["eu", None, "us", ""], "tag": ["#a", "#a", None, "#b"]})
    report = evaluate(trace, two_server_config())
    assert report.dropped_rows == 3 and report.optimized.tuples == 1


def test_missing_column_is_named():
    with pytest.raises(TraceError, match=r"has no column 'tag'; the columns present are \['region', 'hashtag'\]"):
        evaluate(pd.DataFrame({"region": ["eu"], "hashtag": ["#a"]}), two_server_config())
    with pytest.raises(TraceError, match="pandas DataFrame or a pyarrow Table"):
        evaluate([("eu", "#a")], two_server_config())
