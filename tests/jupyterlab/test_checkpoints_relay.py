"""The checkpoint commands (issue 20) through the server extension, as the
panel sends them: list, diff and restore in a real Jupyter server relaying to a
real hdspd (real git, a real kernel); a restore with the kernel replies at once
and its replay, approved through the relay, finishes in the task's history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.jupyterlab.conftest import Lab
from tests.jupyterlab.test_server_extension import (
    call,
    completed,
    connected_socket,
    done,
    message_event,
    named,
    read_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


async def test_list_diff_and_restore_go_through_the_relay(
    lab: Lab, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(
        call("write_to_file", path="data.csv", content="overwritten\n"),
        call("execute_code", code="n = 41"),
        call("execute_code", code="n += 1"),
        done(),
    )
    ws = await connected_socket(lab)
    code, body = await lab.command(
        {
            "commandName": "StartNewTask",
            "data": {
                "text": "overwrite the data",
                "configuration": {
                    "approvals": {"always_allow_write": True, "always_allow_execute": True}
                },
            },
        }
    )
    assert code == 200, body
    task_id = body["result"]["taskId"]
    await read_until(ws, completed(task_id))

    async def command(command: dict[str, Any]) -> dict[str, Any]:
        code, body = await lab.command(command)
        assert code == 200, (command, body)
        return dict(body["result"])

    listing = await command({"commandName": "ListCheckpoints", "data": {"taskId": task_id}})
    cps = listing["checkpoints"]
    assert [c["reason"] for c in cps] == [
        "before write_to_file",
        "before execute_code",
        "before execute_code",
    ]
    assert cps[1]["changed"] == ["data.csv"] and cps[2]["executions"] == 1

    diff = await command(
        {"commandName": "DiffCheckpoints", "data": {"taskId": task_id, "checkpoint": 1}}
    )
    (change,) = diff["files"]
    assert change["path"] == "data.csv" and "+overwritten" in change["diff"]

    # With the kernel: the relay does not hold the request while a person decides.
    restored = await command(
        {
            "commandName": "RestoreCheckpoint",
            "data": {"taskId": task_id, "checkpoint": 3, "withKernel": True},
        }
    )
    assert restored["replayPending"] is True and restored["undoCheckpoint"] == 4
    snapshot = await command({"commandName": "GetTask", "data": {"taskId": task_id}})
    ask = next(
        m for m in snapshot["messages"] if m.get("ask") == "tool" and not m.get("isAnswered")
    )
    cells = json.loads(ask["text"])["cells"]
    assert [c["code"] for c in cells] == ["n = 41"]
    await command(
        {
            "commandName": "RespondToAsk",
            "taskId": task_id,
            "data": {"askTs": ask["ts"], "response": "yesButtonClicked"},
        }
    )
    await read_until(
        ws, message_event(task_id, "checkpoint_restored", "kernel replayed 1 execution(s)")
    )
    await read_until(ws, named("checkpointRestored"))
    assert (workspace / "data.csv").read_text() == "overwritten\n"

    # Files only, back to the first checkpoint: the overwrite is undone.
    result = await command(
        {"commandName": "RestoreCheckpoint", "data": {"taskId": task_id, "checkpoint": 1}}
    )
    assert result["files"] == ["data.csv"] and "replayPending" not in result
    assert (workspace / "data.csv").read_text() == "x,y\n1,2\n3,4\n"
    ws.close()
