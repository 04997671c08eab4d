"""Agents calling agents (seed 002) through the real daemon: a scripted model
answers each request by the agent it is (its system prompt) and what it was
asked, `call_agent` runs each call as a child task with a fresh context,
`finish` and the text fallback return, and the caller gets every return in one
next request."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from hdsp.client import Client
from hdsp.protocol import (
    HistoryItem,
    TaskCompleted,
    TaskDelegated,
    TaskDelegationCompleted,
    TaskEvent,
    TaskPaused,
    TaskSpawned,
    TaskUnpaused,
)
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.events import collect_turn

AGENTS = [
    {"name": "lead", "instructions": "Leads the work.", "groups": ["read", "agents"]},
    {"name": "b", "instructions": "Agent B.", "groups": ["read", "agents"]},
    {"name": "c", "instructions": "Agent C.", "groups": ["read"]},
    {"name": "d", "instructions": "Agent D.", "groups": ["read"]},
]

#: Every agent call is approved without asking (the tree shares the root's settings).
APPROVALS = {"always_allow_subtasks": True}


def calls(*pairs: tuple[str, dict[str, Any]]) -> Reply:
    return Reply.tool_calls([ToolCall(name, json.dumps(args)) for name, args in pairs])


def finish(message: str) -> Reply:
    return calls(("finish", {"message": message}))


def agent_of(body: dict[str, Any]) -> str:
    """Which agent a request is for: its system prompt says."""
    found = re.search(r'^You are "([^"]+)"', body["messages"][0]["content"])
    assert found is not None, body["messages"][0]["content"][:200]
    return found.group(1)


def conversation(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's messages after the system prompt."""
    return body["messages"][1:]


def first_user_text(body: dict[str, Any]) -> str:
    content = conversation(body)[0]["content"]
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content)
    return str(content)


