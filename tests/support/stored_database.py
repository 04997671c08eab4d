"""A store's database as a test reads it beside the daemon or the `Database`
under test, on either backend: a SQLite file (read-only) or a PostgreSQL
database (its URL): what it holds, in bytes and in blobs, and what `hdspd check`
says of it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import psycopg

from hdsp.daemon.store.integrity import IntegrityReport, integrity_check
from hdsp.daemon.store.postgres import check_postgres, to_psycopg

from .daemon_process import DaemonProcess

__all__ = [
    "blob_sizes",
    "check_database",
    "full_check",
    "read_database",
    "rows",
    "run_sql",
    "store_of",
    "stored_bytes",
]


def store_of(daemon: DaemonProcess) -> Path | str:
    """Where the daemon's store is: its PostgreSQL URL, or its SQLite file."""
    return daemon.store_url or daemon.data_dir / "hdsp.sqlite3"


@contextmanager
def read_database(daemon: DaemonProcess) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the daemon's SQLite database."""
    uri = f"file:{daemon.data_dir / 'hdsp.sqlite3'}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as db:
        yield db


def rows(location: Path | str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows of one SELECT (``?`` placeholders) on the store at `location`
    (bytes columns as bytes)."""
    if isinstance(location, Path):
        with closing(sqlite3.connect(f"file:{location}?mode=ro", uri=True)) as db:
            return [tuple(r) for r in db.execute(sql, params)]
    with psycopg.connect(location, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(to_psycopg(sql), params or None).fetchall()]


def run_sql(location: Path | str, sql: str, params: Sequence[Any] = ()) -> None:
    """Run one statement that changes the store at `location` (a test's damage)."""
    if isinstance(location, Path):
        with closing(sqlite3.connect(location)) as db:
            db.execute(sql, params)
            db.commit()
        return
    with psycopg.connect(location, autocommit=True) as conn:
        conn.execute(to_psycopg(sql) if params else sql, params or None)


def full_check(location: Path | str) -> IntegrityReport:
    """What `hdspd check` checks, on the store at `location`."""
    if isinstance(location, Path):
        return integrity_check(location)
    return check_postgres(location)


def stored_bytes(daemon: DaemonProcess) -> int:
    """Bytes of every value in the database (file sizes would hide what sits in
    a WAL that is reused, or in PostgreSQL's pages)."""
    location = store_of(daemon)
    total = 0
    if isinstance(location, Path):
        tables = rows(location, "SELECT name FROM sqlite_master WHERE type='table'")
        for (table,) in tables:
            columns = [r[1] for r in rows(location, f"PRAGMA table_info({table})")]
            lengths = " + ".join(f"coalesce(length({c}), 0)" for c in columns)
            total += int(rows(location, f"SELECT coalesce(sum({lengths}), 0) FROM {table}")[0][0])
        return total
    columns_of: dict[str, list[str]] = {}
    for table, column, kind in rows(
        location,
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position",
    ):
        value = column if kind == "bytea" else f"{column}::text"
        columns_of.setdefault(table, []).append(f"coalesce(octet_length({value}), 0)")
    for table, lengths in columns_of.items():
        total += int(
            rows(location, f"SELECT coalesce(sum({' + '.join(lengths)}), 0) FROM {table}")[0][0]
        )
    return total


def blob_sizes(daemon: DaemonProcess) -> list[int]:
    """The size of each image the database keeps once (its `blobs`)."""
    return [int(r[0]) for r in rows(store_of(daemon), "SELECT size FROM blobs")]


def check_database(daemon: DaemonProcess) -> subprocess.CompletedProcess[str]:
    """`hdspd check` on the daemon's database (the daemon stopped)."""
    return subprocess.run(
        [sys.executable, "-m", "hdsp.daemon", "check"],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
