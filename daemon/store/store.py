"""Async access to the database: reads and writes run on worker threads, each
connection used by one thread at a time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from .database import Database, Write

__all__ = ["Store"]

T = TypeVar("T")


class Store:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._read_limiter = anyio.CapacityLimiter(1)
        self._write_limiter = anyio.CapacityLimiter(1)

    @classmethod
    @asynccontextmanager
    async def open(cls, path: Path) -> AsyncIterator[Store]:
        db = await anyio.to_thread.run_sync(Database, path)
        try:
            yield cls(db)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(db.close)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run one of `Database`'s read methods on the reader connection."""
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._read_limiter)

    async def prune_events(self, before_ts: int, keep_last: int) -> int:
        """Retention: runs on the writer connection, between the journal's batches."""
        return await anyio.to_thread.run_sync(
            self.db.prune_events, before_ts, keep_last, limiter=self._write_limiter
        )

    async def commit(
        self, writes: Sequence[Write], events: Sequence[tuple[int, str, int, bytes]]
    ) -> None:
        await anyio.to_thread.run_sync(self.db.commit, writes, events, limiter=self._write_limiter)
