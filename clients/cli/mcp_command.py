"""`hdsp mcp list|tools|restart|trust`: the MCP servers the agent uses as tools.

The workspace is the directory the command runs in (as for `hdsp run`), or
`--workspace DIR`: its `.hdsp/mcp.json` servers are listed beside the settings'.
What a server says of itself (its name, its tools' descriptions, its errors) is
untrusted: it is printed through `Console.out`, which escapes control
characters; `--json` prints the replies as NDJSON.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from hdsp.protocol import ErrorCode, McpServerList, McpServerStatus, encode

from ..errors import CommandFailed
from ..exit_codes import ExitCode
from .ask_prompt import read_line
from .console import Console, print_result

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["add_mcp_parser", "format_server", "format_tools"]


def _workspace(args: argparse.Namespace) -> str:
    return os.path.abspath(args.workspace or os.getcwd())


def format_server(status: McpServerStatus) -> list[str]:
    """The lines `hdsp mcp list` prints for one server (escaped by `Console.out`)."""
    where = "settings" if status.scope == "global" else "workspace"
    head = f"{status.name}  {status.state}  ({where}, {status.transport})"
    if status.state == "connected":
        head += f"  {len(status.tools)} tools"
        if status.resources:
            head += f", {status.resources} resources"
    lines = [head, f"    {status.target}", *_configuration_lines(status)]
    if status.server_info:
        lines.append(f"    server: {status.server_info}")
    if status.error:
        lines.append(f"    error: {status.error}")
    if status.retry_in_seconds is not None:
        lines.append(f"    next attempt in {status.retry_in_seconds:g} s")
    if status.restarts:
        lines.append(f"    restarted {status.restarts} times after it stopped")
    return lines


def _configuration_lines(status: McpServerStatus) -> list[str]:
    """What its configuration says besides the command or URL: what to check
    before trusting a workspace's server."""
    lines = []
    if status.cwd:
        lines.append(f"    in directory: {status.cwd}")
    if status.env_names:
        lines.append(f"    environment: {', '.join(status.env_names)}")
    if status.header_names:
        lines.append(f"    headers: {', '.join(status.header_names)}")
    if status.secrets:
        lines.append(f"    keyring secrets it gets: {', '.join(status.secrets)}")
    if status.always_allow:
        lines.append(f"    runs without asking: {', '.join(status.always_allow)}")
    return lines


def format_tools(status: McpServerStatus) -> list[str]:
    """The lines `hdsp mcp tools` prints for one server."""
    if status.state != "connected":
        why = f": {status.error}" if status.error else ""
        return [f"{status.name}: {status.state}{why}"]
    lines = [f"{status.name}:"]
    for tool in status.tools:
        mark = "  (always allowed)" if tool.always_allow else ""
        lines.append(f"  {tool.offered_as}{mark}")
        first = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
        if first:
            lines.append(f"      {first[:200]}")
    if not status.tools:
        lines.append("  (no tools)")
    return lines


def _print_list(cli: Console, listing: McpServerList) -> None:
    if listing.config_error:
        cli.out(f"warning: {listing.config_error}")
    if not listing.servers:
        cli.out(
            "No MCP servers. Add one to the settings (`hdsp config set mcp.servers "
            '\'{"NAME": {"command": "..."}}\'`) or to .hdsp/mcp.json in the workspace.'
        )
    for status in listing.servers:
        for line in format_server(status):
            cli.out(line)


async def run_list(cli: Console, client: Client) -> int:
    a = cli.args
    listing = await client.list_mcp_servers(_workspace(a), start=a.start)
    if a.json:
        cli.out_raw(encode(listing).decode())
    else:
        _print_list(cli, listing)
    return ExitCode.OK


async def run_tools(cli: Console, client: Client) -> int:
    a = cli.args
    listing = await client.list_mcp_servers(_workspace(a), start=True)
    servers = [s for s in listing.servers if a.name is None or s.name == a.name]
    if a.name is not None and not servers:
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST, f"There is no MCP server named {a.name!r} here."
        )
    if a.json:
        for status in servers:
            cli.out_raw(encode(status).decode())
        return ExitCode.OK
    for status in servers:
        for line in format_tools(status):
            cli.out(line)
    return ExitCode.OK


