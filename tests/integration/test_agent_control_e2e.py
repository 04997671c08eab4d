"""Control over a tree of agents, through the real daemon: Stop on the root
cancels the whole tree, the approval caps count every task of the tree, and the
operator's depth and fan-out limits reach the model as the call's error."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from hdsp.client import Client
from hdsp.protocol import (
    Ask,
    CellOutput,
    ExecuteCode,
    ExecutionResult,
    KernelList,
    ListKernels,
    MessageEvent,
    TaskAborted,
    TaskCompleted,
    TaskState,
)
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.test_agents_e2e import (
    AGENTS,
    agent_of,
    calls,
    finish,
    first_user_text,
    requests_of,
    results_in,
    start_agent,
    wait_item,
)
from tests.support.events import collect_turn
from tests.support.scripted_turns import ask_or_end


def read_in_two_agents(body: dict[str, Any]) -> Reply | None:
    """lead calls b and c in one reply; each reads data.csv, then finishes."""
    name, results = agent_of(body), results_in(body)
    if name == "lead":
        if not results:
            return calls(
                ("call_agent", {"agent_name": "b", "message": "read"}),
                ("call_agent", {"agent_name": "c", "message": "read"}),
            )
        return finish("read twice")
    if not results:
        return calls(("read_file", {"path": "data.csv"}))
    return finish(f"{name} read")


@pytest.mark.slow
async def test_stop_on_the_root_cancels_the_whole_tree(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    await client.update_settings({"agents": AGENTS})

    def respond(body: dict[str, Any]) -> Reply | None:
        name = agent_of(body)
        if name == "lead":
            return calls(
                ("call_agent", {"agent_name": "b", "message": "go deeper"}),
                ("call_agent", {"agent_name": "c", "message": "wait"}),
            )
        if name == "b":
            return calls(("call_agent", {"agent_name": "d", "message": "wait too"}))
        return Reply.hang()  # c and d work until stopped

    fake_openai.responder = respond
    root, head = await start_agent(client, workspace, "lead", "a tree")
    with anyio.fail_after(60):
        # lead, b, then c and d wait on the model: four tasks in flight.
        await fake_openai.wait_for_requests_async(4)
        item = await wait_item(client, root, lambda i: len(i.child_ids or []) == 2)
        agents = {(await client.get_task(c)).item.agent: c for c in item.child_ids or []}
        b_id = agents["b"]
        b = await wait_item(client, b_id, lambda i: bool(i.child_ids))
        tree = [root, *(item.child_ids or []), *(b.child_ids or [])]
        await client.cancel_task(root)
        await collect_turn(client, root, head, until=(TaskAborted,))
        for task_id in tree:
            await wait_item(client, task_id, lambda i: i.state is TaskState.ABORTED)
    assert len(tree) == 4
    # Nothing of the tree asks the model any more.
    await fake_openai.wait_for_open_connections_async(0)


@pytest.mark.slow
async def test_stop_on_a_middle_task_stops_its_subtree_and_interrupts_its_kernel(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    """lead calls b and c; b calls coder, whose code loops in its kernel. Stop on
    b stops b and coder (the loop is interrupted, the kernel keeps its state);
    c goes on, and lead gets b's call as an error and c's return."""
    coder = {"name": "coder", "instructions": "Runs code.", "groups": ["read", "kernel"]}
    await client.update_settings({"agents": [*AGENTS, coder]})
    c_may_finish = threading.Event()
    loop = "x = 41\nprint('looping', flush=True)\nwhile True:\n    pass"

    def respond(body: dict[str, Any]) -> Reply | None:
        name, results = agent_of(body), results_in(body)
        if name == "lead":
            if not results:
                return calls(
                    ("call_agent", {"agent_name": "b", "message": "go deeper"}),
                    ("call_agent", {"agent_name": "c", "message": "meanwhile"}),
                )
            return finish(" | ".join(results))
        if name == "b":
            return calls(("call_agent", {"agent_name": "coder", "message": "loop"}))
        if name == "coder":
            return calls(("execute_code", {"code": loop}))
        assert c_may_finish.wait(60)
        return finish("c did it")

    fake_openai.responder = respond
    head = (await client.status()).head_seq
    ref = await client.start_task(
        "a tree with a kernel",
        workspace=workspace,
        agent="lead",
        approvals={"always_allow_subtasks": True, "always_allow_execute": True},
    )
    root = ref.task_id
    with anyio.fail_after(90):
        item = await wait_item(client, root, lambda i: len(i.child_ids or []) == 2)
        agents = {(await client.get_task(c)).item.agent: c for c in item.child_ids or []}
        b = await wait_item(client, agents["b"], lambda i: bool(i.child_ids))
        (coder_id,) = b.child_ids or []
        async with client.events(coder_id, since_seq=head) as events:
            async for event in events:
                if isinstance(event.data, MessageEvent):
                    m = event.data.payload[0].message
                    if m.say != "cell_output":
                        continue
                    cell = msgspec.json.decode(m.text or "", type=CellOutput)
                    if any("looping" in (o.text or "") for o in cell.outputs):
                        break  # the loop runs
        stopped = await client.cancel_task(agents["b"])
        assert stopped.state is TaskState.ABORTED
        await wait_item(client, coder_id, lambda i: i.state is TaskState.ABORTED)
        # c still works: nothing above b was stopped.
        assert (await client.get_task(agents["c"])).state is TaskState.RUNNING
        assert (await client.get_task(root)).state is not TaskState.ABORTED
        c_may_finish.set()
        await collect_turn(client, root, head, until=(TaskCompleted,))

    # The loop was interrupted (cancelled), not left running, and the kernel
    # was not restarted: what the code defined before the loop is still there.
    cells = [
        msgspec.json.decode(m.text or "", type=CellOutput)
        for m in (await client.get_task(coder_id)).messages
        if m.say == "cell_output"
    ]
    assert [c.status for c in cells] == ["cancelled"]
    kernels: KernelList = await client.request(ListKernels())
    (kernel,) = [k for k in kernels.kernels if coder_id in k.task_ids]
    result: ExecutionResult = await client.request(
        ExecuteCode(kernel_id=kernel.kernel_id, code="x + 1"), timeout=30
    )
    assert result.status == "ok" and result.outputs[0].data == {"text/plain": "42"}, result
    # lead got b's call as an error and c's return, in the calls' order.
    (b_result, c_result) = results_in(requests_of(fake_openai, "lead")[1])
    assert b_result.startswith("Error: b stopped before it finished"), b_result
    assert c_result == "c did it"


@pytest.mark.slow
async def test_the_approval_cap_counts_every_task_of_the_tree(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    await client.update_settings({"agents": AGENTS})

    fake_openai.responder = read_in_two_agents
    head = (await client.status()).head_seq
    ref = await client.start_task(
        "read in two agents",
        workspace=workspace,
        agent="lead",
        approvals={"always_allow_subtasks": True, "max_auto_approved_requests": 3},
    )
    root = ref.task_id
    with anyio.fail_after(60):
        item = await wait_item(client, root, lambda i: len(i.child_ids or []) == 2)
        # Two calls and one read were approved (three, the cap): the other
        # agent's read asks, though no task by itself made three requests.
        asks = []
        for child in item.child_ids or []:
            ask = await ask_or_end(client, child, 0)
            if ask is not None:
                asks.append((child, ask))
        assert len(asks) == 1
        child, ask = asks[0]
        assert ask.ask == Ask.AUTO_APPROVAL_MAX_REQ_REACHED
        await client.respond_to_ask(child, ask.ts, "yesButtonClicked")
        await collect_turn(client, root, head, until=(TaskCompleted,))
    assert (await client.get_task(root)).item.result == "read twice"


@pytest.mark.slow
async def test_the_cost_cap_counts_every_task_of_the_tree(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    """The daemon-wide cap on what automatic work may cost counts the tree's
    requests together: each request costs $1 here, the cap is $1.50, and though
    no task alone spent that much, each child's read asks a person first."""
    await client.update_settings(
        {
            "agents": AGENTS,
            # 20 prompt tokens per scripted reply at $50,000 per million: $1.
            "models": {"gpt-test": {"input_price": 50_000, "output_price": 0}},
            "approvals": {"always_allow_subtasks": True, "max_auto_approved_cost": 1.5},
        }
    )

    fake_openai.responder = read_in_two_agents
    root, head = await start_agent(client, workspace, "lead", "read in two agents")
    with anyio.fail_after(60):
        item = await wait_item(client, root, lambda i: len(i.child_ids or []) == 2)
        asks = [await ask_or_end(client, child, 0) for child in item.child_ids or []]
        for child, ask in zip(item.child_ids or [], asks, strict=True):
            assert ask is not None and ask.ask == Ask.AUTO_APPROVAL_MAX_REQ_REACHED
            assert "max_auto_approved_cost" in (ask.text or "")
            spent = (await client.get_task(child)).item.total_cost
            assert spent == pytest.approx(1.0)  # the child's own: below the cap
            await client.respond_to_ask(child, ask.ts, "yesButtonClicked")
        await collect_turn(client, root, head, until=(TaskCompleted,))
    assert (await client.get_task(root)).item.result == "read twice"


