"""The daemon's own files are the owner's alone: the database with its -wal and
-shm files, and the data dir (made 0700, or tightened to 0700 when ours)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hdsp.daemon.paths import make_private_dir
from hdsp.daemon.store import SqliteDatabase


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_database_and_its_wal_are_private(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    saved = os.umask(0o022)
    try:
        db = SqliteDatabase(path)
        db.commit([("CREATE TABLE IF NOT EXISTS probe (x)", ())], [])
    finally:
        os.umask(saved)
    wal = path.with_name(path.name + "-wal")
    shm = path.with_name(path.name + "-shm")
    assert wal.exists() and shm.exists()
    for name in (path, wal, shm):
        assert _mode(name) == 0o600, name
    db.close()
    # One an older hdsp left readable is made private when it is opened.
    os.chmod(path, 0o644)
    SqliteDatabase(path).close()
    assert _mode(path) == 0o600


def test_the_data_dir_is_made_or_tightened_to_0700(tmp_path: Path) -> None:
    fresh = tmp_path / "a" / "data"
    assert make_private_dir(fresh) is None
    assert _mode(fresh) == 0o700
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o755)
    assert make_private_dir(loose) == 0o755
    assert _mode(loose) == 0o700
    assert make_private_dir(loose) is None


def test_a_data_dir_of_another_user_is_refused(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("only root can give a directory to another user here")
    other = tmp_path / "other"
    other.mkdir()
    os.chown(other, 12345, 12345)
    with pytest.raises(ValueError, match="another user"):
        make_private_dir(other)
