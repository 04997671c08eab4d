"""The MCP hub: every MCP server the daemon uses, in one task group.

Servers come from the settings (`mcp.servers`, every workspace) and from a
workspace's `.hdsp/mcp.json` (tasks in that workspace; a workspace server of the
same name wins). A server starts when a task first needs its tools (before the
task's next model request) or, with `autostart`, when hdspd starts; it is
restarted with backoff when it crashes; it stops when its configuration changes
or goes, and when hdspd stops. A workspace's servers start only once trusted
(:mod:`.trust`). Every change of a server's state is a daemon-wide
`mcpServerChanged` event.

The hub is the tool registry's source of MCP tools (:meth:`tools`,
:meth:`prepare`): a task is offered the tools of the servers of its workspace
that are connected.

A client may also offer one task servers of its own (an ACP host's, issue 24:
`OfferedMcpServer`): they are kept in memory only, for that task alone, beside
the configured servers (a configured server of the same name wins), and stop
when the task closes, when the client offers others, or when more than
`MAX_OFFERING_TASKS` tasks have offered servers (the least recently offered
go first).
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import anyio.abc
import structlog

from hdsp.daemon.config.mcp import McpServerDefinition, McpSettings, parse_servers
from hdsp.daemon.tools import Tool, ToolError
from hdsp.protocol import (
    Event,
    McpServerChanged,
    McpServerList,
    McpServerStatus,
    McpToolInfo,
    OfferedMcpServer,
)

from .connection import McpConnection, SecretLookup, ServerKey, load_sdk
from .tools import AccessMcpResource, McpTool, make_mcp_tool
from .trust import TrustStore, fingerprint

__all__ = ["MAX_OFFERING_TASKS", "WORKSPACE_FILE", "McpHub"]

log = structlog.get_logger("hdsp.mcp")

#: A workspace's MCP servers, relative to the workspace.
WORKSPACE_FILE = Path(".hdsp") / "mcp.json"
#: The largest workspace file read (a hand-written configuration is far smaller).
MAX_WORKSPACE_FILE_BYTES = 256 * 1024

#: Tasks whose offered servers are kept at once (each may run its own processes).
MAX_OFFERING_TASKS = 16


class _Found:
    """A server configured for a workspace (or offered to a task), and whether it
    may run."""

    def __init__(
        self,
        key: ServerKey,
        definition: McpServerDefinition,
        *,
        trusted: bool,
        offered: tuple[str, str] | None = None,
    ) -> None:
        self.key = key
        self.definition = definition
        self.trusted = trusted
        #: Offered to a task: (its id, its workspace).
        self.offered = offered


def _offered_definition(server: OfferedMcpServer) -> McpServerDefinition:
    if server.command is not None:
        return McpServerDefinition(command=server.command, args=server.args, env=server.env)
    return McpServerDefinition(type="http", url=server.url, headers=server.headers)


class McpHub:
    def __init__(
        self,
        settings: Callable[[], McpSettings],
        *,
        secrets: SecretLookup,
        emit: Callable[[Event], Awaitable[None]],
        trust_file: Path,
    ) -> None:
        self._settings = settings
        self._secrets = secrets
        self._emit = emit
        self._trust = TrustStore(trust_file)
        self._connections: dict[ServerKey, McpConnection] = {}
        self._tool_cache: dict[ServerKey, tuple[int, list[McpTool]]] = {}
        #: Workspace file contents by workspace: (stat signature, servers, error).
        self._files: dict[
            str, tuple[tuple[int, int], dict[str, McpServerDefinition], str | None]
        ] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._resource_tool = AccessMcpResource(self._connection_for_resource)
        #: Servers clients offered tasks, by task id: (the task's workspace, the
        #: servers by name), the most recently offered last. Never written down.
        self._offered: OrderedDict[str, tuple[str, dict[str, McpServerDefinition]]] = OrderedDict()

    # ---- lifetime ---------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            self.apply_settings()
            await anyio.sleep_forever()

    def warm(self) -> None:
        """Import the `mcp` SDK now if the settings name a server (blocking: on a
        worker thread, with the provider SDKs, before the start-up's objects are
        frozen); else the first connection imports it (see `load_sdk`)."""
        if any(d.is_enabled for d in self._settings().servers.values()):
            load_sdk()

    async def aclose(self) -> None:
        """Stop every server (their processes end with them)."""
        for connection in self._connections.values():
            connection.stop()
        self._connections.clear()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    def apply_settings(self) -> None:
        """The settings changed: stop global servers whose definition changed or
        went; start the ones marked `autostart`."""
        configured = self._settings().servers
        for key, connection in list(self._connections.items()):
            if key[0] is None and configured.get(key[1]) != connection.definition:
                self._drop(key)
        for name, definition in configured.items():
            if definition.is_enabled and definition.autostart:
                self._connection(_Found((None, name), definition, trusted=True)).start()

    # ---- what a workspace has -----------------------------------------------------------

    @staticmethod
    def _workspace_key(workspace: str | os.PathLike[str]) -> str:
        return os.path.realpath(workspace)

    def _workspace_file(self, workspace: str) -> tuple[dict[str, McpServerDefinition], str | None]:
        path = Path(workspace) / WORKSPACE_FILE
        try:
            # Non-blocking: a FIFO put there opens at once (and is refused below)
            # instead of holding the daemon until something writes to it.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            self._files.pop(workspace, None)
            return {}, None
        except OSError as exc:
            return {}, f"{path}: {exc.strerror or exc}"
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(fd)
            signature = (info.st_mtime_ns, info.st_size)
            cached = self._files.get(workspace)
            if cached is not None and cached[0] == signature:
                return cached[1], cached[2]
            servers: dict[str, McpServerDefinition] = {}
            error: str | None = None
            try:
                document = json.loads(_read_bounded(file, info, path, workspace))
                if not isinstance(document, dict):
                    raise ValueError("it must hold a JSON object with `mcpServers`")
                servers = parse_servers(document)
            except (OSError, ValueError) as exc:
                error = f"{path} was not used: {exc}"
                log.warning("workspace mcp.json unusable", path=str(path), error=str(exc))
        self._files[workspace] = (signature, servers, error)
        return servers, error

    def _found(
        self, workspace: str | None, task_id: str | None = None
    ) -> tuple[dict[str, _Found], str | None]:
        """The servers a task in `workspace` has, by name (with `task_id`, the
        ones offered to that task too)."""
        found = {
            name: _Found((None, name), definition, trusted=True)
            for name, definition in self._settings().servers.items()
        }
        error = None
        if workspace is not None:
            ws = self._workspace_key(workspace)
            servers, error = self._workspace_file(ws)
            for name, definition in servers.items():
                trusted = self._trust.is_trusted(ws, name, definition)
                found[name] = _Found((ws, name), definition, trusted=trusted)
        offered = self._offered.get(task_id) if task_id is not None else None
        if task_id is not None and offered is not None:
            task_ws, servers = offered
            for name, definition in servers.items():
                if name not in found:  # (a configured server of that name wins)
                    found[name] = _Found(
                        (f"task:{task_id}", name),
                        definition,
                        trusted=True,
                        offered=(task_id, task_ws),
                    )
        return found, error

    # ---- servers offered to a task -------------------------------------------------------

    def offer(self, task_id: str, workspace: str, servers: Sequence[OfferedMcpServer]) -> None:
        """`servers` are what a client offers the task `task_id` now (in place of
        what it offered before); they start when the task next needs its tools."""
        definitions = {s.name: _offered_definition(s) for s in servers}
        self._withdraw(task_id, keep=definitions)
        if not definitions:
            return
        self._offered[task_id] = (str(workspace), definitions)
        while len(self._offered) > MAX_OFFERING_TASKS:
            oldest = next(iter(self._offered))
            log.info("mcp servers offered to a task dropped: too many tasks", task_id=oldest)
            self._withdraw(oldest)

    def forget_task(self, task_id: str) -> None:
        """The task closed: its offered servers stop."""
        self._withdraw(task_id)

    def _withdraw(self, task_id: str, keep: dict[str, McpServerDefinition] | None = None) -> None:
        """Stop the servers offered to `task_id`, except those `keep` has as they are."""
        before = self._offered.pop(task_id, None)
        if before is None:
            return
        for name, definition in before[1].items():
            if keep is None or keep.get(name) != definition:
                self._drop((f"task:{task_id}", name))

    def _connection(self, found: _Found) -> McpConnection:
        """The connection of `found` (a new one if its definition changed)."""
        connection = self._connections.get(found.key)
        if connection is not None and connection.definition == found.definition:
            return connection
        if connection is not None:
            self._drop(found.key)
        connection = McpConnection(
            found.key,
            found.definition,
            secrets=self._secrets,
            on_change=self._changed,
            offered=found.offered,
        )
        self._connections[found.key] = connection
        assert self._tg is not None, "the MCP hub is not running"
        self._tg.start_soon(connection.run)
        return connection

    def _drop(self, key: ServerKey) -> None:
        connection = self._connections.pop(key, None)
        self._tool_cache.pop(key, None)
        if connection is not None:
            connection.stop()

    def _runnable(self, workspace: str | None, task_id: str | None = None) -> list[McpConnection]:
        found, _ = self._found(workspace, task_id)
        return [
            self._connection(f) for f in found.values() if f.definition.is_enabled and f.trusted
        ]

    # ---- the tool registry's source -------------------------------------------------------

    async def prepare(self, workspace: Path, task_id: str | None = None) -> None:
        """Start the servers a task in `workspace` has (with `task_id`, the ones
        offered to it too), and wait (each up to its startup timeout) until each
        is connected or failed."""
        if self._tg is None:
            return
        connections = self._runnable(str(workspace), task_id)
        if connections:
            # Each startup timeout counts from when the SDK is loaded (see
            # McpConnection._connected): so does the wait, or a first import on a
            # loaded machine outlasts it (CI: a server still `connecting`).
            await anyio.to_thread.run_sync(load_sdk)
        for connection in connections:
            connection.start()

        async def settle(connection: McpConnection) -> None:
            with anyio.move_on_after(connection.definition.startup_timeout + 1):
                await connection.wait_settled()

        async with anyio.create_task_group() as tg:
            for connection in connections:
                tg.start_soon(settle, connection)

    def tools(self, workspace: Path, task_id: str | None = None) -> Sequence[Tool]:
        """The tools of the connected servers a task in `workspace` has (with
        `task_id`, the ones offered to it too)."""
        if self._tg is None or not self._connections:
            # No server runs: no tools, and no workspace file to read (asked for
            # several times a turn; `prepare` reads it before each request).
            return []
        found, _ = self._found(str(workspace), task_id)
        tools: list[Tool] = []
        any_resources = False
        for f in found.values():
            connection = self._connections.get(f.key)
            if (
                connection is None
                or connection.definition != f.definition
                or not f.trusted
                or not f.definition.is_enabled
                or connection.state != "connected"
            ):
                continue
            tools += self._tools_of(connection)
            # (An offered server's resources are not offered: access_mcp_resource
            # finds servers by workspace, and an offered one is the task's own.)
            any_resources = any_resources or (bool(connection.resources) and not f.offered)
        if any_resources:
            tools.append(self._resource_tool)
        return tools

    def _tools_of(self, connection: McpConnection) -> list[McpTool]:
        cached = self._tool_cache.get(connection.key)
        if cached is not None and cached[0] == connection.tools_version:
            return cached[1]
        import jsonschema  # (imported by the warm-up, or the first tool call's check)

        allowed = set(connection.definition.always_allow)
        made: list[McpTool] = []
        seen: set[str] = set()
        for tool in connection.tools:
            schema = tool.input_schema or {"type": "object"}
            try:
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as exc:
                log.warning(
                    "mcp tool skipped: its input schema is invalid",
                    server=connection.name,
                    tool=tool.name,
                    error=exc.message,
                )
                continue
            made_tool = make_mcp_tool(
                connection, tool, always_allow=tool.name in allowed or "*" in allowed
            )
            if made_tool.name in seen:
                continue
            seen.add(made_tool.name)
            made.append(made_tool)
        self._tool_cache[connection.key] = (connection.tools_version, made)
        return made

    async def _connection_for_resource(self, workspace: Path, server: str) -> McpConnection:
        found, _ = self._found(str(workspace))
        f = found.get(server)
        if f is None:
            names = ", ".join(sorted(found)) or "none"
            raise ToolError(f"There is no MCP server named {server!r} (the servers: {names}).")
        if not f.definition.is_enabled or not f.trusted:
            raise ToolError(f"The MCP server {server!r} is disabled or not trusted.")
        return self._connection(f)

    # ---- commands -------------------------------------------------------------------------

    def status(self, f: _Found) -> McpServerStatus:
        d = f.definition
        base: dict[str, Any] = {
            "name": f.key[1],
            "scope": "global" if f.key[0] is None else "workspace",
            "workspace": f.key[0],
            "transport": d.transport,
            **_configured(d),
        }
        if f.offered is not None:
            base.update(scope="task", workspace=None, task_id=f.offered[0])
        connection = self._connections.get(f.key)
        if connection is not None and connection.definition != d:
            connection = None
        if not d.is_enabled:
            return McpServerStatus(state="disabled", target=_target(d), **base)
        if not f.trusted:
            return McpServerStatus(
                state="untrusted",
                target=_target(d),
                error=(
                    f"a server of {f.key[0]}/{WORKSPACE_FILE}: check what it runs, then "
                    f"trust it with `hdsp mcp trust {f.key[1]}` in that workspace"
                ),
                **base,
            )
        if connection is None:
            return McpServerStatus(state="stopped", target=_target(d), **base)
        return self._connection_status(connection)

    def _connection_status(self, connection: McpConnection) -> McpServerStatus:
        d = connection.definition
        tools = [
            McpToolInfo(
                name=t.tool_name,
                offered_as=t.name,
                description=t.description.split("] ", 1)[-1],
                always_allow=t.always_allowed,
            )
            for t in (self._tools_of(connection) if connection.state == "connected" else [])
        ]
        return McpServerStatus(
            name=connection.name,
            scope=(
                "task"
                if connection.offered is not None
                else "global"
                if connection.workspace is None
                else "workspace"
            ),
            workspace=connection.workspace,
            task_id=connection.offered[0] if connection.offered is not None else None,
            transport=d.transport,
            state=connection.state,
            error=connection.error,
            target=connection.target(),
            server_info=connection.server_info,
            tools=tools,
            resources=len(connection.resources),
            restarts=connection.restarts,
            retry_in_seconds=connection.retry_in,
            **_configured(d),
        )

    async def _changed(self, connection: McpConnection) -> None:
        if self._connections.get(connection.key) is not connection:
            return
        status = self._connection_status(connection)
        log.info(
            "mcp server state",
            server=connection.name,
            workspace=connection.workspace,
            state=connection.state,
            error=connection.error,
        )
        await self._emit(McpServerChanged(payload=(status,)))

    async def list(self, workspace: str | None, *, start: bool = False) -> McpServerList:
        if start and workspace is not None:
            await self.prepare(Path(workspace))
        elif start:
            for connection in self._runnable(None):
                connection.start()
        ws = None if workspace is None else self._workspace_key(workspace)
        found, error = self._found(ws)
        return McpServerList(
            servers=[self.status(f) for _, f in sorted(found.items())], config_error=error
        )

    def _find(self, name: str, workspace: str | None) -> _Found:
        found, error = self._found(None if workspace is None else self._workspace_key(workspace))
        f = found.get(name)
        if f is None:
            names = ", ".join(sorted(found)) or "none are configured"
            extra = f" ({error})" if error else ""
            raise KeyError(
                f"There is no MCP server named {name!r} here (the servers: {names}){extra}."
            )
        return f

    async def restart(self, name: str, workspace: str | None) -> McpServerStatus:
        """Raises KeyError (unknown) or ValueError (disabled, untrusted)."""
        f = self._find(name, workspace)
        if not f.definition.is_enabled:
            raise ValueError(f"The MCP server {name!r} is disabled in its configuration.")
        if not f.trusted:
            raise ValueError(f"The MCP server {name!r} is not trusted: `hdsp mcp trust {name}`.")
        connection = self._connection(f)
        connection.restart()
        with anyio.move_on_after(f.definition.startup_timeout + 1):
            await connection.wait_settled()
        return self.status(f)

    async def trust(
        self, name: str, workspace: str, trusted: bool, expected: str | None = None
    ) -> McpServerStatus:
        """Raises KeyError (no such workspace server) or ValueError (its entry is
        no longer the one whose digest is `expected`)."""
        ws = self._workspace_key(workspace)
        servers, error = self._workspace_file(ws)
        definition = servers.get(name)
        if definition is None:
            extra = f" ({error})" if error else ""
            raise KeyError(f"{ws}/{WORKSPACE_FILE} has no server named {name!r}{extra}.")
        if trusted and expected is not None and fingerprint(definition) != expected:
            raise ValueError(
                f"The entry of {name!r} in {ws}/{WORKSPACE_FILE} changed since it was shown: "
                "nothing was trusted. Check it again (`hdsp mcp trust` shows it)."
            )
        self._trust.set(ws, name, definition, trusted)
        f = _Found((ws, name), definition, trusted=trusted)
        if not trusted:
            self._drop(f.key)
            return self.status(f)
        if definition.is_enabled:
            connection = self._connection(f)
            connection.start()
            with anyio.move_on_after(definition.startup_timeout + 1):
                await connection.wait_settled()
        return self.status(f)


def _read_bounded(file: BinaryIO, info: os.stat_result, path: Path, workspace: str) -> bytes:
    """A workspace's mcp.json as it was opened: a regular file inside the
    workspace (a link may lead anywhere: to the user's files, or to a device that
    never ends), of at most MAX_WORKSPACE_FILE_BYTES; ValueError says why not."""
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("it is not a regular file")
    opened = os.path.realpath(f"/proc/self/fd/{file.fileno()}")
    if not os.path.exists(opened):  # no /proc: the name, resolved now
        opened = os.path.realpath(path)
    if not Path(opened).is_relative_to(os.path.realpath(workspace)):
        raise ValueError(f"it leads out of the workspace (to {opened})")
    data = file.read(MAX_WORKSPACE_FILE_BYTES + 1)
    if len(data) > MAX_WORKSPACE_FILE_BYTES:
        raise ValueError(f"it is larger than {MAX_WORKSPACE_FILE_BYTES // 1024} KiB")
    return data


def _configured(d: McpServerDefinition) -> dict[str, Any]:
    """What a server's status says of its configuration besides its target."""
    return {
        "cwd": d.cwd,
        "env_names": sorted(d.env),
        "header_names": sorted(d.headers),
        "secrets": sorted(set(d.secrets())),
        "always_allow": list(d.always_allow),
        "fingerprint": fingerprint(d),
    }


def _target(d: McpServerDefinition) -> str:
    return shlex.join([d.command, *d.args]) if d.command is not None else d.url or ""
