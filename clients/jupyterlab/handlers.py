"""The server extension's HTTP surface under `{base_url}hdsp/` (CONTRACT.md):
status, the command relay, blobs and the events WebSocket, all behind Jupyter
Server's own authentication and authorization (resource "hdsp")."""

from __future__ import annotations

import re
import time
from http import HTTPStatus
from typing import Any, cast

import anyio
import msgspec
from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized, ws_authenticated
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from tornado import web, websocket

from hdsp.protocol import (
    AnswerDocumentEdit,
    AttachKernel,
    CommandBase,
    DocumentsHosted,
    ErrorCode,
    HostDocuments,
    SendMessage,
    StartNewTask,
    command_name,
)

from ..errors import ClientError, CommandFailed, ConnectionLost
from .link import DaemonDown, DaemonLink, SinkClosed
from .notebook_kernel import with_notebook_kernel
from .panel_hosts import checked_answer, panel_declaration
from .relay import CommandRefused, decode_request, error_body, http_status, with_workspace

__all__ = [
    "BlobHandler",
    "CommandHandler",
    "EventsHandler",
    "StatusHandler",
    "close_reason",
    "handlers",
]

AUTH_RESOURCE = "hdsp"

#: Image types served as themselves; anything else a blob claims to be is served
#: as bytes to download, never as a page of this origin (a blob is untrusted).
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"})
_SHA256 = re.compile(r"[0-9a-f]{64}")


