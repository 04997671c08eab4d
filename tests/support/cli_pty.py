"""`hdsp` on a pseudo-terminal driven by pexpect, as a person types at it:
start a command, type a line and wait for what it shows, wait for its end."""

from __future__ import annotations

import sys
from pathlib import Path

import pexpect

from tests.support.cli_process import cli_env
from tests.support.daemon_process import DaemonProcess

__all__ = ["ENTER", "PROMPT", "chat_at_prompt", "finish", "say", "spawn"]

ENTER = "\r"  # what the Enter key sends on a terminal
PROMPT = "you>"  # (prompt_toolkit draws the space after it by moving the cursor)


def spawn(daemon: DaemonProcess, *args: str, cwd: Path | None = None) -> pexpect.spawn:
    """`hdsp ARGS` on a terminal of 50 x 200."""
    return pexpect.spawn(
        sys.executable,
        ["-m", "hdsp.client", *args],
        env=cli_env(daemon.runtime_dir),
        cwd=str(cwd) if cwd else None,
        encoding="utf-8",
        codec_errors="replace",
        timeout=30,
        dimensions=(50, 200),
    )


def chat_at_prompt(daemon: DaemonProcess, *args: str, cwd: Path | None = None) -> pexpect.spawn:
    """`hdsp chat ARGS` on a terminal, once it shows its first prompt."""
    child = spawn(daemon, "chat", *args, cwd=cwd)
    child.expect_exact(PROMPT)
    return child


def finish(child: pexpect.spawn) -> int:
    """Wait for the command to end; its exit code (128+N for a signal)."""
    child.expect(pexpect.EOF)
    child.close()
    if child.signalstatus is not None:
        return 128 + int(child.signalstatus)
    return int(child.exitstatus)


def say(child: pexpect.spawn, line: str, *shown: str) -> None:
    """Type `line` and Enter, then wait for each of `shown` in turn."""
    child.send(line + ENTER)
    for text in shown:
        child.expect_exact(text)
