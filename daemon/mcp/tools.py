"""MCP servers' tools as the agent's tools: `mcp__SERVER__TOOL` for each tool a
server lists (its JSON Schema passed through), and `access_mcp_resource`.

What a server says is untrusted: its descriptions go to the model marked as a
server's, its results are mapped to plain tool results (text, images, resources
as text), and nothing it says changes what runs without asking: only the user's
`alwaysAllow` list does (see :class:`hdsp.daemon.approvals.ApprovalPolicy`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import anyio

from hdsp.daemon.bounded_text import BoundedText
from hdsp.daemon.conversation import ImageBlock, TextBlock
from hdsp.daemon.tools import Tool, ToolCategory, ToolContext, ToolError, ToolResult
from hdsp.protocol import Say

from .connection import McpConnection

if TYPE_CHECKING:  # the SDK is loaded by a connection's runner (see `load_sdk`)
    import mcp.types as mcp_types

__all__ = [
    "RESULT_CHARS",
    "AccessMcpResource",
    "McpTool",
    "make_mcp_tool",
    "offered_name",
    "result_from_mcp",
]

#: Characters of an MCP result's text the model gets (head and tail of more).
RESULT_CHARS = 60_000
#: Images a result may carry to the model.
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: Seconds between two updates of a call's progress message.
PROGRESS_INTERVAL = 0.25

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def offered_name(server: str, tool: str) -> str:
    """`mcp__server__tool`, in the characters every provider takes, at most 64
    (a longer one ends with a digest, so that two never collide)."""
    name = f"mcp__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"
    if len(name) <= 64 and name == f"mcp__{server}__{tool}":
        return name
    digest = hashlib.blake2b(f"{server}\0{tool}".encode(), digest_size=4).hexdigest()
    return f"{name[:55]}_{digest}"


def _mcp_ask_text(fields: Mapping[str, Any]) -> str:
    return json.dumps(dict(fields), ensure_ascii=False)


class McpTool(Tool):
    """One tool of one MCP server (a class of its own per tool: see `make_mcp_tool`)."""

    category: ClassVar[ToolCategory] = ToolCategory.MCP
    server: ClassVar[str]
    tool_name: ClassVar[str]
    connection: ClassVar[McpConnection]

    def approval_text(self, args: Mapping[str, Any]) -> str:
        """Roo's `use_mcp_server` ask: server, tool and the arguments as JSON."""
        return _mcp_ask_text(
            {
                "tool": self.name,
                "type": "use_mcp_tool",
                "serverName": self.server,
                "toolName": self.tool_name,
                "arguments": json.dumps(dict(args), ensure_ascii=False, indent=2),
            }
        )

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        label = f"{self.server} · {self.tool_name}"
        progress = _Progress(ctx, label)
        result: mcp_types.CallToolResult | None = None
        failure: ToolError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(progress.show)
            try:
                result = await self.connection.call_tool(
                    self.tool_name, dict(args), progress.report
                )
            except ToolError as exc:  # raised as itself, not in the group's
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        await progress.finish()
        if failure is not None:
            raise failure
        assert result is not None
        return result_from_mcp(result, self.server)


def make_mcp_tool(
    connection: McpConnection, tool: mcp_types.Tool, *, always_allow: bool
) -> McpTool:
    """The Tool for `tool` of `connection`'s server."""
    server = connection.name
    schema = dict(tool.input_schema or {"type": "object"})
    # What the model is offered; the arguments are still checked against all of it.
    described = (tool.description or tool.title or "").strip()
    attributes: dict[str, Any] = {
        "name": offered_name(server, tool.name),
        "description": f"[MCP server {server!r}, tool {tool.name!r}] {described}".strip(),
        "parameters": schema,
        "server": server,
        "tool_name": tool.name,
        "connection": connection,
        "always_allowed": always_allow,
    }
    cls = type(f"McpTool_{attributes['name']}", (McpTool,), attributes)
    made: McpTool = cls()
    return made


