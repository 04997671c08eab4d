"""The daemon's global settings: pydantic models, and the store that keeps them.

Why this shape (seed 001's ContextProxy, seed 003's StateProxy):

- One document, ``settings.json`` in the data dir, validated by the models below.
  Readers get a cached, validated, immutable copy (:attr:`SettingsStore.settings`);
  nothing re-reads the file on the hot path.
- Every change goes through :meth:`SettingsStore.modify`: computed on a copy,
  validated whole, written atomically (a temporary file in the same directory,
  fsync, rename, fsync of the directory) and only then served. An invalid change
  raises :class:`SettingsInvalid` listing every bad field, and nothing is written.
  Changes are applied one at a time, so concurrent updates never lose each other.
- Unknown keys, from an older or a newer hdsp, are kept through a load/save cycle
  (``extra="allow"`` at every level), and ``version`` names the document's shape;
  :func:`migrate` brings older documents up to date, step by step.
- A corrupt or invalid file is never silently emptied: it is moved aside as
  ``settings.json.corrupt-<UTC timestamp>``; what still validates is kept (a
  file that is not JSON keeps nothing: defaults apply); and the problem is logged
  and kept in :attr:`SettingsStore.problems` for the daemon to report.
- Settings hold the *names* of secrets, never their values (see :mod:`.secrets`).
  A key that looks like a secret (``api_key``, ``token``...) is refused anywhere
  in the document, so a pasted key cannot end up in the file, a reply or an export.

Errors::

    SettingsError              the file cannot be read or written (the message says which)
    └── SettingsInvalid        a change or document does not validate (`.errors`)
"""

from __future__ import annotations

import copy
import json
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import parse_qsl, urlsplit

import anyio
import anyio.to_thread
import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hdsp.daemon.atomic_write import fsync_directory, write_atomically
from hdsp.daemon.conversation import ModelInfo, StreamTimeouts
from hdsp.daemon.errors import HdspError
from hdsp.daemon.logs import is_secret_key
from hdsp.daemon.scrubber import url_credentials
from hdsp.protocol import ErrorCode, tcp_endpoints

from .agents import AgentDefinition, AgentLimits
from .approvals import ApprovalSettings
from .mcp import McpSettings
from .modes import ModeDefinition
from .provider_kinds import ProviderKind
from .secrets import SECRET_NAME_PATTERN

__all__ = [
    "PROFILE_NAME_PATTERN",
    "SETTINGS_VERSION",
    "CheckpointSettings",
    "FieldError",
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
    "SettingsError",
    "SettingsInvalid",
    "SettingsStore",
    "StoreSettings",
    "TcpSettings",
    "check_document",
    "check_store_url",
    "merge_patch",
    "migrate",
    "validate_salvaging",
]

log = structlog.get_logger("hdsp.settings")

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


# ---- errors ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldError:
    #: Dotted path of the field: "retry.max_attempts", "profiles.work.provider".
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '(the document)'}: {self.message}"


class SettingsError(HdspError):
    """The settings file cannot be read or written; the message says which and why."""

    code = ErrorCode.INTERNAL


class SettingsInvalid(SettingsError, ValueError):
    """A change or a document does not validate; `errors` lists every bad field
    (and so do the details of the error reply)."""

    code = ErrorCode.INVALID_REQUEST

    def __init__(
        self, errors: list[FieldError], what: str = "The settings were not changed"
    ) -> None:
        self.errors = errors
        listed = "; ".join(str(e) for e in errors)
        super().__init__(
            f"{what}: {listed}.",
            details={"errors": [{"path": e.path, "message": e.message} for e in errors]},
        )


# ---- documents: migration, merge, validation ------------------------------------------


