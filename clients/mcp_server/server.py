"""`hdsp mcp serve`: hdsp's kernels, notebooks and tasks as an MCP server (stdio).

An MCP host (Claude Code, Codex, Cursor, Jupyter AI) starts this process; it is a
client of the running hdspd like `hdsp` itself, so kernels and history are the
daemon's: durable, and visible to every other client. The host's model is
untrusted input. Everything it asks that reads, writes or runs code goes through
a task of this server's own (`CreateTask`, titled after the host) as a relayed
tool call (`CallTool`): the daemon's approval policy decides, exactly as for
hdsp's own model, and an approval waits for an answer from any hdsp client
(`hdsp asks`, `hdsp answer`, the Lab panel) or, when the host offers MCP
elicitation, from the host's user. Nothing the host sends carries approval
settings, a workspace or a kernel's working directory: the workspace is the
directory the host started this server in (or `--workspace`, from the host's
configuration, which the user wrote).

Execution output streams to the host as progress notifications while the code
runs; the host's cancellation interrupts it (CancelTask on the server's task).
What kernels, tools and files return is passed on as data (text and images),
never interpreted here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import msgspec
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field, ValidationError

from hdsp.protocol import (
    Ask,
    ExecutionOutput,
    KernelOutput,
    MessageEvent,
    StartNewTask,
    StartNewTaskData,
    TaskAborted,
    TaskAskResponded,
    TaskCompleted,
    TaskConfiguration,
    TaskResumable,
    ToolCallResult,
    __version__,
    encode,
)

from ..client import Client, connect
from ..errors import ClientError, CommandFailed
from ..escape import escape_controls
from ..exit_codes import ExitCode

__all__ = ["HdspBridge", "build_server", "run_mcp_serve"]

#: Kernels one server may start (a host's model must not fill the machine).
MAX_STARTED_KERNELS = 4
#: Characters of an ask shown in an elicitation.
ELICIT_TEXT_LIMIT = 4000
#: Characters of one progress message.
PROGRESS_TEXT_LIMIT = 2000
#: Seconds a finished call waits for the events it caused before its result goes.
CATCH_UP_SECONDS = 5.0

#: The asks a host's user can answer yes or no through elicitation.
_APPROVAL_ASKS = frozenset({Ask.TOOL, Ask.COMMAND, Ask.USE_MCP_SERVER})

_INSTRUCTIONS = (
    "hdsp runs Python in durable Jupyter kernels held by the hdsp daemon, and reads and "
    "edits notebooks in the workspace. Code runs, writes and edits wait for the user's "
    "approval (in hdsp, or in this app when it can ask). Kernel state (variables) persists "
    "between execute_code calls and is shared with the user's other hdsp clients."
)


class Approval(BaseModel):
    """The host's user's answer to an approval ask."""

    approve: bool = Field(description="Allow hdsp to do this?")


class InputAnswer(BaseModel):
    """The host's user's answer to code that called input()."""

    answer: str = Field(description="The text input() returns")


class HdspBridge:
    """What the MCP tools share: the daemon connection, the workspace, and the
    tasks relayed calls run in: one for the session's own kernel (started on
    first use) and one for each other kernel the host names, made on first use
    and bound to that kernel for good (so that a call in one kernel never moves
    another's binding, and an approval's task names the kernel). Calls in one
    task run one at a time (the daemon refuses a second while the first runs)."""

    def __init__(
        self,
        client: Client,
        workspace: Path,
        *,
        title: str = "MCP host",
        elicitation: bool = True,
    ) -> None:
        self.client = client
        self.workspace = workspace
        self.title = title
        #: Whether asks may go to the host's user when the host offers elicitation.
        self.elicitation = elicitation
        self._tasks: dict[str | None, str] = {}
        self._locks: dict[str | None, anyio.Lock] = {}
        self._creating = anyio.Lock()
        self.started_kernels = 0
        #: Tasks started through this session (start_task): the ones follow_task follows.
        self.started_tasks: set[str] = set()

    def _host(self, ctx: Context[Any, Any] | None) -> str:
        """How the host introduced itself (shown as data, in a task's title)."""
        params = ctx.session.client_params if ctx is not None else None
        if params is None:
            return self.title
        return f"MCP host {params.client_info.name[:60]}"

    def lock(self, kernel_id: str | None) -> anyio.Lock:
        return self._locks.setdefault(kernel_id, anyio.Lock())

    async def task_id(
        self, ctx: Context[Any, Any] | None = None, kernel_id: str | None = None
    ) -> tuple[str, bool]:
        """The task for calls in `kernel_id` (None: the session's own kernel), and
        whether it is new (its first call binds it to the kernel)."""
        async with self._creating:
            found = self._tasks.get(kernel_id)
            if found is not None:
                return found, False
            title = self._host(ctx)
            if kernel_id is not None:
                title += f", in kernel {kernel_id[:36]}"
            ref = await self.client.create_task(title, workspace=self.workspace)
            self._tasks[kernel_id] = ref.task_id
            return ref.task_id, True


def _output_text(output: KernelOutput) -> str:
    """A kernel output as a progress line: stream text as it came, other outputs
    by kind (their whole content comes with the result)."""
    if output.output_type == "stream":
        return output.text or ""
    if output.output_type == "error":
        return f"{output.ename}: {output.evalue}\n"
    if output.data:
        if "text/plain" in output.data and len(output.data) == 1:
            return str(output.data["text/plain"]) + "\n"
        return f"[{output.output_type}: {', '.join(sorted(output.data))}]\n"
    return ""


def _text(text: str) -> types.TextContent:
    """Text made by a kernel, a tool, a file or the host's model, as data: its
    control characters (terminal escapes, bidi overrides) shown as visible
    escapes, since a host may print what it is given on a terminal."""
    return types.TextContent(type="text", text=escape_controls(text))


def _content(result: ToolCallResult) -> types.CallToolResult:
    blocks: list[types.ContentBlock] = [_text(result.text)]
    for image in result.images:
        blocks.append(types.ImageContent(type="image", data=image.data, mime_type=image.media_type))
    if result.status == "denied":
        blocks[0] = _text(result.text or "Denied by the user.")
    return types.CallToolResult(content=blocks, is_error=result.is_error)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[_text(text)], is_error=True)


