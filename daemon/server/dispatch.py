"""Runs command handlers: in order per ordering key (a task id), concurrently
across keys, with a bound on how much may wait.

Each key that has work gets a lane: a bounded stream and one worker that drains
it and goes away when it is empty. Unkeyed commands start at once. Past the bound
the caller learns it is overloaded instead of queueing without end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["Dispatcher", "Overloaded"]

Job = Callable[[], Awaitable[None]]


class Overloaded(Exception):
    pass


class Dispatcher:
    def __init__(self, *, max_pending: int = 1024, lane_size: int = 64) -> None:
        self._max_pending = max_pending
        self._lane_size = lane_size
        self._pending = 0
        self._lanes: dict[str, MemoryObjectSendStream[Job]] = {}
        self._tg: TaskGroup | None = None

    @property
    def pending(self) -> int:
        return self._pending

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await anyio.sleep_forever()

    def submit(self, key: str | None, job: Job) -> None:
        """Schedule `job`; raises Overloaded when too much is waiting already."""
        assert self._tg is not None, "Dispatcher.run() has not started"
        if self._pending >= self._max_pending:
            raise Overloaded
        if key is None:
            self._pending += 1
            self._tg.start_soon(self._run_one, job)
            return
        lane = self._lanes.get(key)
        if lane is None:
            send, receive = anyio.create_memory_object_stream[Job](self._lane_size)
            self._lanes[key] = lane = send
            self._tg.start_soon(self._drain, key, receive)
        try:
            lane.send_nowait(job)
        except anyio.WouldBlock:
            raise Overloaded from None
        self._pending += 1

    async def _run_one(self, job: Job) -> None:
        try:
            await job()
        finally:
            self._pending -= 1

    async def _drain(self, key: str, receive: MemoryObjectReceiveStream[Job]) -> None:
        with receive:
            while True:
                try:
                    job = receive.receive_nowait()
                except anyio.WouldBlock:
                    # Nothing waits: retire the lane. No await between the check and
                    # the removal, so no job can slip in unseen.
                    self._lanes.pop(key).close()
                    return
                await self._run_one(job)
