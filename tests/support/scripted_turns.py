"""Scripting a model's turn and driving it through the real daemon: the replies a
test queues on the fake (a tool call, the closing `attempt_completion`), starting
a task, and waiting for the ask a tool call raises."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hdsp.client import Client
from hdsp.protocol import Ask, ClineMessage, MessageEvent, TaskCompleted, TaskEvent, TaskInteractive
from tests.fakes.openai_server import Reply, ToolCall

from .events import ENDINGS, collect_turn

__all__ = ["ask_or_end", "call", "done", "next_ask", "run_task", "start"]


def call(name: str, **args: Any) -> Reply:
    """A reply that calls the tool `name` with `args`."""
    return Reply.tool_calls([ToolCall(name, json.dumps(args))])


def done(text: str = "done") -> Reply:
    """The reply that ends a task: `attempt_completion` with `text`."""
    return call("attempt_completion", result=text)


async def start(client: Client, text: str, workspace: Path, **approvals: Any) -> tuple[str, int]:
    """Start a task in `workspace` with `approvals` (the task's approval
    settings); returns its id and the head seq before it started."""
    head = (await client.status()).head_seq
    ref = await client.start_task(text, workspace=workspace, approvals=approvals or None)
    return ref.task_id, head


async def run_task(
    client: Client, text: str, workspace: Path, **approvals: Any
) -> tuple[str, list[TaskEvent]]:
    """Start a task as `start` does and wait until its turn completes; returns
    its id and the turn's events."""
    task_id, head = await start(client, text, workspace, **approvals)
    return task_id, await collect_turn(client, task_id, head, until=(TaskCompleted,))


async def ask_or_end(client: Client, task_id: str, since: int) -> ClineMessage | None:
    """The task's next pending ask after `since`, or None when its turn ended
    without asking (the tool was approved automatically)."""
    async with client.events(task_id, since_seq=since) as events:
        async for event in events:
            if isinstance(event.data, ENDINGS):
                return None
            if isinstance(event.data, TaskInteractive) or (
                isinstance(event.data, MessageEvent)
                and event.data.payload[0].message.type == "ask"
                and event.data.payload[0].message.ask != Ask.COMMAND_OUTPUT
            ):
                snap = await client.get_task(task_id)
                if snap.pending_ask is not None:
                    return snap.pending_ask
    raise AssertionError("the event stream ended early")


async def next_ask(client: Client, task_id: str, since: int) -> ClineMessage:
    """The task's next pending ask after `since`."""
    ask = await ask_or_end(client, task_id, since)
    if ask is None:
        raise AssertionError("the turn ended without asking")
    return ask
