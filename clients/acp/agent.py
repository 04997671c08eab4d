"""`hdsp acp`: hdsp as an Agent Client Protocol agent, over stdio.

An ACP host (Jupyter AI, Zed, ...) starts `hdsp acp` and speaks JSON-RPC with
it on stdin/stdout; the adapter is a client of hdspd like the CLI. A session is
a hdsp task in the host's working directory: it outlives the host and this
process (`session/load` finds it again and replays it), every other hdsp client
sees it and may answer its asks, and `session/cancel` interrupts its kernel.

The host's MCP servers (stdio and Streamable HTTP) are offered to the
session's task with each prompt: hdspd keeps them in memory only and runs their
tools after an approval like any MCP tool's.

Modes are hdsp's modes (`session/set_mode`); the model is a session config
option (category "model") whose values are hdsp's provider profiles (ACP's
unstable `session/set_model` became this option). There is
no authentication: who may talk to hdspd is decided by its socket's
permissions, and the adapter runs as the user who started the host.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

import anyio
from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp import Client as AcpClient
from acp.schema import (
    AgentCapabilities,
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    HttpMcpServer,
    ImageContentBlock,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    McpServerStdio,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResourceContentBlock,
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    SseMcpServer,
    TextContentBlock,
    TextResourceContents,
)

from hdsp.protocol import OfferedMcpServer, __version__

from ..client import Client
from ..errors import ClientError, CommandFailed
from .session import AcpSession
from .session_records import SessionRecord, SessionRecords
from .updates import fenced

__all__ = ["HdspAcpAgent", "offered_servers", "serve"]

_log = logging.getLogger("hdsp.client.acp")

#: The id of the session config option that picks the profile (the model).
MODEL_OPTION = "model"

#: The most MCP servers a session offers its task (hdspd takes at most 16).
MAX_OFFERED = 16

# JSON-RPC error codes (ACP uses JSON-RPC's).
_INVALID_PARAMS = -32602
_INTERNAL = -32603
_NOT_FOUND = -32002

McpServer = HttpMcpServer | SseMcpServer | McpServerStdio | Any


def _error(code: int, message: str) -> RequestError:
    return RequestError(code, message, None)


def _absolute(cwd: str) -> str:
    """The host's working directory, which ACP says is absolute: a relative one
    is refused rather than taken from wherever this process runs. (Whether it
    may be a workspace at all is hdspd's to say: it refuses `/`, the home
    directory itself and its own directories when the first prompt starts the
    task, as for every client.)"""
    if not os.path.isabs(cwd):
        raise _error(_INVALID_PARAMS, f"cwd must be an absolute path, not {cwd!r}.")
    return os.path.normpath(cwd)


_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.\-]+")


def offered_servers(servers: list[McpServer]) -> list[OfferedMcpServer]:
    """The host's MCP servers as hdsp takes them: offered to the session's task
    (hdspd keeps them in memory only). Names become what hdsp's tool names allow
    ("Jupyter MCP Server" is `Jupyter_MCP_Server`); SSE, which hdsp does not
    speak (nor claims to), is left out."""
    offered: list[OfferedMcpServer] = []
    taken: set[str] = set()
    for server in servers:
        base = _NOT_IN_NAME.sub("_", server.name).strip("_.-")[:44] or "server"
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        if isinstance(server, McpServerStdio):
            env = {e.name: e.value for e in server.env}
            offered.append(
                OfferedMcpServer(name=name, command=server.command, args=server.args, env=env)
            )
        elif isinstance(server, HttpMcpServer):
            headers = {h.name: h.value for h in server.headers}
            offered.append(OfferedMcpServer(name=name, url=server.url, headers=headers))
        else:
            _log.warning("an MCP server left out (hdsp speaks stdio and HTTP): %s", server.name)
            continue
        taken.add(name)
    if len(offered) > MAX_OFFERED:
        _log.warning(
            "the host offered %d MCP servers: the first %d kept", len(offered), MAX_OFFERED
        )
    return offered[:MAX_OFFERED]


def _mcp_record(server: McpServer) -> dict[str, Any]:
    """What is kept of an MCP server the host offered: its name and how to
    reach it, with the names of its environment variables and headers but
    never their values (they may hold the host's secrets)."""
    data: dict[str, Any] = server.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(data.get("env"), list):
        data["env"] = [e.get("name") for e in data["env"] if isinstance(e, dict)]
    if isinstance(data.get("headers"), list):
        data["headers"] = [h.get("name") for h in data["headers"] if isinstance(h, dict)]
    return data


def prompt_parts(blocks: list[Any]) -> tuple[str, list[str]]:
    """The text and images (data URLs) of an ACP prompt. Embedded context (a
    file the user attached) goes with the text, fenced and named, as data."""
    texts: list[str] = []
    images: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            texts.append(block.text)
        elif isinstance(block, ImageContentBlock):
            images.append(f"data:{block.mime_type};base64,{block.data}")
        elif isinstance(block, EmbeddedResourceContentBlock):
            resource = block.resource
            if isinstance(resource, TextResourceContents):
                texts.append(f"Attached {resource.uri}:\n{fenced(resource.text)}")
            elif isinstance(resource, BlobResourceContents):
                mime = resource.mime_type or "application/octet-stream"
                if mime.startswith("image/"):
                    images.append(f"data:{mime};base64,{resource.blob}")
                else:
                    texts.append(f"[Attached {resource.uri} ({mime}): binary, not included]")
        elif isinstance(block, ResourceContentBlock):
            texts.append(f"[Linked: {block.name} <{block.uri}>]")
        elif isinstance(block, AudioContentBlock):
            texts.append("[An audio clip was attached: hdsp does not take audio]")
    return "\n\n".join(texts), images


class HdspAcpAgent:
    """The ACP agent side: one per `hdsp acp` process, one hdspd connection."""

    def __init__(
        self, client: Client, tg: anyio.abc.TaskGroup, records: SessionRecords | None = None
    ) -> None:
        self.client = client
        self._tg = tg
        self._records = records or SessionRecords()
        self._sessions: dict[str, AcpSession] = {}
        self._host: AcpClient | None = None

    def on_connect(self, conn: AcpClient) -> None:
        self._host = conn

    def _session(self, session_id: str) -> AcpSession:
        session = self._sessions.get(session_id)
        if session is None:
            raise _error(_NOT_FOUND, f"No session {session_id!r} in this adapter: load it first.")
        return session

    # ---- initialize ------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=True, audio=False, embedded_context=True
                ),
                # The host's MCP servers go to the session's task (stdio, and
                # Streamable HTTP, which hdsp's MCP client speaks; not SSE).
                mcp_capabilities=McpCapabilities(http=True, sse=False),
            ),
            agent_info=Implementation(name="hdsp", title="hdsp", version=__version__),
            auth_methods=[],
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None  # (nothing to authenticate: see the module's docstring)

    # ---- sessions ----------------------------------------------------------------

    def _open(self, record: SessionRecord, workspace: str) -> AcpSession:
        assert self._host is not None
        session = AcpSession(
            self._host, self.client, record, self._records, self._tg, workspace=workspace
        )
        self._sessions[record.session_id] = session
        return session

    async def new_session(
        self,
        cwd: str,
        mcp_servers: list[McpServer] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        cwd = _absolute(cwd)
        record = SessionRecord(
            session_id=self._records.new_id(),
            cwd=cwd,
            mcp_servers=[_mcp_record(s) for s in mcp_servers or []],
        )
        session = self._open(record, cwd)
        session.offered = offered_servers(mcp_servers or [])
        session.save()
        return NewSessionResponse(
            session_id=record.session_id,
            modes=await self._modes(session),
            config_options=await self._config_options(session),
        )

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[McpServer] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        cwd = _absolute(cwd)
        record = self._records.load(session_id)
        if record is None:
            # A hdsp task's own id opens that task (`hdsp tasks` lists them).
            try:
                snapshot = await self.client.get_task(session_id)
            except CommandFailed:
                raise _error(_NOT_FOUND, f"No session or hdsp task {session_id!r}.") from None
            record = SessionRecord(
                session_id=session_id,
                cwd=snapshot.item.workspace or cwd,
                task_id=snapshot.item.id,
            )
        if mcp_servers:
            record.mcp_servers = [_mcp_record(s) for s in mcp_servers]
        workspace = record.cwd
        if record.task_id is not None:
            try:
                item = (await self.client.get_task(record.task_id)).item
            except CommandFailed as exc:
                raise _error(_NOT_FOUND, f"The session's task is gone: {exc.message}") from None
            workspace = item.workspace or record.cwd
            record.mode = item.mode or record.mode
            record.profile = item.api_config_name or record.profile
        if session_id in self._sessions:
            raise _error(_INVALID_PARAMS, f"Session {session_id!r} is open already.")
        session = self._open(record, workspace)
        session.offered = offered_servers(mcp_servers or [])
        session.save()
        if record.task_id is not None:
            await session.replay()
        return LoadSessionResponse(
            modes=await self._modes(session), config_options=await self._config_options(session)
        )

    # ---- modes and models ----------------------------------------------------------

    async def _modes(self, session: AcpSession) -> SessionModeState | None:
        try:
            listing = await self.client.get_modes(session.record.cwd)
        except ClientError as exc:
            _log.warning("could not list modes: %s", exc)
            return None
        modes = [
            SessionMode(id=m.slug, name=m.name, description=m.when_to_use or m.description)
            for m in listing.modes
        ]
        current = session.record.mode or "code"
        return SessionModeState(current_mode_id=current, available_modes=modes)

    async def _config_options(
        self, session: AcpSession
    ) -> list[SessionConfigOptionSelect | SessionConfigOptionBoolean]:
        try:
            listing = await self.client.list_profiles()
        except ClientError as exc:
            _log.warning("could not list profiles: %s", exc)
            return []
        if not listing.profiles:
            return []
        current = session.record.profile or listing.current or listing.profiles[0].name
        return [
            SessionConfigOptionSelect(
                type="select",
                id=MODEL_OPTION,
                name="Model",
                description="hdsp's provider profile (`hdsp profile list`); fixed once the "
                "session's task has started",
                category="model",
                current_value=current,
                options=[
                    SessionConfigSelectOption(
                        value=p.name, name=p.name, description=f"{p.provider}: {p.model}"
                    )
                    for p in listing.profiles
                ],
            )
        ]

    async def set_session_mode(
        self, mode_id: str, session_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        session = self._session(session_id)
        task_id = session.record.task_id
        try:
            if task_id is not None:
                await self.client.switch_mode(task_id, mode_id)
            else:
                listing = await self.client.get_modes(session.record.cwd)
                if mode_id not in {m.slug for m in listing.modes}:
                    raise _error(_INVALID_PARAMS, f"No mode {mode_id!r} (`hdsp modes` lists them).")
        except CommandFailed as exc:
            raise _error(_INVALID_PARAMS, exc.message) from None
        session.record.mode = mode_id
        session.save()
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        session = self._session(session_id)
        if config_id != MODEL_OPTION or not isinstance(value, str):
            raise _error(_INVALID_PARAMS, f"No option {config_id!r}: hdsp has {MODEL_OPTION!r}.")
        listing = await self.client.list_profiles()
        if value not in {p.name for p in listing.profiles}:
            raise _error(_INVALID_PARAMS, f"No profile {value!r} (`hdsp profile list`).")
        if session.record.task_id is not None and value != session.record.profile:
            raise _error(
                _INVALID_PARAMS,
                "This session's task has started with its profile, which a task keeps; "
                "a new session uses another.",
            )
        session.record.profile = value
        session.save()
        return SetSessionConfigOptionResponse(config_options=await self._config_options(session))

    # ---- prompts -----------------------------------------------------------------

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        text, images = prompt_parts(prompt)
        if not text.strip() and not images:
            raise _error(_INVALID_PARAMS, "The prompt has no text and no image.")
        try:
            stop = await session.prompt(text or "(see the image)", images)
        except ClientError as exc:
            raise _error(_INTERNAL, f"hdspd: {exc}") from None
        return PromptResponse(stop_reason=stop)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            await session.cancel()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


async def serve(client: Client, records: SessionRecords | None = None) -> None:
    """Run the ACP agent on stdin/stdout until the host closes stdin."""
    async with anyio.create_task_group() as tg:
        agent = HdspAcpAgent(client, tg, records)
        await run_agent(agent)  # type: ignore[arg-type]
        tg.cancel_scope.cancel()
