"""The task's todo list: `update_todo_list` replaces it with a markdown
checklist, which the task stores with itself and announces to every client
(`taskTodoListUpdated`).

The checklist is one item a line: `- [ ] pending`, `- [-] in progress` (or
`[~]`), `- [x] done`; `*` or a number may stand for `-`, and `[ ]` may come
without a bullet. Other lines are refused with a message that says which.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from hdsp.protocol import TodoItem, TodoStatus

from .base import Tool, ToolCategory, ToolContext, ToolError, ToolResult

__all__ = [
    "MAX_TODO_ITEMS",
    "TaskTodoList",
    "UpdateTodoList",
    "parse_todo_markdown",
    "render_todo_markdown",
]

#: The most items a list holds; the longest item in characters.
MAX_TODO_ITEMS = 100
MAX_TODO_CHARS = 500

_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])?\s*\[([ xX\-~])\]\s*(.*?)\s*$")
_STATUS: dict[str, TodoStatus] = {
    " ": "pending",
    "x": "completed",
    "X": "completed",
    "-": "in_progress",
    "~": "in_progress",
}
_MARK: dict[str, str] = {"pending": " ", "in_progress": "-", "completed": "x"}


def parse_todo_markdown(text: str) -> list[TodoItem]:
    """The items of a markdown checklist; raises ValueError naming a bad line."""
    items: list[TodoItem] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _ITEM.match(line)
        if match is None or not match[2]:
            raise ValueError(
                f"line {number} is not a checklist item: {line[:80]!r} (write `- [ ] item`, "
                "`- [-] item in progress` or `- [x] item done`)"
            )
        if len(match[2]) > MAX_TODO_CHARS:
            raise ValueError(f"line {number} is longer than {MAX_TODO_CHARS} characters")
        items.append(TodoItem(id=str(len(items) + 1), content=match[2], status=_STATUS[match[1]]))
    if len(items) > MAX_TODO_ITEMS:
        raise ValueError(f"the list has {len(items)} items; at most {MAX_TODO_ITEMS}")
    return items


def render_todo_markdown(items: list[TodoItem]) -> str:
    return "\n".join(f"- [{_MARK[item.status]}] {item.content}" for item in items)


class TaskTodoList(Protocol):
    """What the tool asks of its task (the service "todo_list")."""

    async def set_todos(self, items: list[TodoItem], *, by: str) -> None: ...


class UpdateTodoList(Tool):
    name: ClassVar[str] = "update_todo_list"
    description: ClassVar[str] = (
        "Replace the task's todo list (every client shows it) with a markdown checklist, "
        "one item a line: `- [ ] pending`, `- [-] in progress`, `- [x] done`. Send the "
        "whole list each time. Use it for work with several steps: make the list first, "
        "then mark each step in progress and done as you go."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "todos": {"type": "string", "description": "The whole list as a markdown checklist."}
        },
        "required": ["todos"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.TODO

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        try:
            items = parse_todo_markdown(str(args["todos"]))
        except ValueError as exc:
            raise ToolError(f"The todo list was not changed: {exc}.") from None
        todo_list: TaskTodoList = ctx.service("todo_list")
        await todo_list.set_todos(items, by="model")
        done = sum(i.status == "completed" for i in items)
        return ToolResult.text(f"Todo list updated: {len(items)} items, {done} done.")
