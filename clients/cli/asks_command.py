"""`hdsp asks`: the asks that wait for an answer, across all tasks."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

import msgspec

from hdsp.protocol import ClineMessage, TaskState, encode

from ..exit_codes import ExitCode
from .columns import columns
from .console import Console

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["add_asks_parser"]

#: States in which a task can wait on an ask.
_ASKING_STATES = (TaskState.INTERACTIVE, TaskState.IDLE, TaskState.RESUMABLE)


class PendingAsk(msgspec.Struct, frozen=True, rename="camel"):
    task_id: str
    task: str
    ask: ClineMessage
    #: The agent whose task asks (an agent's call, seed 002), if any.
    agent: str | None = None


def _waiting(ask: ClineMessage) -> bool:
    return (
        ask.type == "ask"
        and not ask.partial
        and not ask.is_answered
        and ask.ask not in (None, "command_output")
    )


def summary(ask: ClineMessage) -> str:
    """One line saying what an ask wants."""
    text = ask.text or ""
    data: Any = None
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
    if ask.ask == "command":
        return f"run `{' '.join(text.split())}`" + (f" in {ask.cwd}" if ask.cwd else "")
    if isinstance(data, dict) and ask.ask == "followup":
        return f"question: {data.get('question', text)}"
    if isinstance(data, dict) and "tool" in data:
        target = data.get("path") or data.get("notebook") or ""
        return f"allow {data['tool']} {target}".rstrip()
    return f"{ask.ask}: {' '.join(text.split())}".rstrip(": ")


async def pending_asks(client: Client) -> list[PendingAsk]:
    found: list[PendingAsk] = []
    cursor: str | None = None
    while True:
        page = await client.list_tasks(cursor=cursor, limit=1000)
        for item in page.tasks:
            if item.state not in _ASKING_STATES:
                continue
            snap = await client.get_task(item.id)
            oldest = snap.pending_ask
            if oldest is None:
                continue
            # Concurrent tool calls ask together: every ask from the oldest that
            # waits on (the turn's; older unanswered ones are stopped turns').
            asks = [m for m in snap.messages if m.ts >= oldest.ts and _waiting(m)] or [oldest]
            found += [
                PendingAsk(task_id=item.id, task=item.task, ask=a, agent=item.agent) for a in asks
            ]
        cursor = page.next_cursor
        if cursor is None:
            return found


async def run_asks(cli: Console, client: Client) -> int:
    asks = await pending_asks(client)
    if cli.args.json:
        for pending in asks:
            cli.out_raw(encode(pending).decode())
        return ExitCode.OK
    if not asks:
        cli.out("No task waits for an answer.")
        return ExitCode.OK
    rows = []
    for pending in asks:
        title = " ".join(pending.task.split())
        title = title if len(title) <= 40 else title[:39] + "…"
        line = summary(pending.ask)
        line = line if len(line) <= 100 else line[:99] + "…"
        agent = f"[{pending.agent}] " if pending.agent else ""
        rows.append([pending.task_id[:8], pending.ask.ask or "", agent + line, f"[{title}]"])
    for line in columns(rows):
        cli.out(line)
    cli.out("Answer with `hdsp answer TASK --yes | --no WHY | TEXT`, or `hdsp attach TASK`.")
    return ExitCode.OK


def add_asks_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    asks = sub.add_parser(
        "asks",
        parents=[common],
        help="list the asks that wait for an answer, across all tasks",
        description="List every ask a task waits on (approvals, questions, retries).",
    )
    asks.set_defaults(handler=run_asks)