def _v0_to_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Files written before the version field existed have version 1's shape."""
    return data


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 retried a failing model request for ever by default, and wrote
    that default (``retry.max_attempts: null``) into every file: the null goes, so
    that the finite default of version 2 applies."""
    retry = data.get("retry")
    if isinstance(retry, Mapping) and "max_attempts" in retry and retry["max_attempts"] is None:
        data["retry"] = {key: value for key, value in retry.items() if key != "max_attempts"}
    return data


#: One step per version: _MIGRATIONS[n] turns a version-n document into version n+1.
_MIGRATIONS: Final[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    0: _v0_to_v1,
    1: _v1_to_v2,
}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Bring a settings document of an older version up to :data:`SETTINGS_VERSION`.

    A document without ``version`` is version 0. A newer document is returned as
    it is: this hdsp keeps what it does not know and never lowers the version.

    Raises:
        SettingsInvalid: ``version`` is not a whole number of at least 0.
    """
    version = data.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise SettingsInvalid(
            [FieldError("version", f"must be a whole number, not {version!r}")],
            "The settings document cannot be read",
        )
    if version > SETTINGS_VERSION:
        log.warning(
            "settings written by a newer hdsp: keys this version does not know are kept",
            file_version=version,
            known_version=SETTINGS_VERSION,
        )
        return data
    while version < SETTINGS_VERSION:
        data = _MIGRATIONS[version](dict(data))
        version += 1
        data["version"] = version
    return data


def merge_patch(target: Any, patch: Any) -> Any:
    """JSON Merge Patch (RFC 7396): objects merge key by key, ``None`` removes a key,
    anything else replaces. Neither argument is modified."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = copy.deepcopy(dict(target)) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _walk(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield (*path, str(key))
            yield from _walk(item, (*path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, (*path, str(index)))


def _secret_like_keys(document: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Paths of keys named like secret values. A profile's ``secret`` (the name of a
    keyring entry) is the one allowed."""
    return [
        path
        for path in _walk(document)
        if is_secret_key(path[-1])
        and not (len(path) == 3 and path[0] == "profiles" and path[2] == "secret")
        # A gateway's `token_secret` names a keyring entry too (validated as a name).
        and not (path[-2:] == ("gateway", "token_secret") and path[-3] == "kernels")
        and path != ("store", "secret")
        # An MCP server's env and headers: McpSettings lets only `${secret:NAME}`
        # references stand under names like these.
        and not (len(path) == 5 and path[:2] == ("mcp", "servers") and path[3] in _MCP_MAPS)
    ]


_MCP_MAPS = frozenset({"env", "headers"})


_SECRET_REASON = (
    "looks like a secret value; settings hold only the names of secrets. Store the "
    "key with `hdsp secret set NAME` and name it in a profile's `secret`"
)


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _field_errors(exc: ValidationError) -> list[FieldError]:
    return [FieldError(_dotted(err["loc"]), err["msg"]) for err in exc.errors()]


def check_document(document: Mapping[str, Any]) -> Settings:
    """Validate a whole document strictly.

    Raises:
        SettingsInvalid: listing every bad field (and every key that looks like a secret).
    """
    errors = [FieldError(".".join(p), _SECRET_REASON) for p in _secret_like_keys(document)]
    try:
        settings = Settings.model_validate(document)
    except ValidationError as exc:
        errors += _field_errors(exc)
    if errors:
        raise SettingsInvalid(errors)
    return settings


def _unit_of(loc: tuple[Any, ...]) -> tuple[str, ...]:
    """What to leave out for an error at `loc`: a whole profile or model entry, a
    whole list, else the field itself."""
    unit: list[str] = []
    for part in loc:
        if not isinstance(part, str):
            break  # a list index: the list goes as a whole
        unit.append(part)
        if len(unit) == 2 and unit[0] in ("profiles", "models"):
            break
    return tuple(unit)


