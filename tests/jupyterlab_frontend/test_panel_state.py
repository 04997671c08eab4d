"""The panel's state (clients/jupyterlab/frontend/src/state.ts) against a real
daemon: a task runs with a scripted model (streamed text, a write that asks and
is approved, code whose output streams, completion), its events are recorded as
the server extension forwards them (`{"kind": "event", "event": TaskEvent}`),
and the reducer, fed those frames (also twice over, also after the snapshot),
must end with exactly the daemon's own snapshot (GetTask). jest runs the
TypeScript side (test/recorded.test.ts) on the fresh recording.

With HDSP_RECORD_FIXTURES=1 the recording also replaces the committed fixture
that the frontend's own unit tests replay (test/fixtures/)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from hdsp.client import Client
from hdsp.protocol import TaskCompleted, TaskEvent, TaskInteractive
from hdsp.protocol.codec import encode
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.jupyterlab_frontend import frontend

FIXTURE = frontend.FRONTEND / "test" / "fixtures" / "write-approve-run.json"


def call(name: str, **args: Any) -> FakeReply:
    return FakeReply.tool_calls([ToolCall(name, json.dumps(args))])


def frame(event: TaskEvent) -> dict[str, Any]:
    return {"kind": "event", "event": json.loads(encode(event))}


async def record(client: Client, fake: FakeOpenAI, workspace: Path) -> dict[str, Any]:
    fake.script(
        FakeReply.text("I will write the note, then count.", chunk_size=3)
        + call("write_to_file", path="notes.md", content="# Notes\nhello\n"),
        call("execute_code", code="for i in range(3):\n    print('line', i)\n6 * 7"),
        call("attempt_completion", result="Wrote notes.md and counted to 3."),
    )
    head = (await client.status()).head_seq
    ref = await client.start_task(
        "Write a note, then count", workspace=workspace, approvals={"always_allow_execute": True}
    )
    frames: list[dict[str, Any]] = []
    async with client.events(ref.task_id, since_seq=head) as events:
        async for event in events:
            frames.append(frame(event))
            if isinstance(event.data, TaskInteractive):
                snap = await client.get_task(ref.task_id)
                assert snap.pending_ask is not None
                await client.respond_to_ask(ref.task_id, snap.pending_ask.ts, "yesButtonClicked")
            if isinstance(event.data, TaskCompleted):
                break
    snapshot = await client.get_task(ref.task_id)
    names = [f["event"]["data"]["eventName"] for f in frames]
    assert "executionOutput" in names, "the recording holds no streamed kernel output"
    assert any(
        f["event"]["data"]["eventName"] == "message"
        and f["event"]["data"]["payload"][0]["message"].get("partial")
        for f in frames
    ), "the recording holds no streamed (partial) message"
    return {
        "taskId": ref.task_id,
        "sinceSeq": head,
        "frames": frames,
        "snapshot": json.loads(encode(snapshot)),
    }


@pytest.mark.slow
@pytest.mark.timeout(600)  # a first run installs the frontend's packages (npm ci)
async def test_the_reducer_ends_where_the_daemon_s_snapshot_is(
    client: Client, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    recording = await record(client, fake_openai, workspace)
    assert (workspace / "notes.md").read_text() == "# Notes\nhello\n"
    path = tmp_path / "recording.json"
    path.write_text(json.dumps(recording, indent=1))
    if os.environ.get("HDSP_RECORD_FIXTURES") == "1":
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        FIXTURE.write_text(json.dumps(recording, indent=1) + "\n")
    done = frontend.run(
        ["node_modules/jest/bin/jest.js", "test/recorded.test.ts"],
        env={"HDSP_RECORDING": str(path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