def _ok(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[_text(text)])


class _AskRelay:
    """Puts the asks of one task to the host's user through elicitation (when
    the host declared it), each in a task of its own that an answer from another
    client cancels; the first answer wins in the daemon either way."""

    def __init__(self, bridge: HdspBridge, ctx: Context[Any, Any], task_id: str) -> None:
        self._client = bridge.client
        self._ctx = ctx
        self._task_id = task_id
        self._open: dict[int, anyio.CancelScope] = {}
        caps = ctx.client_capabilities
        self.enabled = bridge.elicitation and caps is not None and caps.elicitation is not None

    def on_message(self, tg: anyio.abc.TaskGroup, event: MessageEvent) -> None:
        message = event.payload[0].message
        if message.type != "ask" or message.partial:
            return
        if message.is_answered:
            self.answered(message.ts)
        elif self.enabled and message.ts not in self._open:
            if message.ask in _APPROVAL_ASKS or message.ask == Ask.FOLLOWUP:
                scope = self._open[message.ts] = anyio.CancelScope()
                tg.start_soon(self._elicit, scope, message.ts, message.ask, message.text or "")

    def answered(self, ts: int | None = None) -> None:
        """An ask was answered (None: the task's current one, whichever it is)."""
        for key in list(self._open) if ts is None else [ts]:
            scope = self._open.pop(key, None)
            if scope is not None:
                scope.cancel()

    async def _elicit(self, scope: anyio.CancelScope, ts: int, kind: str, text: str) -> None:
        if len(text) > ELICIT_TEXT_LIMIT:
            text = text[:ELICIT_TEXT_LIMIT] + " […]"
        shown = escape_controls(text)
        with scope:
            try:
                await self._put(ts, kind, shown)
            except (MCPError, ValidationError) as exc:
                # The host could not ask (or answered out of shape): the ask
                # stays open for hdsp's clients.
                print(
                    f"hdsp mcp serve: elicitation failed: {escape_controls(str(exc))}",
                    file=sys.stderr,
                )

    async def _put(self, ts: int, kind: str, shown: str) -> None:
        if kind == Ask.FOLLOWUP:
            asked = await self._ctx.elicit(f"hdsp: the code asks for input: {shown}", InputAnswer)
            if asked.action == "accept":
                await self._respond(ts, "messageResponse", asked.data.answer)
            return  # else left to hdsp's clients
        answer = await self._ctx.elicit(
            f"hdsp asks before it does this (task {self._task_id[:8]}):\n{shown}", Approval
        )
        if answer.action == "cancel":
            return  # dismissed: the ask stays open for hdsp's clients
        yes = answer.action == "accept" and answer.data.approve
        await self._respond(ts, "yesButtonClicked" if yes else "noButtonClicked", None)

    async def _respond(self, ts: int, response: Any, text: str | None) -> None:
        try:
            await self._client.respond_to_ask(self._task_id, ts, response, text)
        except CommandFailed:
            pass  # answered by another client first: theirs won


