"""What the journal's tests share: a journal whose writer runs for the length of
a block, a publisher that keeps what it published, and tasks created (while
the storage commits, or while it refuses to)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager

import anyio

from hdsp.daemon.store import Journal, Store, insert_task
from hdsp.daemon.store.journal import Publisher
from hdsp.protocol import HistoryItem, StorageHealth, TaskCreated, TaskEvent, decode_event

__all__ = ["Published", "create_task", "create_while_refused", "running_journal"]


class Published:
    """Keeps each event published, decoded, for a test to wait for."""

    def __init__(self) -> None:
        self.events: list[TaskEvent] = []
        self._changed = anyio.Event()

    async def publish(self, topic: bytes, body: bytes) -> None:
        self.events.append(decode_event(body))
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        """Wait until `condition()` holds, looking again at each event published."""
        while not condition():
            await self._changed.wait()


@asynccontextmanager
async def running_journal(store: Store, publish: Publisher) -> AsyncIterator[Journal]:
    """The journal of `store`, its writer running until the block ends, when the
    journal is closed (all it holds committed and published)."""
    journal = Journal(store, publish)
    async with anyio.create_task_group() as tg:
        await tg.start(journal.run)
        yield journal
        await journal.aclose()


async def create_task(journal: Journal, task: HistoryItem) -> None:
    """Emit the creation of `task`, with the row that stores it."""
    await journal.emit(TaskCreated(payload=(task.id,)), insert_task(task))


async def create_while_refused(
    store: Store, journal: Journal, tasks: Iterable[HistoryItem]
) -> StorageHealth:
    """Emit the creation of each of `tasks` while the storage refuses commits, and
    wait until the store's monitor reports it; returns the health it reports."""
    seen = store.monitor.version
    for task in tasks:
        await create_task(journal, task)
    await store.monitor.wait_changed(seen)
    return store.monitor.health()
