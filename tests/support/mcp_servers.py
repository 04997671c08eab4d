"""Real MCP servers for the MCP client's tests (issue 23).

- `mcp-server-time` and `mcp-server-git` (PyPI, dev dependencies): console
  scripts of this virtual environment.
- `@modelcontextprotocol/server-everything` (npm): pinned in
  tests/js-mcp-servers/package.json and installed on first use by `npm ci` from
  its committed lockfile (tests/support/npm_locked.py). Without node and npm the
  tests that need it fail, saying how to install them.
- :data:`BAD_SERVER`: a purpose-built MCP server (the SDK's own `MCPServer`)
  with a tool that kills its process in the middle of a call.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from tests.support.npm_locked import TESTS_DIR, install_locked

__all__ = [
    "BAD_SERVER",
    "JS_DIR",
    "everything_server",
    "free_port",
    "venv_script",
]

#: tests/js-mcp-servers: its package.json pins server-everything, its lockfile the rest.
JS_DIR = TESTS_DIR / "js-mcp-servers"

#: The purpose-built server: `python BAD_SERVER`.
BAD_SERVER = Path(__file__).with_name("mcp_bad_server.py")


def venv_script(name: str) -> str:
    path = Path(sys.prefix) / "bin" / name
    assert path.is_file(), f"{name} is not installed: pip install -e '.[dev]'"
    return str(path)


def everything_server() -> str:
    """The path of the `mcp-server-everything` executable, installed if need be."""
    modules = install_locked(JS_DIR, "the MCP client's tests run server-everything")
    return str(modules / ".bin" / "mcp-server-everything")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
