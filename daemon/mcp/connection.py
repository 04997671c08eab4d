"""One MCP server, kept connected: started in the hub's task group, watched,
restarted with backoff when it crashes or its connection breaks, stopped with
its scope.

The runner (:meth:`McpConnection.run`) owns the transport (a process over
stdio, or a Streamable HTTP session) and the SDK's ``ClientSession``; tasks call
tools through :meth:`McpConnection.call_tool`, which uses the live session and
turns what can go wrong into a :class:`~hdsp.daemon.tools.ToolError` the model
can read. The server's stderr goes to hdspd's log, line by line.
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
import anyio.abc
import anyio.to_thread
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from hdsp.daemon import __version__
from hdsp.daemon.config.mcp import SECRET_REFERENCE, McpServerDefinition
from hdsp.daemon.tools import ToolError

if TYPE_CHECKING:
    import mcp.types as mcp_types
    from mcp import ClientSession
    from mcp.shared.dispatcher import ProgressFnT
    from mcp.shared.exceptions import MCPError
    from mcp.shared.message import SessionMessage

__all__ = ["MAX_ATTEMPTS", "McpConnection", "SecretLookup", "ServerKey", "load_sdk"]

log = structlog.get_logger("hdsp.mcp")

#: (workspace, None for the settings' servers or `task:<id>` for a task's offered
#: ones; server name).
ServerKey = tuple[str | None, str]

#: Looks a keyring secret up by name (None: not set).
SecretLookup = Callable[[str], Awaitable[str | None]]

#: Seconds before the first restart; doubled after each failed attempt, up to the cap.
BACKOFF_START = 1.0
BACKOFF_CAP = 60.0
#: Failed attempts in a row (never connected in between) before hdsp stops trying.
MAX_ATTEMPTS = 5
#: A connection that lived this long resets the backoff when it ends.
HEALTHY_SECONDS = 60.0
#: Seconds between two refreshes of a server's lists (list-changed notifications).
REFRESH_INTERVAL = 1.0
#: A line of a server's stderr kept in the log, at most.
STDERR_LINE_CHARS = 2000

State = Literal["stopped", "connecting", "connected", "failed"]

_Result = TypeVar("_Result")
_Item = TypeVar("_Item")


def load_sdk() -> None:
    """Import the `mcp` SDK (blocking: about half a second of CPU, more on a busy
    machine) and httpx2, which this module otherwise imports only inside its
    methods: a runner calls it on a worker thread before its first connection, so
    a daemon whose tasks use no MCP server never loads the SDK, and the engine
    (which imports this module) is ready that much sooner."""
    import httpx2  # noqa: F401
    import mcp.client.stdio
    import mcp.client.streamable_http
    import mcp.shared.exceptions
    import mcp.types  # noqa: F401


class _ConnectionEnded(Exception):
    """The live connection ended (the server exited, the HTTP session broke)."""


class McpConnection:
    def __init__(
        self,
        key: ServerKey,
        definition: McpServerDefinition,
        *,
        secrets: SecretLookup,
        on_change: Callable[[McpConnection], Awaitable[None]],
        offered: tuple[str, str] | None = None,
    ) -> None:
        self.key = key
        self.definition = definition
        self._secrets = secrets
        #: A server a client offered one task: (the task's id, its workspace). It
        #: runs in that workspace, and its env and headers are taken as they are
        #: (a client's `${secret:NAME}` never reads hdsp's keyring).
        self.offered = offered
        self._on_change = on_change
        self.state: State = "stopped"
        self.error: str | None = None
        self.retry_in: float | None = None
        self.restarts = 0
        self.server_info: str | None = None
        self.tools: list[mcp_types.Tool] = []
        self.resources: list[mcp_types.Resource] = []
        #: Bumped whenever `tools` changes (the hub's tool objects follow it).
        self.tools_version = 0
        self._session: ClientSession | None = None
        self._wanted = anyio.Event()
        self._retry_now = anyio.Event()
        self._ended = anyio.Event()
        self._settled = anyio.Event()
        self._ended_reason = ""
        self._refresh_wanted = anyio.Event()
        self._scope = anyio.CancelScope()

    @property
    def name(self) -> str:
        return self.key[1]

    @property
    def workspace(self) -> str | None:
        """The workspace of a workspace's server (None: a settings' or offered one)."""
        return None if self.offered is not None else self.key[0]

    def target(self) -> str:
        d = self.definition
        if d.command is not None:
            return shlex.join([d.command, *d.args])
        return d.url or ""

    # ---- control ----------------------------------------------------------------------

    def start(self) -> None:
        """Start it if it is not started (idempotent)."""
        self._wanted.set()

    def restart(self) -> None:
        """End the live connection (if any) and connect again now, backoff reset."""
        if self._settled.is_set():
            self._settled = anyio.Event()
        self._wanted.set()
        self._retry_now.set()
        self._ended_reason = "restarted on request"
        self._ended.set()

    def stop(self) -> None:
        """Stop for good (its configuration went away or changed)."""
        self._scope.cancel()

    async def wait_settled(self) -> None:
        """Until the current attempt to connect has connected or failed."""
        await self._settled.wait()

    # ---- the runner -------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        with self._scope:
            task_status.started()
            await self._wanted.wait()
            backoff, failures = BACKOFF_START, 0
            while True:
                self._ended = anyio.Event()
                self._retry_now = anyio.Event()
                self.retry_in = None
                await self._set("connecting", None)
                began = time.monotonic()
                connected = False
                try:
                    async with self._connected():
                        connected = True
                        failures, self.retry_in = 0, None
                        await self._set("connected", None)
                        await self._serve()
                    error = self._ended_reason or "the connection ended"
                except Exception as exc:
                    error = _describe(exc)
                self._session = None
                if self._retry_now.is_set():
                    backoff, failures = BACKOFF_START, 0
                    continue
                if connected:
                    self.restarts += 1
                    log.warning("mcp server stopped; restarting", server=self.name, error=error)
                    if time.monotonic() - began > HEALTHY_SECONDS:
                        backoff = BACKOFF_START
                else:
                    failures += 1
                    log.warning("mcp server failed to start", server=self.name, error=error)
                if failures >= MAX_ATTEMPTS:
                    self.retry_in = None
                    await self._set(
                        "failed",
                        f"{error} (gave up after {failures} attempts; "
                        f"`hdsp mcp restart {self.name}` tries again)",
                    )
                    await self._retry_now.wait()
                    backoff, failures = BACKOFF_START, 0
                    continue
                self.retry_in = backoff
                await self._set("failed", error)
                with anyio.move_on_after(backoff):
                    await self._retry_now.wait()
                backoff = min(backoff * 2, BACKOFF_CAP)

    async def _set(self, state: State, error: str | None) -> None:
        self.state, self.error = state, error
        if state == "connecting":
            if self._settled.is_set():
                self._settled = anyio.Event()
        else:
            self._settled.set()
        await self._on_change(self)

    async def _serve(self) -> None:
        """While connected: refresh the lists when the server says they changed,
        until the connection ends."""
        async with anyio.create_task_group() as tg:

            async def refresher() -> None:
                while True:
                    await self._refresh_wanted.wait()
                    self._refresh_wanted = anyio.Event()
                    session = self._session
                    if session is None:
                        return
                    try:
                        await self._list(session)
                    except Exception as exc:
                        log.warning("mcp list refresh failed", server=self.name, error=str(exc))
                    await self._on_change(self)
                    # Notifications meanwhile make one refresh after the pause:
                    # a server that never stops saying its lists changed gets
                    # one listing (and one durable event) a second, not one each.
                    await anyio.sleep(REFRESH_INTERVAL)

            tg.start_soon(refresher)
            await self._ended.wait()
            tg.cancel_scope.cancel()

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        import httpx2
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        d = self.definition
        if d.command is not None:
            env = {k: await self._fill(v) for k, v in d.env.items()}
            cwd = d.cwd
            if self.workspace is not None:
                cwd = str(Path(self.workspace, cwd or "."))
            elif self.offered is not None:
                cwd = self.offered[1]
            params = StdioServerParameters(command=d.command, args=d.args, env=env, cwd=cwd)
            read_fd, write_fd = os.pipe()
            os.set_blocking(read_fd, False)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._forward_stderr, read_fd)
                try:
                    with os.fdopen(write_fd, "w") as errlog:
                        async with stdio_client(params, errlog=errlog) as streams:
                            errlog.close()  # the child has its copy
                            yield streams
                finally:
                    tg.cancel_scope.cancel()
            return
        headers = {k: await self._fill(v) for k, v in d.headers.items()}
        assert d.url is not None
        async with (
            httpx2.AsyncClient(
                headers=headers, timeout=httpx2.Timeout(30.0, read=300.0), follow_redirects=False
            ) as http,
            streamable_http_client(d.url, http_client=http) as streams,
        ):
            yield streams

    async def _fill(self, value: str) -> str:
        """`value` with its `${secret:NAME}` references filled in from the keyring
        (an offered server's value as it is)."""
        if self.offered is not None:
            return value
        parts: list[str] = []
        last = 0
        for match in SECRET_REFERENCE.finditer(value):
            secret = await self._secrets(match.group(1))
            if secret is None:
                raise ValueError(
                    f"the secret {match.group(1)!r} it needs is not set "
                    f"(`hdsp secret set {match.group(1)}`)"
                )
            parts += [value[last : match.start()], secret]
            last = match.end()
        parts.append(value[last:])
        return "".join(parts)

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[None]:
        """Connect, initialize and list within the startup timeout; the body runs
        while connected (it ends when the connection ends)."""
        await anyio.to_thread.run_sync(load_sdk)  # (once loaded: at once)
        import mcp.types as mcp_types
        from mcp import ClientSession
        from mcp.shared.message import SessionMessage

        yielded = False
        # One scope whose deadline is the startup timeout until the server answered.
        with anyio.CancelScope(
            deadline=anyio.current_time() + self.definition.startup_timeout
        ) as startup:
            async with self._transport() as (read, write), anyio.create_task_group() as tg:
                # Between the transport and the session: to see the transport end.
                relay_send, relay_receive = anyio.create_memory_object_stream[
                    SessionMessage | Exception
                ](0)
                tg.start_soon(self._relay, read, relay_send)
                try:
                    async with ClientSession(
                        relay_receive,
                        write,
                        message_handler=self._on_message,
                        client_info=mcp_types.Implementation(name="hdsp", version=__version__),
                    ) as session:
                        init = await session.initialize()
                        info = init.server_info
                        self.server_info = f"{info.name} {info.version}".strip()
                        await self._list(session)
                        startup.deadline = math.inf
                        self._session = session
                        yielded = True
                        try:
                            yield
                        finally:
                            self._session = None
                finally:
                    tg.cancel_scope.cancel()
                    if not yielded and startup.cancel_called:
                        # Say so now: stopping a process that does not answer
                        # takes the SDK seconds more (stdin closed, then SIGTERM).
                        with anyio.CancelScope(shield=True):
                            await self._set("failed", _describe(TimeoutError()))
        if not yielded:
            raise TimeoutError

    async def _relay(
        self,
        read: MemoryObjectReceiveStream[SessionMessage | Exception],
        relay: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        async with relay:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for item in read:
                    await relay.send(item)
        if not self._ended.is_set():
            self._ended_reason = "the server closed the connection (it exited or crashed)"
            self._ended.set()

    async def _list(self, session: ClientSession) -> None:
        caps = session.server_capabilities
        tools: list[mcp_types.Tool] = []
        resources: list[mcp_types.Resource] = []
        if caps is None or caps.tools is not None:
            tools = await _every_page(session.list_tools, lambda page: page.tools)
        if caps is not None and caps.resources is not None:
            resources = await _every_page(session.list_resources, lambda page: page.resources)
        self.tools, self.resources = tools, resources
        self.tools_version += 1

    async def _on_message(self, message: Any) -> None:
        """Notifications: the lists changed; transport faults end the connection."""
        import httpx2
        import mcp.types as mcp_types

        if isinstance(message, Exception):
            log.warning("mcp transport error", server=self.name, error=str(message))
            if isinstance(message, httpx2.TransportError | httpx2.HTTPStatusError | OSError):
                self._ended_reason = f"the connection failed: {_describe(message)}"
                self._ended.set()
            return
        if isinstance(
            message,
            mcp_types.ToolListChangedNotification | mcp_types.ResourceListChangedNotification,
        ):
            self._refresh_wanted.set()

    async def _forward_stderr(self, fd: int) -> None:
        """The server's stderr, line by line, into hdspd's log."""
        pending = b""
        try:
            while True:
                await anyio.wait_readable(fd)
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    self._log_stderr(line)
                if len(pending) > STDERR_LINE_CHARS:
                    self._log_stderr(pending)
                    pending = b""
            if pending:
                self._log_stderr(pending)
        finally:
            os.close(fd)

    def _log_stderr(self, line: bytes) -> None:
        text = line.decode("utf-8", "replace").rstrip("\r")[:STDERR_LINE_CHARS]
        if text:
            log.info("mcp server stderr", server=self.name, line=text)

    # ---- using it ---------------------------------------------------------------------

    async def session(self) -> ClientSession:
        """The live session, starting the server (and waiting for it) if need be;
        a ToolError says why there is none."""
        self.start()
        if self._session is None:
            with anyio.move_on_after(self.definition.startup_timeout + 1):
                await self.wait_settled()
        if self._session is None:
            why = self.error or f"it is {self.state}"
            raise ToolError(f"The MCP server {self.name!r} is not connected: {why}.")
        return self._session

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        progress: ProgressFnT | None = None,
    ) -> mcp_types.CallToolResult:
        async def call(session: ClientSession) -> mcp_types.CallToolResult:
            return await session.call_tool(tool, arguments, progress_callback=progress)

        return await self._request(tool, call)

    async def read_resource(self, uri: str) -> mcp_types.ReadResourceResult:
        async def read(session: ClientSession) -> mcp_types.ReadResourceResult:
            return await session.read_resource(uri)

        return await self._request(f"resources/read {uri}", read)

    async def _request(
        self, what: str, send: Callable[[ClientSession], Awaitable[_Result]]
    ) -> _Result:
        """`send` on the live session, within the server's `timeout`. An HTTP
        session the server no longer knows (it restarted) is opened again and the
        request sent once more: the server refused it unseen, so nothing ran."""
        from mcp.shared.exceptions import MCPError

        timeout = self.definition.timeout
        for attempt in (1, 2):
            session = await self.session()
            try:
                with anyio.fail_after(timeout):
                    return await send(session)
            except TimeoutError:
                raise ToolError(
                    f"The MCP server {self.name!r} did not finish {what} within {timeout:g} s "
                    "(its `timeout`); the call was cancelled."
                ) from None
            except MCPError as exc:
                if attempt == 1 and self._session_lost(exc):
                    log.warning("mcp http session lost; reconnecting", server=self.name)
                    self.restart()
                    with anyio.move_on_after(self.definition.startup_timeout + 1):
                        await self.wait_settled()
                    continue
                raise self._call_error(what, exc) from None
            except Exception as exc:
                raise ToolError(
                    f"The call of {what} on the MCP server {self.name!r} failed: {_describe(exc)}"
                ) from None
        raise AssertionError("unreachable")

    def _session_lost(self, exc: MCPError) -> bool:
        """Whether an HTTP server refused the request at the HTTP level (an
        unknown or ended session: it restarted, or dropped the session)."""
        from mcp_types import INTERNAL_ERROR, INVALID_REQUEST

        if self.definition.transport != "http":
            return False
        return (exc.code, exc.message) in (
            (INTERNAL_ERROR, "Server returned an error response"),
            (INVALID_REQUEST, "Session terminated"),
        )

    def _call_error(self, what: str, exc: MCPError) -> ToolError:
        from mcp_types import CONNECTION_CLOSED

        if exc.code == CONNECTION_CLOSED:
            self._ended_reason = "the server closed the connection (it exited or crashed)"
            self._ended.set()
            return ToolError(
                f"The MCP server {self.name!r} stopped (its connection closed) while running "
                f"{what}; the call did not finish, and hdsp is restarting the server. Check "
                "what the call may have done before repeating it."
            )
        return ToolError(
            f"The MCP server {self.name!r} refused {what}: {exc.message} (code {exc.code})."
        )


async def _every_page(
    list_page: Callable[..., Awaitable[Any]], items: Callable[[Any], list[_Item]]
) -> list[_Item]:
    """The `items` of every page `list_page` (a session's list_tools,
    list_resources) returns, following its cursor; past 1000 items it stops."""
    import mcp.types as mcp_types

    found: list[_Item] = []
    cursor: str | None = None
    while True:
        page = await list_page(
            params=mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        )
        found += items(page)
        cursor = page.next_cursor
        if not cursor or len(found) > 1000:
            return found


def _describe(error: BaseException) -> str:
    """A sentence for an error (the first of a group)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return "it did not start and answer within its startup timeout"
    if isinstance(error, FileNotFoundError):
        return f"the command was not found ({error.filename or error})"
    sdk = sys.modules.get("mcp.shared.exceptions")  # (an MCPError: only once it is loaded)
    if sdk is not None and isinstance(error, sdk.MCPError):
        return f"{error.message} (code {error.code})"
    text = str(error) or type(error).__name__
    return f"{type(error).__name__}: {text}" if str(error) else text
