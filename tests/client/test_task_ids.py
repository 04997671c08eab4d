"""A short task id is resolved by the daemon's prefix lookup: one page of at
most two tasks, whatever the number of tasks."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import pytest

from hdsp.client import CommandFailed, connect
from hdsp.client.cli.task_ids import resolve_task_id
from hdsp.daemon.store import Journal, insert_task
from hdsp.protocol import ErrorCode, HistoryItem, TaskCreated, TaskState
from tests.support.daemon_process import DaemonProcess

IDS = [
    "aaaa1111-0000-4000-8000-000000000000",
    "aaaa2222-0000-4000-8000-000000000000",
    "bbbb1111-0000-4000-8000-000000000000",
]


async def test_a_prefix_resolves_to_its_one_task(
    daemon_process: DaemonProcess,
    stored_journal: Callable[[], AbstractAsyncContextManager[Journal]],
) -> None:
    async with stored_journal() as journal:
        for number, task_id in enumerate(IDS, start=1):
            item = HistoryItem(id=task_id, number=number, ts=number, task="t", state=TaskState.IDLE)
            await journal.emit(TaskCreated(payload=(task_id,)), insert_task(item))
    daemon_process.start()
    async with connect(daemon_process.runtime_dir, name="test") as client:
        assert await resolve_task_id(client, "aaaa1") == IDS[0]
        assert await resolve_task_id(client, "bbbb") == IDS[2]
        with pytest.raises(CommandFailed) as several:
            await resolve_task_id(client, "aaaa")
        assert "several" in str(several.value)
        with pytest.raises(CommandFailed) as none:
            await resolve_task_id(client, "cccc")
        assert none.value.code == ErrorCode.TASK_NOT_FOUND
        page = await client.list_tasks(id_prefix="aaaa", limit=10)
        assert [t.id for t in page.tasks] == [IDS[1], IDS[0]]  # newest first
        assert page.next_cursor is None
        with pytest.raises(CommandFailed) as both:
            await client.list_tasks(id_prefix="aaaa", cursor="5")
        assert both.value.code == ErrorCode.INVALID_REQUEST
