"""Following a daemon's storage reports: every event from seq 0 on, the
`StorageChanged` reports among them, and checks that what a client saw is the
log, gap-free (the storage fault tests, on a full disk and a lost server)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from hdsp.client import Client, CommandFailed, connect
from hdsp.protocol import (
    ErrorCode,
    StorageChanged,
    StorageHealth,
    StorageState,
    TaskCompleted,
    TaskEvent,
)
from tests.support.events import collect_turn, logged_events

__all__ = ["Follower", "assert_seen_is_logged", "assert_service_resumes", "follow", "refused"]


class Follower:
    """Every event from seq 0 on, in `seen`; storage reports also in `reports`."""

    def __init__(self) -> None:
        self.seen: list[TaskEvent] = []
        self._send, self.reports = anyio.create_memory_object_stream[StorageHealth](16)
        self._progress = anyio.Event()

    async def follow(self, c: Client, ready: anyio.Event) -> None:
        async with c.events(None, since_seq=0) as stream:
            ready.set()
            async for event in stream:
                self.seen.append(event)
                self._progress.set()
                if isinstance(event.data, StorageChanged):
                    await self._send.send(event.data.payload[0])

    async def wait_seq(self, seq: int) -> None:
        while not self.seen or (self.seen[-1].seq or 0) < seq:
            self._progress = anyio.Event()
            await self._progress.wait()


@asynccontextmanager
async def follow(runtime_dir: Path) -> AsyncIterator[Follower]:
    follower = Follower()
    async with (
        follower._send,
        follower.reports,
        connect(runtime_dir) as watcher,
        anyio.create_task_group() as tg,
    ):
        ready = anyio.Event()
        tg.start_soon(follower.follow, watcher, ready)
        await ready.wait()
        yield follower
        tg.cancel_scope.cancel()


def assert_seen_is_logged(seen: list[TaskEvent], log: dict[int, TaskEvent]) -> int:
    durable = [e for e in seen if e.seq is not None]
    seqs = [e.seq for e in durable]
    assert seqs == sorted(set(seqs)), "a subscriber saw an event twice or out of order"
    for e in durable:
        assert e.seq is not None
        assert log.get(e.seq) == e, f"seq {e.seq} was published but is not in the log as seen"
    assert seqs == list(range(1, len(seqs) + 1)), "the subscriber's events have gaps"
    return len(durable)


async def assert_service_resumes(
    c: Client, f: Follower, waiting_task_id: str, new_work: str
) -> tuple[int, int]:
    """Once the storage is back: the daemon reports it OK, the task that waited
    in the journal goes on, new work (a task `new_work`) is taken, the health is
    clean again, and what `f` saw is the log. The head seq then, and how many
    events were checked."""
    with anyio.fail_after(20):
        back = await f.reports.receive()
    assert back.state is StorageState.OK
    with anyio.fail_after(30):
        await collect_turn(c, waiting_task_id, 0, until=(TaskCompleted,))
        after = await c.start_task(new_work)
        await collect_turn(c, after.task_id, 0, until=(TaskCompleted,))
    assert (await c.status()).storage == StorageHealth()
    head = (await c.status()).head_seq
    with anyio.fail_after(20):
        await f.wait_seq(head)
    return head, assert_seen_is_logged(f.seen, await logged_events(c))


async def refused(call: Callable[[], object]) -> CommandFailed:
    with pytest.raises(CommandFailed) as refused:
        await call()  # type: ignore[misc]
    assert refused.value.code is ErrorCode.STORAGE_UNAVAILABLE
    return refused.value
