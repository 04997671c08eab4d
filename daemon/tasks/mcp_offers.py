"""MCP servers a client offers a task (StartNewTask, SendMessage): checked here,
then handed to the daemon's MCP hub, which runs them for that task."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from hdsp.daemon.errors import BadRequest, NotServed
from hdsp.protocol import OfferedMcpServer

__all__ = ["MAX_OFFERED_MCP_SERVERS", "McpOffers", "offer_mcp"]

#: The most MCP servers a client may offer one task.
MAX_OFFERED_MCP_SERVERS = 16


class McpOffers(Protocol):
    """Where MCP servers a client offers a task go (the daemon's MCP hub)."""

    def offer(self, task_id: str, workspace: str, servers: Sequence[OfferedMcpServer]) -> None: ...

    def forget_task(self, task_id: str) -> None: ...


def offer_mcp(
    offers: McpOffers | None,
    task_id: str,
    workspace: str,
    servers: Sequence[OfferedMcpServer] | None,
) -> None:
    """The MCP servers a client offers the task now (None: it says nothing), to
    `offers` (None: the daemon runs no MCP servers)."""
    if servers is None:
        return
    if len(servers) > MAX_OFFERED_MCP_SERVERS:
        raise BadRequest(
            f"{len(servers)} MCP servers offered: a task takes at most {MAX_OFFERED_MCP_SERVERS}.",
        )
    if len({s.name for s in servers}) < len(servers):
        raise BadRequest("Two offered MCP servers share a name.")
    if offers is None:
        if servers:
            raise NotServed("This daemon runs no MCP servers.")
        return
    offers.offer(task_id, workspace, servers)
