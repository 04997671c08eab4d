"""hdsp.daemon.atomic_write: the one way the daemon replaces a file of its own."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from hdsp.daemon.atomic_write import write_atomically


def test_replaces_the_file_privately_by_default(tmp_path: Path) -> None:
    target = tmp_path / "settings.json"
    target.write_text("old")
    target.chmod(0o644)
    write_atomically(target, b'{"version": 2}')
    assert target.read_bytes() == b'{"version": 2}'
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_mode_is_given_to_the_new_file(tmp_path: Path) -> None:
    target = tmp_path / "hdspd.service"
    write_atomically(target, b"[Unit]\n" * 100_000, mode=0o644)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert target.read_bytes() == b"[Unit]\n" * 100_000


def test_a_failed_replace_keeps_the_old_and_leaves_no_temporary(tmp_path: Path) -> None:
    # A directory in the target's place: the rename fails after the temp is written.
    target = tmp_path / "discovery.json"
    target.mkdir()
    (target / "inside").write_text("kept")
    with pytest.raises(OSError):
        write_atomically(target, b"new")
    assert (target / "inside").read_text() == "kept"
    assert [p.name for p in tmp_path.iterdir()] == ["discovery.json"]
