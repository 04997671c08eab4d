"""A tree of five agent tasks across kill -9: lead calls b and c in one reply
(they run in parallel), b calls d and c calls e; the daemon is killed while d
and e wait on the model. After the restart the root asks to resume; once
resumed, the tree goes on where it stood (no task is started twice) and every
caller receives each child's return exactly once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from hdsp.client import connect
from hdsp.protocol import Ask, TaskCompleted, TaskDelegationCompleted, TaskState
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.test_agents_e2e import (
    AGENTS,
    agent_of,
    calls,
    finish,
    first_user_text,
    results_in,
    start_agent,
    wait_item,
)
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn, logged_events

TREE_AGENTS = [*AGENTS, {"name": "e", "instructions": "Agent E.", "groups": ["read"]}]


def tree_of_five(leaves_answer: threading.Event) -> Callable[[dict[str, Any]], Reply | None]:
    """lead calls b and c in one reply; b calls d, c calls e; d and e hang
    until `leaves_answer` is set, then finish."""

    def respond(body: dict[str, Any]) -> Reply | None:
        name, results = agent_of(body), results_in(body)
        if name == "lead":
            if not results:
                return calls(
                    ("call_agent", {"agent_name": "b", "message": "left"}),
                    ("call_agent", {"agent_name": "c", "message": "right"}),
                )
            return finish("lead: " + " + ".join(results))
        if name in ("b", "c"):
            if not results:
                leaf = "d" if name == "b" else "e"
                return calls(("call_agent", {"agent_name": leaf, "message": f"leaf of {name}"}))
            return finish(f"{name}: {results[0]}")
        if not leaves_answer.is_set():
            return Reply.hang()  # d and e work when the daemon is killed
        return finish(f"{name} did {first_user_text(body)}")

    return respond


async def killed_with_a_tree_in_flight(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> tuple[str, list[str]]:
    """Start the tree of five, kill the daemon -9 while d and e wait on the
    model; the root's id, and the tree's ids (the root first)."""
    async with connect(daemon.runtime_dir) as client:
        await client.update_settings({"agents": TREE_AGENTS})
        root, _ = await start_agent(client, workspace, "lead", "a tree of five")
        with anyio.fail_after(60):
            await fake_openai.wait_for_requests_async(5)  # lead, b, c, d, e
            item = await wait_item(client, root, lambda i: len(i.child_ids or []) == 2)
            tree = [root]
            for child_id in item.child_ids or []:
                child = await wait_item(client, child_id, lambda i: bool(i.child_ids))
                tree += [child_id, *(child.child_ids or [])]
        assert len(tree) == 5
        # Every task of the tree is on disk (a read flushes the journal).
        for task_id in tree:
            await client.get_task(task_id)
        daemon.kill()
    return root, tree


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_a_tree_of_five_resumes_after_kill_9_and_each_return_arrives_once(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    leaves_answer = threading.Event()
    fake_openai.responder = tree_of_five(leaves_answer)
    root, tree = await killed_with_a_tree_in_flight(daemon, fake_openai, workspace)

    leaves_answer.set()
    daemon.start()
    async with connect(daemon.runtime_dir) as client:
        with anyio.fail_after(90):
            head = (await client.status()).head_seq
            # Recovery is over before the daemon is ready: the root asks to resume.
            ask = (await client.get_task(root)).pending_ask
            assert ask is not None and ask.ask == Ask.RESUME_TASK
            # Its children wait for it, not for a person.
            for task_id in tree[1:]:
                assert (await client.get_task(task_id)).pending_ask is None
            await client.respond_to_ask(root, ask.ts, "yesButtonClicked")
            await collect_turn(client, root, head, until=(TaskCompleted,))
        items = {t: (await client.get_task(t)).item for t in tree}
        by_agent = {i.agent: i for i in items.values()}
        assert items[root].result == "lead: b: d did leaf of b + c: e did leaf of c"
        # No task was started twice: the tree is still five, each child once.
        for item in items.values():
            assert len(item.child_ids or []) == {"lead": 2, "b": 1, "c": 1}.get(item.agent, 0)
        assert by_agent["d"].parent_task_id == by_agent["b"].id
        assert by_agent["e"].parent_task_id == by_agent["c"].id
        # Each caller's model saw each return once: one tool result per call.
        final = [b for b in fake_openai.requests if agent_of(b) == "lead"][-1]
        assert results_in(final) == ["b: d did leaf of b", "c: e did leaf of c"]
        for name, leaf in (("b", "d"), ("c", "e")):
            last = [b for b in fake_openai.requests if agent_of(b) == name][-1]
            assert results_in(last) == [f"{leaf} did leaf of {name}"]
        # And the durable log says each child returned once.
        logged = await logged_events(client)
        returned = [
            e.data.payload[1]
            for e in logged.values()
            if isinstance(e.data, TaskDelegationCompleted)
        ]
        assert sorted(returned) == sorted(tree[1:])


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_stop_on_the_root_after_kill_9_aborts_the_children_left_waiting_for_it(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    """After the restart the children wait for their callers; the user stops the
    root instead of resuming it: the whole tree is stopped, none is left waiting
    (resumable) for a caller that will never come back for it."""
    fake_openai.responder = tree_of_five(threading.Event())
    root, tree = await killed_with_a_tree_in_flight(daemon, fake_openai, workspace)
    asked = len(fake_openai.requests)
    daemon.start()
    async with connect(daemon.runtime_dir) as client:
        with anyio.fail_after(60):
            ask = (await client.get_task(root)).pending_ask
            assert ask is not None and ask.ask == Ask.RESUME_TASK
            stopped = await client.cancel_task(root)
            assert stopped.state is TaskState.ABORTED
            for task_id in tree:
                await wait_item(client, task_id, lambda i: i.state is TaskState.ABORTED)
        for task_id in tree:
            snap = await client.get_task(task_id)
            assert snap.state is TaskState.ABORTED and snap.pending_ask is None
        # Nothing of the tree asked the model after the restart.
        assert len(fake_openai.requests) == asked
