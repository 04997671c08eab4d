"""The `hdsp` CLI as a user runs it: a real process against a real daemon."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.cli_process import run_hdsp_sync
from tests.support.daemon_process import DaemonProcess


def hdsp(daemon_runtime: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {"HDSP_RUNTIME_DIR": str(daemon_runtime), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    return run_hdsp_sync(env, *args, timeout=timeout)


def test_run_streams_the_reply_and_exits_0(daemon: DaemonProcess, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.reasoning("hmm") + FakeReply.text("Forty-two.", chunk_size=2))
    r = hdsp(daemon.runtime_dir, "run", "What is the answer?")
    assert r.returncode == 0, r.stderr
    assert "> What is the answer?" in r.stdout
    assert "thinking: hmm" in r.stdout
    assert "Forty-two." in r.stdout
    assert "tokens:" in r.stderr


def test_tasks_show_send_cancel_and_events(daemon: DaemonProcess, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.text("first"), FakeReply.text("second"))
    r = hdsp(daemon.runtime_dir, "run", "--detach", "Start something")
    assert r.returncode == 0, r.stderr
    task_id = r.stdout.strip()
    assert len(task_id) == 36

    r = hdsp(daemon.runtime_dir, "send", task_id[:8], "and more")
    assert r.returncode == 0, r.stderr
    assert "second" in r.stdout

    r = hdsp(daemon.runtime_dir, "tasks")
    assert r.returncode == 0 and task_id[:8] in r.stdout and "Start something" in r.stdout

    r = hdsp(daemon.runtime_dir, "show", task_id[:6])
    assert r.returncode == 0, r.stderr
    assert (
        r.stdout.index("> Start something")
        < r.stdout.index("first")
        < r.stdout.index("> and more")
        < r.stdout.index("second")
    )

    r = hdsp(daemon.runtime_dir, "--json", "show", task_id)
    assert json.loads(r.stdout)["item"]["id"] == task_id

    r = hdsp(daemon.runtime_dir, "cancel", task_id)
    assert r.returncode == 0 and "completed" in r.stdout

    r = hdsp(daemon.runtime_dir, "events", "--task", task_id)
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert lines[0]["data"]["eventName"] == "taskCreated"
    seqs = [line["seq"] for line in lines]
    assert seqs == sorted(seqs)

    r = hdsp(daemon.runtime_dir, "--json", "daemon", "status")
    assert json.loads(r.stdout)["tasksTotal"] == 1


def test_errors_are_clear(daemon: DaemonProcess, tmp_path: Path) -> None:
    r = hdsp(daemon.runtime_dir, "show", "no-such-task")
    assert r.returncode == 2 and "No task id starts with" in r.stderr
    r = hdsp(daemon.runtime_dir, "run", "--profile", "nope", "hi")
    assert r.returncode == 2 and "No provider profile named 'nope'" in r.stderr
    r = hdsp(daemon.runtime_dir, "run", "--workspace", str(tmp_path / "missing"), "hi")
    assert r.returncode == 2 and "is not a directory" in r.stderr
    r = hdsp(tmp_path, "tasks")
    assert r.returncode == 3 and "hdspd is not running" in r.stderr


def test_run_reports_a_failed_request(daemon: DaemonProcess, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.status(401))
    r = hdsp(daemon.runtime_dir, "run", "hi")
    assert r.returncode == 4  # it waits for an answer: retry or not
    # Why, in the history on stdout (as `hdsp show` has it); that it failed, on stderr.
    assert "error:" in r.stdout and "API key" in r.stdout
    assert "The model request failed" in r.stderr


@pytest.mark.parametrize("action", ["stop"])
def test_daemon_stop(daemon: DaemonProcess, action: str) -> None:
    r = hdsp(daemon.runtime_dir, "daemon", action)
    assert r.returncode == 0
    assert daemon.wait() == 0


def _write_call(path: str) -> FakeReply:
    from tests.fakes.openai_server import ToolCall

    return FakeReply.tool_calls(
        [ToolCall("write_to_file", json.dumps({"path": path, "content": "hi\n"}))]
    )


def _done() -> FakeReply:
    from tests.fakes.openai_server import ToolCall

    return FakeReply.tool_calls([ToolCall("attempt_completion", '{"result": "ok"}')])


def test_auto_approve_runs_unattended(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(_write_call("a.txt"), _done())
    r = hdsp(
        daemon.runtime_dir, "run", "--workspace", str(tmp_path), "--auto-approve", "write", "go"
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "a.txt").read_text() == "hi\n"
    assert "Result: ok" in r.stdout
    r = hdsp(daemon.runtime_dir, "run", "--auto-approve", "writes", "go")
    assert r.returncode == 2 and "unknown kind writes" in r.stderr


def test_a_script_answers_an_approval(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(_write_call("b.txt"), _done())
    # Not on a terminal: `hdsp run` stops at the approval, says how to answer,
    # and exits with the code of a task that waits (ExitCode.WAITING).
    r = hdsp(daemon.runtime_dir, "run", "--workspace", str(tmp_path), "write b")
    assert r.returncode == 4 and "hdsp answer" in r.stderr
    task = r.stderr.split("task ", 1)[1].split()[0]
    # A bare answer approves nothing: approving takes --yes.
    r = hdsp(daemon.runtime_dir, "answer", task[:8])
    assert r.returncode == 2 and "Say --yes to approve" in r.stderr
    assert not (tmp_path / "b.txt").exists()
    r = hdsp(daemon.runtime_dir, "answer", task[:8], "--yes")
    assert r.returncode == 0, r.stderr
    r = hdsp(daemon.runtime_dir, "attach", task[:8])
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "b.txt").exists()
    r = hdsp(daemon.runtime_dir, "answer", task[:8], "--no")
    assert r.returncode == 2 and "waits on no ask" in r.stderr
