"""`hdsp` on a pseudo-terminal, as a person runs it, with the screen as the
terminal shows it: the bytes the CLI writes go through pyte, a terminal
emulator, so that redrawn lines replace what they redraw, as on a real screen.

The CLI is the session leader of its pty (its controlling terminal), so that
typing Ctrl-C sends it SIGINT the way a shell's terminal does.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

import pyte

__all__ = ["Terminal", "cli_env"]


def cli_env(runtime_dir: Path, term: str = "xterm-256color") -> dict[str, str]:
    return {
        "HDSP_RUNTIME_DIR": str(runtime_dir),
        "PATH": "/usr/bin:/bin",
        "NO_COLOR": "1",
        "TERM": term,
    }


def _take_terminal() -> None:
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """`hdsp ARGS` on a pty of `rows` x `cols`: its screen, and what a person types.

    As a context manager it closes on the way out (the CLI killed if it still runs)."""

    def __init__(
        self,
        runtime_dir: Path,
        *args: str,
        cwd: Path | None = None,
        rows: int = 200,
        cols: int = 120,
        term: str = "xterm-256color",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hdsp.client", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env={**cli_env(runtime_dir, term), **(env or {})},
            preexec_fn=_take_terminal,
        )
        os.close(slave)
        self.output = b""
        self.screen = pyte.Screen(cols, rows)
        self._stream = pyte.ByteStream(self.screen)
        self._closed = False

    # ---- reading ------------------------------------------------------------

    def _read(self, deadline: float) -> bool:
        """Read what the CLI wrote, until `deadline`; False once it closed the pty."""
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        ready, _, _ = select.select([self.master], [], [], left)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: the CLI closed the terminal
            chunk = b""
        if not chunk:
            self._closed = True
            return False
        self.output += chunk
        self._stream.feed(chunk)
        return True

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
        """Read until `condition()` holds (the CLI must not end first)."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"no {what} on the screen:\n{self.text}"
            assert self._read(deadline), f"hdsp ended before {what}:\n{self.text}"

    def wait_for_text(self, text: str, timeout: float = 60) -> None:
        """Read until the screen shows `text`."""
        self.wait_for(lambda: text in self.text, repr(text), timeout)

    def wait_for_output(self, marker: bytes, *, after: int = 0, timeout: float = 60) -> None:
        """Read until the bytes written since offset `after` hold `marker`."""
        self.wait_for(lambda: marker in self.output[after:], repr(marker), timeout)

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def ctrl_c(self) -> None:
        self.type("\x03")

    def finish(self, timeout: float = 60) -> int:
        """Read everything until the CLI exits; its exit code."""
        deadline = time.monotonic() + timeout
        while not self._closed:
            assert time.monotonic() < deadline, f"hdsp did not end:\n{self.text}"
            self._read(deadline)
        os.close(self.master)
        return self.proc.wait(30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if not self._closed:
            self._closed = True
            os.close(self.master)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---- the screen ---------------------------------------------------------

    @property
    def lines(self) -> list[str]:
        """The screen's lines as shown, without trailing blanks or empty lines."""
        lines = [line.rstrip() for line in self.screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    @property
    def text(self) -> str:
        return "\n".join(self.lines)