async def run_restart(cli: Console, client: Client) -> int:
    a = cli.args
    status = await client.restart_mcp_server(a.name, _workspace(a))
    print_result(cli, status, format_server(status))
    return ExitCode.OK if status.state == "connected" else ExitCode.FAILED


async def run_trust(cli: Console, client: Client) -> int:
    """Show the workspace server's entry as the daemon read it, ask (unless
    --yes), and trust that entry only: if the file changed in between, the
    daemon refuses."""
    a = cli.args
    workspace = _workspace(a)
    if a.revoke:
        status = await client.trust_mcp_server(a.name, workspace, trusted=False)
        return _print_trusted(cli, status, "No longer trusted")
    if a.json and not a.yes:
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST, "--json has nobody to ask: add --yes to trust it."
        )
    listing = await client.list_mcp_servers(workspace)
    shown = next((s for s in listing.servers if s.name == a.name and s.scope == "workspace"), None)
    if shown is None:
        extra = f" ({listing.config_error})" if listing.config_error else ""
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST,
            f"{workspace}/.hdsp/mcp.json has no server named {a.name!r}{extra}.",
        )
    if not a.yes:
        cli.out(f"The server {shown.name} of {shown.workspace}/.hdsp/mcp.json:")
        for line in format_server(shown):
            cli.out(line)
        reply = await _confirm("Trust it as written, to run when tasks here need it? [y/N] ")
        if reply.strip().lower() not in ("y", "yes"):
            cli.out("Not trusted.")
            return ExitCode.FAILED
    status = await client.trust_mcp_server(a.name, workspace, fingerprint=shown.fingerprint)
    return _print_trusted(cli, status, "Trusted")


async def _confirm(prompt: str) -> str:
    """The line typed after `prompt`: on a terminal as every prompt of hdsp
    reads it, else the next line of stdin ("" at its end)."""
    if sys.stdin.isatty():
        try:
            return await read_line(prompt)
        except EOFError:
            return ""
    sys.stdout.write(prompt)
    sys.stdout.flush()
    import anyio.to_thread

    line: str = await anyio.to_thread.run_sync(sys.stdin.readline)
    sys.stdout.write("\n")  # what a terminal would have echoed
    return line


def _print_trusted(cli: Console, status: McpServerStatus, verb: str) -> int:
    if cli.args.json:
        cli.out_raw(encode(status).decode())
        return ExitCode.OK
    cli.out(f"{verb}: {status.name} of {status.workspace} ({status.target})")
    for line in format_server(status):
        cli.out(line)
    return ExitCode.OK


def add_mcp_parser(sub: Any, common: argparse.ArgumentParser) -> Any:
    """`hdsp mcp ...`; returns its subcommands, for more of them (`serve`)."""
    text = "MCP: the agent's tools from MCP servers, and hdsp as an MCP server (serve)"
    p = sub.add_parser("mcp", parents=[common], help=text, description=text)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--workspace", help="the workspace whose .hdsp/mcp.json counts (default: here)"
    )

    listing = actions.add_parser(
        "list", parents=[common, where], help="the servers, their state and errors"
    )
    listing.add_argument(
        "--start", action="store_true", help="start servers not started yet, and wait for them"
    )
    listing.set_defaults(handler=run_list)

    tools = actions.add_parser(
        "tools", parents=[common, where], help="the tools each server offers (starts them)"
    )
    tools.add_argument("name", nargs="?", help="only this server")
    tools.set_defaults(handler=run_tools)

    restart = actions.add_parser(
        "restart", parents=[common, where], help="stop a server and start it again"
    )
    restart.add_argument("name")
    restart.set_defaults(handler=run_restart)

    trust = actions.add_parser(
        "trust",
        parents=[common, where],
        help="let a server of the workspace's .hdsp/mcp.json run, exactly as written now",
    )
    trust.add_argument("name")
    trust.add_argument("--revoke", action="store_true", help="stop trusting it (and stop it)")
    trust.add_argument(
        "--yes", action="store_true", help="trust it without asking (it prints what it trusted)"
    )
    trust.set_defaults(handler=run_trust)
    return actions
