"""CreateTask and CallTool through the real daemon: another agent's calls of
hdsp's tools, relayed by a client, take the path of the model's calls. What the
relaying client sends cannot widen what runs without asking: the policy is the
daemon's, the tools that steer a task are refused, and a call that waits for
approval runs only once a person says yes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from hdsp.client import Client, CommandFailed
from hdsp.protocol import (
    ErrorCode,
    ExecutionOutput,
    TaskAborted,
    TaskState,
    ToolCallResult,
)
from tests.support.daemon_process import DaemonProcess, short_tmp_dir
from tests.support.events import collect_turn, wait_for_ask_ts

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@dataclass
class WaitingCall:
    #: The head seq before the call.
    head: int
    #: The ts of the ask it waits on.
    ask: int
    #: Its result, once the `relayed_call` block has ended.
    results: list[ToolCallResult] = field(default_factory=list)


@asynccontextmanager
async def relayed_call(
    client: Client, task_id: str, tool: str, args: dict[str, Any]
) -> AsyncIterator[WaitingCall]:
    """A relayed call of `tool`, made in the background and waiting for
    approval; the block answers the ask, and ends once the call has."""
    head = (await client.status()).head_seq
    results: list[ToolCallResult] = []
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            results.append(await client.call_tool(task_id, tool, args))

        tg.start_soon(call)
        yield WaitingCall(head, await wait_for_ask_ts(client, task_id, head), results)


async def test_a_created_task_waits_and_refuses_tools_that_steer_it(
    daemon: DaemonProcess, client: Client
) -> None:
    workspace = short_tmp_dir()
    ref = await client.create_task("relay", workspace=workspace)
    assert ref.state == TaskState.IDLE
    snapshot = await client.get_task(ref.task_id)
    assert snapshot.state == TaskState.IDLE
    assert [m.text for m in snapshot.messages] == ["relay"]
    for tool in ("attempt_completion", "ask_followup_question", "switch_mode", "no_such_tool"):
        with pytest.raises(CommandFailed) as refused:
            await client.call_tool(ref.task_id, tool, {})
        assert refused.value.code == ErrorCode.INVALID_REQUEST
        assert "execute_code" in refused.value.message
    with pytest.raises(CommandFailed) as missing:
        await client.call_tool(ref.task_id, "execute_code", {"code": "1"}, kernel_id="nope")
    assert missing.value.code == ErrorCode.KERNEL_NOT_FOUND
    with pytest.raises(CommandFailed) as unknown:
        await client.call_tool("no-such-task", "read_file", {"path": "x"})
    assert unknown.value.code == ErrorCode.TASK_NOT_FOUND
    with pytest.raises(CommandFailed) as broad:
        await client.create_task("relay", workspace="/")
    assert broad.value.code == ErrorCode.INVALID_REQUEST


async def test_a_read_runs_by_the_policy_and_invalid_arguments_do_not_run(
    daemon: DaemonProcess, client: Client
) -> None:
    workspace = short_tmp_dir()
    (workspace / "data.txt").write_text("hello from the file\n")
    ref = await client.create_task("relay", workspace=workspace)
    read = await client.call_tool(ref.task_id, "read_file", {"path": "data.txt"})
    assert read.status == "done" and not read.is_error
    assert "hello from the file" in read.text
    bad = await client.call_tool(ref.task_id, "read_file", {"path": 3})
    assert bad.status == "done" and bad.is_error
    assert "invalid arguments" in bad.text
    outside = await client.call_tool(ref.task_id, "read_file", {"path": "/etc/passwd"})
    assert outside.is_error


async def test_a_write_waits_for_a_person_and_a_no_leaves_the_file_alone(
    daemon: DaemonProcess, client: Client
) -> None:
    workspace = short_tmp_dir()
    ref = await client.create_task("relay", workspace=workspace)
    args = {"path": "out.txt", "content": "written\n"}
    async with relayed_call(client, ref.task_id, "write_to_file", args) as write:
        # While the call waits, the task is busy: a second call is refused.
        with pytest.raises(CommandFailed) as busy:
            await client.call_tool(ref.task_id, "read_file", {"path": "out.txt"})
        assert busy.value.code == ErrorCode.TASK_BUSY
        await client.respond_to_ask(ref.task_id, write.ask, "noButtonClicked", "not now")
    assert write.results[0].status == "denied" and write.results[0].is_error
    assert not (workspace / "out.txt").exists()


async def test_cancelling_the_task_stops_a_relayed_run(
    daemon: DaemonProcess, client: Client
) -> None:
    workspace = short_tmp_dir()
    ref = await client.create_task("relay", workspace=workspace)
    code = "import time\nfor i in range(600):\n    print(i, flush=True)\n    time.sleep(0.1)"
    async with relayed_call(client, ref.task_id, "execute_code", {"code": code}) as run:
        await client.respond_to_ask(ref.task_id, run.ask, "yesButtonClicked")
        async with client.events(ref.task_id, since_seq=run.head) as events:
            async for event in events:
                if isinstance(event.data, ExecutionOutput):
                    break
        await client.cancel_task(ref.task_id)
    assert run.results[0].status == "cancelled"
    ended = await collect_turn(client, ref.task_id, run.head, until=(TaskAborted,))
    assert isinstance(ended[-1].data, TaskAborted)
    # The kernel was interrupted and lives: the next call runs at once (approved).
    async with relayed_call(client, ref.task_id, "execute_code", {"code": "i"}) as again:
        await client.respond_to_ask(ref.task_id, again.ask, "yesButtonClicked")
    assert again.results[0].status == "done"
    assert int(again.results[0].text.splitlines()[-1].removeprefix("Out[2]: ")) < 590
