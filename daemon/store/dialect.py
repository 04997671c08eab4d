"""What differs between the store's two SQL backends, SQLite and PostgreSQL.

The store's SQL is written once, with ``?`` placeholders (SQLite's own; the
PostgreSQL connection turns them into psycopg's ``%s``, see :mod:`.postgres`), in
the part of SQL both speak: ``INSERT ... ON CONFLICT ... DO UPDATE`` for an
upsert, ``ON CONFLICT DO NOTHING``, bytes parameters for BLOB and bytea alike,
``COALESCE``, ``substr``. That goes for the statements other parts of the daemon
hand the journal as `Write` tuples too. Where the two differ, a `Dialect` has the
fragment; the schema itself is written out for each (see :mod:`.migrations`).

The connection protocols below are the part of `sqlite3.Connection` the store
uses; the PostgreSQL connection offers the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = ["POSTGRESQL", "SQLITE", "Connection", "Cursor", "Dialect"]


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """A connection in autocommit mode: each statement commits by itself unless
    a transaction was begun (`Dialect.begin_write`, `Dialect.begin_read`)."""

    @property
    def in_transaction(self) -> bool: ...
    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...
    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any: ...


@dataclass(frozen=True, slots=True)
class Dialect:
    name: Literal["sqlite", "postgresql"]
    #: Begins a transaction that writes. SQLite takes the write lock at once (a
    #: deferred one could fail halfway on a busy lock); PostgreSQL locks rows.
    begin_write: str
    #: Begins a transaction whose reads all see one snapshot (PostgreSQL's
    #: default, READ COMMITTED, gives each statement its own).
    begin_read: str
    #: A condition on a bytes column (`{column}`) that holds when it contains the
    #: bytes of one parameter.
    contains: str
    #: The newest seq among the events older than a ts parameter (ms), through
    #: the index on ts (SQLite's planner would rather walk the primary key).
    seq_before_ts: str
    #: How many tasks there are (see `Database.task_count`).
    task_count: str
    #: A row when the table named by the parameter exists.
    table_exists: str

    def holds(self, column: str) -> str:
        """`contains` for `column`."""
        return self.contains.format(column=column)


SQLITE = Dialect(
    name="sqlite",
    begin_write="BEGIN IMMEDIATE",
    begin_read="BEGIN",
    contains="instr({column}, ?) > 0",
    seq_before_ts="SELECT COALESCE(MAX(seq), 0) FROM events INDEXED BY events_by_ts WHERE ts < ?",
    # No task is ever deleted, so the rowids SQLite gave them run 1, 2, ... and the
    # biggest is the count (a rolled-back insert leaves no gap: the next one takes
    # its rowid): no pass over the table.
    task_count="SELECT MAX(rowid) FROM tasks",
    table_exists="SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
)

POSTGRESQL = Dialect(
    name="postgresql",
    begin_write="BEGIN",
    begin_read="BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
    contains="position(? in {column}) > 0",
    seq_before_ts="SELECT COALESCE(MAX(seq), 0) FROM events WHERE ts < ?",
    # No rowid: counted, an index-only scan of the primary key (a row per task:
    # thousands, not the millions of the event log).
    task_count="SELECT COUNT(*) FROM tasks",
    table_exists=(
        "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = ?"
    ),
)