def results_in(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def requests_of(fake: FakeOpenAI, name: str) -> list[dict[str, Any]]:
    return [b for b in fake.requests if agent_of(b) == name]


async def start_agent(client: Client, workspace: Path, agent: str, text: str) -> tuple[str, int]:
    head = (await client.status()).head_seq
    ref = await client.start_task(text, workspace=workspace, agent=agent, approvals=APPROVALS)
    return ref.task_id, head


async def wait_item(
    client: Client, task_id: str, ready: Callable[[HistoryItem], bool]
) -> HistoryItem:
    """The task's item once `ready` holds for it (checked at each of its events)."""
    head = 0
    async with client.events(task_id, since_seq=head) as events:
        item = (await client.get_task(task_id)).item
        if ready(item):
            return item
        async for _ in events:
            item = (await client.get_task(task_id)).item
            if ready(item):
                return item
    raise AssertionError("the event stream ended early")


def of_type(events: list[TaskEvent], kind: type[Any]) -> list[Any]:
    return [e.data for e in events if isinstance(e.data, kind)]


@pytest.mark.slow
async def test_three_calls_in_one_reply_run_concurrently_and_one_failing_disturbs_none(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    await client.update_settings({"agents": AGENTS})
    # B, C and D each answer only once all three wait for an answer: their
    # time-lines overlap, or the test times out.
    all_three = threading.Barrier(3, timeout=30)

    def respond(body: dict[str, Any]) -> Reply | None:
        name = agent_of(body)
        if name == "lead":
            if not results_in(body):
                return calls(
                    ("call_agent", {"agent_name": "b", "message": "part one"}),
                    ("call_agent", {"agent_name": "c", "message": "part two"}),
                    ("call_agent", {"agent_name": "d", "message": "part three"}),
                )
            return finish("all parts: " + " | ".join(results_in(body)))
        all_three.wait()
        if name == "d":
            return Reply.hang()  # stopped by the test: its call fails
        return finish(f"{name} did {first_user_text(body)}")

    fake_openai.responder = respond
    root, head = await start_agent(client, workspace, "lead", "split the work")
    with anyio.fail_after(60):
        item = await wait_item(client, root, lambda i: len(i.child_ids or []) == 3)
        # While its calls run, the caller delegates (to one of its children).
        assert item.status == "delegated" and item.delegated_to_id in (item.child_ids or [])
        children = {}
        for child_id in item.child_ids or []:
            children[(await client.get_task(child_id)).item.agent] = child_id
        # D is stopped once it has made its request (the barrier let all three go).
        await fake_openai.wait_for_requests_async(4)
        await wait_item(client, children["d"], lambda i: True)
        await client.cancel_task(children["d"])
        events = await collect_turn(client, root, head, until=(TaskCompleted,))

    # A received all three results in one next request, in the calls' order.
    second = requests_of(fake_openai, "lead")[1]
    results = results_in(second)
    assert results[0] == "b did part one"
    assert results[1] == "c did part two"
    assert results[2].startswith("Error: ") and "d stopped before it finished" in results[2]
    done = (await client.get_task(root)).item
    assert done.result == "all parts: " + " | ".join(results)
    # Every call returned: it delegates to none any more.
    assert done.delegated_to_id is None and done.status == "active"

    # Their time-lines overlap: each started (its first request) before any ended.
    spans = {}
    for name in ("b", "c", "d"):
        snap = await client.get_task(children[name])
        stamps = [m.ts for m in snap.messages]
        asked = [m.ts for m in snap.messages if m.say == "api_req_started"]
        spans[name] = (asked[0], stamps[-1])
    assert max(s for s, _ in spans.values()) < min(e for _, e in spans.values())

    # The tree: ids, links and the four events on the parent's topic.
    for name, child_id in children.items():
        child = (await client.get_task(child_id)).item
        assert child.parent_task_id == root and child.root_task_id == root
        assert child.agent == name and child.parent_call_id
    spawned = of_type(events, TaskSpawned)
    delegated = of_type(events, TaskDelegated)
    returned = of_type(events, TaskDelegationCompleted)
    assert sorted(p.payload[1] for p in spawned) == sorted(children.values())
    assert sorted(p.payload[1] for p in delegated) == sorted(children.values())
    assert sorted((p.payload[1], p.payload[2]) for p in returned) == sorted(
        [(children["b"], "b did part one"), (children["c"], "c did part two")]
    )
    assert all(p.payload[0] == root for p in [*spawned, *delegated, *returned])
    # The caller waited for its children once (Roo's paused parent), then went on.
    assert [p.payload for p in of_type(events, TaskPaused)] == [(root,)]
    assert [p.payload for p in of_type(events, TaskUnpaused)] == [(root,)]


@pytest.mark.slow
async def test_recursion_a_b_a_a_runs_with_independent_contexts(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    await client.update_settings({"agents": AGENTS})

    def respond(body: dict[str, Any]) -> Reply | None:
        name, asked, results = agent_of(body), first_user_text(body), results_in(body)
        if name == "lead" and asked == "outer question":
            if not results:
                return calls(("call_agent", {"agent_name": "b", "message": "ask lead back"}))
            return finish(f"outer got: {results[0]}")
        if name == "b":
            if not results:
                return calls(("call_agent", {"agent_name": "lead", "message": "inner question"}))
            return finish(f"b got: {results[0]}")
        if name == "lead" and asked == "inner question":
            if not results:  # lead calls itself: A -> B -> A -> A
                return calls(("call_agent", {"agent_name": "lead", "message": "innermost"}))
            assert results == ["innermost answer"]
            return finish("inner answer")
        if name == "lead" and asked == "innermost":
            return finish("innermost answer")
        raise AssertionError(f"unexpected request of {name}: {asked}")

    fake_openai.responder = respond
    root, head = await start_agent(client, workspace, "lead", "outer question")
    with anyio.fail_after(60):
        await collect_turn(client, root, head, until=(TaskCompleted,))
    assert (await client.get_task(root)).item.result == "outer got: b got: inner answer"

    # Every loop had its own context: each request holds its own conversation only.
    leads = requests_of(fake_openai, "lead")
    inner = [b for b in leads if first_user_text(b) == "inner question"]
    assert len(inner) == 2
    assert [m["role"] for m in conversation(inner[0])] == ["user"]
    (innermost,) = [b for b in leads if first_user_text(b) == "innermost"]
    assert [m["role"] for m in conversation(innermost)] == ["user"]
    outer = [b for b in leads if first_user_text(b) == "outer question"]
    assert [m["role"] for m in conversation(outer[-1])] == ["user", "assistant", "tool"]
    assert results_in(outer[-1]) == ["b got: inner answer"]
    (b_first, b_last) = requests_of(fake_openai, "b")
    assert [m["role"] for m in conversation(b_first)] == ["user"]
    assert first_user_text(b_first) == "ask lead back"
    assert results_in(b_last) == ["inner answer"]
    # The inner lead is a task of its own, two levels below the root.
    b_id = (await client.get_task(root)).item.child_ids or []
    b_item = (await client.get_task(b_id[0])).item
    inner_item = (await client.get_task((b_item.child_ids or [])[0])).item
    assert inner_item.agent == "lead" and inner_item.root_task_id == root
    assert inner_item.parent_task_id == b_item.id
    # Its call of itself is a task of its own too, a level further down.
    self_item = (await client.get_task((inner_item.child_ids or [])[0])).item
    assert self_item.agent == "lead" and self_item.parent_task_id == inner_item.id
    assert self_item.result == "innermost answer"


@pytest.mark.slow
async def test_finish_and_the_text_fallback_both_return(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    await client.update_settings({"agents": AGENTS})

    def respond(body: dict[str, Any]) -> Reply | None:
        name, results = agent_of(body), results_in(body)
        if name == "lead":
            if not results:
                return calls(
                    ("call_agent", {"agent_name": "b", "message": "use finish"}),
                    ("call_agent", {"agent_name": "c", "message": "just answer"}),
                )
            return Reply.text("done: " + " + ".join(results))
        if name == "b":
            return finish("from finish")
        return Reply.text("from text")

    fake_openai.responder = respond
    root, head = await start_agent(client, workspace, "lead", "two ways")
    with anyio.fail_after(60):
        await collect_turn(client, root, head, until=(TaskCompleted,))
    assert results_in(requests_of(fake_openai, "lead")[1]) == ["from finish", "from text"]
    # The user is an agent without a model: the root returned by the text fallback.
    assert (await client.get_task(root)).item.result == "done: from finish + from text"


async def test_the_system_prompt_has_the_seeds_structure(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    await client.update_settings({"agents": AGENTS})
    fake_openai.script(Reply.text("ok"))
    root, head = await start_agent(client, workspace, "b", "hello")
    with anyio.fail_after(30):
        await collect_turn(client, root, head, until=(TaskCompleted,))
    system = fake_openai.requests[0]["messages"][0]["content"]
    head_part = system.split("\n\n====\n\n")[0]
    others = "\n".join(
        f"- {a['name']}: {a['instructions']}"
        for a in [
            {"name": "analyst", "instructions": _builtin("analyst")},
            {"name": "reviewer", "instructions": _builtin("reviewer")},
            *AGENTS,
        ]
        if a["name"] != "b"
    )
    assert head_part == (
        'You are "b". Agent B.\n'
        "\n"
        "Available agents:\n"
        f"{others}\n"
        "\n"
        "Use call_agent to delegate work to other agents.\n"
        "Use finish to complete your task and return the result."
    )
    lowered = system.lower()
    for word in ("openai", "gpt-test", "provider", "max_depth", "fan-out", "limit"):
        assert word not in lowered
    tools = {t["function"]["name"] for t in fake_openai.requests[0]["tools"]}
    assert {"call_agent", "finish", "read_file"} <= tools
    assert "write_to_file" not in tools


def _builtin(name: str) -> str:
    from hdsp.daemon.agents import BUILT_IN_AGENTS

    return next(a.instructions for a in BUILT_IN_AGENTS if a.name == name)
