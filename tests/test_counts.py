import pandas as pd
import pytest

from locality.counts import KeyCounts, blend, count_keys
from locality.errors import InvalidParameterError, SerializationError

OPS = ["user", "tag"]


def window(rows):
    return count_keys(pd.DataFrame(rows, columns=OPS), OPS)


def pair_weights(counts):
    return counts.pair_counts[0].set_index(["key0", "key1"])["weight"].to_dict()


def test_exact_counts_of_a_trace():
    counts = window([("a", "x"), ("a", "x"), ("b", "y"), (None, "y")])
    assert pair_weights(counts) == {("a", "x"): 2.0, ("b", "y"): 1.0}
    assert counts.key_loads["tag"].set_index("key")["weight"].to_dict() == {"x": 2.0, "y": 1.0}
    assert counts.totals == {"user": 3.0, "tag": 3.0}
    graph = counts.graph()
    assert graph.n_vertices == 4 and graph.n_edges == 2


def test_blend_reset_history_and_decay():
    old, mid, new = window([("a", "x")] * 4), window([("a", "y")] * 2), window([("b", "y")] * 1)
    assert pair_weights(blend([old, mid, new])) == {("b", "y"): 1.0}  # the paper's reset
    assert pair_weights(blend([old, mid, new], windows=2)) == {("a", "y"): 2.0, ("b", "y"): 1.0}
    decayed = blend([old, mid, new], windows=None, decay=0.5)
    assert pair_weights(decayed) == {("a", "x"): 1.0, ("a", "y"): 1.0, ("b", "y"): 1.0}
    assert decayed.totals["user"] == pytest.approx(4 * 0.25 + 2 * 0.5 + 1)
    forgotten = blend([old, mid, new], windows=None, decay=0)  # decay 0 forgets: the reset, whatever the windows
    assert pair_weights(forgotten) == {("b", "y"): 1.0} and forgotten.totals == blend([old, mid, new]).totals
    assert forgotten.key_loads["user"]["key"].tolist() == ["b"]  # no key of the older windows left at weight 0


def test_write_read_round_trip_keeps_key_types(tmp_path):
    counts = count_keys(pd.DataFrame({"user": [1, 2, 2], "tag": ["x", "y", "y"]}), OPS)
    counts.write(tmp_path / "c")
    back = KeyCounts.read(tmp_path / "c")
    assert pair_weights(back) == {(1, "x"): 1.0, (2, "y"): 2.0}
    assert back.key_loads["user"]["key"].tolist() == [1, 2] and back.totals == counts.totals
    with pytest.raises(SerializationError, match="cannot read key counts"):
        KeyCounts.read(tmp_path / "missing")


def test_blend_bad_parameters():
    with pytest.raises(InvalidParameterError, match="at least one window"):
        blend([])
    with pytest.raises(InvalidParameterError, match="'decay' parameter of blend"):
        blend([window([("a", "x")])], decay=1.5)