@pytest.mark.slow
async def test_depth_and_fan_out_limits_are_the_calls_errors(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    await client.update_settings(
        {"agents": AGENTS, "agent_limits": {"max_depth": 1, "max_fan_out": 2}}
    )

    def respond(body: dict[str, Any]) -> Reply | None:
        name, results = agent_of(body), results_in(body)
        if name == "lead":
            if not results:
                return calls(("call_agent", {"agent_name": "b", "message": "go deeper"}))
            if len(results) == 1:
                return calls(
                    ("call_agent", {"agent_name": "c", "message": "one"}),
                    ("call_agent", {"agent_name": "d", "message": "two"}),
                    ("call_agent", {"agent_name": "c", "message": "three"}),
                )
            return finish("|".join(results))
        if name == "b" and not results:
            return calls(("call_agent", {"agent_name": "c", "message": "deeper"}))
        if name == "b":
            return finish(f"b saw: {results[0]}")
        # The two calls let through return only once both run.
        both.wait()
        return finish(f"{name} did {first_user_text(body)}")

    both = threading.Barrier(2, timeout=30)
    fake_openai.responder = respond
    root, head = await start_agent(client, workspace, "lead", "limits")
    with anyio.fail_after(60):
        await collect_turn(client, root, head, until=(TaskCompleted,))
    leads = requests_of(fake_openai, "lead")
    # b, one level down, may call no agent (max_depth 1): its call's error.
    (b_result,) = results_in(leads[1])
    assert b_result.startswith("b saw: Error: c was not called")
    assert "agent_limits.max_depth" in b_result
    # One of the three calls of one reply was refused (two at once at most).
    results = results_in(leads[2])[1:]
    assert len(results) == 3
    refused = [r for r in results if "agent_limits.max_fan_out" in r]
    assert len(refused) == 1 and refused[0].startswith("Error: "), results
    assert sorted(r for r in results if r not in refused) in (
        ["c did one", "d did two"],
        ["c did one", "c did three"],
        ["c did three", "d did two"],
    )
    # Nothing in any prompt says there is a limit.
    for body in fake_openai.requests:
        assert "max_depth" not in body["messages"][0]["content"]
