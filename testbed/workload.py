"""What the testbed's Flink job replays, the tables it is routed by, and the bytes it should send.

- :func:`write_replay_trace`: the records the job replays (two key columns) as the tab-separated
  file its source reads and as a Parquet file ``locality`` reads;
- :func:`learn_tables`: ``locality optimize --hash flink`` into a store, which the job reads with
  locality-flink's ``RoutingKeySelector`` (docs/engines/flink.md); with ``max_entries=0``, a version
  with no entries (every key where Flink's hash puts it), and :func:`reconfigure_tables`: the online
  job (``locality reconfigure``) from it, for a job that starts on hash routing and switches;
- :func:`evaluate_locality`: ``locality evaluate --json`` on the same records: the share of hops
  that stay on a server, with the tables and with Flink's hash;
- :func:`flink_record_bytes`: the bytes Flink's network stack carries for one record, so that the
  traffic between servers can be predicted as ``(1 - locality) x records x record size``;
- :func:`paired_keys`: the core paper's synthetic workload with a known share of local pairs
  (Caneill et al., Middleware 2016, Section 4.2: keys ``(i, j)`` with ``i = j`` for a set share).

The commands run this checkout's ``locality_job.py`` on ``local[2]``, in the root namespace.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "evaluate_locality",
    "flink_record_bytes",
    "learn_tables",
    "paired_keys",
    "reconfigure_tables",
    "write_replay_trace",
]

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "locality_job.py"
CLI_TIMEOUT = 600
#: Bytes of a record beyond its fields: the length Flink writes before each serialized record (an int),
#: the stream element's tag (a byte) and its timestamp (a long), which a record from a FLIP-27 source
#: always carries (``Long.MIN_VALUE`` without watermarks; at padding 0 the prediction fell 25% short of
#: the measured bytes without these 9 bytes, and 3% with them).
RECORD_FRAMING_BYTES = 4 + 1 + 8


def write_replay_trace(frame: pd.DataFrame, keys: list[str], directory: Path) -> tuple[Path, Path]:
    """``keys.tsv`` (for the job) and ``keys.parquet`` (for ``locality``) of ``frame[keys]``, in row order.

    Raises
    ------
    ValueError
        ``keys`` is not two columns of ``frame``, a key is null, or holds a tab or a line break (the
        message names the column).
    """
    if len(keys) != 2 or not set(keys) <= set(frame.columns):
        raise ValueError(f"the job replays two key columns of the trace; got {keys}, columns {list(frame.columns)}")
    records = frame[keys].astype(str)
    for column in keys:
        if frame[column].isna().any():
            raise ValueError(f"column {column!r} of the trace holds nulls: the job's records need both keys")
        if records[column].str.contains(r"[\t\r\n]").any():
            raise ValueError(f"column {column!r} holds a tab or a line break, which the job's trace file cannot")
    directory.mkdir(parents=True, exist_ok=True)
    tsv, parquet = directory / "keys.tsv", directory / "keys.parquet"
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b in zip(records[keys[0]], records[keys[1]])), encoding="utf-8")
    records.to_parquet(parquet, index=False)
    return tsv, parquet


def _locality(*args: object) -> dict:
    done = subprocess.run(
        [sys.executable, str(JOB), *map(str, args), "--master", "local[2]", "--json", "-q"],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"locality {' '.join(map(str, args))} exited with {done.returncode}: {done.stderr[-3000:]}")
    return json.loads(done.stdout)


def learn_tables(trace: Path, keys: list[str], servers: int, store: Path, *, max_entries: int | None = None) -> Path:
    """Tables for Flink's Java ``keyBy`` on ``servers`` servers, published in ``store`` (returned).

    ``max_entries`` caps each table (``--max-entries``); 0 publishes a version with no table entries,
    on which a job keyed by it runs on Flink's own hash.
    """
    cap = [] if max_entries is None else ["--max-entries", max_entries]
    _locality(
        "optimize", trace, "--keys", ",".join(keys), "--servers", servers, "--hash", "flink", *cap, "--store", store
    )
    return store


def reconfigure_tables(trace: Path, keys: list[str], store: Path) -> dict:
    """``locality reconfigure`` on ``trace`` from the current version of ``store``: its JSON document."""
    return _locality("reconfigure", trace, "--keys", ",".join(keys), "--store", store)


def evaluate_locality(trace: Path, keys: list[str], store: Path, *, weight: str | None = None) -> dict:
    """``locality evaluate --json`` of ``trace`` through the current tables of ``store`` (and Flink's hash).

    With ``weight`` naming a column of record sizes, its ``network_weight`` (``hash_network_weight``)
    is the bytes the tables (the hash) send between servers.
    """
    return _locality(
        "evaluate", trace, "--keys", ",".join(keys), "--store", store, *(["--weight", weight] * bool(weight))
    )


def _string_bytes(text: str) -> int:
    # Flink's StringValue.writeString: length + 1, then each UTF-16 unit, all in 7-bit groups.
    units = np.frombuffer(text.encode("utf-16-le"), dtype="<u2").astype(np.int64)
    return _varint_bytes(len(units) + 1) + int(np.sum((units >= 0x80).astype(int) + (units >= 0x4000) + 1))


def _varint_bytes(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def flink_record_bytes(first: pd.Series, second: pd.Series, padding: int) -> np.ndarray:
    """Bytes each record ``(first, second, padding)`` takes in Flink's network buffers.

    The job's records are ``Tuple3<String, String, byte[]>``: Flink writes an int length, the
    stream record's tag and timestamp (:data:`RECORD_FRAMING_BYTES`), then each string as
    ``StringValue.writeString`` does (its length + 1 and its UTF-16 units, each in 7-bit groups)
    and the padding as an int length and its bytes. Network buffers add their own headers and the
    receivers' credits (about 0.2% more at any padding), which this leaves out.
    """
    return _strings_bytes(first) + _strings_bytes(second) + RECORD_FRAMING_BYTES + 4 + padding


def _strings_bytes(values: pd.Series) -> np.ndarray:
    """:func:`_string_bytes` of each value as a string, computed once per distinct value."""
    codes, distinct = pd.factorize(values.astype(str))
    return np.array([_string_bytes(text) for text in distinct], dtype=np.int64)[codes]


def paired_keys(
    n_rows: int, n_servers: int, local_share: float, *, keys_per_server: int = 20, seed: int = 0
) -> pd.DataFrame:
    """Pairs ``(a, b)`` of which ``local_share`` travel together by construction (the paper's Section 4.2).

    Keys come in ``n_servers`` groups of ``keys_per_server``; ``a`` is uniform over all its keys,
    and ``b`` is drawn from ``a``'s group with probability ``local_share``, else from another group
    (uniformly). Tables that place each group on one server keep ``local_share`` of the hops local.
    """
    if not 0 <= local_share <= 1:
        raise ValueError(f"the 'local_share' parameter of paired_keys must be in [0, 1]; got {local_share}")
    if n_servers < 2:
        raise ValueError(f"the 'n_servers' parameter of paired_keys must be >= 2; got {n_servers}")
    rng = np.random.default_rng(seed)
    group_a = rng.integers(0, n_servers, n_rows)
    local = rng.random(n_rows) < local_share
    group_b = np.where(local, group_a, (group_a + rng.integers(1, n_servers, n_rows)) % n_servers)
    a = [f"a{g}-{k}" for g, k in zip(group_a, rng.integers(0, keys_per_server, n_rows))]
    b = [f"b{g}-{k}" for g, k in zip(group_b, rng.integers(0, keys_per_server, n_rows))]
    return pd.DataFrame({"a": a, "b": b})
