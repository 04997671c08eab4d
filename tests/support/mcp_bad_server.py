"""An MCP server that misbehaves on purpose (stdio, the SDK's own MCPServer).

Tools: `ping` answers "pong N" (N: its process id, so a test sees a restart);
`crash` kills the process in the middle of the call, before any answer;
`picture` returns a small PNG (made with Pillow); `grow` adds a tool named
`extra` and says so (`notifications/tools/list_changed`); `hang` reports
progress and waits until the client cancels the call, and `was_hang_cancelled`
says whether that cancellation reached it; `flood` says every 10 ms for half
a second that its tools changed; `shout` answers (and reports
progress) with terminal escape sequences; `where` tells its working directory
and a digest of an environment variable's value (what it was started with).
Arguments after the script's path are ignored (a test names its own server by
one).
"""

from __future__ import annotations

import hashlib
import io
import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image
from PIL import Image as PILImage

server = MCPServer("hdsp-bad-server")


@server.tool()
def ping() -> str:
    """Answer pong and the process id."""
    return f"pong {os.getpid()}"


@server.tool()
def crash() -> str:
    """Exit the process in the middle of the call."""
    sys.stderr.write("bad server: crashing now\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def picture() -> Image:
    """A 16x8 red PNG."""
    out = io.BytesIO()
    PILImage.new("RGB", (16, 8), (255, 0, 0)).save(out, format="PNG")
    return Image(data=out.getvalue(), format="png")


@server.tool()
def where(variable: str) -> str:
    """The working directory, and the SHA-256 of the environment variable
    `variable`'s value (not the value: it may be a credential)."""
    value = os.environ.get(variable)
    digest = "unset" if value is None else hashlib.sha256(value.encode()).hexdigest()
    return f"cwd={os.getcwd()} {variable}:sha256={digest}"


def extra() -> str:
    """A tool that grow added."""
    return "the extra tool ran"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `extra`, and tell the client its tools changed."""
    server.add_tool(extra, name="extra")
    await ctx.session.send_tool_list_changed()
    return "grown"


_hang_cancelled: list[anyio.Event] = []


def _cancelled() -> anyio.Event:
    if not _hang_cancelled:
        _hang_cancelled.append(anyio.Event())
    return _hang_cancelled[0]


@server.tool()
async def hang(ctx: Context) -> str:
    """Report progress, then wait until the client cancels the call."""
    cancelled = _cancelled()
    await ctx.report_progress(1, None, "hanging until cancelled")
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        sys.stderr.write("bad server: hang cancelled\n")
        cancelled.set()
        raise
    return "never"


@server.tool()
async def was_hang_cancelled() -> str:
    """Whether a call of hang was cancelled by the client (waits up to 10 s)."""
    cancelled = _cancelled()
    with anyio.move_on_after(10):
        await cancelled.wait()
    return "hang was cancelled" if cancelled.is_set() else "hang was never cancelled"


@server.tool()
async def flood(ctx: Context) -> str:
    """Say every 10 ms for half a second that the tools changed (they did not)."""
    for _ in range(50):
        await ctx.session.send_tool_list_changed()
        await anyio.sleep(0.01)
    return "flooded"


@server.tool()
async def shout(ctx: Context) -> str:
    """Text that would drive a terminal: set its clipboard, clear it, reverse text."""
    await ctx.report_progress(1, 1, "\x1b[2Jprogress \u202egnp.exe")
    return "\x1b]52;c;aGk=\x07 \x1b[2J gone \u202egnp.exe"


if __name__ == "__main__":
    sys.stderr.write(f"bad server: started, pid {os.getpid()}\n")
    server.run("stdio")
