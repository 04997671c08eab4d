"""What the journal's tests share: a journal whose writer runs for the length of
a block, and a publisher that keeps what it published."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from hdsp.daemon.store import Journal, Store
from hdsp.daemon.store.journal import Publisher
from hdsp.protocol import TaskEvent, decode_event

__all__ = ["Published", "running_journal"]


class Published:
    """Keeps each event published, decoded; `arrived` is set at the first."""

    def __init__(self) -> None:
        self.events: list[TaskEvent] = []
        self.arrived = anyio.Event()

    async def publish(self, topic: bytes, body: bytes) -> None:
        self.events.append(decode_event(body))
        self.arrived.set()


@asynccontextmanager
async def running_journal(store: Store, publish: Publisher) -> AsyncIterator[Journal]:
    """The journal of `store`, its writer running until the block ends, when the
    journal is closed (all it holds committed and published)."""
    journal = Journal(store, publish)
    async with anyio.create_task_group() as tg:
        await tg.start(journal.run)
        yield journal
        await journal.aclose()
