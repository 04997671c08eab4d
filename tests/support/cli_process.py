"""Running the real `hdsp` CLI to its end, off a terminal, against a real
daemon: from async tests (`run_hdsp`) and from tests that are not async
(`run_hdsp_sync`, in an environment the test gives)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import anyio

__all__ = ["cli_env", "run_hdsp", "run_hdsp_sync"]


def cli_env(runtime_dir: Path, **extra: str) -> dict[str, str]:
    """The environment a user's shell would give `hdsp` (no colours, no CPR
    queries from prompt_toolkit, which a pty in a test never answers)."""
    env = {
        "HDSP_RUNTIME_DIR": str(runtime_dir),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "NO_COLOR": "1",
        "PROMPT_TOOLKIT_NO_CPR": "1",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    env.update(extra)
    return env


async def run_hdsp(
    runtime_dir: Path, *args: str, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    """`hdsp ARGS` to its end, not on a terminal; stdout and stderr as text."""
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [sys.executable, "-m", "hdsp.client", *args],
            input=stdin.encode(),
            env=cli_env(runtime_dir, **env),
            check=False,
        )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def run_hdsp_sync(
    env: Mapping[str, str],
    *args: str,
    cwd: Path | None = None,
    stdin: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """`hdsp ARGS` to its end in `env`, not on a terminal, `stdin` its input
    (none by default); stdout and stderr as text."""
    return subprocess.run(
        [sys.executable, "-m", "hdsp.client", *args],
        env=env,
        cwd=cwd,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
