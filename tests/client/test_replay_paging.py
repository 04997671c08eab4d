"""A stream opened at an old seq pages through the log as it is read: the first
event comes after one page, and the client never holds more than a page of the
backlog (plus what arrives live)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import anyio

from hdsp.client import connect
from hdsp.daemon.store import Journal, insert_task
from hdsp.protocol import (
    ClineMessage,
    HistoryItem,
    MessageEvent,
    MessagePayload,
    TaskCreated,
    TaskState,
)
from tests.support.daemon_process import DaemonProcess

#: More than three of the daemon's replay pages (1000 events).
EVENTS = 3_500
TASK = "paging"


async def test_a_stream_from_seq_0_pages_through_the_log_as_it_is_read(
    daemon_process: DaemonProcess,
    stored_journal: Callable[[], AbstractAsyncContextManager[Journal]],
) -> None:
    async with stored_journal() as journal:
        item = HistoryItem(id=TASK, number=1, ts=1, task="t", state=TaskState.IDLE)
        await journal.emit(TaskCreated(payload=(TASK,)), insert_task(item))
        for i in range(1, EVENTS):
            msg = ClineMessage(ts=i, type="say", say="text", text=f"message {i}")
            await journal.emit(MessageEvent(payload=(MessagePayload(TASK, "created", msg),)))
    daemon_process.start()
    async with connect(daemon_process.runtime_dir, name="test") as client:
        for task_id in (None, TASK):
            seqs: list[int] = []
            most_held = 0
            async with client.events(task_id, since_seq=0) as stream:
                with anyio.fail_after(60):
                    async for event in stream:
                        assert event.seq is not None
                        seqs.append(event.seq)
                        most_held = max(most_held, stream.buffered)
                        if event.seq == EVENTS:
                            break
            assert seqs == list(range(1, EVENTS + 1))
            # One page of the backlog at a time, never the whole of it.
            assert most_held < 1000, most_held