class AccessMcpResource(Tool):
    """Roo's access_mcp_resource: read a resource of a connected MCP server."""

    name: ClassVar[str] = "access_mcp_resource"
    description: ClassVar[str] = (
        "Read a resource (a document, data, an image) that a connected MCP server offers, "
        "by the server's name and the resource's URI."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "server_name": {"type": "string", "description": "The MCP server's name."},
            "uri": {"type": "string", "description": "The resource's URI."},
        },
        "required": ["server_name", "uri"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.MCP

    def __init__(self, find: Callable[[Path, str], Awaitable[McpConnection]]) -> None:
        self._find = find

    def approval_text(self, args: Mapping[str, Any]) -> str:
        return _mcp_ask_text(
            {
                "tool": self.name,
                "type": "access_mcp_resource",
                "serverName": args.get("server_name"),
                "uri": args.get("uri"),
            }
        )

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        server, uri = str(args["server_name"]), str(args["uri"])
        connection = await self._find(ctx.workspace, server)
        read = await connection.read_resource(uri)
        blocks: list[TextBlock | ImageBlock] = []
        for contents in read.contents:
            blocks += _resource_blocks(contents)
        if not blocks:
            blocks.append(TextBlock(text=f"The resource {uri} is empty."))
        return ToolResult(content=_bounded(blocks))


class _Progress:
    """A call's progress notifications, shown to people as one message updated
    at most every PROGRESS_INTERVAL seconds (never blocking the server's reader)."""

    def __init__(self, ctx: ToolContext, label: str) -> None:
        self._ctx = ctx
        self._label = label
        self._latest: str | None = None
        self._changed = anyio.Event()
        self._message: Any = None

    async def report(self, progress: float, total: float | None, message: str | None) -> None:
        amount = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        self._latest = f"{self._label}: progress {amount}" + (f" {message}" if message else "")
        self._changed.set()

    async def show(self) -> None:
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            await self._say(partial=True)
            await anyio.sleep(PROGRESS_INTERVAL)

    async def _say(self, *, partial: bool) -> None:
        if self._latest is None:
            return
        if self._message is None:
            self._message = await self._ctx.say(
                Say.MCP_SERVER_REQUEST_STARTED, self._latest, partial=partial
            )
        else:
            self._message = await self._ctx.update(
                self._message, text=self._latest, partial=partial
            )

    async def finish(self) -> None:
        """The last progress, final (durable)."""
        await self._say(partial=False)


def _resource_blocks(
    contents: mcp_types.TextResourceContents | mcp_types.BlobResourceContents,
) -> list[TextBlock | ImageBlock]:
    import mcp.types as mcp_types

    mime = contents.mime_type or "unknown type"
    if isinstance(contents, mcp_types.TextResourceContents):
        return [TextBlock(text=f"Resource {contents.uri} ({mime}):\n{contents.text}")]
    if contents.mime_type in _IMAGE_TYPES:
        return [
            TextBlock(text=f"Resource {contents.uri} ({mime}): an image, below."),
            ImageBlock(media_type=contents.mime_type, data=contents.blob),
        ]
    size = len(base64.b64decode(contents.blob, validate=False)) if contents.blob else 0
    return [
        TextBlock(text=f"Resource {contents.uri} ({mime}): {size} bytes of binary data, not shown.")
    ]


def result_from_mcp(result: mcp_types.CallToolResult, server: str) -> ToolResult:
    """An MCP call's result as a tool result: text, images (the types models take),
    embedded resources and resource links as text, audio described; `isError`
    kept."""
    import mcp.types as mcp_types

    blocks: list[TextBlock | ImageBlock] = []
    for item in result.content:
        if isinstance(item, mcp_types.TextContent):
            blocks.append(TextBlock(text=item.text))
        elif isinstance(item, mcp_types.ImageContent):
            if item.mime_type in _IMAGE_TYPES:
                blocks.append(ImageBlock(media_type=item.mime_type, data=item.data))
            else:
                blocks.append(TextBlock(text=f"(an image of type {item.mime_type}, not shown)"))
        elif isinstance(item, mcp_types.AudioContent):
            blocks.append(TextBlock(text=f"(audio of type {item.mime_type}, not shown)"))
        elif isinstance(item, mcp_types.EmbeddedResource):
            blocks += _resource_blocks(item.resource)
        elif isinstance(item, mcp_types.ResourceLink):
            about = f": {item.description}" if item.description else ""
            blocks.append(
                TextBlock(
                    text=f"Resource link {item.uri} ({item.name}, "
                    f"{item.mime_type or 'unknown type'}){about} — read it with "
                    f"access_mcp_resource (server_name {server!r})."
                )
            )
    if not blocks and result.structured_content is not None:
        blocks.append(TextBlock(text=json.dumps(result.structured_content, ensure_ascii=False)))
    if result.is_error:
        blocks.insert(0, TextBlock(text=f"Error: the MCP server {server!r} reported an error:"))
    if not blocks:
        blocks.append(TextBlock(text="(the tool returned nothing)"))
    return ToolResult(content=_bounded(blocks), is_error=bool(result.is_error))


def _bounded(blocks: list[TextBlock | ImageBlock]) -> list[TextBlock | ImageBlock]:
    """The text blocks cut to RESULT_CHARS in all (head and tail of each long one)."""
    total = sum(len(b.text) for b in blocks if isinstance(b, TextBlock))
    if total <= RESULT_CHARS:
        return blocks
    share = max(RESULT_CHARS // max(1, sum(isinstance(b, TextBlock) for b in blocks)), 1000)
    out: list[TextBlock | ImageBlock] = []
    for block in blocks:
        if isinstance(block, TextBlock) and len(block.text) > share:
            kept = BoundedText(share)
            kept.append(block.text)
            out.append(TextBlock(text=kept.text()))
        else:
            out.append(block)
    return out
