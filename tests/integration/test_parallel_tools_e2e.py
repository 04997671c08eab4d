"""The tool calls of one reply run concurrently (seed 002, §6), through the real
daemon: approvals for several calls are asked together and answered one by one,
calls that write one file keep their order, a failing call is an error result
that disturbs no other, and the results go back in the calls' order."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from hdsp.client import Client
from hdsp.protocol import Ask, ClineMessage, MessageEvent, Say, TaskCompleted
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.events import collect_turn
from tests.support.model_requests import tool_results
from tests.support.scripted_turns import done, start


def calls(*pairs: tuple[str, dict[str, object]]) -> Reply:
    """One reply with several tool calls."""
    return Reply.tool_calls([ToolCall(name, json.dumps(args)) for name, args in pairs])


async def open_asks(client: Client, task_id: str, since: int, count: int) -> list[ClineMessage]:
    """Wait until `count` approval asks of the task wait at once (posted, none
    answered); the asks, oldest first."""
    async with client.events(task_id, since_seq=since) as events:
        async for event in events:
            if not isinstance(event.data, MessageEvent):
                continue
            snap = await client.get_task(task_id)
            waiting = [
                m
                for m in snap.messages
                if m.type == "ask" and m.ask == Ask.TOOL and not m.is_answered
            ]
            if len(waiting) >= count:
                return waiting
    raise AssertionError("the event stream ended early")


async def result_shown(client: Client, task_id: str, since: int, tool_use_id: str | None) -> None:
    """Wait for the `tool_result` message of the call `tool_use_id`."""
    async with client.events(task_id, since_seq=since) as events:
        async for event in events:
            if isinstance(event.data, MessageEvent):
                m = event.data.payload[0].message
                if m.say == Say.TOOL_RESULT and m.tool_use_id == tool_use_id:
                    return
    raise AssertionError("the event stream ended early")


async def test_approvals_of_concurrent_calls_are_asked_together_and_answered_one_by_one(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(
        calls(
            ("write_to_file", {"path": "a.txt", "content": "A"}),
            ("read_file", {"path": "missing.csv"}),
            ("write_to_file", {"path": "b.txt", "content": "B"}),
            ("read_file", {"path": "data.csv"}),
        ),
        done(),
    )
    task_id, head = await start(client, "write two files", workspace)
    with anyio.fail_after(30):
        waiting = await open_asks(client, task_id, head, 2)
    # Both asks wait at once: neither call waited for the other's approval.
    by_path = {json.loads(m.text or "{}")["path"]: m for m in waiting}
    first, second = by_path["a.txt"], by_path["b.txt"]
    assert not (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()
    # Answered one by one, the later first: b is written while a still waits.
    await client.respond_to_ask(task_id, second.ts, "yesButtonClicked")
    with anyio.fail_after(30):
        await result_shown(client, task_id, head, second.tool_use_id)
    assert (workspace / "b.txt").read_text() == "B"
    assert not (workspace / "a.txt").exists()
    await client.respond_to_ask(task_id, first.ts, "noButtonClicked")
    events = await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert isinstance(events[-1].data, TaskCompleted)
    # The results, in the calls' order, in one next request; the failing read
    # is an error that disturbed no other call.
    results = tool_results(fake_openai, 1)
    assert len(results) == 4
    assert "denied" in results[0]
    assert results[1].startswith("Error") or "not found" in results[1].lower()
    assert "B" not in results[1]
    assert "x,y" in results[3]
    assert (workspace / "b.txt").read_text() == "B"
    assert not (workspace / "a.txt").exists()


async def test_calls_that_write_one_file_keep_their_order(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(
        calls(
            ("write_to_file", {"path": "same.txt", "content": "first"}),
            ("write_to_file", {"path": "same.txt", "content": "second"}),
        ),
        done(),
    )
    task_id, head = await start(client, "write one file twice", workspace)
    with anyio.fail_after(30):
        (ask,) = await open_asks(client, task_id, head, 1)
    assert "+first" in json.loads(ask.text or "{}")["diff"]
    await client.respond_to_ask(task_id, ask.ts, "yesButtonClicked")
    with anyio.fail_after(30):
        (later,) = await open_asks(client, task_id, head, 1)
    # The second write asked only once the first was done.
    assert "+second" in json.loads(later.text or "{}")["diff"]
    assert later.ts > ask.ts
    assert (workspace / "same.txt").read_text() == "first"
    await client.respond_to_ask(task_id, later.ts, "yesButtonClicked")
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert (workspace / "same.txt").read_text() == "second"
