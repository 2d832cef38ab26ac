"""A store damaged in every way a disk, a restore or a hand can damage it: named, listed, repaired, never exit 70.

Each case damages one file of a two-version store. ``show`` must list what it
can and name the damaged file (exit 2, one JSON document with ``--json``);
``rollback`` must repair what blocks a writer (``CURRENT``, the history, the
lock file) and refuse, naming it, a version that is itself damaged; a publish
must go through; the Router must serve the current version, or refuse naming
the file when that version is the damaged one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from locality.cli import ExitCode, main
from locality.errors import StoreError
from locality.router import Router
from locality.store import ConfigStore
from tests._store_children import make_config

V1, V2 = "versions/000001", "versions/000002"


def _rewrite_manifest(root: Path, directory: str, **changes) -> None:
    path = root / directory / "manifest.json"
    doc = {**json.loads(path.read_text()), **changes}
    path.write_text(json.dumps({k: v for k, v in doc.items() if v is not _DROP}))


_DROP = object()


def _drop_checksum(root: Path, directory: str, name: str) -> None:
    """The manifest of ``directory`` without ``name``'s checksum (as a hand-edited or older manifest would be)."""
    path = root / directory / "manifest.json"
    doc = json.loads(path.read_text())
    del doc["checksums"][name]
    path.write_text(json.dumps(doc))


def _replace_with_directory(path: Path) -> None:
    shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    path.mkdir()
    (path / "inside").write_text("x")


def _replace_with_file(path: Path) -> None:
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    path.write_text("not a directory")


# name -> (damage, the file a message must name, current version usable?, version 1 usable?)
CASES = {
    "current_not_utf8": (lambda r: (r / "CURRENT").write_bytes(b"\xff\xfe2\n"), "CURRENT", False, True),
    "current_a_directory": (lambda r: _replace_with_directory(r / "CURRENT"), "CURRENT", False, True),
    "current_a_fifo": (lambda r: ((r / "CURRENT").unlink(), os.mkfifo(r / "CURRENT")), "CURRENT", False, True),
    "current_negative": (lambda r: (r / "CURRENT").write_text("-1\n"), "CURRENT", False, True),
    "current_arabic_digit": (lambda r: (r / "CURRENT").write_text("\u0662\n"), "CURRENT", False, True),
    "current_5000_digits": (lambda r: (r / "CURRENT").write_text("9" * 5000), "CURRENT", False, True),
    "history_a_directory": (lambda r: _replace_with_directory(r / "history.jsonl"), "history.jsonl", True, True),
    "history_binary_line": (
        lambda r: (r / "history.jsonl").write_bytes(b"\xff\x00garbage\n" + (r / "history.jsonl").read_bytes()),
        "history.jsonl",
        True,
        True,
    ),
    "history_entries_of_other_shapes": (
        lambda r: (r / "history.jsonl").write_text('[1, 2]\n{"version": "x"}\n{"version": 1.5}\n{"version": 2}\n'),
        "history.jsonl",
        True,
        True,
    ),
    "lease_a_directory": (lambda r: _replace_with_directory(r / "LEASE"), "LEASE", True, True),
    "schedule_a_directory": (lambda r: _replace_with_directory(r / "SCHEDULE"), "SCHEDULE", True, True),
    "schedule_of_another_shape": (lambda r: (r / "SCHEDULE").write_text('{"entries": 3}'), "SCHEDULE", True, True),
    "current_version_a_file": (lambda r: _replace_with_file(r / V2), V2, False, True),
    "manifest_a_directory": (lambda r: _replace_with_directory(r / V2 / "manifest.json"), "manifest.json", False, True),
    "manifest_not_utf8": (lambda r: (r / V2 / "manifest.json").write_bytes(b"\xff{}"), "manifest.json", False, True),
    "manifest_a_list": (lambda r: (r / V2 / "manifest.json").write_text("[1]"), "manifest.json", False, True),
    "manifest_version_a_word": (lambda r: _rewrite_manifest(r, V2, version="two"), "manifest.json", False, True),
    "manifest_checksums_a_list": (lambda r: _rewrite_manifest(r, V2, checksums=[1]), "manifest.json", False, True),
    "manifest_checksum_without_size": (
        lambda r: _rewrite_manifest(r, V2, checksums={"configuration/header.json": {"sha256": "0" * 64}}),
        "manifest.json",
        False,
        True,
    ),
    "manifest_checksum_outside_the_version": (
        lambda r: _rewrite_manifest(r, V2, checksums={"../../CURRENT": {"size": 2, "sha256": "0" * 64}}),
        "manifest.json",
        False,
        True,
    ),
    "manifest_files_a_number": (lambda r: _rewrite_manifest(r, V2, files=3), "manifest.json", False, True),
    "manifest_leaving_out_the_json_document": (
        lambda r: _drop_checksum(r, V2, "configuration/configuration.json"),
        "configuration.json",
        False,
        True,
    ),
    "schedule_naming_a_missing_version": (
        lambda r: (r / "SCHEDULE").write_text(
            '{"entries": [{"version": 1, "from": 0}, {"version": 9, "from": 5}], "sealed_until": 10}'
        ),
        "SCHEDULE",
        True,
        True,
    ),
    "configuration_a_file": (lambda r: _replace_with_file(r / V2 / "configuration"), "configuration", False, True),
    "header_a_directory": (
        lambda r: _replace_with_directory(r / V2 / "configuration" / "header.json"),
        "header.json",
        False,
        True,
    ),
    "table_a_directory": (
        lambda r: _replace_with_directory(r / V2 / "configuration" / "tables" / "00.parquet"),
        "00.parquet",
        False,
        True,
    ),
    "old_manifest_a_directory": (
        lambda r: _replace_with_directory(r / V1 / "manifest.json"),
        f"{V1}/manifest.json",
        True,
        False,
    ),
    "old_manifest_not_utf8": (lambda r: (r / V1 / "manifest.json").write_bytes(b"\x00\xff"), V1, True, False),
    "old_table_truncated": (
        lambda r: (r / V1 / "configuration" / "tables" / "00.parquet").write_bytes(b"PAR1"),
        "00.parquet",
        True,
        False,
    ),
}


