"""An ACP host for tests: the `agent-client-protocol` package's own client side,
talking to a real `hdsp acp` subprocess over stdio.

It records every `session/update`, lets a test wait for one, and hands each
`session/request_permission` to the test to answer. Like Zed, it takes down a
permission request whose tool call the agent reports as past pending (someone
else answered): the request then resolves as cancelled, and is counted as
withdrawn.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from acp import spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
)

from tests.support.cli_process import cli_env

__all__ = ["AcpHost", "PendingPermission", "agent_text", "run_hdsp_acp", "tool_updates"]


@dataclass
class PendingPermission:
    tool_call: ToolCallUpdate
    options: list[PermissionOption]
    chosen: str | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)
    #: The agent reported the tool call past pending before anyone chose here.
    withdrawn: bool = False

    def choose(self, option_id: str) -> None:
        self.chosen = option_id
        self.answered.set()


class AcpHost:
    def __init__(self) -> None:
        self.updates: list[Any] = []
        self._changed = anyio.Event()
        self.permissions: list[PendingPermission] = []

    # ---- the ACP client side -------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        if isinstance(update, ToolCallProgress) and update.status not in (None, "pending"):
            for p in self.permissions:
                if p.tool_call.tool_call_id == update.tool_call_id and p.chosen is None:
                    p.withdrawn = True
                    p.answered.set()
        self._changed.set()
        self._changed = anyio.Event()

    async def request_permission(
        self,
        options: list[PermissionOption],
        session_id: str,
        tool_call: ToolCallUpdate,
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        pending = PendingPermission(tool_call, options)
        self.permissions.append(pending)
        self._changed.set()
        self._changed = anyio.Event()
        await pending.answered.wait()
        if pending.chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=pending.chosen)
        )

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        pass

    # ---- for tests -----------------------------------------------------------

    async def wait_for(self, condition: Callable[[], bool], what: str = "") -> None:
        with anyio.fail_after(30):
            while not condition():
                await self._changed.wait()

    async def next_permission(self) -> PendingPermission:
        seen = len(self.permissions)
        await self.wait_for(lambda: len(self.permissions) > seen or _open(self.permissions))
        return _open(self.permissions) or self.permissions[-1]


def _open(permissions: list[PendingPermission]) -> PendingPermission | None:
    return next((p for p in permissions if not p.answered.is_set()), None)


def agent_text(updates: list[Any]) -> str:
    return "".join(
        u.content.text
        for u in updates
        if isinstance(u, AgentMessageChunk) and isinstance(u.content, TextContentBlock)
    )


def thought_text(updates: list[Any]) -> str:
    return "".join(
        u.content.text
        for u in updates
        if isinstance(u, AgentThoughtChunk) and isinstance(u.content, TextContentBlock)
    )


def tool_updates(updates: list[Any], call_id: str | None = None) -> list[Any]:
    return [
        u
        for u in updates
        if isinstance(u, (ToolCallStart, ToolCallProgress))
        and (call_id is None or u.tool_call_id == call_id)
    ]


@asynccontextmanager
async def run_hdsp_acp(
    host: AcpHost, runtime_dir: Path, state_dir: Path, stderr: Path
) -> AsyncIterator[tuple[ClientSideConnection, Any]]:
    """`hdsp acp` as a subprocess, connected to `host`; yields the connection
    and the process. Its stderr goes to `stderr`."""
    env = cli_env(runtime_dir, XDG_STATE_HOME=str(state_dir))
    async with await anyio.open_file(stderr, "ab") as err:
        async with spawn_agent_process(
            host,
            sys.executable,
            "-m",
            "hdsp.client",
            "acp",
            env=env,
            transport_kwargs={"stderr": err.wrapped.fileno()},
        ) as (conn, process):
            yield conn, process