class _LinkHandler(APIHandler):
    auth_resource = AUTH_RESOURCE
    link: DaemonLink

    def initialize(self, link: DaemonLink) -> None:
        self.link = link

    def _fail(self, status: HTTPStatus, code: ErrorCode, message: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(error_body(code, message))

    def _client_error(self, exc: ClientError | DaemonDown) -> None:
        if isinstance(exc, DaemonDown):
            self._fail(HTTPStatus.SERVICE_UNAVAILABLE, ErrorCode.UNAVAILABLE, exc.hint)
        elif isinstance(exc, CommandFailed):
            self._fail(http_status(exc.code), exc.code, exc.message)
        elif isinstance(exc, ConnectionLost):
            self._fail(HTTPStatus.SERVICE_UNAVAILABLE, ErrorCode.UNAVAILABLE, str(exc))
        else:
            self._fail(HTTPStatus.BAD_GATEWAY, ErrorCode.INTERNAL, str(exc))


class StatusHandler(_LinkHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        status = await self.link.status()
        running = status is not None
        body = {
            "daemon": "running" if running else "down",
            "hint": None if running else (self.link.hint or "Connecting to hdspd…"),
            "status": status,
        }
        self.set_header("Content-Type", "application/json")
        self.finish(msgspec.json.encode(body))


class CommandHandler(_LinkHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        try:
            command, page_kernel_id = decode_request(self.request.body)
        except CommandRefused as exc:
            self._fail(exc.status, exc.code, exc.message)
            return
        command = with_workspace(command, self.settings["server_root_dir"])
        name = command_name(command)
        #: For a panel's HostDocuments: its paths made absolute (panel_hosts).
        hosted: dict[str, str] | None = None
        try:
            if isinstance(command, HostDocuments):
                command, hosted = panel_declaration(command, self.settings["server_root_dir"])
            elif isinstance(command, AnswerDocumentEdit):
                command = checked_answer(command)
            command = await with_notebook_kernel(
                command,
                root_dir=self.settings["server_root_dir"],
                session_manager=self.session_manager,
                kernel_manager=self.kernel_manager,
                attach=self._attach,
                page_kernel_id=page_kernel_id,
            )
            context = (
                command.data.context if isinstance(command, StartNewTask | SendMessage) else None
            )
            if context is not None and context.notebook and not context.kernel_id:
                self.log.info("hdsp: %s has no running kernel here", context.notebook)
            result: object
            if hosted is not None and not self.settings.get("hdsp_live_edits", True):
                # Live edits are off: the window holds nothing the agent edits.
                assert isinstance(command, HostDocuments)
                result, hosted = DocumentsHosted(host_id=command.host_id, paths=0), {}
            else:
                result = await self.link.request(cast("CommandBase[object]", command))
        except CommandRefused as exc:
            self._fail(exc.status, exc.code, exc.message)
            return
        except (ClientError, DaemonDown) as exc:
            code = getattr(exc, "code", "unavailable")
            self.log.info("hdsp: %s from the browser failed (%s)", name, code)
            self._client_error(exc)
            return
        self.set_header("Content-Type", "application/json")
        if hosted is not None:
            body = {"result": result, "paths": hosted, "serverTime": time.time()}
            self.finish(msgspec.json.encode(body))
            return
        self.finish(msgspec.json.encode({"result": result}))

    async def _attach(self, connection_file: str) -> str:
        """Have hdspd attach the kernel of a notebook of this server (it only
        ever detaches from it); the daemon's id for it."""
        info = await self.link.request(AttachKernel(connection_file=connection_file))
        self.log.info("hdsp: the notebook's kernel is attached as %s", info.kernel_id)
        return info.kernel_id


class BlobHandler(_LinkHandler):
    @web.authenticated
    @authorized
    async def get(self, sha256: str) -> None:
        if not _SHA256.fullmatch(sha256):
            self._fail(
                HTTPStatus.BAD_REQUEST,
                ErrorCode.INVALID_REQUEST,
                "A blob is named by its sha256: 64 lowercase hex digits.",
            )
            return
        try:
            media_type, data = await self.link.blob(sha256)
        except (ClientError, DaemonDown) as exc:
            self._client_error(exc)
            return
        self.set_header(
            "Content-Type", media_type if media_type in _IMAGE_TYPES else "application/octet-stream"
        )
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Content-Security-Policy", "default-src 'none'; sandbox")
        # Named by its content: the same name always has the same bytes.
        self.set_header("Cache-Control", "private, max-age=31536000, immutable")
        self.finish(data)


#: How long a socket opened while the extension starts waits for its link.
LINK_START_WAIT = 10.0


class EventsHandler(JupyterHandler, websocket.WebSocketHandler):
    """`hdsp/events?since=SEQ`: the connection's state and the daemon's events, as
    text frames of one JSON object each (CONTRACT.md)."""

    auth_resource = AUTH_RESOURCE
    link: DaemonLink

    def initialize(self, link: DaemonLink) -> None:
        self.link = link
        self._feed: anyio.CancelScope | None = None
        self._since: int | None = None

    async def pre_get(self) -> None:
        authorized = await ensure_async(
            self.authorizer.is_authorized(self, self.current_user, "read", AUTH_RESOURCE)
        )
        if not authorized:
            raise web.HTTPError(403)
        since = self.get_query_argument("since", None)
        if since is not None:
            try:
                self._since = int(since)
            except ValueError:
                raise web.HTTPError(400, "since must be an event's seq (an integer)") from None
            if self._since < 0:
                raise web.HTTPError(400, "since must be an event's seq (0 or more)")
        # Jupyter serves requests before it starts its extensions (the port is
        # bound first): a socket opened in between waits for the link to start,
        # a few seconds at most, rather than being closed as "starting".
        with anyio.move_on_after(LINK_START_WAIT):
            await self.link.wait_started()

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        await self.pre_get()
        res = super().get(*args, **kwargs)
        if res is not None:
            await res

    def open(self, *args: str, **kwargs: str) -> None:
        try:
            self._feed = self.link.serve_feed(self, self._since)
        except DaemonDown as exc:
            self.close(1013, close_reason(exc.hint))

    def on_message(self, message: str | bytes) -> None:
        """The socket carries events one way; what the browser sends is ignored."""

    def on_close(self) -> None:
        if self._feed is not None:
            self._feed.cancel()

    # FeedSink
    async def send_frame(self, text: str) -> None:
        try:
            await self.write_message(text)
        except websocket.WebSocketClosedError:
            raise SinkClosed from None

    def close_sink(self, code: int, reason: str) -> None:
        self.close(code, close_reason(reason))


def close_reason(text: str) -> str:
    """`text` cut to what a WebSocket close frame holds (123 bytes of UTF-8)."""
    data = text.encode()
    if len(data) <= 123:
        return text
    return data[:120].decode(errors="ignore") + "…"


def handlers(link: DaemonLink) -> list[tuple[str, type[web.RequestHandler], dict[str, Any]]]:
    """The URL patterns (below base_url) and their handlers."""
    kwargs = {"link": link}
    return [
        (r"/hdsp/status", StatusHandler, kwargs),
        (r"/hdsp/command", CommandHandler, kwargs),
        (r"/hdsp/blob/([^/]+)", BlobHandler, kwargs),
        (r"/hdsp/events", EventsHandler, kwargs),
    ]
