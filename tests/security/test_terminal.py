"""What an attacker's text can do to the terminal of a person using `hdsp`:
nothing. A scripted model (a prompt injection) asks to run a command that hides
itself behind escape sequences, and writes escape sequences (OSC 52 clipboard,
window title) into its text, a file and kernel output; the real CLI, on a real
pseudo-terminal or a pipe, shows them as visible text, and a bare Enter never
approves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.scripted_turns import call
from tests.support.terminal import Terminal, cli_env

pytestmark = pytest.mark.slow

SPOOF = "mv victim elsewhere # \x1b[2K\r  $ ls -la"
OSC52 = "\x1b]52;c;ZXZpbA==\x07"  # "set the clipboard to 'evil'"
TITLE = "\x1b]0;pwned\x07"  # "set the window title"


@pytest.fixture
def workspace(workspace: Path) -> Path:
    """The shared workspace, with a directory `victim` a spoofed command would move."""
    (workspace / "victim").mkdir()
    (workspace / "victim" / "data.csv").write_text("x\n1\n")
    return workspace


def test_a_spoofed_command_ask_shows_its_escapes_and_enter_does_not_approve(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(
        call("execute_command", command=SPOOF), call("attempt_completion", result="ok")
    )
    with Terminal(daemon.runtime_dir, "run", "tidy up", cwd=workspace, term="dumb") as term:
        prompt = b"es / [n]o"
        term.wait_for_output(prompt, timeout=30)
        asked = len(term.output)
        term.type("\n")  # a bare Enter
        term.wait_for_output(b"Enter alone does neither", after=asked, timeout=30)
        term.wait_for_output(prompt, after=asked, timeout=30)
        assert (workspace / "victim").is_dir() and not (workspace / "elsewhere").exists()
        term.type("n\n")
        assert term.finish() == 0, term.text
    assert (workspace / "victim").is_dir() and not (workspace / "elsewhere").exists()
    # The command shows whole, its escapes as text, with where it would run.
    printed = term.output.decode("utf-8", "replace")
    assert "$ mv victim elsewhere # \\x1b[2K\\r  $ ls -la" in printed
    assert f"ask: run a command in {workspace}" in printed
    assert b"\x1b" not in term.output  # not one raw ESC reached the terminal
    # The model was told the user said no.
    assert "denied" in json.dumps(fake_openai.requests[1]["messages"])


def test_osc_and_title_escapes_from_model_file_command_and_kernel_are_shown_escaped(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text(f"old line {OSC52}\n")
    code = "print('kernel says \\x1b]0;pwned\\x07 and \\x1b]52;c;ZXZpbA==\\x07')"
    fake_openai.script(
        FakeReply.text(f"Look {OSC52} and {TITLE}\u202e!") + call("read_file", path="notes.txt"),
        call("write_to_file", path="notes.txt", content="new line\n"),
        call("execute_command", command="printf '\\033]52;c;ZXZpbA==\\007 from sh\\n'"),
        call("execute_code", code=code),
        call("attempt_completion", result=f"done {TITLE}"),
    )
    env = cli_env(daemon.runtime_dir, term="dumb")

    def hdsp(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "hdsp.client", *args],
            env=env,
            cwd=workspace,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )

    run = hdsp("run", "--yes", "go")
    assert run.returncode == 0, run.stderr.decode()
    task_id = next(
        line.split()[1] for line in run.stderr.decode().splitlines() if line.startswith("task ")
    )
    show = hdsp("show", task_id)
    assert show.returncode == 0, show.stderr.decode()
    for result in (run, show):
        out = result.stdout.decode()
        assert b"\x1b" not in result.stdout + result.stderr, out
        assert "Look \\x1b]52;c;ZXZpbA==\\x07 and \\x1b]0;pwned\\x07\\u202e!" in out  # model
        assert "-old line \\x1b]52;c;ZXZpbA==\\x07" in out  # the file, in the write's diff
        assert "\\x1b]52;c;ZXZpbA==\\x07 from sh" in out  # command output
        assert "kernel says \\x1b]0;pwned\\x07 and \\x1b]52;c;ZXZpbA==\\x07" in out  # kernel
        assert "Result: done \\x1b]0;pwned\\x07" in out
    assert (workspace / "notes.txt").read_text() == "new line\n"
