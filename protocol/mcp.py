"""MCP servers the agent uses as tools (issue 23): `ListMcpServers`,
`RestartMcpServer`, `TrustMcpServer`, and the records they and the daemon-wide
`mcpServerChanged` event carry; `OfferedMcpServer`, a server a client offers one
task (an ACP host's, issue 24) with `StartNewTask` or `SendMessage`.

Everything a server said (its name for itself, its tools' descriptions, an
error it gave) is untrusted text: clients show it escaped.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ._base import CommandBase, WireStruct

__all__ = [
    "ListMcpServers",
    "McpServerList",
    "McpServerState",
    "McpServerStatus",
    "McpToolInfo",
    "OfferedMcpServer",
    "RestartMcpServer",
    "TrustMcpServer",
]

#: A server's name: what the model sees in `mcp__NAME__tool`.
SERVER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,47}$"


class OfferedMcpServer(WireStruct, frozen=True):
    """An MCP server a client offers one task, beside the configured ones: a
    program spoken to over stdio (`command`, `args`, `env`; it runs in the task's
    workspace) or a Streamable HTTP endpoint (`url`, `headers`). hdspd keeps it in
    memory only, never on disk nor in its log (its `env` and `headers` may hold
    the client's credentials, taken as they are: `${secret:NAME}` is not filled
    in), until the task closes, the daemon stops or the client offers others.
    A configured server of the same name wins; a tool of an offered server runs
    as any MCP tool does: after an approval, unless `alwaysAllowMcp` is on."""

    name: Annotated[str, Meta(pattern=SERVER_NAME_PATTERN)]
    command: Annotated[str, Meta(min_length=1)] | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    url: Annotated[str, Meta(pattern="^https?://")] | None = None
    headers: dict[str, str] = {}


McpServerState = Literal["disabled", "untrusted", "stopped", "connecting", "connected", "failed"]


class McpToolInfo(WireStruct, frozen=True):
    """One tool of a server."""

    name: Annotated[str, Meta(description="The tool's name on its server.")]
    offered_as: Annotated[
        str, Meta(description="The name the model calls it by: mcp__SERVER__TOOL.")
    ]
    description: Annotated[str, Meta(description="The server's description (untrusted).")] = ""
    always_allow: Annotated[
        bool, Meta(description="The configuration lets it run without asking.")
    ] = False


class McpServerStatus(WireStruct, frozen=True):
    """One configured server and how it is doing."""

    name: str
    scope: Annotated[
        Literal["global", "workspace", "task"],
        Meta(
            description=(
                "global: the settings' mcp.servers; workspace: a .hdsp/mcp.json; task: "
                "offered to one task by a client (taskId), an ACP host's."
            )
        ),
    ]
    state: Annotated[
        McpServerState,
        Meta(
            description=(
                "disabled (configured off); untrusted (a workspace server nobody trusted "
                "yet: `hdsp mcp trust NAME`); stopped (not started yet: servers start when a "
                "task first needs them); connecting; connected; failed (see error; "
                "retryInSeconds: when it is tried again, restarts backing off)."
            )
        ),
    ]
    workspace: Annotated[str | None, Meta(description="The workspace of a workspace server.")] = (
        None
    )
    task_id: Annotated[str | None, Meta(description="The task an offered server is for.")] = None
    transport: Literal["stdio", "http"] = "stdio"
    error: Annotated[str | None, Meta(description="Why it failed or is untrusted.")] = None
    target: Annotated[str, Meta(description="What it runs (command and arguments) or its URL.")] = (
        ""
    )
    server_info: Annotated[
        str | None, Meta(description="The server's name and version for itself (untrusted).")
    ] = None
    tools: list[McpToolInfo] = []
    resources: Annotated[int, Meta(description="How many resources it lists.")] = 0
    restarts: Annotated[int, Meta(description="Restarts after a crash since hdspd started.")] = 0
    retry_in_seconds: Annotated[
        float | None, Meta(description="failed: seconds until the next attempt, if any.")
    ] = None
    # What its configuration says besides `target`: what a person checks before
    # trusting a workspace's server (values of variables and headers stay in the
    # file: they may be credentials).
    cwd: Annotated[str | None, Meta(description="The directory it runs in, as configured.")] = None
    env_names: Annotated[
        list[str], Meta(description="The environment variables its configuration sets.")
    ] = []
    header_names: Annotated[
        list[str], Meta(description="The HTTP headers its configuration sends.")
    ] = []
    secrets: Annotated[
        list[str],
        Meta(description="The keyring secrets (`${secret:NAME}`) it is given when it starts."),
    ] = []
    always_allow: Annotated[
        list[str], Meta(description="Its tools configured to run without asking (`*`: all).")
    ] = []
    fingerprint: Annotated[
        str,
        Meta(
            description=(
                "A digest of its whole configuration entry: TrustMcpServer with it trusts "
                "this entry only."
            )
        ),
    ] = ""


class McpServerList(WireStruct, frozen=True):
    servers: list[McpServerStatus] = []
    config_error: Annotated[
        str | None,
        Meta(description="Why the workspace's .hdsp/mcp.json could not be read, if it could not."),
    ] = None


class ListMcpServers(CommandBase[McpServerList], tag="ListMcpServers", frozen=True):
    """The MCP servers a task in `workspace` has (the settings' and the workspace's
    `.hdsp/mcp.json`), with their state; without `workspace`, the settings' only.
    With `start`, servers not started yet are started, and the reply waits (up to
    their startup timeout) until each is connected or failed."""

    workspace: str | None = None
    start: bool = False


class RestartMcpServer(CommandBase[McpServerStatus], tag="RestartMcpServer", frozen=True):
    """Stop a server (if it runs) and start it again; the reply waits until it is
    connected or failed. A failed server's backoff is reset."""

    name: str
    workspace: str | None = None


class TrustMcpServer(CommandBase[McpServerStatus], tag="TrustMcpServer", frozen=True):
    """Trust (or, with `trusted` false, stop trusting) a server of a workspace's
    `.hdsp/mcp.json`, exactly as it is written now: a change to its definition
    (command, arguments, environment, URL, headers, alwaysAllow) makes it
    untrusted again. A trusted server starts at once. With `fingerprint` (from
    the server's status a person was shown), only that definition is trusted:
    if the file changed since, the command is refused."""

    name: str
    workspace: str
    trusted: bool = True
    fingerprint: Annotated[
        str | None,
        Meta(description="Trust only if the entry's digest is still this one (McpServerStatus)."),
    ] = None
