"""Checking the database for damage: a quick check at start-up, bounded in time,
and the full check that `hdspd check` runs on demand: `PRAGMA integrity_check`,
then whether every blob reference in a record has its blob, and every blob the
bytes its sha256 names (see `blobs`). The blob check is SQL both backends speak:
`hdspd check` runs it on PostgreSQL too (see :mod:`.postgres`)."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .blobs import BLOB_MARKER, referenced_hashes
from .dialect import SQLITE, Connection, Dialect

__all__ = ["IntegrityReport", "blob_problems", "integrity_check", "quick_check"]

#: At most this many problems are listed.
MAX_PROBLEMS = 20


def quick_check(conn: sqlite3.Connection, budget_seconds: float | None) -> list[str] | None:
    """`PRAGMA quick_check` (every page and b-tree, without matching indexes to
    their tables) on `conn`, given at most `budget_seconds` (None: all it takes).
    Returns the problems found ([] for none), or None when the budget ran out
    first (a big database: `hdspd check` checks it all).

    The budget is kept by interrupting the check from a timer thread: SQLite
    checks a whole b-tree in one step of its virtual machine, so a progress
    handler could stop it only between tables (the events table of a 1M-event log
    took 0.2-0.4 s past a budget of 30 ms)."""
    timer: threading.Timer | None = None
    lock = threading.Lock()
    running = True

    def interrupt() -> None:
        with lock:  # never once the check is over: it would cut the next statement
            if running:
                conn.interrupt()

    if budget_seconds is not None:
        timer = threading.Timer(budget_seconds, interrupt)
        timer.start()
    try:
        rows = conn.execute(f"PRAGMA quick_check({MAX_PROBLEMS})").fetchall()
    except sqlite3.OperationalError as exc:
        if budget_seconds is not None and "interrupt" in str(exc):
            return None
        raise
    finally:
        if timer is not None:
            with lock:
                running = False
            timer.cancel()
    problems = [str(r[0]) for r in rows]
    return [] if problems == ["ok"] else problems


@dataclass(frozen=True)
class IntegrityReport:
    #: The database: a path, or a URL.
    path: Path | str
    #: What the check found ([]: nothing), or why it could not run.
    problems: list[str]
    pages: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def integrity_check(path: Path) -> IntegrityReport:
    """The full check, on a read-only connection (a running daemon may keep
    writing meanwhile: WAL lets both go on)."""
    started = time.monotonic()
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        try:
            pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
            rows = conn.execute(f"PRAGMA integrity_check({MAX_PROBLEMS})").fetchall()
        except sqlite3.DatabaseError as exc:
            return IntegrityReport(path, [str(exc)], seconds=time.monotonic() - started)
        problems = [str(r[0]) for r in rows]
        if problems == ["ok"]:
            try:
                problems = blob_problems(conn)
            except sqlite3.DatabaseError as exc:
                problems = [str(exc)]
    finally:
        conn.close()
    return IntegrityReport(
        path,
        problems,
        pages=pages,
        seconds=time.monotonic() - started,
    )


#: Where records may refer to blobs: (table, how a row is named, its task).
_RECORDS = (
    ("ui_messages", "'task ' || task_id || ', UI message ' || ts", "task_id"),
    ("api_messages", "'task ' || task_id || ', API message ' || idx", "task_id"),
    ("events", "'event ' || seq", "topic"),
)


def blob_problems(conn: Connection, dialect: Dialect = SQLITE) -> list[str]:
    """Records that refer to a blob the database lacks, and blobs whose bytes
    are not what their sha256 says (at most MAX_PROBLEMS)."""
    if conn.execute(dialect.table_exists, ("blobs",)).fetchone() is None:
        return []  # a database from before blobs
    # (Before migration 4, every reference counted.)
    ownership = conn.execute(dialect.table_exists, ("task_blobs",)).fetchone()
    problems: list[str] = []
    for table, name, owner in _RECORDS:
        rows = conn.execute(
            f"SELECT {name}, {owner}, body FROM {table} WHERE {dialect.holds('body')}",
            (BLOB_MARKER,),
        )
        for record, task_id, body in rows:
            for sha in dict.fromkeys(referenced_hashes(bytes(body))):
                # A reference to a blob its task never stored is a string that a
                # model or a kernel wrote there, and reads leave it as it is.
                owned = (
                    ownership is None
                    or conn.execute(
                        "SELECT 1 FROM task_blobs WHERE task_id = ? AND sha256 = ?", (task_id, sha)
                    ).fetchone()
                )
                if (
                    not owned
                    or conn.execute("SELECT 1 FROM blobs WHERE sha256 = ?", (sha,)).fetchone()
                ):
                    continue
                problems.append(f"{record} refers to blob {sha}, which is missing")
                if len(problems) >= MAX_PROBLEMS:
                    return problems
    for sha, data in conn.execute("SELECT sha256, data FROM blobs"):
        if hashlib.sha256(bytes(data)).hexdigest() != sha:
            problems.append(f"blob {sha} does not hold the bytes its sha256 names")
            if len(problems) >= MAX_PROBLEMS:
                break
    return problems