async def _follow(
    bridge: HdspBridge,
    ctx: Context[Any, Any],
    task_id: str,
    work: Callable[[], Awaitable[Any]],
    *,
    on_event: Callable[[Any], str | None],
) -> Any:
    """Run `work` while following the task's events: each one `on_event` turns
    into text goes to the host as progress, and asks go to the host's user."""
    client = bridge.client
    head = (await client.get_task(task_id)).head_seq
    relay = _AskRelay(bridge, ctx, task_id)
    progress = 0
    result: Any = None
    failure: ClientError | None = None
    # Set once `work` is done and the events it caused are in `events`: what is
    # left there is passed on, then following ends (before the host gets the result).
    finished = False
    handling = anyio.Lock()
    async with client.events(task_id, since_seq=head) as events:
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                nonlocal progress
                async for event in events:
                    async with handling:
                        data = event.data
                        if isinstance(data, MessageEvent):
                            relay.on_message(tg, data)
                        elif isinstance(data, TaskAskResponded):
                            relay.answered()
                        text = on_event(data)
                        if text:
                            progress += 1
                            shown = escape_controls(text[:PROGRESS_TEXT_LIMIT])
                            await ctx.report_progress(progress, None, shown)
                        if finished and events.buffered == 0:
                            tg.cancel_scope.cancel()

            async def run() -> None:
                nonlocal result, failure, finished
                try:
                    result = await work()
                except ClientError as exc:
                    failure = exc  # raised as itself, not in the task group's group
                else:
                    # The reply can overtake the last output it printed: catch up,
                    # so that the host gets every line as progress before the result
                    # (which has all of it anyway: a failure here loses nothing).
                    with anyio.move_on_after(CATCH_UP_SECONDS), contextlib.suppress(ClientError):
                        await client.caught_up(task_id)
                async with handling:
                    finished = True
                    if failure is not None or events.buffered == 0:
                        tg.cancel_scope.cancel()
                        return
                # The watcher passes on what is left; a task that goes on
                # producing events cannot hold the result back for long.
                await anyio.sleep(CATCH_UP_SECONDS)
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            tg.start_soon(run)
    if failure is not None:
        raise failure
    return result


def _execution_progress(data: Any) -> str | None:
    if isinstance(data, ExecutionOutput):
        return "".join(_output_text(o) for o in data.payload[0].outputs) or None
    if isinstance(data, MessageEvent):
        message = data.payload[0].message
        if message.type == "ask" and not message.is_answered and not message.partial:
            return "Waiting for approval in hdsp (`hdsp asks`, `hdsp answer`, the Lab panel)."
    return None


async def relay_call(
    bridge: HdspBridge,
    ctx: Context[Any, Any],
    tool: str,
    arguments: dict[str, Any],
    *,
    kernel_id: str | None = None,
) -> types.CallToolResult:
    """Run one of hdsp's tools in the task for `kernel_id`, streaming execution
    output as progress; the host's cancellation cancels the call (interrupting
    its kernel)."""
    async with bridge.lock(kernel_id):
        try:
            task_id, new = await bridge.task_id(ctx, kernel_id)
        except CommandFailed as exc:
            return _error(f"hdsp refused: {exc.message}")
        binding = kernel_id if new else None

        async def call() -> ToolCallResult:
            try:
                return await bridge.client.call_tool(task_id, tool, arguments, kernel_id=binding)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                    await bridge.client.cancel_task(task_id)
                raise

        try:
            result: ToolCallResult = await _follow(
                bridge, ctx, task_id, call, on_event=_execution_progress
            )
        except CommandFailed as exc:
            return _error(f"hdsp refused: {exc.message}")
        except ClientError as exc:
            return _error(f"hdsp: {exc}")
    return _content(result)


