"""Running the real `hdspd` as a subprocess for tests.

The daemon tells us it is ready the way it tells systemd: READY=1 on the datagram
socket named by NOTIFY_SOCKET, so no test polls or sleeps for it. Its stderr goes
to a file that is printed when a test fails.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from tests.support.server_process import ServerProcess

__all__ = ["DaemonProcess", "call_failed", "model_env", "short_tmp_dir"]


def short_tmp_dir() -> Path:
    """A fresh directory with a path short enough for Unix sockets (pytest's
    tmp_path can exceed the 107-byte limit)."""
    return Path(tempfile.mkdtemp(prefix="hdsp-", dir="/tmp"))


def model_env(base_url: str, model: str = "gpt-test") -> dict[str, str]:
    """The environment that points a daemon at the fake OpenAI-compatible
    server at `base_url`, for `model`, with a key that is not real."""
    return {
        "HDSP_BASE_URL": base_url,
        "HDSP_MODEL": model,
        "HDSP_API_KEY": "sk-test-not-a-real-key",
    }


#: What a test's daemon starts with unless the test writes its own settings: no
#: spare kernels (each task's start would start one beside the test, a second of
#: CPU each; tests/daemon/kernels/test_kernel_pool.py tests the pool).
_TEST_SETTINGS = {"version": 2, "kernels": {"pool_size": 0}}


class DaemonProcess(ServerProcess):
    def __init__(
        self, root: Path, env: Mapping[str, str] | None = None, *, cwd: Path | None = None
    ) -> None:
        super().__init__("hdspd", root / "hdspd.stderr")
        self.root = root
        #: The daemon's working directory (the test's own by default).
        self.cwd = cwd
        self.data_dir = root / "data"
        self.runtime_dir = root / "run"
        self.extra_env = dict(env or {})
        self._notify_path = root / "notify"
        self.starts = 0
        #: The PostgreSQL database the daemon's store is in (None: SQLite).
        self.store_url: str | None = None

    def use_store(self, url: str, *, secret: str | None = None) -> None:
        """Keep the daemon's store in the PostgreSQL database at `url`
        (``store.url`` in the settings file it starts with; `secret`: the name
        of the keyring secret with its password, ``store.secret``)."""
        self.store_url = url
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        store = {"url": url} if secret is None else {"url": url, "secret": secret}
        self._write_settings({**_TEST_SETTINGS, "store": store})

    def _write_settings(self, settings: Mapping[str, object]) -> None:
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.data_dir / "settings.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(settings))

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HDSP_", "NOTIFY_"))}
        env.update(
            HDSP_DATA_DIR=str(self.data_dir),
            HDSP_RUNTIME_DIR=str(self.runtime_dir),
            PYTHONUNBUFFERED="1",
            # Never the developer's own keyring: a file keyring under the test's root.
            PYTHON_KEYRING_BACKEND="keyrings.alt.file.PlaintextKeyring",
            XDG_DATA_HOME=str(self.root / "xdg-data"),
            # Never the developer's own global slash commands (~/.config/hdsp/commands).
            XDG_CONFIG_HOME=str(self.root / "xdg-config"),
        )
        env.update(self.extra_env)
        return env

    def start(
        self,
        *args: str,
        timeout: float = 20.0,
        preexec_fn: Callable[[], object] | None = None,
    ) -> None:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        if not (self.data_dir / "settings.json").exists():
            self._write_settings(_TEST_SETTINGS)  # (a test's own settings replace it)
        self._notify_path.unlink(missing_ok=True)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.bind(str(self._notify_path))
            env = self.env | {"NOTIFY_SOCKET": str(self._notify_path)}
            proc = self._spawn(
                [sys.executable, "-m", "hdsp.daemon", "--log-format", "json", *args],
                env=env,
                cwd=self.cwd,
                preexec_fn=preexec_fn,
            )
            self.starts += 1
            # Wait for READY=1 or for the daemon to exit (a refusal), whichever
            # comes first: a pidfd is readable once the process has ended.
            pidfd = os.pidfd_open(proc.pid)
            try:
                deadline = time.monotonic() + timeout
                while (left := deadline - time.monotonic()) > 0:
                    ready, _, _ = select.select([notify, pidfd], [], [], left)
                    if notify in ready:
                        if b"READY=1" in notify.recv(4096).split(b"\n"):
                            return
                    elif ready:
                        break  # exited before it was ready
            finally:
                os.close(pidfd)
            if left > 0:
                what = f"hdspd exited before it was ready (exit code {proc.wait(10)})"
            else:
                what = f"hdspd did not become ready in {timeout} s (exit code {proc.poll()})"
            raise AssertionError(f"{what}:\n{self.stderr()}")

    def wait_for_log(self, event: str, timeout: float = 30.0) -> None:
        """Wait until the daemon has logged `event` (a JSON log line's "event")."""
        needle = json.dumps({"event": event})[1:-1]
        deadline = time.monotonic() + timeout
        with open(self.stderr_path, "rb") as log:
            seen = b""
            while needle.encode() not in seen:
                chunk = log.read()
                if chunk:
                    seen = seen[-len(needle) :] + chunk
                    continue
                assert self.proc is not None and self.proc.poll() is None, self.stderr()
                assert time.monotonic() < deadline, f"no {event!r} in the log:\n{self.stderr()}"
                time.sleep(0.02)  # the file has no more yet: wait for the daemon to write

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Signal the daemon and wait for it to exit; returns its exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def wait(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def finish(self, *, show_log: bool) -> None:
        """End a test's daemon: stop it if it runs, print its log when the test
        failed (`show_log`) or the daemon would not stop, remove its files."""
        try:
            if self.proc is not None and self.proc.poll() is None:
                try:
                    self.stop()
                except subprocess.TimeoutExpired:
                    # The test fails with this, and no process outlives it (a
                    # Popen left running fails whichever test collects it).
                    self.proc.kill()
                    self.proc.wait()
                    show_log = True
                    raise
        finally:
            if show_log:
                print(f"---- hdspd stderr ----\n{self.stderr()}")
            self.cleanup()


def call_failed(request: object) -> bool:
    """Whether the test of a pytest `request` failed in its call (conftest's hook
    records the report as `rep_call`)."""
    report = getattr(getattr(request, "node", None), "rep_call", None)
    return report is not None and bool(report.failed)
