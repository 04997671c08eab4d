"""What a finished turn returns to its caller (seed 002, §4): the message of its
`finish` call (or the result of `attempt_completion`). A turn that ends with a
reply and no tool call returns that reply's text instead (the task sees it)."""

from __future__ import annotations

from collections.abc import Sequence

from .turn import CallState

__all__ = ["returned_by"]

#: The tools that end a turn, with the argument that holds what they return.
_RETURNED_ARGUMENT = {"finish": "message", "attempt_completion": "result"}


def returned_by(calls: Sequence[CallState]) -> str | None:
    """What the completing call among `calls` returns; None if none says."""
    for call in calls:
        key = _RETURNED_ARGUMENT.get(call.name)
        if call.completes_task and key is not None and call.arguments is not None:
            return str(call.arguments.get(key, ""))
    return None
