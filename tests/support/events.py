"""Helpers for following a task's events in tests."""

from __future__ import annotations

from hdsp.client import Client
from hdsp.protocol import (
    ClineMessage,
    Event,
    MessageEvent,
    TaskAborted,
    TaskCompleted,
    TaskEvent,
    TaskIdle,
    TaskResumable,
)

__all__ = [
    "ENDINGS",
    "collect_turn",
    "logged_events",
    "next_unanswered_ask",
    "texts",
    "wait_for_ask_ts",
    "wait_for_said",
]

ENDINGS = (TaskCompleted, TaskAborted, TaskIdle, TaskResumable)


async def collect_turn(
    client: Client, task_id: str, since_seq: int, *, until: tuple[type[Event], ...] = ENDINGS
) -> list[TaskEvent]:
    """Every event of `task_id` after `since_seq` up to the first ending event."""
    got: list[TaskEvent] = []
    async with client.events(task_id, since_seq=since_seq) as events:
        async for event in events:
            got.append(event)
            if isinstance(event.data, until):
                return got
    raise AssertionError("event stream ended early")


async def wait_for_said(client: Client, task_id: str, since_seq: int, say: str, part: str) -> None:
    """Wait until the task publishes, after `since_seq`, a `say` message whose
    text (so far: it may still stream) holds `part`."""
    async with client.events(task_id, since_seq=since_seq) as events:
        async for event in events:
            if isinstance(event.data, MessageEvent):
                m = event.data.payload[0].message
                if m.say == say and part in (m.text or ""):
                    return
    raise AssertionError("event stream ended early")


async def next_unanswered_ask(
    client: Client, since_seq: int, task_id: str | None = None
) -> tuple[str, ClineMessage]:
    """The next unanswered ask after `since_seq`, once whole, of `task_id` or
    of any task: its task's id and the ask."""
    async with client.events(task_id, since_seq=since_seq) as events:
        async for event in events:
            if isinstance(event.data, MessageEvent):
                payload = event.data.payload[0]
                m = payload.message
                if m.type == "ask" and not m.partial and not m.is_answered:
                    return payload.task_id, m
    raise AssertionError("event stream ended early")


async def wait_for_ask_ts(client: Client, task_id: str, since_seq: int) -> int:
    """The ts of the task's next unanswered ask after `since_seq`, once whole."""
    _, ask = await next_unanswered_ask(client, since_seq, task_id)
    return ask.ts


def texts(events: list[TaskEvent], say: str = "text") -> list[str]:
    """The final texts of the `say` messages among `events`, in order."""
    final: dict[int, str] = {}
    for e in events:
        if isinstance(e.data, MessageEvent):
            m = e.data.payload[0].message
            if m.say == say and not m.partial:
                final[m.ts] = m.text or ""
    return [final[ts] for ts in sorted(final)]


async def logged_events(client: Client) -> dict[int, TaskEvent]:
    """The daemon's whole event log, by seq, read through Replay's pages."""
    got: dict[int, TaskEvent] = {}
    since = 0
    while True:
        page = await client.replay(since)
        for e in page.events:
            assert e.seq is not None
            got[e.seq] = e
            since = e.seq
        if not page.more:
            return got
