"""`hdsp checkpoints`, `hdsp diff`, `hdsp restore` and the checkpoint lines of
`hdsp show`, the real CLI against a real daemon and real git."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from hdsp.client import Client
from hdsp.client.exit_codes import ExitCode
from tests.fakes.openai_server import FakeOpenAI
from tests.support.cli_process import run_hdsp
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn
from tests.support.scripted_turns import call, done, start

# Real git, a real daemon (two for the kill -9) and kernels: slow on a loaded machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


async def test_list_diff_restore_and_replay_from_the_command_line(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("one\n")
    # A nested repository: every command says it is not in checkpoints.
    (ws / "vendor").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    await anyio.run_process(["git", "init", "-q", str(ws / "vendor")], env=env)
    (ws / "vendor" / "v.py").write_text("V = 1\n")
    fake_openai.script(
        call("write_to_file", path="notes.md", content="two\x1b[31m\n"),
        call("execute_code", code="total = 40"),
        call("execute_code", code="total += 2"),
        done(),
    )
    task_id, head = await start(
        client, "edit", ws, always_allow_write=True, always_allow_execute=True
    )
    await collect_turn(client, task_id, head)
    short = task_id[:8]

    r = await run_hdsp(daemon.runtime_dir, "checkpoints", short)
    assert r.returncode == ExitCode.OK, r.stderr
    lines = r.stdout.splitlines()
    assert "before write_to_file" in lines[0] and "vendor/ is a git repository" in lines[1]
    assert lines[-1] == (
        "Not in checkpoints, nor restored (git repositories of their own): vendor/"
    )
    checkpoints = [line for line in lines if line.lstrip()[:1].isdigit()]
    assert [line.split()[0] for line in checkpoints] == ["1", "2", "3"]
    assert "changed: notes.md" in checkpoints[1]

    r = await run_hdsp(daemon.runtime_dir, "diff", short, "1", "2")
    assert r.returncode == ExitCode.OK, r.stderr
    assert "modified: notes.md" in r.stdout and "  -one" in r.stdout
    assert "\x1b" not in r.stdout and "+two\\x1b[31m" in r.stdout  # escaped
    assert "Not in checkpoints, not in this diff (git repositories of their own): vendor/" in (
        r.stdout
    )

    r = await run_hdsp(daemon.runtime_dir, "show", short)
    assert "checkpoint 1 saved" in r.stdout and "checkpoint 2 saved: 1 file(s) changed" in r.stdout

    r = await run_hdsp(daemon.runtime_dir, "restore", short, "3", "--with-kernel", "--yes")
    assert r.returncode == ExitCode.OK, r.stderr + r.stdout
    assert "--- execution 1" in r.stdout and "total = 40" in r.stdout  # the cells shown
    assert "files changed: none" in r.stdout
    assert "total: int = 40" in r.stdout
    assert f"to undo: hdsp restore {short} 4" in r.stdout

    r = await run_hdsp(daemon.runtime_dir, "restore", short, "1")
    assert r.returncode == ExitCode.OK, r.stderr
    assert (ws / "notes.md").read_text() == "one\n"
    assert "left as they are (git repositories of their own): vendor/" in r.stdout
    assert (ws / "vendor" / "v.py").read_text() == "V = 1\n"
    r = await run_hdsp(daemon.runtime_dir, "show", short)
    assert "restored checkpoint 1 (files)" in r.stdout
