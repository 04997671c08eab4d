"""MCP servers in the settings (`mcp.servers`) and in a workspace's
`.hdsp/mcp.json`: the common `mcpServers` shape, so that a configuration made for
another MCP host pastes in.

A server is either a local process spoken to over stdio (`command`, `args`,
`env`, `cwd`) or a Streamable HTTP endpoint (`url`, `headers`). Secrets are never
written in: an `env` or `headers` value may name a keyring secret as
`${secret:NAME}` (set with `hdsp secret set NAME`), which the daemon fills in
when it connects. In the settings, a header or variable whose name says it holds
a credential (`Authorization`, `X-Api-Key`, `GITHUB_TOKEN`) must be such a
reference, so that no export of the settings carries a key.

Keys may be written as this module names them or in camelCase (`alwaysAllow`,
`startupTimeout`), and Roo's and Cline's spellings are understood (`disabled`,
`autoApprove`, `type: "streamable-http"`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from hdsp.daemon.logs import is_secret_key

__all__ = [
    "SECRET_REFERENCE",
    "SERVER_NAME_PATTERN",
    "McpServerDefinition",
    "McpSettings",
    "parse_servers",
    "secret_references",
]

#: `${secret:NAME}`: the keyring secret NAME, filled in when the server starts.
SECRET_REFERENCE: Final = re.compile(r"\$\{secret:([A-Za-z0-9][A-Za-z0-9_.\-]{0,63})\}")

#: Names of headers that carry credentials whatever their words say.
_CREDENTIAL_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "cookie"})

#: Server names: what the model sees in `mcp__NAME__tool` and a person types.
SERVER_NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,47}$"


def secret_references(value: str) -> list[str]:
    """The secret names `value` refers to."""
    return SECRET_REFERENCE.findall(value)


def _credential_name(name: str) -> bool:
    return name.lower() in _CREDENTIAL_HEADERS or is_secret_key(name)


class McpServerDefinition(BaseModel):
    """One MCP server as configured."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    type: Literal["stdio", "streamable-http", "streamableHttp", "http"] | None = Field(
        default=None, validation_alias=AliasChoices("type", "transportType")
    )
    #: stdio: the program and its arguments (not run through a shell).
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = []
    #: Extra environment variables, over a minimal environment (never hdsp's own).
    env: dict[str, str] = {}
    #: The working directory; relative to the workspace for a workspace's server.
    cwd: str | None = None
    #: Streamable HTTP: the endpoint and extra request headers.
    url: str | None = Field(default=None, min_length=1)
    headers: dict[str, str] = {}
    disabled: bool = False
    enabled: bool = True
    #: Tools that run without asking (the user's choice, never the server's).
    always_allow: list[str] = Field(
        default=[], validation_alias=AliasChoices("always_allow", "alwaysAllow", "autoApprove")
    )
    #: Seconds a tool call may take.
    timeout: float = Field(default=60.0, gt=0, le=86_400)
    #: Seconds the server may take to start and answer `initialize`.
    startup_timeout: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        validation_alias=AliasChoices("startup_timeout", "startupTimeout"),
    )
    #: Start it when hdspd starts, not when a task first needs its tools.
    autostart: bool = Field(
        default=False, validation_alias=AliasChoices("autostart", "autoStart", "startOnLaunch")
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerDefinition:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (a stdio server) or `url` (Streamable HTTP)")
        if self.transport == "stdio" and self.command is None:
            raise ValueError("a stdio server needs `command`")
        if self.transport == "http" and not self.url:
            raise ValueError("a Streamable HTTP server needs `url`")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("`url` must start with http:// or https://")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        if self.type in ("streamable-http", "streamableHttp", "http"):
            return "http"
        if self.type == "stdio":
            return "stdio"
        return "stdio" if self.command is not None else "http"

    @property
    def is_enabled(self) -> bool:
        return self.enabled and not self.disabled

    def secrets(self) -> list[str]:
        """Every secret name its env and headers refer to."""
        found: list[str] = []
        for value in [*self.env.values(), *self.headers.values()]:
            found += secret_references(value)
        return found

    def inline_credentials(self) -> list[str]:
        """Env variables and headers that look like credentials but are written in
        (not `${secret:NAME}`): the settings refuse them."""
        found = []
        for where, values in (("env", self.env), ("headers", self.headers)):
            for name, value in values.items():
                if _credential_name(name) and value and not secret_references(value):
                    found.append(f"{where}.{name}")
        return found


class McpSettings(BaseModel):
    """`mcp` in the settings: the servers every workspace has."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    servers: dict[str, McpServerDefinition] = Field(
        default={}, validation_alias=AliasChoices("servers", "mcpServers")
    )

    @model_validator(mode="after")
    def _names_and_secrets(self) -> McpSettings:
        for name, server in self.servers.items():
            if not re.match(SERVER_NAME_PATTERN, name):
                raise ValueError(
                    f"MCP server name {name!r}: use letters, digits, `_`, `.` or `-` "
                    "(at most 48, starting with a letter or digit)"
                )
            if inline := server.inline_credentials():
                raise ValueError(
                    f"MCP server {name!r}: {', '.join(inline)} holds a credential written "
                    "in; settings never keep keys. Store it with `hdsp secret set NAME` "
                    "and write `${secret:NAME}` instead (for example "
                    '"Authorization": "Bearer ${secret:NAME}")'
                )
        return self


def parse_servers(document: Mapping[str, Any]) -> dict[str, McpServerDefinition]:
    """The servers of an `mcp.json` document (`{"mcpServers": {...}}`); raises
    ValueError (pydantic's ValidationError) naming what is wrong."""
    servers = document.get("mcpServers", document.get("servers", {}))
    if not isinstance(servers, Mapping):
        raise ValueError("`mcpServers` must be an object of servers by name")
    found: dict[str, McpServerDefinition] = {}
    for name, value in servers.items():
        if not isinstance(name, str) or not re.match(SERVER_NAME_PATTERN, name):
            raise ValueError(f"MCP server name {name!r}: use letters, digits, `_`, `.` or `-`")
        found[name] = McpServerDefinition.model_validate(value)
    return found
