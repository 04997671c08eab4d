"""MCP servers as the agent's tools (issue 23): their connections, kept by the
daemon (:class:`McpHub`), and their tools (`mcp__SERVER__TOOL`,
`access_mcp_resource`).

Imported with the engine (see :mod:`hdsp.daemon.app`): the `mcp` SDK is not
loaded before the daemon answers its first client.
"""

from __future__ import annotations

from .connection import McpConnection
from .hub import WORKSPACE_FILE, McpHub
from .tools import AccessMcpResource, McpTool, offered_name, result_from_mcp
from .trust import TrustStore, fingerprint

__all__ = [
    "WORKSPACE_FILE",
    "AccessMcpResource",
    "McpConnection",
    "McpHub",
    "McpTool",
    "TrustStore",
    "fingerprint",
    "offered_name",
    "result_from_mcp",
]
