"""What the tests' servers run as subprocesses (hdspd, Jupyter, the kernel
servers) have in common: one log file for stdout and stderr, printed when the
test fails, and a stop that ends in SIGKILL when SIGTERM is not enough."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

__all__ = ["ServerProcess"]


class ServerProcess:
    """A server a test runs as a subprocess; a subclass says how it starts.
    Leaving its `with` block stops it, and prints its log if the block raised."""

    #: Seconds it has to exit on SIGTERM before it is killed.
    stop_timeout = 30.0
    #: Start it in a session of its own, so that SIGKILL ends its children too.
    own_session = False

    def __init__(self, name: str, stderr_path: Path) -> None:
        #: What the banner over its printed log calls it.
        self.name = name
        #: Where its stdout and stderr go.
        self.stderr_path = stderr_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        raise NotImplementedError

    def _spawn(
        self, command: Sequence[str], *, env: Mapping[str, str], cwd: Path | None, **popen: Any
    ) -> subprocess.Popen[bytes]:
        """Run `command`, its output appended to the log, no stdin."""
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(
                command,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                start_new_session=self.own_session,
                **popen,
            )
        return self.proc

    def stderr(self) -> str:
        """Its log so far ("" before it has started)."""
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def terminate(self, timeout: float | None = None) -> None:
        """SIGTERM, and SIGKILL if it has not exited in `timeout` seconds
        (`stop_timeout` by default); nothing if it is not running."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(self.stop_timeout if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            if self.own_session:
                os.killpg(self.proc.pid, signal.SIGKILL)
            else:
                self.proc.kill()
            self.proc.wait()

    def finish(self, *, show_log: bool) -> None:
        """End a test's server: stop it, and print its log when the test
        failed (`show_log`)."""
        self.terminate()
        if show_log:
            print(f"---- {self.name} stderr ----\n{self.stderr()}")

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.terminate()
        if exc is not None:
            sys.stderr.write(f"---- {self.name} stderr ----\n{self.stderr()}\n")
