"""The kernel fault matrix, through the real daemon and its sandboxed kernels: for
each fault the scripted model's code causes, no hang, a clear message that two
clients both see, the task recovers (its next code runs), and nothing is lost
from the task's history."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from hdsp.client import connect
from hdsp.protocol import CellOutput, MessageEvent, TaskCompleted
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

_RUN_CODE = {"always_allow_execute": True}


def _run_code(code: str, **extra: object) -> FakeReply:
    return FakeReply.tool_calls([ToolCall("execute_code", json.dumps({"code": code, **extra}))])


#: name: (the faulty code, its execute_code arguments, the cell status clients
#: see, what the model is told).
FAULTS: dict[str, tuple[str, dict[str, object], str, str]] = {
    "kill -9 mid-cell": (
        "import os, signal\nprint('before', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)",
        {},
        "died",
        "The kernel died while the code ran",
    ),
    "os._exit": ("import os\nos._exit(3)", {}, "died", "The kernel died while the code ran"),
    "infinite loop past the timeout": (
        "while True:\n    pass",
        {"timeout": 1},
        "timeout",
        "ran longer than 1 s and was interrupted",
    ),
    "a loop that ignores SIGINT": (
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
        {"timeout": 1},
        "timeout",
        "did not stop when interrupted, so it was restarted",
    ),
}


def _tool_results(fake: FakeOpenAI) -> list[str]:
    out = []
    for request in fake.requests:
        tools = [m for m in request["messages"] if m["role"] == "tool"]
        if tools:
            content = tools[-1]["content"]
            out.append(content if isinstance(content, str) else json.dumps(content))
    return out


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_a_kernel_fault_is_reported_and_the_task_recovers(
    fault: str, daemon_process: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    code, extra, status, told = FAULTS[fault]
    daemon_process.data_dir.mkdir(parents=True, exist_ok=True)
    (daemon_process.data_dir / "settings.json").write_text(
        json.dumps({"kernels": {"interrupt_grace_seconds": 1}})
    )
    daemon_process.start()
    fake_openai.script(
        _run_code("x = 41"),
        _run_code(code, **extra),
        _run_code("print(1 + 1)"),
        FakeReply.text("Recovered."),
    )
    async with connect(daemon_process.runtime_dir) as a, connect(daemon_process.runtime_dir) as b:
        head = (await a.status()).head_seq
        ref = await a.start_task("Run the faulty code", workspace=tmp_path, approvals=_RUN_CODE)
        seen: dict[str, list[str]] = {}
        for name, client in (("a", a), ("b", b)):
            statuses = seen.setdefault(name, [])
            async with client.events(ref.task_id, since_seq=head) as events:
                async for event in events:
                    if isinstance(event.data, MessageEvent):
                        message = event.data.payload[0].message
                        if message.say == "cell_output" and not message.partial:
                            cell = msgspec.json.decode(message.text or "", type=CellOutput)
                            statuses.append(cell.status)
                    if isinstance(event.data, TaskCompleted):
                        break
        snap = await a.get_task(ref.task_id)
    # Both clients saw the fault's status, and the recovery after it.
    assert seen["a"] == seen["b"] == ["ok", status, "ok"], seen
    results = _tool_results(fake_openai)
    assert told in results[1], results[1]
    assert "2" in results[2] and "[execution" in results[2]
    # The history keeps every cell, final, and the task's answer.
    cells = [m for m in snap.messages if m.say == "cell_output"]
    assert len(cells) == 3 and not any(m.partial for m in cells)
    assert snap.messages[-1].text == "Recovered."
