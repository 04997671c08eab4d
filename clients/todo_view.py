"""A task's todo list as the markdown checklist the CLI shows and edits."""

from __future__ import annotations

from hdsp.protocol import TodoItem

__all__ = ["todo_markdown"]

_MARKS = {"pending": " ", "in_progress": "-", "completed": "x"}


def todo_markdown(items: list[TodoItem]) -> str:
    """`- [ ]` pending, `- [-]` in progress, `- [x]` done, one item a line."""
    return "\n".join(f"- [{_MARKS.get(i.status, ' ')}] {i.content}" for i in items)
