"""`hdsp` loads only what the command it runs needs: the SDK of `hdsp acp` (over
half a second to import) and the live view's rich come with their commands."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support.daemon_process import DaemonProcess


def _imported(stderr: str) -> set[str]:
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", stderr, re.M))


def test_hdsp_tasks_loads_neither_the_acp_sdk_nor_rich(daemon: DaemonProcess) -> None:
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hdsp.client", "tasks"],
        env={"HDSP_RUNTIME_DIR": str(daemon.runtime_dir), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr
    loaded = _imported(r.stderr)
    assert "hdsp.client.acp.command" in loaded  # the parser's module, and the log read right
    assert not {"acp", "acp.schema", "hdsp.client.acp.agent", "rich", "pydantic"} & loaded
