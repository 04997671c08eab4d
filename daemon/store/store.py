"""Async access to the database: reads and writes run on worker threads, each
connection used by one thread at a time; with SQLite, short ones run on the
event loop's thread (see `INLINE_BYTES`).

A read that meets damage (a corrupt page, not a database) puts the store's
:class:`StorageMonitor` in read-only and raises :class:`StorageUnavailable`;
the journal reports what its commits meet (see :mod:`.journal`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from .database import STARTUP_CHECK_SECONDS, Database, EventRow, Write
from .errors import StorageUnavailable
from .health import Fault, StorageMonitor

__all__ = ["INLINE_BYTES", "Store", "is_postgres_url", "open_database"]

T = TypeVar("T")


#: A batch with at most this many statements and bytes commits on the event
#: loop's thread: that takes tens of microseconds, less than handing it to a worker
#: thread and back. Bigger batches (a long tool output, a burst) go to a thread,
#: where SQLite runs without the GIL and the loop goes on. (PostgreSQL's commits
#: all go to a thread: a round trip to a server is no short call.)
INLINE_STATEMENTS = 32
INLINE_BYTES = 256 * 1024


def _small(writes: Sequence[Write], events: Sequence[EventRow]) -> bool:
    if len(writes) + len(events) > INLINE_STATEMENTS:
        return False
    size = sum(len(body) for *_, body in events)
    for _, params in writes:
        size += sum(len(p) for p in params if isinstance(p, bytes | str))
    return size <= INLINE_BYTES


def is_postgres_url(location: object) -> bool:
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def open_database(
    location: Path | str,
    *,
    check_seconds: float | None = STARTUP_CHECK_SECONDS,
    password: str | None = None,
) -> Database:
    """Open the database at `location`: a PostgreSQL URL (``store.url``), or the
    path of a SQLite file. Blocking: run it on a worker thread."""
    if is_postgres_url(location):
        from .postgres import PostgresDatabase  # psycopg only for those who use it

        return PostgresDatabase(str(location), password=password)
    from .sqlite import SqliteDatabase

    return SqliteDatabase(Path(location), check_seconds=check_seconds)


class Store:
    def __init__(self, db: Database) -> None:
        self.db = db
        #: The backend's errors: what a read or a commit that fails raises.
        self.errors = db.errors
        self._inline = db.inline
        self.monitor = StorageMonitor(db.where, db.advice)
        self._read_limiter = anyio.CapacityLimiter(1)
        self._write_limiter = anyio.CapacityLimiter(1)
        self._checkpoint_limiter = anyio.CapacityLimiter(1)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        location: Path | str,
        *,
        check_seconds: float | None = STARTUP_CHECK_SECONDS,
        password: str | None = None,
    ) -> AsyncIterator[Store]:
        """Open the database at `location` (see `open_database`) for the block."""
        db = await anyio.to_thread.run_sync(
            partial(open_database, location, check_seconds=check_seconds, password=password)
        )
        try:
            yield cls(db)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(db.close)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run one of `Database`'s read methods on the reader connection."""
        try:
            return await anyio.to_thread.run_sync(fn, *args, limiter=self._read_limiter)
        except self.errors as exc:
            raise self.read_failed(exc) from exc

    def read_now(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a read on the reader connection on the event loop's thread. Only for
        reads bounded to tens of microseconds (a few rows, INLINE_BYTES at most):
        less than the trip to a worker thread and back, as for small commits.
        Raises anyio.WouldBlock while a worker thread has the reader, and always
        where the database is a server (a round trip is no short read)."""
        if not self._inline:
            raise anyio.WouldBlock
        self._read_limiter.acquire_nowait()
        try:
            return fn(*args)
        except self.errors as exc:
            raise self.read_failed(exc) from exc
        finally:
            self._read_limiter.release()

    def read_failed(self, exc: Exception) -> StorageUnavailable:
        """The error to raise for a failed read; damage makes the store read-only."""
        fault = self.db.classify(exc)
        if fault is Fault.DAMAGE:
            self.monitor.damaged(exc)
            return StorageUnavailable(self.monitor.message(), details=self.monitor.details())
        if fault is None:
            raise exc  # a bug: the caller's log shows it
        return StorageUnavailable(self.db.read_failed_message(exc), details=self.monitor.details())

    async def prune_events(self, before_ts: int, keep_last: int) -> int:
        """Retention: runs on the writer connection, between the journal's batches."""
        return await anyio.to_thread.run_sync(
            self.db.prune_events, before_ts, keep_last, limiter=self._write_limiter
        )

    async def commit(self, writes: Sequence[Write], events: Sequence[EventRow]) -> None:
        if not (self._inline and _small(writes, events)):
            await anyio.to_thread.run_sync(
                self.db.commit, writes, events, limiter=self._write_limiter
            )
            return
        # The writer connection is shared with retention (on a worker thread): hold
        # the same limiter, without a trip through the loop when it is free.
        try:
            self._write_limiter.acquire_nowait()
        except anyio.WouldBlock:
            await self._write_limiter.acquire()
        try:
            self.db.commit(writes, events)
        finally:
            self._write_limiter.release()

    async def checkpoint(self) -> tuple[int, int]:
        """Checkpoint the WAL on a worker thread. The first pass runs beside the
        writer and copies most of it; a checkpoint that runs while commits go on
        can never finish, though, and then the WAL never starts over. So the
        second pass holds commits back (they queue in the journal; the event loop
        runs on) while it copies the little that is left."""
        await anyio.to_thread.run_sync(self.db.checkpoint, limiter=self._checkpoint_limiter)
        async with self._write_limiter:
            return await anyio.to_thread.run_sync(
                self.db.checkpoint, limiter=self._checkpoint_limiter
            )