def _get(document: Mapping[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
    node: Any = document
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _restore(document: dict[str, Any], path: tuple[str, ...], base: Mapping[str, Any]) -> None:
    """Put `base`'s value at `path` into `document`, or remove `path` if base has none."""
    parent: Any = document
    for part in path[:-1]:
        if not isinstance(parent, dict) or not isinstance(parent.get(part), dict):
            return
        parent = parent[part]
    found, value = _get(base, path)
    if found:
        parent[path[-1]] = copy.deepcopy(value)
    else:
        parent.pop(path[-1], None)


def validate_salvaging(
    document: Mapping[str, Any], base: Mapping[str, Any] | None = None
) -> tuple[Settings, list[FieldError]]:
    """Validate `document`, leaving out what does not validate: a whole profile or
    model entry, a list, or a single field, which takes `base`'s value (or its
    default). Returns the settings and what was left out, and why.

    Raises:
        SettingsInvalid: nothing could be salvaged (the document is not an object).
    """
    base = base or {}
    if not isinstance(document, Mapping):
        raise SettingsInvalid([FieldError("", "must be a JSON object")], "Not a settings document")
    work: dict[str, Any] = copy.deepcopy(dict(document))
    rejected: list[FieldError] = []
    for path in _secret_like_keys(work):
        unit = path if path[0] not in ("profiles", "models") else path[:2]
        rejected.append(FieldError(".".join(path), _SECRET_REASON))
        _restore(work, unit, {})  # never from base: a secret-like key is never wanted
    tried: set[tuple[str, ...]] = set()
    while True:
        try:
            return Settings.model_validate(work), rejected
        except ValidationError as exc:
            errors = exc.errors()
        progress = False
        for err in errors:
            unit = _unit_of(err["loc"])
            rejected.append(FieldError(_dotted(err["loc"]), err["msg"]))
            if not unit or (unit in tried and not _get(work, unit)[0]):
                continue
            # The first time, restore the base's value; if that fails too, drop it.
            _restore(work, unit, base if unit not in tried else {})
            tried.add(unit)
            progress = True
        if not progress:
            raise SettingsInvalid(
                [FieldError(_dotted(e["loc"]), e["msg"]) for e in errors],
                "The settings document cannot be used",
            )


# ---- the store --------------------------------------------------------------------------


def _utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


class SettingsStore:
    """The settings file behind a cache (see the module docstring).

    Call :meth:`load` once; then :attr:`settings` serves the cached copy and
    :meth:`update`, :meth:`modify` and :meth:`import_document` change it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._settings: Settings | None = None
        self._lock = anyio.Lock()
        #: What was wrong with the file at load, for people to read.
        self.problems: list[str] = []
        #: Where the corrupt or invalid file went, if it was moved aside.
        self.moved_aside: Path | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            raise RuntimeError("SettingsStore.load() has not run")
        return self._settings

    # ---- loading -------------------------------------------------------------------

    async def load(self) -> Settings:
        """Read the file once (on a worker thread); see :meth:`load_blocking`."""
        return await anyio.to_thread.run_sync(self.load_blocking)

    def load_blocking(self) -> Settings:
        """Read and validate the file; defaults when there is none.

        A corrupt or invalid file is moved aside and reported (:attr:`problems`,
        :attr:`moved_aside`, a warning in the log); what still validates is kept.

        Raises:
            SettingsError: the file exists but cannot be read or moved aside.
        """
        self.problems = []
        self.moved_aside = None
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self._settings = Settings()
            return self._settings
        except OSError as exc:
            raise SettingsError(
                f"Cannot read the settings file {self.path}: {exc.strerror or exc}. "
                "Fix its permissions, or move it away to start with defaults."
            ) from exc
        self._tighten_mode()
        try:
            document = json.loads(raw.decode("utf-8"))
            if not isinstance(document, dict):
                raise ValueError(f"the file holds a JSON {type(document).__name__}, not an object")
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            self._settings = Settings()
            self._set_aside(f"it is not a JSON object ({exc}); defaults apply")
            return self._settings
        try:
            settings, dropped = validate_salvaging(migrate(document))
        except SettingsInvalid as exc:
            self._settings = Settings()
            self._set_aside(f"{exc}; defaults apply")
            return self._settings
        self._settings = settings
        if dropped:
            listed = "; ".join(str(e) for e in dropped)
            self._set_aside(f"these parts were invalid and are left out: {listed}")
        return settings

    def _tighten_mode(self) -> None:
        try:
            mode = stat.S_IMODE(self.path.stat().st_mode)
            if mode & 0o077:
                os.chmod(self.path, 0o600)
                log.warning(
                    "settings file was readable by others; made it private",
                    path=str(self.path),
                    mode=oct(mode),
                )
        except OSError:
            pass

    def _set_aside(self, why: str) -> None:
        stamp = _utc_stamp()
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while target.exists():
            target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
            n += 1
        try:
            os.replace(self.path, target)
            fsync_directory(self.path.parent)
        except OSError as exc:
            raise SettingsError(
                f"The settings file {self.path} is unusable ({why}), and moving it aside "
                f"to {target.name} failed: {exc.strerror or exc}. Move it away by hand."
            ) from exc
        self.moved_aside = target
        message = (
            f"The settings file {self.path} was unusable: {why}. The old file is kept as {target}."
        )
        self.problems.append(message)
        log.warning(
            "settings file unusable: moved aside",
            path=str(self.path),
            moved_to=str(target),
            problem=why,
        )

    # ---- changes -----------------------------------------------------------------------

    async def modify(self, change: Callable[[dict[str, Any]], Mapping[str, Any]]) -> Settings:
        """Apply `change` (current document -> new document), validate the result
        whole, write it atomically, and serve it. Changes run one at a time.

        Raises:
            SettingsInvalid: the new document does not validate; nothing was written.
            SettingsError: writing the file failed; nothing changed.
        """
        async with self._lock:
            document = change(self.settings.document())
            settings = check_document(document)
            await self._save(settings)
            return settings

    async def update(self, patch: Mapping[str, Any]) -> Settings:
        """Apply a JSON Merge Patch (see :func:`merge_patch`) to the settings.

        Raises:
            SettingsInvalid: the patch or its result does not validate (listing
                every bad field); nothing was written.
            SettingsError: writing the file failed; nothing changed.
        """
        if not isinstance(patch, Mapping):
            raise SettingsInvalid([FieldError("", "a patch must be a JSON object")])
        if "version" in patch:
            raise SettingsInvalid([FieldError("version", "is managed by hdsp; leave it out")])
        bad = _secret_like_keys(patch)
        if bad:
            raise SettingsInvalid([FieldError(".".join(p), _SECRET_REASON) for p in bad])
        return await self.modify(lambda current: merge_patch(current, patch))

    async def import_document(
        self, document: Mapping[str, Any], *, merge: bool = True
    ) -> tuple[Settings, list[FieldError]]:
        """Apply a settings document (an export), leaving out the parts that do not
        validate. `merge` merges it into the current settings; otherwise it
        replaces them (defaults for what it leaves out). Returns the settings and
        what was left out, and why.

        Raises:
            SettingsInvalid: `document` is not a settings document at all.
            SettingsError: writing the file failed; nothing changed.
        """
        if not isinstance(document, Mapping):
            raise SettingsInvalid([FieldError("", "must be a JSON object")], "Nothing was imported")
        async with self._lock:
            current = self.settings.document()
            incoming = migrate(dict(document))
            incoming.pop("version", None)
            combined = merge_patch(current, incoming) if merge else incoming
            base = current if merge else {}
            settings, rejected = validate_salvaging(combined, base)
            await self._save(settings)
            return settings, rejected

    async def _save(self, settings: Settings) -> None:
        data = (json.dumps(settings.document(), indent=2, ensure_ascii=False) + "\n").encode()
        try:
            await anyio.to_thread.run_sync(write_atomically, self.path, data)
        except OSError as exc:
            raise SettingsError(
                f"Could not save the settings to {self.path}: {exc.strerror or exc}. "
                "Nothing was changed; check the disk and the directory's permissions."
            ) from exc
        self._settings = settings
