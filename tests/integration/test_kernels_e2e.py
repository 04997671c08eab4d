"""Kernels through the real daemon: hdspd as a subprocess with a real ipykernel,
the fake model scripting execute_code calls, and clients over real sockets."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from hdsp.client import CommandFailed, connect
from hdsp.protocol import (
    CellOutput,
    ClineMessage,
    ErrorCode,
    ExecuteCode,
    ExecutionOutput,
    ExecutionResult,
    KernelInfo,
    KernelList,
    KernelRef,
    KernelShutdown,
    KernelStarted,
    KernelState,
    KernelStatus,
    ListKernels,
    MessageEvent,
    ShutdownKernel,
    StartKernel,
    StartNewTask,
    StartNewTaskData,
    TaskAborted,
    TaskCompleted,
    TaskConfiguration,
    TaskEvent,
    TaskInteractive,
    TaskRef,
)
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn
from tests.support.host_processes import processes_mentioning

pytestmark = pytest.mark.timeout(60)

#: This task's code runs without asking a person first.
_RUN_CODE = {"always_allow_execute": True}
#: Kernel commands wait for a kernel to start or code to run.
_SLOW = 30.0


def _cell(event: TaskEvent) -> tuple[CellOutput, bool] | None:
    """The CellOutput of a cell_output message event, and whether it is partial."""
    if not isinstance(event.data, MessageEvent):
        return None
    message = event.data.payload[0].message
    if message.say != "cell_output":
        return None
    return msgspec.json.decode(message.text or "", type=CellOutput), bool(message.partial)


def _run_code(code: str, **extra: object) -> FakeReply:
    return FakeReply.tool_calls([ToolCall("execute_code", json.dumps({"code": code, **extra}))])


def _tool_result(fake: FakeOpenAI, request: int) -> str:
    messages = fake.requests[request]["messages"]
    tool = [m for m in messages if m["role"] == "tool"][-1]
    content = tool["content"]
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return str(content)


async def test_outputs_reach_a_second_client_live_and_it_answers_input(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    code = "print('hello', flush=True)\nname = input('Your name? ')\nprint('hi', name)"
    fake_openai.script(_run_code(code), FakeReply.text("Greeted."))
    async with connect(daemon.runtime_dir) as a, connect(daemon.runtime_dir) as b:
        head = (await a.status()).head_seq
        ref = await a.start_task("Greet me", workspace=tmp_path)
        live_output = False
        answered = False
        asked: ClineMessage | None = None
        question: ClineMessage | None = None
        async with b.events(ref.task_id, since_seq=head) as events:
            async for event in events:
                cell = _cell(event)
                if cell is not None and cell[1] and cell[0].outputs:
                    # A partial, live-only update: the output while the code runs.
                    assert event.seq is None
                    assert (cell[0].outputs[0].text or "").startswith("hello\n")
                    live_output = True
                if isinstance(event.data, MessageEvent):
                    message = event.data.payload[0].message
                    if message.type == "ask" and event.data.payload[0].action == "created":
                        asked = message
                if isinstance(event.data, TaskInteractive) and asked is not None:
                    # The task waits for its ask now (taskInteractive): b answers.
                    if asked.ask == "tool":
                        # Running code needs a person's yes by default.
                        await b.respond_to_ask(ref.task_id, asked.ts, "yesButtonClicked")
                    elif asked.ask == "followup":
                        assert asked.text == "Your name? "
                        question = asked
                if question is not None and live_output and not answered:
                    # The code waits in input() until b answers: 'hello' reached b
                    # while the code was still running.
                    await b.respond_to_ask(ref.task_id, question.ts, "messageResponse", "Ada")
                    answered = True
                if isinstance(event.data, ExecutionOutput):
                    assert event.data.payload[0].task_id == ref.task_id
                if isinstance(event.data, TaskCompleted):
                    break
        assert live_output and answered
        snap = await a.get_task(ref.task_id)
        (final,) = [m for m in snap.messages if m.say == "cell_output"]
        assert not final.partial
        cell_output = msgspec.json.decode(final.text or "", type=CellOutput)
        assert cell_output.status == "ok"
        assert "".join(o.text or "" for o in cell_output.outputs) == "hello\nhi Ada\n"
        assert "hi Ada" in _tool_result(fake_openai, 1)
        system = fake_openai.requests[0]["messages"][0]["content"]
        assert "Jupyter kernel (execute_code, run_cell): python3" in system
        kernels: KernelList = await a.request(ListKernels())
        (kernel,) = kernels.kernels
        assert kernel.task_ids == [ref.task_id] and kernel.cwd == str(tmp_path)


async def test_cancel_task_interrupts_a_running_infinite_loop(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(
        _run_code("x = 41"),
        _run_code("print('looping', flush=True)\nwhile True:\n    pass"),
        FakeReply.text("unreachable"),
    )
    async with connect(daemon.runtime_dir) as client:
        head = (await client.status()).head_seq
        ref = await client.start_task("Loop forever", workspace=tmp_path, approvals=_RUN_CODE)
        async with client.events(ref.task_id, since_seq=head) as events:
            async for event in events:
                cell = _cell(event)
                if cell is not None and "while True" in cell[0].code and cell[0].outputs:
                    break
        stopped: TaskRef = await client.cancel_task(ref.task_id)
        assert stopped.state == "aborted"
        events_after = await collect_turn(client, ref.task_id, head)
        assert isinstance(events_after[-1].data, TaskAborted)
        snap = await client.get_task(ref.task_id)
        cells = [
            msgspec.json.decode(m.text or "", type=CellOutput)
            for m in snap.messages
            if m.say == "cell_output"
        ]
        assert [c.status for c in cells] == ["ok", "cancelled"]
        assert all(not m.partial for m in snap.messages if m.say == "cell_output")
        # The kernel was interrupted, not restarted: x is still there.
        kernels: KernelList = await client.request(ListKernels())
        (kernel,) = kernels.kernels
        result: ExecutionResult = await client.request(
            ExecuteCode(kernel_id=kernel.kernel_id, code="x + 1"), timeout=_SLOW
        )
        assert result.status == "ok" and result.outputs[0].data == {"text/plain": "42"}


async def test_execute_code_from_a_client_and_a_task_bound_to_that_kernel(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    async with connect(daemon.runtime_dir) as client:
        head = (await client.status()).head_seq
        async with client.events(None, since_seq=head) as events:
            info: KernelInfo = await client.request(StartKernel(cwd=str(tmp_path)), timeout=_SLOW)
            assert (info.status, info.owned, info.cwd) == (KernelState.IDLE, True, str(tmp_path))
            result: ExecutionResult = await client.request(
                ExecuteCode(kernel_id=info.kernel_id, code="print('one')\nshared = 2 + 3\nshared"),
                timeout=_SLOW,
            )
            assert result.status == "ok"
            assert [o.output_type for o in result.outputs] == ["stream", "execute_result"]
            assert result.outputs[1].data == {"text/plain": "5"}
            seen: list[type] = []
            live: list[str] = []
            # The kernel's start is durable and comes first; every output also went
            # out live. (The last outputs may come after the idle status: they are
            # sent once the kernel is done, so wait for both, in either order.)
            async for event in events:
                seen.append(type(event.data))
                if isinstance(event.data, ExecutionOutput):
                    out = event.data.payload[0]
                    assert event.seq is None and out.task_id is None
                    assert out.execution_id == result.execution_id
                    live += [o.output_type for o in out.outputs]
                if KernelStatus in seen and len(live) >= 2:
                    break
            assert seen[0] is KernelStarted
            assert live == ["stream", "execute_result"]

        # A task bound to this kernel sees the client's variables.
        fake_openai.script(_run_code("shared * 2"), FakeReply.text("Ten."))
        mark = (await client.status()).head_seq
        ref = await client.start_task(
            "Double it", workspace=tmp_path, kernel_id=info.kernel_id, approvals=_RUN_CODE
        )
        done = await collect_turn(client, ref.task_id, mark)
        assert isinstance(done[-1].data, TaskCompleted)
        assert "Out[2]: 10" in _tool_result(fake_openai, 1)
        kernels: KernelList = await client.request(ListKernels())
        assert [k.task_ids for k in kernels.kernels] == [[ref.task_id]]

        with pytest.raises(CommandFailed) as failed:
            await client.request(ExecuteCode(kernel_id="nope", code="1"))
        assert failed.value.code == ErrorCode.KERNEL_NOT_FOUND
        bad = StartNewTaskData(text="x", configuration=TaskConfiguration(kernel_id="nope"))
        with pytest.raises(CommandFailed) as failed:
            await client.request(StartNewTask(data=bad))
        assert failed.value.code == ErrorCode.KERNEL_NOT_FOUND

        mark = (await client.status()).head_seq
        gone: KernelRef = await client.request(
            ShutdownKernel(kernel_id=info.kernel_id), timeout=_SLOW
        )
        assert gone.status == KernelState.DEAD
        page = await client.replay(mark)
        assert any(isinstance(e.data, KernelShutdown) for e in page.events)
        assert (await client.request(ListKernels())).kernels == []


async def test_the_daemon_shuts_its_kernels_down_when_it_stops(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    async with connect(daemon.runtime_dir) as client:
        info: KernelInfo = await client.request(StartKernel(cwd=str(tmp_path)), timeout=_SLOW)
        # In its sandbox the kernel's pid is its namespace's: find it by its
        # connection file, which is on its command line.
        assert processes_mentioning(info.connection_file)
    assert daemon.stop() == 0
    assert processes_mentioning(info.connection_file) == []
    daemon.start()
    async with connect(daemon.runtime_dir) as client:
        page = await client.replay(0)
        assert any(isinstance(e.data, KernelShutdown) for e in page.events)


async def test_a_kernel_directory_left_by_a_kill_9_is_removed_at_the_next_start(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    """A kill -9 of hdspd leaves its kernels' own directories (connection file,
    sockets) behind, their kernels dead with it; the next hdspd removes them."""
    async with connect(daemon.runtime_dir) as client:
        info: KernelInfo = await client.request(StartKernel(cwd=str(tmp_path)), timeout=_SLOW)
    assert info.connection_file is not None
    own = Path(info.connection_file).parent
    assert own.parent == daemon.runtime_dir / "k" and own.is_dir()
    daemon.kill()
    assert own.is_dir()  # nobody removed it
    daemon.start()
    async with connect(daemon.runtime_dir) as client:
        # Answered once the engine (the kernel service among it) is up.
        assert (await client.request(ListKernels())).kernels == []
    assert not own.exists() and list((daemon.runtime_dir / "k").iterdir()) == []


async def test_an_idle_kernel_is_culled_with_a_note_and_the_next_run_is_told(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    daemon_process.data_dir.mkdir(parents=True, exist_ok=True)
    (daemon_process.data_dir / "settings.json").write_text(
        json.dumps({"kernels": {"cull_idle_seconds": 1}})
    )
    daemon_process.start()
    fake_openai.script(
        _run_code("x = 41"), FakeReply.text("Set."), _run_code("x + 1"), FakeReply.text("Gone.")
    )
    async with connect(daemon_process.runtime_dir) as client:
        head = (await client.status()).head_seq
        ref = await client.start_task("Set x", workspace=tmp_path, approvals=_RUN_CODE)
        events = await collect_turn(client, ref.task_id, head)
        # The task is idle now; its kernel follows it into idleness and is culled.
        note = ""
        async with client.events(ref.task_id, since_seq=events[-1].seq or head) as stream:
            async for event in stream:
                if isinstance(event.data, MessageEvent):
                    message = event.data.payload[0].message
                    if message.say == "kernel_culled":
                        note = message.text or ""
                        break
        assert "variables and imports are gone" in note
        head = (await client.status()).head_seq
        await client.send_message(ref.task_id, "What is x + 1?")
        await collect_turn(client, ref.task_id, head)
    told = _tool_result(fake_openai, 3)
    assert "was shut down after" in told and "NameError" in told
