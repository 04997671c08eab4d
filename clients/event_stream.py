"""One gap-free stream of a task's events (or all): :class:`EventStream`.

A stream replays what it missed (from a cursor, across a gap on the live stream,
after the daemon came back) from the event log and drops duplicates by `seq`, so
its user sees every durable event once and in order."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from hdsp.protocol import TaskEvent

if TYPE_CHECKING:
    from .client import Client

__all__ = ["IDLE_CHECK", "STREAM_BUFFER", "EventStream"]

#: Events buffered per stream before the client drops and later replays them.
STREAM_BUFFER = 10_000
#: A stream quiet for this long checks the log for events it may have missed.
IDLE_CHECK = 5.0


class EventStream:
    """Make one with `Client.events()`."""

    def __init__(
        self, client: Client, task_id: str | None, since_seq: int | None, buffer: int
    ) -> None:
        self._client = client
        self.task_id = task_id
        #: The seq of the last durable event delivered (of this stream's topic).
        self.last_seq = since_seq
        # None in the stream means: the connection came back, catch up from the log.
        send, receive = anyio.create_memory_object_stream[TaskEvent | None](buffer)
        self._send: MemoryObjectSendStream[TaskEvent | None] = send
        self._receive: MemoryObjectReceiveStream[TaskEvent | None] = receive
        self._resync_pending = False
        self._ready: deque[TaskEvent] = deque()
        #: Where the catch-up from the log stands, while one is under way: the seq
        #: to read on from and the seq to stop before (None: the log's end). The
        #: log is read a page at a time as the reader takes events, so a stream
        #: from an old seq holds one page of the backlog, not all of it.
        self._fill_from: int | None = None
        self._fill_up_to: int | None = None
        #: The live event that showed a gap: delivered once the gap is filled
        #: (as it is if the log no longer has what it missed: pruned).
        self._after_fill: TaskEvent | None = None
        self._filled_gap: TaskEvent | None = None
        self._topic = (task_id or "").encode()
        #: Live events dropped because the reader fell behind (replayed later).
        self.dropped = 0
        #: Gaps found on the live stream and filled from the log.
        self.gaps = 0
        #: Catch-ups after the daemon came back.
        self.resyncs = 0

    async def __aenter__(self) -> EventStream:
        c = self._client
        c._streams.add(self)
        c._events.subscribe(self._topic)
        await c._sync_subscriptions()
        if self.last_seq is not None:
            self._start_fill(up_to=None)
            await self._fill_page()  # the first page now: an expired cursor fails here
        return self

    @property
    def buffered(self) -> int:
        """Events this stream holds that the reader has not taken yet."""
        return len(self._ready) + self._receive.statistics().current_buffer_used

    async def __aexit__(self, *exc_info: object) -> None:
        self._close()

    def _close(self) -> None:
        c = self._client
        if self in c._streams:
            c._streams.discard(self)
            if not c._closed:
                c._events.unsubscribe(self._topic)
            self._send.close()
            self._receive.close()

    def _resync(self) -> None:
        try:
            self._send.send_nowait(None)
        except anyio.WouldBlock:
            self._resync_pending = True  # taken up when the reader drains the buffer
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

    def _deliver(self, event: TaskEvent) -> None:
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            # The user reads too slowly: drop, and catch up from the log once the
            # buffer is drained.
            self.dropped += 1
            self._resync_pending = True
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

    def _start_fill(self, up_to: int | None, then: TaskEvent | None = None) -> None:
        """Catch up from the log: every durable event after `last_seq` (before
        `up_to`), read a page at a time as the reader goes; then `then`."""
        assert self.last_seq is not None
        self._fill_from = self.last_seq
        self._fill_up_to = up_to
        self._after_fill = then

    async def _fill_page(self) -> None:
        """Queue the next page of the catch-up; end it after its last page."""
        cursor, up_to = self._fill_from, self._fill_up_to
        if cursor is None:
            return
        page = await self._client.replay(cursor, task_id=self.task_id)
        done = not page.more
        for event in page.events:
            assert event.seq is not None
            if up_to is not None and event.seq >= up_to:
                done = True
                break
            self._ready.append(event)
            cursor = event.seq
        self._fill_from = cursor
        if done or not page.events:
            self._fill_from = None
            if self._after_fill is not None:
                self._ready.append(self._after_fill)
                self._filled_gap, self._after_fill = self._after_fill, None

    def _is_gap(self, event: TaskEvent) -> bool:
        assert event.seq is not None
        if self.last_seq is None:
            return False
        if self.task_id is None:
            return event.seq > self.last_seq + 1
        return (event.prev_seq or 0) > self.last_seq

    async def _next_live(self) -> TaskEvent | None:
        """The next live event; None when the stream must catch up from the log
        first (events were dropped, the daemon came back, or the stream has been
        quiet for a while: the live stream cannot show a gap at its very end)."""
        try:
            return self._receive.receive_nowait()
        except anyio.WouldBlock:
            if self._resync_pending:
                return None
        with anyio.move_on_after(IDLE_CHECK):
            return await self._receive.receive()
        self._resync_pending = self.last_seq is not None
        return None

    def __aiter__(self) -> AsyncIterator[TaskEvent]:
        return self

    async def __anext__(self) -> TaskEvent:
        while True:
            event: TaskEvent | None
            if self._ready:
                event = self._ready.popleft()
            elif self._fill_from is not None:
                await self._fill_page()
                continue
            else:
                try:
                    event = await self._next_live()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    if self._client._shut_out is not None:
                        raise self._client._shut_out from None
                    raise StopAsyncIteration from None
            if event is None:
                # Catch up from the log: after a reconnect, dropped events, or a
                # quiet spell.
                self._resync_pending = False
                self.resyncs += 1
                await self._client._sync_subscriptions()
                if self.last_seq is not None:
                    self._start_fill(up_to=None)
                continue
            if event.seq is None:
                return event
            if self.last_seq is not None and event.seq <= self.last_seq:
                continue  # already delivered (replay and live overlap)
            if event is not self._filled_gap and self._is_gap(event):
                self.gaps += 1
                self._start_fill(up_to=event.seq, then=event)
                continue
            self.last_seq = event.seq
            return event
