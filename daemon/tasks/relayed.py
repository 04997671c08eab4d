"""Tool calls relayed from another agent (CallTool, issue 23): which tools may be
relayed, and the reply a finished call gives.

A relayed call runs in its task like a call of the task's own model (see
:meth:`.task.Task.run_relayed_call`): what decides whether it runs is the
daemon's approval policy, never the relaying client. Only tools that read, write
or run code or commands may be relayed: the tools that steer a task (complete
it, ask its user a question, switch its mode, keep its todo list) belong to the
task's own model.
"""

from __future__ import annotations

from typing import Literal

from hdsp.daemon.conversation import ImageBlock, TextBlock
from hdsp.daemon.tools import ToolCategory, ToolRegistry
from hdsp.protocol import RelayedImage, ToolCallResult

from .turn import CallState

__all__ = ["RELAYABLE", "relay_refusal", "relayed_result"]

#: The categories of tools a client may relay calls to.
RELAYABLE = frozenset(
    {ToolCategory.READ, ToolCategory.WRITE, ToolCategory.EXECUTE, ToolCategory.COMMAND}
)

#: How a finished call's result text starts when it did not run.
_DENIED = "The user denied this operation."


def relay_refusal(tools: ToolRegistry, name: str) -> str | None:
    """Why a call to the tool `name` cannot be relayed, or None when it can."""
    tool = tools.get(name)
    relayable = sorted(n for n in tools.names() if tools[n].category in RELAYABLE)
    if tool is None:
        return f"There is no tool named {name[:80]!r}. The tools are: {', '.join(relayable)}."
    if tool.category not in RELAYABLE:
        return (
            f"The tool {name} steers a task and belongs to its own model; relayed calls may "
            f"use: {', '.join(relayable)}."
        )
    return None


def relayed_result(task_id: str, call: CallState) -> ToolCallResult:
    """The reply to CallTool for `call`, as far as it got."""
    blocks = call.result or []
    text = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
    images = [
        RelayedImage(media_type=b.media_type, data=b.data)
        for b in blocks
        if isinstance(b, ImageBlock)
    ]
    status: Literal["done", "denied", "cancelled"]
    if call.status != "done":
        status = "cancelled"
        text = text or "The call was cancelled before it finished."
    elif call.result is not None and text.startswith(("Denied: ", _DENIED)):
        status = "denied"
    else:
        status = "done"
    return ToolCallResult(
        task_id=task_id,
        tool=call.name,
        status=status,
        is_error=call.is_error or status != "done",
        text=text,
        images=images,
    )