def _store(root: Path) -> Path:
    store = ConfigStore(root)
    for index in (1, 2):
        store.publish(make_config(index, 10), fingerprint=f"f{index}", artifacts={"report.json": {"i": index}})
    return root


@pytest.fixture(params=sorted(CASES))
def damaged(request, tmp_path):
    damage, culprit, current_usable, first_usable = CASES[request.param]
    root = _store(tmp_path / "store")
    damage(root)
    return root, culprit, current_usable, first_usable


def test_show_lists_what_it_can_and_names_the_damage(damaged, capsys):
    root, culprit, current_usable, first_usable = damaged
    assert main(["show", "--store", str(root), "--json"]) == ExitCode.BAD_INPUT
    out, err = capsys.readouterr()
    document = json.loads(out)  # one JSON document on stdout, even so
    assert "Traceback" not in err and err.count("\n") == 1 and culprit in err, err
    assert any(culprit in problem for problem in document["damage"]), document["damage"]
    assert document["current"] == (2 if current_usable else None)
    assert (1 in [v.get("version") for v in document["versions"]]) == first_usable
    assert main(["show", "--store", str(root)]) == ExitCode.BAD_INPUT
    out, _ = capsys.readouterr()
    assert out.startswith(f"store {root}: ") and "! " in out and culprit in out


def test_rollback_repairs_the_store_or_names_the_damaged_version(damaged, capsys):
    root, culprit, _, first_usable = damaged
    code = main(["rollback", "--store", str(root), "--to", "1", "--reason", "repair"])
    err = capsys.readouterr().err
    if not first_usable:
        assert code == ExitCode.BAD_INPUT and culprit in err and "Traceback" not in err, err
        return
    assert code == ExitCode.OK, err
    with Router(root) as router:
        assert router.version == 1
    assert ConfigStore(root).history()[-1]["action"] == "rollback"
    survey = ConfigStore(root).survey()
    # CURRENT, the history and the lock file are repaired (the damaged ones kept aside); a damaged version stays,
    # and so does a damaged switch schedule (routers by point need what it held: named, for a person to restore)
    assert survey.current == 1
    left = (str(root / "versions"), str(root / "SCHEDULE"))
    assert all(any(name in problem for name in left) for problem in survey.damage), survey.damage


def test_a_publish_goes_through_and_the_router_follows(damaged):
    root, culprit, current_usable, _ = damaged
    if current_usable:
        with Router(root) as router:
            assert router.version == 2
    else:
        with pytest.raises(StoreError, match=culprit.replace(".", r"\.")):
            Router(root)
    result = ConfigStore(root, lock_timeout=5).publish(make_config(3, 10), fingerprint="f3")
    assert result.created and result.current_version == 3
    with Router(root) as router:
        assert router.version == 3 and router.snapshot().configuration.tables == make_config(3, 10).tables


def test_a_manifest_missing_display_fields_is_not_damage(tmp_path, capsys):
    root = _store(tmp_path / "store")
    _rewrite_manifest(root, V2, version=_DROP, created=_DROP, summary={"locality": "high"})
    assert main(["show", "--store", str(root), "--json"]) == ExitCode.OK
    document = json.loads(capsys.readouterr().out)
    assert document["current"] == 2 and document["damage"] == []
    with Router(root) as router:
        assert router.version == 2


def test_a_versions_file_is_named_by_every_reader_and_writer(tmp_path, capsys):
    root = _store(tmp_path / "store")
    shutil.rmtree(root / "versions")
    (root / "versions").write_text("x")
    assert main(["show", "--store", str(root)]) == ExitCode.BAD_INPUT
    assert str(root / "versions") in capsys.readouterr().err
    with pytest.raises(StoreError, match="versions"):
        ConfigStore(root).publish(make_config(3, 10), fingerprint="f3")
    assert main(["rollback", "--store", str(root), "--to", "1"]) == ExitCode.BAD_INPUT
    assert str(root / "versions") in capsys.readouterr().err
