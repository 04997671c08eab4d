"""An MCP server that misbehaves on purpose (stdio, the SDK's own MCPServer).

Tools: `ping` answers "pong N" (N: its process id, so a test sees a restart);
`crash` kills the process in the middle of the call, before any answer;
`picture` returns a small PNG (made with Pillow); `grow` adds a tool named
`extra` and says so (`notifications/tools/list_changed`); `where` tells its
working directory and a digest of an environment variable's value (what it
was started with). Arguments after the script's path are ignored (a test names
its own server by one).
"""

from __future__ import annotations

import hashlib
import io
import os
import sys

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


if __name__ == "__main__":
    sys.stderr.write(f"bad server: started, pid {os.getpid()}\n")
    server.run("stdio")
