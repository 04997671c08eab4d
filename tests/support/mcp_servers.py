"""Real MCP servers for the MCP client's tests (issue 23).

- `mcp-server-time` and `mcp-server-git` (PyPI, dev dependencies): console
  scripts of this virtual environment.
- `@modelcontextprotocol/server-everything` (npm): installed on first use with
  `npm install --prefix` into the test cache in the virtual environment
  (`<venv>/hdsp-test-cache/server-everything-<version>`), at a pinned version.
  Without npm the tests that need it are skipped, saying so; a failed install
  fails them with npm's output.
- :data:`BAD_SERVER`: a purpose-built MCP server (the SDK's own `MCPServer`)
  with a tool that kills its process in the middle of a call.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

__all__ = [
    "BAD_SERVER",
    "EVERYTHING_VERSION",
    "everything_server",
    "free_port",
    "venv_script",
]

EVERYTHING_VERSION = "2026.8.31"

#: The purpose-built server: `python BAD_SERVER`.
BAD_SERVER = Path(__file__).with_name("mcp_bad_server.py")


def venv_script(name: str) -> str:
    path = Path(sys.prefix) / "bin" / name
    assert path.is_file(), f"{name} is not installed: pip install -e '.[dev]'"
    return str(path)


def everything_server() -> str:
    """The path of the `mcp-server-everything` executable, installed if need be."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip(
            "npm and node are needed to install @modelcontextprotocol/server-everything "
            "(apt-get install nodejs npm)"
        )
    root = Path(sys.prefix) / "hdsp-test-cache" / f"server-everything-{EVERYTHING_VERSION}"
    binary = root / "node_modules" / ".bin" / "mcp-server-everything"
    if binary.exists():
        return str(binary)
    root.mkdir(parents=True, exist_ok=True)
    command = [
        npm,
        "install",
        "--prefix",
        str(root),
        "--no-audit",
        "--no-fund",
        f"@modelcontextprotocol/server-everything@{EVERYTHING_VERSION}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0 or not binary.exists():
        raise AssertionError(
            f"`{' '.join(command)}` exited {done.returncode}:\n{done.stderr.strip()[-2000:]}"
        )
    return str(binary)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
