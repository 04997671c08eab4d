"""The SQLite backend, the default: one file in the data dir (``hdsp.sqlite3``),
one writer connection, one reader connection, WAL mode.

SQLite's errors are sorted into faults that pass (disk full, I/O error: retry)
and damage (a corrupt page, not a database: write nothing more); see
:mod:`.health`.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import structlog

from hdsp.protocol import StorageState

from .database import STARTUP_CHECK_SECONDS, Batch, Database, EventRow, Write
from .dialect import SQLITE, Dialect
from .errors import StoreCorrupt, StoreError
from .health import Fault
from .integrity import quick_check

__all__ = ["FILE_MODE", "SqliteDatabase", "classify", "statements"]

log = structlog.get_logger("hdsp.store")

#: SQLite's primary result codes (https://sqlite.org/rescode.html).
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
_TRANSIENT = {
    3,  # PERM
    5,  # BUSY
    6,  # LOCKED
    7,  # NOMEM
    8,  # READONLY
    10,  # IOERR
    13,  # FULL
    14,  # CANTOPEN
    15,  # PROTOCOL
}


def classify(exc: BaseException) -> Fault | None:
    """What kind of storage fault SQLite's `exc` is; None: none (a bug, such as a
    constraint a statement broke)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return None
    if code & 0xFF in _TRANSIENT:
        return Fault.TRANSIENT
    if code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return Fault.DAMAGE
    return None


#: The database holds every prompt, reply and tool result: the owner's alone.
FILE_MODE = 0o600


def _make_private(path: Path) -> None:
    """Create the database file 0600 before SQLite opens it (SQLite gives its -wal
    and -shm files the database's mode), and take group and other access away
    from one an older hdsp left readable, and from its -wal and -shm files."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    os.close(fd)
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if stat.S_IMODE(os.stat(name).st_mode) & 0o077:
                os.chmod(name, FILE_MODE)
        except FileNotFoundError:
            pass


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5.0)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def statements(script: str) -> list[str]:
    """Split a migration script into statements (executescript would commit)."""
    parts: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            parts.append(buf.strip())
            buf = ""
    if buf.strip():
        raise StoreError(f"Incomplete statement in a migration: {buf.strip()[:80]}")
    return parts


class SqliteDatabase(Database):
    dialect: ClassVar[Dialect] = SQLITE
    errors: ClassVar[tuple[type[Exception], ...]] = (sqlite3.Error,)
    inline: ClassVar[bool] = True
    checkpoints_log: ClassVar[bool] = True

    _writer: sqlite3.Connection
    _reader: sqlite3.Connection

    def __init__(self, path: Path, *, check_seconds: float | None = STARTUP_CHECK_SECONDS) -> None:
        """Open (creating or migrating) the database and check it for damage,
        spending at most `check_seconds` on that (0: no check, None: all of it)."""
        self.path = path
        self.where = str(path)
        try:
            _make_private(path)
        except OSError as exc:
            raise StoreError(
                f"The database {path} cannot be opened: {exc.strerror or exc}. Check that "
                "its folder exists and that you own it."
            ) from exc
        try:
            self._writer = _connect(path)
            self._writer.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL survives a crash of the process (kill -9); only a power
            # loss can take the last commits back.
            self._writer.execute("PRAGMA synchronous = NORMAL")
            # No checkpoint inside a commit: that would stall the writer for
            # milliseconds every few thousand events. `checkpoint()` runs on its own
            # connection, beside the writer (a WAL checkpoint never blocks writers).
            self._writer.execute("PRAGMA wal_autocheckpoint = 0")
            self._migrate()
            if check_seconds != 0:
                problems = quick_check(self._writer, check_seconds)
                if problems is None:
                    log.info(
                        "the quick check at start-up covered part of the database (it is "
                        "big); `hdspd check` checks all of it",
                        seconds=check_seconds,
                    )
                elif problems:
                    raise StoreCorrupt(self._damaged("; ".join(problems[:3])))
            self._reader = _connect(path)
            self._checkpointer = _connect(path)
        except sqlite3.Error as exc:
            raise self.open_error(exc) from exc

    def _damaged(self, what: str) -> str:
        path = self.path
        return (
            f"The database {path} is damaged ({what}). hdsp never empties it by itself: "
            f"stop, run `hdspd check` to see the damage, then restore it from a backup, "
            f"repair it (`sqlite3 {path} .recover`), or move it aside "
            f"(mv {path} {path}.broken) to start afresh."
        )

    def open_error(self, exc: sqlite3.Error) -> StoreError:
        """What to tell a person when the database fails at start-up."""
        if classify(exc) is not Fault.DAMAGE:
            return StoreError(
                f"The database {self.path} cannot be opened ({exc}). Check the disk's "
                "free space and the data dir's permissions, then start hdspd again."
            )
        return StoreCorrupt(self._damaged(str(exc)))

    # ---- what the backend says ----------------------------------------------

    def classify(self, exc: BaseException) -> Fault | None:
        return classify(exc)

    def advice(self, state: StorageState) -> str:
        path = self.path
        if state is StorageState.FAILING:
            return (
                f"Free space on the disk of {path} (or fix the I/O error). hdspd keeps what "
                "it could not write, retries, and takes new work again by itself; running "
                "tasks wait meanwhile."
            )
        return (
            f"The database {path} is damaged. Stop hdspd, run `hdspd check` to see the "
            f"damage, and restore the database from a backup (or repair it: "
            f"`sqlite3 {path} .recover`)."
        )

    def read_failed_message(self, exc: BaseException) -> str:
        return (
            f"hdspd could not read its database ({exc}); try again, and check the disk "
            f"of {self.path} if it goes on."
        )

    # ---- schema ---------------------------------------------------------------

    def _stored_version(self) -> int:
        return int(self._writer.execute("PRAGMA user_version").fetchone()[0])

    def _run_script(self, script: str) -> None:
        for statement in statements(script):
            self._writer.execute(statement)

    def _set_version(self, version: int) -> None:
        self._writer.execute(f"PRAGMA user_version = {int(version)}")

    def _too_new_advice(self) -> str:
        return "point it at another data dir with --data-dir"

    def close(self) -> None:
        self._checkpointer.close()
        self._reader.close()
        self._writer.close()  # the last connection out checkpoints what is left

    def checkpoint(self) -> tuple[int, int]:
        """Copy committed pages from the WAL into the database (PASSIVE: skips
        what readers still use; the writer restarts the WAL once all is copied).
        Returns (WAL pages, pages checkpointed)."""
        _, wal, done = self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(wal), int(done)

    # ---- writing (writer thread) ------------------------------------------------

    def commit(self, writes: Sequence[Write], events: Sequence[EventRow]) -> None:
        batch = Batch(writes, events)
        conn = self._writer
        if conn.in_transaction:  # a failed commit whose rollback failed too
            conn.execute("ROLLBACK")
        conn.execute("BEGIN IMMEDIATE")
        try:
            batch.apply(conn)
            conn.execute("COMMIT")
        except BaseException:
            self._rollback(conn)
            raise
