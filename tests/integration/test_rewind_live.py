"""Rewinding a task that is in the middle of something, through the real daemon:
a cell that runs is interrupted first (the kernel's variables are not rolled
back), and an ask that waits is taken away with the messages it came with."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from hdsp.client import Client, CommandFailed
from hdsp.protocol import ExecutionOutput, Say, TaskCompleted, TaskInteractive, TaskState
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.events import collect_turn

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def call(name: str, **args: object) -> FakeReply:
    return FakeReply.tool_calls([ToolCall(name, json.dumps(args))])


async def test_a_rewind_while_a_cell_runs_interrupts_it_and_keeps_the_kernels_variables(
    client: Client, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    waiting = (
        "import time\nx = 41\nprint('set x', flush=True)\n"
        "while True:  # until the rewind interrupts it\n    time.sleep(0.05)\n"
    )
    fake_openai.script(
        call("execute_code", code=waiting),
        # After the rewind: the next message's turn reads x back.
        call("execute_code", code="print(x + 1)"),
        call("attempt_completion", result="x + 1 is 42"),
    )
    head = (await client.status()).head_seq
    ref = await client.start_task(
        "Set x, then wait", workspace=tmp_path, approvals={"always_allow_execute": True}
    )
    task_id = ref.task_id
    with anyio.fail_after(90):
        async with client.events(task_id, since_seq=head) as events:
            # The cell printed: x is set, and the cell runs on.
            async for event in events:
                data = event.data
                if isinstance(data, ExecutionOutput) and any(
                    "set x" in (o.text or "") for o in data.payload[0].outputs or []
                ):
                    break
        snap = await client.get_task(task_id)
        assert snap.state == TaskState.RUNNING
        prompt = snap.messages[0]
        rewound = await client.rewind_task(task_id, prompt.ts, include=False)
    assert rewound.state == TaskState.IDLE
    after = await client.get_task(task_id)
    assert [m.ts for m in after.messages] == [prompt.ts]

    head = (await client.status()).head_seq
    await client.send_message(task_id, "What is x + 1?")
    with anyio.fail_after(60):
        events_after = await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert isinstance(events_after[-1].data, TaskCompleted)
    outputs = [
        m.text or "" for m in (await client.get_task(task_id)).messages if m.say == Say.CELL_OUTPUT
    ]
    # The kernel's state was not rolled back: x survived the rewind.
    assert any("42" in text for text in outputs), outputs


async def test_a_rewind_takes_a_waiting_ask_away_and_it_cannot_be_answered(
    client: Client, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(
        call("write_to_file", path="notes.md", content="# Notes\n"),
        call("attempt_completion", result="nothing written"),
    )
    head = (await client.status()).head_seq
    ref = await client.start_task("Write notes.md", workspace=tmp_path)
    task_id = ref.task_id
    with anyio.fail_after(60):
        await collect_turn(client, task_id, head, until=(TaskInteractive,))
    snap = await client.get_task(task_id)
    assert snap.pending_ask is not None
    ask_ts = snap.pending_ask.ts

    await client.rewind_task(task_id, snap.messages[0].ts, include=False)
    after = await client.get_task(task_id)
    assert after.pending_ask is None and after.state == TaskState.IDLE
    assert [m.ts for m in after.messages] == [snap.messages[0].ts]
    with pytest.raises(CommandFailed):
        await client.respond_to_ask(task_id, ask_ts, "yesButtonClicked")
    assert not (tmp_path / "notes.md").exists()
