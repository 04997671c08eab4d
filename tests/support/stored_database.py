"""A daemon's SQLite database as a test reads it beside the daemon (read-only):
what it holds, in bytes and in blobs, and what `hdspd check` says of it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager

from .daemon_process import DaemonProcess

__all__ = ["blob_sizes", "check_database", "read_database", "stored_bytes"]


@contextmanager
def read_database(daemon: DaemonProcess) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the daemon's database."""
    uri = f"file:{daemon.data_dir / 'hdsp.sqlite3'}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as db:
        yield db


def stored_bytes(daemon: DaemonProcess) -> int:
    """Bytes of every value in the database (file sizes would hide what sits in
    a WAL that is reused)."""
    with read_database(daemon) as db:
        total = 0
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
            lengths = " + ".join(f"coalesce(length({c}), 0)" for c in columns)
            total += db.execute(f"SELECT coalesce(sum({lengths}), 0) FROM {table}").fetchone()[0]
        return int(total)


def blob_sizes(daemon: DaemonProcess) -> list[int]:
    """The size of each image the database keeps once (its `blobs`)."""
    with read_database(daemon) as db:
        return [int(r[0]) for r in db.execute("SELECT size FROM blobs")]


def check_database(daemon: DaemonProcess) -> subprocess.CompletedProcess[str]:
    """`hdspd check` on the daemon's database (the daemon stopped)."""
    return subprocess.run(
        [sys.executable, "-m", "hdsp.daemon", "check"],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
