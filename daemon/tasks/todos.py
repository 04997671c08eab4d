"""A task's todo list, stored with its item: the model replaces it
(the update_todo_list tool), and so may a person (UpdateTodoList), whose edit the
model is told of.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from hdsp.daemon.conversation import TextBlock
from hdsp.daemon.tools.todo_list import render_todo_markdown
from hdsp.protocol import TaskTodoListUpdated, TodoItem

from .feedback import Feedback
from .history import ApiHistory
from .record import TaskRecord

__all__ = ["TaskTodos"]


class TaskTodos:
    """The todo list of the task of `record` (the update_todo_list tool's
    service). `turn_open` says whether a turn runs or is open: a person's edit
    waits in `feedback` for its next request, else it goes into `history`."""

    def __init__(
        self,
        record: TaskRecord,
        history: ApiHistory,
        feedback: Feedback,
        turn_open: Callable[[], bool],
    ) -> None:
        self._record = record
        self._history = history
        self._feedback = feedback
        self._turn_open = turn_open

    async def set_todos(self, items: list[TodoItem], *, by: str) -> None:
        """Replace the todo list, stored with the task; every client gets
        taskTodoListUpdated. A person's edit is told to the model: before the
        open turn's next request, or as a message in its history."""
        record = self._record
        record.item = msgspec.structs.replace(record.item, todos=list(items))
        await record.emit(TaskTodoListUpdated(payload=(record.item.id, list(items), by)))
        if by != "user":
            return
        note = (
            "The user edited the todo list. It is now:\n"
            + (render_todo_markdown(items) or "(empty)")
            + "\nWork from this list from now on."
        )
        if self._turn_open():
            self._feedback.add(note)
        else:
            await self._history.add("user", [TextBlock(text=note)])
