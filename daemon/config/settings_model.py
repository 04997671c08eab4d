"""The settings document's pydantic models: :class:`Settings` and its sections.

Every section is immutable once validated and keeps the keys it does not know
(``extra="allow"`` at every level), so that a load/save cycle keeps what an
older or a newer hdsp wrote. The store that keeps them is in :mod:`.settings`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hdsp.daemon.conversation import ModelInfo, StreamTimeouts
from hdsp.daemon.scrubber import url_credentials
from hdsp.protocol import tcp_endpoints

from .agents import AgentDefinition, AgentLimits
from .approvals import ApprovalSettings
from .mcp import McpSettings
from .modes import ModeDefinition
from .provider_kinds import ProviderKind
from .secrets import SECRET_NAME_PATTERN
from .tool_calls import ToolCallLimits

__all__ = [
    "PROFILE_NAME_PATTERN",
    "SETTINGS_VERSION",
    "CheckpointSettings",
    "GatewaySettings",
    "KernelProvider",
    "KernelSettings",
    "ModelInfoOverride",
    "ProfileKernels",
    "ProfileOptions",
    "ProviderProfile",
    "RetrySettings",
    "SandboxMode",
    "SandboxSettings",
    "Settings",
    "StoreSettings",
    "TcpSettings",
    "check_store_url",
]

#: The shape of the document this hdsp writes; see :func:`migrate`.
SETTINGS_VERSION: Final = 2


#: Profile names: as secret names, so that both fit on a command line unquoted.
PROFILE_NAME_PATTERN: Final = SECRET_NAME_PATTERN


class _Section(BaseModel):
    """Immutable once validated; keeps keys it does not know (older, newer hdsp)."""

    model_config = ConfigDict(extra="allow", frozen=True)


class ProfileOptions(_Section):
    """Provider options of a profile. Others are kept and passed on where a
    provider knows them."""

    #: Anthropic extended thinking: tokens the model may think for (at least 1024).
    thinking_budget: int | None = Field(default=None, ge=1024)
    #: OpenAI reasoning models: how hard to think.
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    #: The most tokens one reply may have (below the model's own limit).
    max_tokens: int | None = Field(default=None, ge=1)
    #: Seconds the server may take to start answering a request (the first byte
    #: of its response) before the request is given up and retried. Raise it for a
    #: local server that loads its model before it answers.
    first_byte_timeout: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    #: Seconds the server may stay silent between two events of a reply that
    #: streams before the reply is given up and retried.
    idle_timeout: float = Field(default=120.0, gt=0, allow_inf_nan=False)

    #: Condense the conversation (a summary replaces its older part) before a
    #: request that would fill more than this percentage of the model's context window.
    condense_threshold: int = Field(default=80, ge=5, le=100)
    #: Percentage of the context window kept free beside the reply's max tokens:
    #: a request over the rest is reduced even below the threshold (seed 004's 10%).
    context_buffer: int = Field(default=10, ge=0, le=50)
    #: False: never ask the model for a summary; reduce by truncating instead.
    auto_condense: bool = True
    #: Whether the model takes images (plots, pasted pictures); None: as the model
    #: table (or the settings' `models` entry) says. False: each image reaches the
    #: model as a short text note instead.
    supports_images: bool | None = None

    def stream_timeouts(self) -> StreamTimeouts:
        """These options' bounds on a server's silences."""
        return StreamTimeouts(first_byte=self.first_byte_timeout, idle=self.idle_timeout)


#: Where a task's kernels run: started by hdspd on this machine, in its sandbox
#: (local), or by a Jupyter server through its REST and WebSocket kernel API
#: (gateway: Jupyter Server, a JupyterHub single-user server, Jupyter Kernel
#: Gateway, Jupyter Enterprise Gateway).
KernelProvider = Literal["local", "gateway"]

#: A Jupyter token is 48 hex digits; a secret's NAME that looks like one is the
#: token itself pasted where its name belongs.
_TOKEN_SHAPED = re.compile(r"^[0-9a-fA-F]{32,}$")


class GatewaySettings(_Section):
    """A Jupyter server whose kernels tasks use (``kernels.gateway``, or a
    profile's ``kernels.gateway``): its URL, the NAME of the keyring secret
    holding its token (never the token), and the kernelspec to start there."""

    #: The server's base URL: http://127.0.0.1:8888/, a JupyterHub user's
    #: https://hub.example.org/user/NAME/, an Enterprise Gateway's URL.
    url: str
    #: The NAME of the secret (``hdsp secret set NAME``) holding the server's
    #: token, sent as ``Authorization: token ...``; None: the server wants none.
    token_secret: str | None = Field(default=None, pattern=SECRET_NAME_PATTERN)
    #: The kernelspec to start on the server; None: the server's default.
    kernel_name: str | None = Field(default=None, min_length=1)
    #: Where on the server kernels start, relative to its root directory
    #: (Jupyter Server's kernel `path`); None: the server's root.
    path: str | None = None
    #: Seconds one REST request may take.
    request_timeout_seconds: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    #: Seconds between two checks of a kernel's status on the server (a kernel
    #: the server culled or shut down is noticed within this).
    poll_seconds: float = Field(default=5.0, gt=0, allow_inf_nan=False)

    @field_validator("url")
    @classmethod
    def _url_is_http_without_credentials(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")) or len(value.split("://", 1)[1]) == 0:
            raise ValueError("must be an http:// or https:// URL, such as http://127.0.0.1:8888/")
        if url_credentials(value) or "token=" in value.lower():
            raise ValueError(
                "must not carry credentials; store the token with `hdsp secret set NAME` "
                "and name it in `token_secret`"
            )
        return value

    @field_validator("token_secret")
    @classmethod
    def _a_name_not_a_token(cls, value: str | None) -> str | None:
        if value is not None and _TOKEN_SHAPED.match(value):
            raise ValueError(
                "looks like a token itself, not the name of a secret: store it with "
                "`hdsp secret set NAME` and give NAME here"
            )
        return value


class ProfileKernels(_Section):
    """A profile's choice of where its tasks' kernels run, over ``kernels``."""

    #: None: the ``kernels.provider`` setting.
    provider: KernelProvider | None = None
    #: None: the ``kernels.gateway`` setting.
    gateway: GatewaySettings | None = None


class ProviderProfile(_Section):
    """Which API, model and key a task talks to (a Roo "API configuration")."""

    name: str = Field(pattern=PROFILE_NAME_PATTERN)
    provider: ProviderKind
    model: str = Field(min_length=1)
    #: The API's base URL (".../v1" for OpenAI-compatible servers); None for the
    #: provider's own.
    base_url: str | None = None
    options: ProfileOptions = ProfileOptions()
    #: The NAME of the secret holding the API key (see :mod:`.secrets`), never the key.
    secret: str | None = Field(default=None, pattern=SECRET_NAME_PATTERN)
    #: Where this profile's tasks run their kernels; None: the ``kernels`` settings.
    kernels: ProfileKernels | None = None

    @field_validator("model")
    @classmethod
    def _model_is_a_name(cls, value: str) -> str:
        if value != value.strip():
            raise ValueError("must not start or end with spaces")
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url_is_http(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")) or len(value.split("://", 1)[1]) == 0:
            raise ValueError(
                "must be an http:// or https:// URL, such as http://localhost:11434/v1"
            )
        return value


class ModelInfoOverride(_Section):
    """The user's entry in the model table: what is given replaces hdsp's numbers
    for that model id, what is left out keeps them."""

    context_window: int | None = Field(default=None, ge=1)
    max_output: int | None = Field(default=None, ge=1)
    #: USD per million tokens.
    input_price: float | None = Field(default=None, ge=0)
    output_price: float | None = Field(default=None, ge=0)
    cache_read_price: float | None = Field(default=None, ge=0)
    cache_write_price: float | None = Field(default=None, ge=0)
    supports_images: bool | None = None

    def apply(self, info: ModelInfo) -> ModelInfo:
        """`info` with the numbers this entry gives, and marked known."""
        import msgspec

        given = {
            name: value
            for name in type(self).model_fields
            if (value := getattr(self, name)) is not None
        }
        return msgspec.structs.replace(info, known=True, **given)


class RetrySettings(_Section):
    """Automatic retries of a failed model request (made a policy by
    :meth:`hdsp.daemon.llm.retry.RetryPolicy.from_settings`)."""

    #: Seconds before the first retry; doubled at each next one, with jitter.
    base_delay: float = Field(default=1.0, gt=0)
    #: The longest wait between two attempts; a server asking for more gets none.
    max_delay: float = Field(default=600.0, gt=0)
    #: Attempts in all, the first included, before the task asks the user
    #: (api_req_failed); None: retry while the error allows. The default, 5, is
    #: the retry policy's (see :class:`~hdsp.daemon.llm.retry.RetryPolicy`).
    max_attempts: int | None = Field(default=5, ge=1)

    @model_validator(mode="after")
    def _max_not_below_base(self) -> RetrySettings:
        if self.max_delay < self.base_delay:
            raise ValueError(
                f"max_delay ({self.max_delay:g} s) must not be smaller than base_delay "
                f"({self.base_delay:g} s)"
            )
        return self


class KernelSettings(_Section):
    #: How long one execution may run before it is interrupted.
    default_timeout_seconds: float = Field(default=120.0, gt=0)
    #: How long an interrupted kernel may take to stop before it is restarted.
    interrupt_grace_seconds: float = Field(default=5.0, ge=0)
    #: A kernel hdsp started for a task is shut down after it and its task have
    #: been idle this long (seconds), giving its memory back; the next code run
    #: starts a new one and the task is told its state is gone. None: never.
    #: One hour, as JupyterHub's idle culler: a person coming back from lunch
    #: keeps their variables; a kernel left over from yesterday does not stay.
    #: Kernels hdsp attached to (a notebook's) are never shut down.
    cull_idle_seconds: float | None = Field(default=3600.0, gt=0)
    #: Spare kernels kept started, per workspace and sandbox settings, so that a
    #: task's first code does not wait for its kernel to start; one starts when a
    #: task starts. Never while memory is short; culled when idle as above. 0: none.
    pool_size: int = Field(default=1, ge=0, le=4)
    #: Where tasks' kernels run (a profile's ``kernels.provider`` and a task's
    #: own choice come first): ``local`` or ``gateway`` (the server below).
    provider: KernelProvider = "local"
    #: The Jupyter server of the ``gateway`` provider.
    gateway: GatewaySettings | None = None

    @model_validator(mode="after")
    def _a_server_for_the_gateway(self) -> KernelSettings:
        if self.provider == "gateway" and self.gateway is None:
            raise ValueError(
                "provider is gateway but gateway is not set: set kernels.gateway first "
                '({"url": "http://127.0.0.1:8888/", "token_secret": "NAME"})'
            )
        return self


SandboxMode = Literal["workspace-write", "read-only", "off"]


class SandboxSettings(_Section):
    """The OS sandbox around shell commands and kernels (see :mod:`hdsp.daemon.sandbox`)."""

    #: workspace-write: writes only in the workspace and a private /tmp;
    #: read-only: writes only in the private /tmp; off: no sandbox at all.
    mode: SandboxMode = "workspace-write"
    #: Whether sandboxed code may use the network (off: only its own loopback).
    network: bool = False
    #: The bubblewrap binary: a name looked up in PATH, or a path.
    bwrap_path: str = Field(default="bwrap", min_length=1)


class CheckpointSettings(_Section):
    """Checkpoints of the agent's workspace (see :mod:`hdsp.daemon.checkpoints`)."""

    #: Take a checkpoint before every change the agent makes.
    enabled: bool = True
    #: Files bigger than this (bytes) are left out of checkpoints, with a note.
    max_file_bytes: int = Field(default=10 * 1024 * 1024, ge=0)
    #: More gitignore patterns left out of checkpoints (beside the workspace's
    #: .gitignore files and its .hdspignore).
    exclude: list[str] = []
    #: How long one git command may take (seconds).
    git_timeout_seconds: float = Field(default=60.0, gt=0)


class TcpSettings(_Section):
    """A team daemon: TCP endpoints beside the local socket, only ever under CURVE
    (see :mod:`hdsp.daemon.server.curve`). Read at start: a change takes effect
    when hdspd restarts."""

    #: `tcp://HOST:PORT`: control on PORT, events on PORT + 1; None: no TCP at all.
    listen: str | None = None

    @field_validator("listen")
    @classmethod
    def _listen_is_tcp(cls, value: str | None) -> str | None:
        if value is not None:
            tcp_endpoints(value)  # raises ValueError saying what is wrong
        return value


def check_store_url(url: str) -> str:
    """A PostgreSQL URI (libpq's form) that holds no password: settings are
    exported and shown, a password is not (name a keyring secret in
    ``store.secret``, or let libpq find it: ~/.pgpass, PGPASSFILE, a service
    file)."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres") or not url.startswith(parts.scheme + "://"):
        raise ValueError(
            "must be a PostgreSQL URL, such as postgresql:///hdsp (the local server's "
            "database hdsp) or postgresql://user@host:5432/hdsp; leave it unset for the "
            "SQLite file in the data dir"
        )
    userinfo = parts.netloc.rpartition("@")[0]  # '' without an @
    query = [key.lower() for key, _ in parse_qsl(parts.query, keep_blank_values=True)]
    if ":" in userinfo or any("password" in key for key in query):
        raise ValueError(
            "must not hold a password (settings are exported and shown): store it with "
            "`hdsp secret set NAME` and name it in store.secret, or leave it to libpq "
            "(~/.pgpass, PGPASSFILE, or a service file named by ?service=)"
        )
    return url


class StoreSettings(_Section):
    """Where hdspd keeps tasks, their histories and the event log. Read at
    start-up: a change takes effect when hdspd starts again."""

    #: None: SQLite, ``hdsp.sqlite3`` in the data dir. A PostgreSQL URL
    #: (``postgresql://[user@][host][:port]/dbname[?param=value...]``, libpq's):
    #: that database, which hdsp makes its own (see the README).
    url: str | None = None
    #: The NAME of the keyring secret holding the PostgreSQL password (see
    #: :mod:`.secrets`), never the password; None: libpq finds one itself
    #: (~/.pgpass, PGPASSFILE, a service file) or the server needs none.
    secret: str | None = Field(default=None, pattern=SECRET_NAME_PATTERN)

    @field_validator("url")
    @classmethod
    def _url_is_postgres(cls, value: str | None) -> str | None:
        return None if value is None else check_store_url(value)


class Settings(_Section):
    """The whole settings document (``settings.json``)."""

    version: int = Field(default=SETTINGS_VERSION, ge=1)
    #: The profile new tasks use when they name none; None: `default` if the
    #: environment defines it.
    current_profile: str | None = None
    profiles: dict[str, ProviderProfile] = {}
    #: The user's extensions of the model table, by model id.
    models: dict[str, ModelInfoOverride] = {}
    retry: RetrySettings = RetrySettings()
    approvals: ApprovalSettings = Field(default_factory=ApprovalSettings)
    kernels: KernelSettings = KernelSettings()
    sandbox: SandboxSettings = SandboxSettings()
    checkpoints: CheckpointSettings = CheckpointSettings()
    #: Instructions for every task, first in the prompt's instructions (see
    #: :mod:`hdsp.daemon.modes.rules`).
    custom_instructions: str = Field(default="", max_length=20_000)
    #: The user's own modes, beside the built-in ones (:mod:`hdsp.daemon.modes`).
    custom_modes: list[ModeDefinition] = []
    #: The user's agents, beside the built-in ones (:mod:`hdsp.daemon.agents`).
    agents: list[AgentDefinition] = []
    #: Depth and fan-out limits of a tree of agents.
    agent_limits: AgentLimits = AgentLimits()
    #: Tool calls per reply, and at once per task and daemon-wide (config.tool_calls).
    tool_calls: ToolCallLimits = ToolCallLimits()
    #: MCP servers every workspace has (issue 23; :mod:`hdsp.daemon.config.mcp`).
    mcp: McpSettings = McpSettings()
    #: TCP endpoints under CURVE, for a team daemon (off unless `tcp.listen` is set).
    tcp: TcpSettings = TcpSettings()
    #: Where the durable state lives: SQLite, or PostgreSQL (issue 25).
    store: StoreSettings = StoreSettings()

    @model_validator(mode="before")
    @classmethod
    def _profile_names_from_keys(cls, data: Any) -> Any:
        """A profile's key is its name: fill it in where the file leaves it out, and
        let the key win where they disagree, so that a hand-edited file stays usable."""
        if isinstance(data, Mapping) and isinstance(data.get("profiles"), Mapping):
            profiles = {
                key: ({**value, "name": key} if isinstance(value, Mapping) else value)
                for key, value in data["profiles"].items()
            }
            data = {**data, "profiles": profiles}
        return data

    def document(self) -> dict[str, Any]:
        """The settings as the JSON object the file holds."""
        return self.model_dump(mode="json")
