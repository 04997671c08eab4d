"""Checking the database for damage: a quick check at start-up, bounded in time,
and the full `PRAGMA integrity_check` that `hdspd check` runs on demand."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["IntegrityReport", "integrity_check", "quick_check"]

#: SQLite runs the progress handler every this many virtual machine steps
#: (about a tenth of a millisecond of work).
_PROGRESS_STEPS = 10_000
#: At most this many problems are listed.
MAX_PROBLEMS = 20


def quick_check(conn: sqlite3.Connection, budget_seconds: float | None) -> list[str] | None:
    """`PRAGMA quick_check` (every page and b-tree, without matching indexes to
    their tables) on `conn`, given at most `budget_seconds` (None: all it takes).
    Returns the problems found ([] for none), or None when the budget ran out
    first (a big database: `hdspd check` checks it all)."""
    if budget_seconds is not None:
        deadline = time.monotonic() + budget_seconds
        conn.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
    try:
        rows = conn.execute(f"PRAGMA quick_check({MAX_PROBLEMS})").fetchall()
    except sqlite3.OperationalError as exc:
        if budget_seconds is not None and "interrupt" in str(exc):
            return None
        raise
    finally:
        if budget_seconds is not None:
            conn.set_progress_handler(None, 0)
    problems = [str(r[0]) for r in rows]
    return [] if problems == ["ok"] else problems


@dataclass(frozen=True)
class IntegrityReport:
    path: Path
    #: What `PRAGMA integrity_check` found ([]: nothing), or why it could not run.
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
    finally:
        conn.close()
    problems = [str(r[0]) for r in rows]
    return IntegrityReport(
        path,
        [] if problems == ["ok"] else problems,
        pages=pages,
        seconds=time.monotonic() - started,
    )
