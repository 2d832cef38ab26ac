"""Java's Flink routing keys (``locality-flink``) are Python's, key for key, on real tables.

The store holds the tweet tables learned with Flink's own fallback (``--hash flink``,
M = 128, parallelism 6); Java's ``PrintRoutingKeys`` (``jvm/examples``, on locality-flink's
drop-in jar) computes each key's routing key with ``FlinkRoutingKeys`` (surrogates found with
Flink's own ``KeyGroupRangeAssignment``) and Python's
:class:`~locality.engines.flink.RoutingKeySelector` does the same: every key of the trace, plus
odd and reserved keys, must get the same routing key or be refused by both.
"""

from __future__ import annotations

import json

import pytest

from locality.engines.flink import RoutingKeySelector
from locality.errors import InvalidParameterError
from locality.hashing import FlinkKeyGroups, make_fallback
from locality.hashing.flink import flink_surrogates
from locality.store import ConfigStore
from tests.engines.test_flink_splits import TAGS, split_config
from tests.jvm.conftest import FLINK_EXAMPLES, run_java
from tests.jvm.test_store_routes import ODD_STRINGS

FLINK = [FLINK_EXAMPLES]


def python_routing_key(selector: RoutingKeySelector, key, server: int | None = None):
    """The selector's routing key of ``key``, None where it refuses the key."""
    try:
        return selector.routing_key(key, server)
    except InvalidParameterError:
        return None


def java_routing_keys(store: ConfigStore, operator: str, keys: list, tmp_path, server: int | None = None) -> list:
    keys_file, out = tmp_path / f"{operator}.keys.jsonl", tmp_path / f"{operator}.routing.jsonl"
    keys_file.write_text("".join(json.dumps(k) + "\n" for k in keys), encoding="utf-8")
    args = [store.root, operator, keys_file, out] + ([] if server is None else [server])
    done = run_java(FLINK, "io.locality.flink.PrintRoutingKeys", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_every_key_of_the_tweet_tables_gets_pythons_routing_key(flink_tweet_tables, geotweets, tmp_path):
    config = flink_tweet_tables[0]
    store = ConfigStore(tmp_path / "store")
    store.publish(config, fingerprint="flink-tweets")
    for op in config.topology.operators:
        keys = list(dict.fromkeys([*geotweets[op].unique().tolist(), *ODD_STRINGS]))
        selector = RoutingKeySelector(config, op)
        python = [python_routing_key(selector, k) for k in keys]
        java = java_routing_keys(store, op, keys, tmp_path)
        mismatched = [(k, p, j) for k, p, j in zip(keys, python, java) if p != j]
        assert not mismatched, f"{len(mismatched)} of {len(keys)} keys of {op} differ: {mismatched[:5]}"
        entries = config.tables[op].entries
        surrogates = sum(1 for k, r in zip(keys, java) if r is not None and r != k)
        assert surrogates == len(entries) > 100  # every table key, and only those, on a surrogate
        assert java[keys.index("\x00locality:7")] is None  # a reserved form is refused by both


@pytest.mark.parametrize(
    ("max_parallelism", "key_type"), [(128, "string"), (7, "string"), (1000, "long"), (32768, "int")]
)
def test_java_finds_pythons_surrogate_for_every_key_group(max_parallelism, key_type):
    int_type = "int" if key_type == "int" else "long"
    fallback = FlinkKeyGroups(max_parallelism, max_parallelism, int_type=int_type)
    python = flink_surrogates(fallback, key_type)["surrogate"].tolist()
    done = run_java(FLINK, "io.locality.flink.PrintSurrogates", max_parallelism, key_type)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [json.loads(line) for line in done.stdout.splitlines()] == python


def test_split_keys_get_pythons_routing_key_of_their_part_on_each_server(tmp_path):
    config, _, splits = split_config(make_fallback("flink", 6, max_parallelism=128))
    store = ConfigStore(tmp_path / "store")
    store.publish(config, fingerprint="flink-splits")
    for server in range(len(config.topology.servers)):
        selector = RoutingKeySelector(config, "hashtag", server=server)
        python = [python_routing_key(selector, k) for k in TAGS]
        assert java_routing_keys(store, "hashtag", TAGS, tmp_path, server) == python
        assert sum(1 for k in splits if selector.routing_key(k) != k) > len(splits) // 2