def _drop_none(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _task_progress(data: Any) -> str | None:
    """What a followed task did, in a line: its final messages."""
    if isinstance(data, MessageEvent):
        message = data.payload[0].message
        if message.partial:
            return None
        kind = message.ask or message.say or message.type
        if message.type == "ask" and message.is_answered:
            return None
        return f"[{kind}] {message.text or ''}"
    if isinstance(data, TaskCompleted | TaskAborted):
        return f"[{type(data).__struct_config__.tag}]"
    return None


def build_server(bridge: HdspBridge) -> MCPServer[Any]:
    """The MCP server: its tools, each a client call of the daemon."""
    server: MCPServer[Any] = MCPServer("hdsp", instructions=_INSTRUCTIONS, version=__version__)
    client = bridge.client

    @server.tool(description="List the Jupyter kernels the hdsp daemon holds (JSON lines).")
    async def list_kernels() -> str:
        listing = await client.list_kernels()
        lines = [
            json.dumps(
                {
                    "kernelId": k.kernel_id,
                    "kernelName": k.kernel_name,
                    "status": k.status,
                    "startedByHdsp": k.owned,
                    "cwd": k.cwd,
                }
            )
            for k in listing.kernels
        ]
        return "\n".join(lines) or "No kernels."

    @server.tool(
        description=(
            "Start a Jupyter kernel in the workspace, in hdsp's sandbox. Returns its id, "
            "for execute_code's kernel_id. Without one, execute_code uses this session's own "
            "kernel, started on first use."
        )
    )
    async def start_kernel(kernel_name: str = "python3") -> types.CallToolResult:
        if bridge.started_kernels >= MAX_STARTED_KERNELS:
            return _error(
                f"This session started {MAX_STARTED_KERNELS} kernels already; use one of them."
            )
        try:
            info = await client.start_kernel(kernel_name, bridge.workspace)
        except CommandFailed as exc:
            return _error(f"hdsp refused: {exc.message}")
        bridge.started_kernels += 1
        # As list_kernels: the path of its connection file (its key) is not the host's.
        text = encode(msgspec.structs.replace(info, connection_file=None)).decode()
        return _ok(text)

    @server.tool(
        description=(
            "Run Python code in a durable Jupyter kernel held by hdsp (IPython: magics work). "
            "State persists between calls and is shared with the user's hdsp clients. The "
            "user approves each run in hdsp unless they allowed it. Output streams as progress; "
            "cancelling the call interrupts the kernel. Returns stdout/stderr, the result, "
            "errors and images."
        )
    )
    async def execute_code(
        code: str,
        ctx: Context[Any, Any],
        kernel_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  (the tool's argument: the kernel's limit)
    ) -> types.CallToolResult:
        args = _drop_none(code=code, timeout=timeout)
        return await relay_call(bridge, ctx, "execute_code", args, kernel_id=kernel_id)

    @server.tool(
        description=(
            "List the variables of a kernel (name, type, shape, size, a short preview): "
            "this session's kernel by default. Runs nothing of the user's."
        )
    )
    async def list_variables(
        ctx: Context[Any, Any], kernel_id: str | None = None
    ) -> types.CallToolResult:
        if kernel_id is not None:
            # Another kernel (a notebook's?): read as hdsp's model would, so the
            # approval policy decides and the task's history shows it.
            return await relay_call(bridge, ctx, "list_variables", {}, kernel_id=kernel_id)
        task_id, _ = await bridge.task_id(ctx)
        listing = await client.list_variables(task_id)
        text = encode(listing).decode()
        return _ok(text)

    @server.tool(
        description="Read a notebook (.ipynb) in the workspace: every cell with its index."
    )
    async def read_notebook(path: str, ctx: Context[Any, Any]) -> types.CallToolResult:
        return await relay_call(bridge, ctx, "read_notebook", {"path": path})

    @server.tool(
        description=(
            "Replace the source of a notebook cell (by index from 0; read_notebook first); the "
            "user approves it."
        )
    )
    async def edit_cell(
        path: str,
        index: int,
        source: str,
        ctx: Context[Any, Any],
        cell_type: str | None = None,
    ) -> types.CallToolResult:
        args = _drop_none(path=path, index=index, source=source, cell_type=cell_type)
        return await relay_call(bridge, ctx, "edit_cell", args)

    @server.tool(
        description=(
            "Insert a cell into a notebook at an index (at the end without one); creates "
            "the notebook if needed. The user approves it."
        )
    )
    async def insert_cell(
        path: str,
        source: str,
        ctx: Context[Any, Any],
        index: int | None = None,
        cell_type: str | None = None,
    ) -> types.CallToolResult:
        args = _drop_none(path=path, source=source, index=index, cell_type=cell_type)
        return await relay_call(bridge, ctx, "insert_cell", args)

    @server.tool(description="Delete a notebook cell by index; the user approves it.")
    async def delete_cell(path: str, index: int, ctx: Context[Any, Any]) -> types.CallToolResult:
        return await relay_call(bridge, ctx, "delete_cell", {"path": path, "index": index})

    @server.tool(
        description=(
            "Start an hdsp agent task in the workspace with a prompt; returns its id. Its "
            "actions ask the user as hdsp's always do. Follow it with follow_task."
        )
    )
    async def start_task(prompt: str, mode: str | None = None) -> types.CallToolResult:
        data = StartNewTaskData(
            text=prompt,
            configuration=TaskConfiguration(workspace=str(bridge.workspace), mode=mode),
        )
        try:
            ref = await client.request(StartNewTask(data=data))
        except CommandFailed as exc:
            return _error(f"hdsp refused: {exc.message}")
        bridge.started_tasks.add(ref.task_id)
        text = json.dumps({"taskId": ref.task_id, "state": ref.state})
        return _ok(text)

    @server.tool(
        description=(
            "Follow an hdsp task until its turn ends (or `wait_seconds` pass): its "
            "messages stream as progress; returns its state and last messages."
        )
    )
    async def follow_task(
        task_id: str, ctx: Context[Any, Any], wait_seconds: float = 600
    ) -> types.CallToolResult:
        if task_id not in bridge.started_tasks:
            # The user's other tasks are not the host's to read.
            return _error(f"{task_id[:40]!r} is not a task this session started (start_task).")
        settled = anyio.Event()

        def on_event(data: Any) -> str | None:
            if isinstance(data, TaskCompleted | TaskAborted | TaskResumable):
                settled.set()
            return _task_progress(data)

        async def until_settled() -> str:
            snapshot = await client.get_task(task_id)
            if snapshot.state in ("running", "interactive"):
                with anyio.move_on_after(max(1.0, min(wait_seconds, 3600))):
                    await settled.wait()
                snapshot = await client.get_task(task_id)
            last = [
                {"type": m.ask or m.say, "text": m.text}
                for m in snapshot.messages[-5:]
                if not m.partial
            ]
            return json.dumps({"taskId": task_id, "state": snapshot.state, "last": last})

        try:
            text = await _follow(bridge, ctx, task_id, until_settled, on_event=on_event)
        except CommandFailed as exc:
            return _error(f"hdsp refused: {exc.message}")
        return _ok(text)

    return server


async def _serve(args: argparse.Namespace, workspace: Path) -> int:
    async with connect(
        args.runtime_dir, remote=getattr(args, "remote", None), name="hdsp mcp serve", kind="mcp"
    ) as client:
        bridge = HdspBridge(client, workspace, elicitation=not args.no_elicitation)
        await build_server(bridge).run_stdio_async()
    return ExitCode.OK


def run_mcp_serve(args: argparse.Namespace) -> int:
    """Serve MCP on stdin/stdout until the host closes them; errors go to stderr
    (stdout is the protocol's)."""
    try:
        workspace = Path(args.workspace or os.getcwd()).absolute()
        return anyio.run(_serve, args, workspace, backend="asyncio")
    except ClientError as exc:
        print(f"hdsp mcp serve: {escape_controls(str(exc))}", file=sys.stderr)
        return ExitCode.UNREACHABLE
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
