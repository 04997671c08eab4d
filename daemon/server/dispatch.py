"""Runs command handlers: in order per ordering key (a task id), concurrently
across keys, with a bound on how much may wait.

Jobs run on a pool of worker tasks that grows with demand: a job goes to a worker
that waits idle, or to a new one when none does (a slow command never holds up
another). Spawning a task per command cost more than the command itself for the
cheap ones (Ping, GetTask), so workers stay for the next job, up to `keep_idle`
of them.

A key that has work gets a lane: a bounded queue that one worker at a time drains
in order, and that goes away when it is empty. Past the bounds the caller learns
it is overloaded instead of queueing without end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from hdsp.daemon.errors import HdspError
from hdsp.protocol import ErrorCode

__all__ = ["Dispatcher", "DispatcherFull"]

Job = Callable[[], Awaitable[None]]


class DispatcherFull(HdspError):
    """Too many commands wait, in all or on one key: answered ``overloaded``."""

    code = ErrorCode.OVERLOADED

    def __init__(self) -> None:
        super().__init__("The daemon has too many commands waiting; retry shortly.")


class Dispatcher:
    def __init__(self, *, max_pending: int = 1024, lane_size: int = 64, keep_idle: int = 8) -> None:
        self._max_pending = max_pending
        self._lane_size = lane_size
        self._keep_idle = keep_idle
        self._pending = 0
        self._lanes: dict[str, deque[Job]] = {}
        #: Workers waiting on `_receive` that no job has been promised to.
        self._idle = 0
        self._send: MemoryObjectSendStream[Job] | None = None
        self._receive: MemoryObjectReceiveStream[Job] | None = None
        self._tg: TaskGroup | None = None

    @property
    def pending(self) -> int:
        return self._pending

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        # Every job sent here has an idle worker promised to it; the buffer only
        # covers a worker between going idle and waiting.
        send, receive = anyio.create_memory_object_stream[Job](self._max_pending)
        with send, receive:
            self._send, self._receive = send, receive
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await anyio.sleep_forever()

    def submit(self, key: str | None, job: Job) -> None:
        """Schedule `job`; raises DispatcherFull when too much is waiting already."""
        if self._pending >= self._max_pending:
            raise DispatcherFull
        if key is None:
            self._pending += 1
            self._start(job)
            return
        lane = self._lanes.get(key)
        if lane is not None:
            if len(lane) + 1 >= self._lane_size:  # + the one running
                raise DispatcherFull
            lane.append(job)
            self._pending += 1
            return
        self._lanes[key] = deque()
        self._pending += 1

        async def drain() -> None:
            await job()
            await self._drain(key)

        self._start(drain)

    def _start(self, job: Job) -> None:
        assert self._tg is not None and self._send is not None, "Dispatcher.run() has not started"
        if self._idle:
            self._idle -= 1
            self._send.send_nowait(job)  # a waiting worker takes it
        else:
            self._tg.start_soon(self._worker, job)

    async def _worker(self, job: Job) -> None:
        assert self._receive is not None
        while True:
            try:
                await job()
            finally:
                self._pending -= 1
            if self._idle >= self._keep_idle:
                return
            self._idle += 1
            job = await self._receive.receive()

    async def _drain(self, key: str) -> None:
        """Run the rest of a lane, in order; the lane's first job has just run."""
        lane = self._lanes[key]
        while lane:
            job = lane.popleft()
            try:
                await job()
            finally:
                self._pending -= 1
        # Nothing waits: retire the lane. No await between the check and the
        # removal, so no job can slip in unseen.
        del self._lanes[key]
