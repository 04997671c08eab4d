"""Tools and approvals through the real loop: a scripted model (the fake server)
calls the tools, the real daemon runs them, clients approve over ZeroMQ."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import anyio
import pytest

from hdsp.client import Client, CommandFailed, connect
from hdsp.protocol import (
    Ask,
    TaskAskResponded,
    TaskCompleted,
    TaskState,
)
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn, wait_for_said
from tests.support.host_processes import processes_mentioning
from tests.support.model_requests import tool_results
from tests.support.scripted_turns import call, done, next_ask, start


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.csv").write_text("x,y\n1,2\n3,4\n")
    (ws / "notes.md").write_text("hello world\nsecond line\n")
    return ws


async def test_reads_and_searches_run_without_asking(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(
        call("read_file", path="data.csv"),
        call("search_files", regex="world"),
        call("list_files", path=".", recursive=True),
        done("read it"),
    )
    task_id, head = await start(client, "look around", workspace)
    events = await collect_turn(client, task_id, head)
    assert isinstance(events[-1].data, TaskCompleted)
    assert "3,4" in tool_results(fake_openai, 1)[-1]
    assert "notes.md" in tool_results(fake_openai, 2)[-1]
    assert "data.csv" in tool_results(fake_openai, 3)[-1]
    usage = events[-1].data.payload[2]
    assert usage["read_file"].attempts == 1 and usage["read_file"].failures == 0


async def test_a_write_asks_with_a_diff_and_runs_once_approved(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(call("write_to_file", path="out.txt", content="new content\n"), done())
    task_id, head = await start(client, "write a file", workspace)
    ask = await next_ask(client, task_id, head)
    assert ask.ask == Ask.TOOL
    preview = json.loads(ask.text or "{}")
    assert preview["tool"] == "write_to_file" and "+new content" in preview["diff"]
    assert not (workspace / "out.txt").exists()
    await client.respond_to_ask(task_id, ask.ts, "yesButtonClicked")
    events = await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert (workspace / "out.txt").read_text() == "new content\n"
    assert any(isinstance(e.data, TaskAskResponded) for e in events)


async def test_a_denial_with_feedback_reaches_the_model(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(call("write_to_file", path="out.txt", content="x"), done())
    task_id, head = await start(client, "write", workspace)
    ask = await next_ask(client, task_id, head)
    await client.respond_to_ask(task_id, ask.ts, "noButtonClicked", "use a better name")
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert not (workspace / "out.txt").exists()
    result = tool_results(fake_openai, 1)[-1]
    assert "denied" in result and "use a better name" in result


async def test_two_clients_race_to_answer_one_ask(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(call("write_to_file", path="a.txt", content="a"), done())
    async with connect(daemon.runtime_dir) as a, connect(daemon.runtime_dir) as b:
        task_id, head = await start(a, "race", workspace)
        ask = await next_ask(b, task_id, head)
        outcomes: dict[str, str] = {}

        async def answer(name: str, c: Client, response: str) -> None:
            try:
                await c.respond_to_ask(task_id, ask.ts, response)
                outcomes[name] = "won"
            except CommandFailed as exc:
                outcomes[name] = exc.code

        async with anyio.create_task_group() as tg:
            tg.start_soon(answer, "a", a, "yesButtonClicked")
            tg.start_soon(answer, "b", b, "noButtonClicked")
        assert sorted(outcomes.values()) == ["already_answered", "won"]
        # Both learn the outcome: the ask is answered and the task went on.
        for c in (a, b):
            events = await collect_turn(c, task_id, head, until=(TaskCompleted,))
            assert sum(isinstance(e.data, TaskAskResponded) for e in events) == 1
        written = (workspace / "a.txt").exists()
        assert written == (outcomes["a"] == "won")


async def test_confinement_escapes_are_refused(
    client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("TOKEN-4711")
    os.symlink(tmp_path / "secret.txt", workspace / "link.txt")
    fake_openai.script(
        call("read_file", path="../secret.txt"),
        call("read_file", path=str(tmp_path / "secret.txt")),
        call("read_file", path="link.txt"),
        done(),
    )
    task_id, head = await start(client, "escape", workspace)
    # Three refusals in a row are three mistakes: the task asks for guidance.
    ask = await next_ask(client, task_id, head)
    assert ask.ask == Ask.MISTAKE_LIMIT_REACHED
    await client.respond_to_ask(task_id, ask.ts, "yesButtonClicked")
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    for i in (1, 2, 3):
        result = tool_results(fake_openai, i)[-1]
        assert "TOKEN-4711" not in result
        assert "out of the workspace" in result or "outside the workspace" in result


async def test_ignored_files_are_invisible_and_protected_ones_ask(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    (workspace / ".hdspignore").write_text("private/\n")
    (workspace / "private").mkdir()
    (workspace / "private" / "keys.txt").write_text("k")
    fake_openai.script(
        call("list_files", path=".", recursive=True),
        call("read_file", path="private/keys.txt"),
        call("write_to_file", path=".hdspignore", content=""),
        done(),
    )
    task_id, head = await start(client, "poke", workspace, always_allow_write=True)
    ask = await next_ask(client, task_id, head)
    assert ask.ask == Ask.TOOL and ask.is_protected
    await client.respond_to_ask(task_id, ask.ts, "noButtonClicked")
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert "keys.txt" not in tool_results(fake_openai, 1)[-1]
    assert "no such file" in tool_results(fake_openai, 2)[-1].lower()
    assert (workspace / ".hdspignore").read_text() == "private/\n"


async def test_deny_list_beats_allow_list(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(call("execute_command", command="rm -rf build"), done())
    task_id, head = await start(
        client, "clean", workspace, allowed_commands=["*"], denied_commands=["rm"]
    )
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert "Denied" in tool_results(fake_openai, 1)[-1]


async def test_shell_output_streams_and_cancel_leaves_no_orphans(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    # The command runs in a sandbox with a PID namespace of its own: its `$!` is
    # not a host pid, so the child is found by a marker on its command line.
    marker = f"300.{os.getpid()}{id(workspace) % 10_000}"
    script = f"sleep {marker} & echo started; wait"
    fake_openai.script(call("execute_command", command=script))
    task_id, head = await start(client, "run it", workspace, allowed_commands=["*"])
    await wait_for_said(client, task_id, head, "command_output", "started")
    assert processes_mentioning(f"sleep {marker}")
    await client.cancel_task(task_id)
    assert processes_mentioning(f"sleep {marker}") == [], "the command's child outlived the cancel"


async def test_the_request_cap_asks_before_going_on(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(
        call("write_to_file", path="1.txt", content="1"),
        call("write_to_file", path="2.txt", content="2"),
        done(),
    )
    task_id, head = await start(
        client, "two writes", workspace, always_allow_write=True, max_auto_approved_requests=1
    )
    ask = await next_ask(client, task_id, head)
    assert ask.ask == Ask.AUTO_APPROVAL_MAX_REQ_REACHED
    assert (workspace / "1.txt").exists() and not (workspace / "2.txt").exists()
    await client.respond_to_ask(task_id, ask.ts, "yesButtonClicked")
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert (workspace / "2.txt").exists()


async def test_approval_timeouts_deny_and_followups_take_the_default(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(
        call("write_to_file", path="late.txt", content="x"),
        call("ask_followup_question", question="Which column?", suggestions=["x", "y"]),
        done(),
    )
    task_id, head = await start(
        client,
        "unattended",
        workspace,
        approval_timeout_seconds=0.5,
        followup_timeout_seconds=0.5,
    )
    with anyio.fail_after(20):
        await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert not (workspace / "late.txt").exists()
    assert "in time" in tool_results(fake_openai, 1)[-1]
    assert "x" in tool_results(fake_openai, 2)[-1]


async def test_mistakes_and_repetition_are_caught(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    same = call("read_file", path="data.csv")
    fake_openai.script(
        same,
        same,
        same,  # the third identical call is refused
        FakeReply.tool_calls([ToolCall("read_file", "{not json")]),
        call("no_such_tool"),
        done(),
    )
    task_id, head = await start(client, "loop", workspace)
    ask = await next_ask(client, task_id, head)
    assert ask.ask == Ask.MISTAKE_LIMIT_REACHED
    await client.respond_to_ask(task_id, ask.ts, "messageResponse", "read notes.md instead")
    events = await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert "same arguments 3 times" in tool_results(fake_openai, 3)[-1]
    assert "not valid JSON" in tool_results(fake_openai, 4)[-1]
    assert "no tool named" in tool_results(fake_openai, 5)[-1]
    guidance = [m for m in fake_openai.requests[5]["messages"] if m["role"] == "user"]
    assert "read notes.md instead" in json.dumps(guidance[-1])
    failed = [e for e in events if type(e.data).__name__ == "TaskToolFailed"]
    assert len(failed) >= 3


async def test_a_tool_running_at_kill_is_reported_after_resume(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(call("execute_command", command="echo partial; sleep 300"))
    async with connect(daemon.runtime_dir) as c:
        task_id, head = await start(c, "slow command", workspace, allowed_commands=["*"])
        await wait_for_said(c, task_id, head, "command_output", "partial")
    daemon.kill()
    daemon.start()
    fake_openai.script(done("recovered"))
    async with connect(daemon.runtime_dir) as c:
        snap = await c.get_task(task_id)
        assert snap.state == TaskState.RESUMABLE
        await c.resume_task(task_id)
        events = await collect_turn(c, task_id, snap.head_seq, until=(TaskCompleted,))
        assert isinstance(events[-1].data, TaskCompleted)
    result = tool_results(fake_openai, 1)[-1]
    assert "interrupted by a restart" in result and "partial" in result


async def test_an_approved_call_not_yet_started_runs_after_a_restart(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(call("write_to_file", path="w.txt", content="w"))
    async with connect(daemon.runtime_dir) as c:
        task_id, head = await start(c, "approve me", workspace)
        ask = await next_ask(c, task_id, head)
    # The ask waits; SIGTERM keeps it waiting across the restart.
    assert daemon.stop(signal.SIGTERM) == 0
    daemon.start()
    fake_openai.script(done("written"))
    async with connect(daemon.runtime_dir) as c:
        snap = await c.get_task(task_id)
        assert snap.pending_ask is not None and snap.pending_ask.ts == ask.ts
        await c.respond_to_ask(task_id, ask.ts, "yesButtonClicked")
        await collect_turn(c, task_id, snap.head_seq, until=(TaskCompleted,))
    assert (workspace / "w.txt").read_text() == "w"
