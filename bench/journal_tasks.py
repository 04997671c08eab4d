"""A task and its messages as the daemon's journal writes them, for the benches
that fill a store (or a running daemon) through a real `Journal`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hdsp.daemon.store import Journal, insert_task
from hdsp.protocol import HistoryItem, MessageEvent, MessagePayload, TaskCreated, TaskState

if TYPE_CHECKING:
    from hdsp.protocol import ClineMessage

__all__ = ["create_task", "message_created", "task_item"]


def task_item(task_id: str, *, number: int = 1, task: str = "bench") -> HistoryItem:
    """The history item of an idle task."""
    return HistoryItem(id=task_id, number=number, ts=1, task=task, state=TaskState.IDLE)


async def create_task(journal: Journal, item: HistoryItem) -> None:
    """Emit the task's creation with its row, as a new task's is."""
    await journal.emit(TaskCreated(payload=(item.id,)), insert_task(item))


def message_created(task_id: str, message: ClineMessage) -> MessageEvent:
    """The event of a new UI message of the task."""
    return MessageEvent(payload=(MessagePayload(task_id, "created", message),))
