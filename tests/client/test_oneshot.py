"""The one-shot request (`hdsp tasks`' synchronous path) against a real daemon:
the same answer as the async client's, the daemon's refusals as CommandFailed,
and the async client's messages when there is no daemon or it does not answer."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from hdsp.client import CommandFailed, DaemonNotRunning, connect
from hdsp.client.oneshot import local_daemon, request_once
from hdsp.protocol import ErrorCode, ListTasks, ListTasksData, TaskList
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn


async def test_the_answer_is_the_async_clients(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(FakeReply.text("done"))
    async with connect(daemon.runtime_dir, name="test") as client:
        head = (await client.status()).head_seq
        ref = await client.start_task("one task", workspace=tmp_path)
        await collect_turn(client, ref.task_id, head)
        expected = await client.list_tasks(limit=5)
    got = request_once(ListTasks(data=ListTasksData(limit=5)), daemon.runtime_dir)
    assert isinstance(got, TaskList)
    assert [t.id for t in got.tasks] == [ref.task_id]
    assert got == expected


def test_a_refused_command_raises_the_daemons_error(daemon: DaemonProcess) -> None:
    with pytest.raises(CommandFailed) as refused:
        request_once(ListTasks(data=ListTasksData(limit=5000)), daemon.runtime_dir)
    assert refused.value.code == ErrorCode.INVALID_REQUEST


def test_no_daemon_and_an_unanswered_handshake_say_what_to_do(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    with pytest.raises(DaemonNotRunning, match="Start it with `hdspd`"):
        request_once(ListTasks(data=ListTasksData()), tmp_path)
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGSTOP)  # alive, listening, not answering
    try:
        with pytest.raises(DaemonNotRunning, match="did not answer the handshake"):
            request_once(ListTasks(data=ListTasksData()), daemon.runtime_dir, timeout=0.5)
    finally:
        daemon.proc.send_signal(signal.SIGCONT)


def test_a_remote_goes_through_the_async_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HDSP_REMOTE", raising=False)
    assert local_daemon(None, None) and local_daemon("/run/x", None)
    assert not local_daemon(None, "lab")
    monkeypatch.setenv("HDSP_REMOTE", "lab")
    assert not local_daemon(None, None) and local_daemon("/run/x", None)
