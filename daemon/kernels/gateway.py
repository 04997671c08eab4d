"""Kernels on a Jupyter server, through its REST and WebSocket kernel API.

Jupyter Server, a JupyterHub single-user server, Jupyter Kernel Gateway and
Jupyter Enterprise Gateway all serve the same API: REST under `api/kernels`
(start, list, interrupt, restart, shut down), `api/sessions` (which notebook
uses which kernel), and one WebSocket per client at
`api/kernels/ID/channels?session_id=S` that carries the four channels.

The parts, along the kernel seam (:mod:`.connection`, :mod:`.process`):

- :class:`ServerApi`: the REST calls, over httpx2, with the token in an
  `Authorization: token ...` header (never in a URL, so never in a log line).
- :class:`RemoteKernelProcess`: the process half of a kernel hdsp started on
  the server: start, interrupt (REST), restart (REST), shut down (REST).
- :class:`WebSocketKernelConnection`: the wire half, a
  :class:`~.connection.KernelConnection` over the WebSocket. It speaks the
  `v1.kernel.websocket.jupyter.org` binary subprotocol when the server agrees,
  else the JSON protocol; both are framed with jupyter_server's own functions
  and the messages made by jupyter_client's `Session`.

Reconnecting: the WebSocket's `session_id` is the connection's own and never
changes. When the connection drops, Jupyter Server keeps what the kernel
publishes for that session and replays it to the WebSocket that comes back
with the same `session_id` (its kernel manager's `buffer_offline_messages`),
so a drop mid-cell loses none of the output the server published after it saw
the drop. What the server had already written into the dying connection is
lost with it (no protocol resends it): the execution running then is marked
(`connectionDropped`), and the model is told its output may be incomplete. The
connection comes back by itself, with backoff, for as long as it runs; what it
was asked to send meanwhile waits and goes once it is back.

Liveness is the server's to judge: it watches its kernel process, restarts one
that died (and says `restarting` on iopub, or `dead` when it could not), and
culls idle kernels. The connection polls the kernel's REST model and reports:
`restarting` and `dead` as the server says them, and :data:`KERNEL_GONE` when
the server no longer has the kernel (culled, or shut down there). A network
that is down is never a kernel's death: only the server can say that.

What a remote kernel prints is as untrusted as any kernel's output; the server
and the kernel are outside hdsp's sandbox (the server is the boundary there).
"""

from __future__ import annotations

import getpass
import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote, urlsplit, urlunsplit

import anyio
import httpx2
import structlog
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .connection import (
    KERNEL_GONE,
    KERNEL_LINK_DROPPED,
    MessageRouter,
    Routes,
    StatusCallback,
    kernel_info_routes,
)
from .errors import KernelError, KernelNotFound, KernelServerUnreachable, KernelStartFailed

__all__ = [
    "KERNEL_GONE",
    "V1_SUBPROTOCOL",
    "GatewayTarget",
    "RemoteKernelProcess",
    "ServerApi",
    "WebSocketKernelConnection",
    "check_remote_id",
    "shown_url",
]

log = structlog.get_logger("hdsp.kernels")

#: Jupyter Server's binary WebSocket protocol (channel and message parts framed
#: by offsets, no JSON re-encoding on the server).
V1_SUBPROTOCOL: Final = "v1.kernel.websocket.jupyter.org"

#: The largest message the WebSocket takes (a big image, a long output); bounded
#: all the same.
_MAX_MESSAGE: Final = 64 * 1024 * 1024
#: Messages waiting to be sent while the WebSocket is down (the kernel lock lets
#: one execution at a time; inputs and handshakes are few).
_OUTBOX: Final = 256
#: A handshake request unanswered this long is sent again.
_HANDSHAKE_RETRY: Final = 0.5
#: Backoff between two attempts to reconnect (seconds): doubled up to the max.
_RECONNECT_FIRST: Final = 0.1
_RECONNECT_MAX: Final = 5.0
#: The WebSocket's own keepalive: a peer that does not answer a ping within
#: this is gone, and the connection reconnects.
_WS_PING_INTERVAL: Final = 10.0
_WS_PING_TIMEOUT: Final = 20.0
#: After the kernel answered a `shutdown_request` (someone shut it down or
#: restarts it), its status is checked this soon.
_CHECK_SOON: Final = 0.3
#: Remote kernel ids (they go into URL paths): Jupyter's are UUIDs.
_REMOTE_ID: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: The part of a server's error text kept in a message.
_BODY_EXCERPT: Final = 300


def check_remote_id(remote_id: str) -> str:
    """`remote_id` if it can name a kernel on a server; else KernelNotFound."""
    if not isinstance(remote_id, str) or not _REMOTE_ID.match(remote_id):
        raise KernelNotFound(f"{remote_id!r} is not a kernel id of a Jupyter server.")
    return remote_id


def shown_url(url: str) -> str:
    """`url` as messages show it: without user, password, query or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass(frozen=True)
class GatewayTarget:
    """A Jupyter server to run kernels on, with its token read (in memory only)."""

    #: The server's base URL, ending in "/".
    url: str
    #: Sent as `Authorization: token ...`; never printed (`repr` leaves it out).
    token: str | None = field(default=None, repr=False)
    #: The NAME of the secret the token came from, for messages.
    token_secret: str | None = None
    #: The kernelspec to start; None: the server's default.
    kernel_name: str | None = None
    #: Where kernels start, relative to the server's root; None: its root.
    path: str | None = None
    request_timeout: float = 30.0
    poll_interval: float = 5.0

    def __post_init__(self) -> None:
        if not self.url.endswith("/"):
            object.__setattr__(self, "url", self.url + "/")

    @property
    def shown(self) -> str:
        return shown_url(self.url)

    def headers(self) -> dict[str, str]:
        return {} if not self.token else {"Authorization": f"token {self.token}"}


def _excerpt(response: httpx2.Response) -> str:
    """What a server's error says, short: its JSON `message` or `reason`, else
    the start of its text (untrusted: clients escape it when they show it)."""
    text = ""
    try:
        body = response.json()
        if isinstance(body, Mapping):
            text = str(body.get("message") or body.get("reason") or "")
    except ValueError:
        text = response.text
    text = " ".join(text.split())
    return text[:_BODY_EXCERPT] + ("…" if len(text) > _BODY_EXCERPT else "")


class ServerApi:
    """The REST half of a Jupyter server's kernel API. One httpx2 client, closed
    by `aclose()` (its owner's)."""

    def __init__(self, target: GatewayTarget) -> None:
        self.target = target
        self._client = httpx2.AsyncClient(
            base_url=target.url,
            headers=target.headers(),
            timeout=httpx2.Timeout(target.request_timeout),
            follow_redirects=False,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> ServerApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- the calls ----------------------------------------------------------------

    async def kernelspecs(self) -> dict[str, Any]:
        found = await self._json("GET", "api/kernelspecs", "listing its kernelspecs")
        return found if isinstance(found, dict) else {}

    async def kernels(self) -> list[dict[str, Any]]:
        found = await self._json("GET", "api/kernels", "listing its kernels")
        return [k for k in found if isinstance(k, dict)] if isinstance(found, list) else []

    async def sessions(self) -> list[dict[str, Any]]:
        found = await self._json("GET", "api/sessions", "listing its sessions")
        return [s for s in found if isinstance(s, dict)] if isinstance(found, list) else []

    async def kernel(self, remote_id: str) -> dict[str, Any] | None:
        """The kernel's model, or None when the server has no such kernel."""
        response = await self._send("GET", self._path(remote_id), "reading a kernel's status")
        if response.status_code == 404:
            return None
        self._check(response, "reading a kernel's status")
        body = response.json()
        return body if isinstance(body, dict) else None

    async def start(self, kernel_name: str | None, path: str | None) -> dict[str, Any]:
        """Start a kernel; its model. `KERNEL_USERNAME` names the user to
        servers that ask (Enterprise Gateway)."""
        body: dict[str, Any] = {"env": {"KERNEL_USERNAME": getpass.getuser()}}
        if kernel_name is not None:
            body["name"] = kernel_name
        if path is not None:
            body["path"] = path
        what = f"starting a kernel {kernel_name or '(its default kernelspec)'}"
        response = await self._send("POST", "api/kernels", what, json=body)
        if response.status_code >= 400:
            raise KernelStartFailed(self._refusal(response, what))
        model = response.json()
        if not isinstance(model, dict) or not isinstance(model.get("id"), str):
            raise KernelStartFailed(
                f"The Jupyter server at {self.target.shown} answered {what} without a kernel id."
            )
        check_remote_id(model["id"])
        return model

    async def interrupt(self, remote_id: str) -> None:
        path = self._path(remote_id) + "/interrupt"
        response = await self._send("POST", path, "interrupting a kernel")
        self._check(response, "interrupting a kernel", remote_id)

    async def restart(self, remote_id: str) -> dict[str, Any]:
        path = self._path(remote_id) + "/restart"
        response = await self._send("POST", path, "restarting a kernel")
        self._check(response, "restarting a kernel", remote_id)
        model = response.json()
        return model if isinstance(model, dict) else {}

    async def shutdown(self, remote_id: str) -> bool:
        """Shut the kernel down; False when the server had no such kernel."""
        response = await self._send("DELETE", self._path(remote_id), "shutting down a kernel")
        if response.status_code == 404:
            return False
        self._check(response, "shutting down a kernel", remote_id)
        return True

    def channels_url(self, remote_id: str, session_id: str) -> str:
        parts = urlsplit(self.target.url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        path = parts.path + self._path(remote_id) + "/channels"
        return urlunsplit((scheme, parts.netloc, path, f"session_id={quote(session_id)}", ""))

    # ---- plumbing ---------------------------------------------------------------

    @staticmethod
    def _path(remote_id: str) -> str:
        return "api/kernels/" + quote(check_remote_id(remote_id), safe="")

    async def _send(
        self, method: str, path: str, what: str, *, json: Any = None
    ) -> httpx2.Response:
        try:
            return await self._client.request(method, path, json=json)
        except httpx2.HTTPError as exc:
            raise KernelServerUnreachable(
                f"The Jupyter server at {self.target.shown} could not be reached ({what}): "
                f"{type(exc).__name__}: {exc}".rstrip(": ")
            ) from None

    def _check(self, response: httpx2.Response, what: str, remote_id: str | None = None) -> None:
        if response.status_code < 400:
            return
        if response.status_code == 404 and remote_id is not None:
            raise KernelNotFound(
                f"The Jupyter server at {self.target.shown} has no kernel {remote_id} "
                "(it was shut down or culled there)."
            )
        raise KernelError(self._refusal(response, what))

    def _refusal(self, response: httpx2.Response, what: str) -> str:
        hint = ""
        if response.status_code in (401, 403):
            name = self.target.token_secret
            hint = (
                f" Check its token (the secret {name!r}: `hdsp secret set {name}`)."
                if name
                else " It wants a token: store it with `hdsp secret set NAME` and name it in "
                "kernels.gateway.token_secret."
            )
        said = f"{response.status_code} {response.reason_phrase} {_excerpt(response)}".rstrip()
        return f"The Jupyter server at {self.target.shown} refused {what}: {said}.{hint}"

    async def _json(self, method: str, path: str, what: str) -> Any:
        response = await self._send(method, path, what)
        self._check(response, what)
        try:
            return response.json()
        except ValueError:
            raise KernelError(
                f"The Jupyter server at {self.target.shown} answered {what} with no JSON."
            ) from None


class RemoteKernelProcess:
    """The process half of a kernel hdsp started on a Jupyter server: REST calls
    only (the server runs the process). Its liveness is reported by the
    connection; `is_alive` says whether the server still has it."""

    #: Interrupts go through the server's REST interrupt, which works for every
    #: kernelspec (a signal or a message, as the spec says).
    interrupts_by_message = False

    def __init__(self, api: ServerApi, *, kernel_id: str, kernel_name: str | None) -> None:
        self.api = api
        self.kernel_id = kernel_id
        self.kernel_name = kernel_name
        #: The kernel's id on the server, once started.
        self.remote_id: str | None = None
        #: The server no longer has it (set by the connection).
        self.gone = False

    async def start(self) -> None:
        target = self.api.target
        model = await self.api.start(self.kernel_name or target.kernel_name, target.path)
        self.remote_id = str(model["id"])
        self.kernel_name = str(model.get("name") or self.kernel_name or "unknown")
        log.info(
            "remote kernel started",
            kernel_id=self.kernel_id,
            remote_id=self.remote_id,
            server=target.shown,
        )

    async def is_alive(self) -> bool:
        return not self.gone

    async def signal_interrupt(self) -> None:
        if self.remote_id is not None:
            await self.api.interrupt(self.remote_id)

    async def restart(self, *, now: bool) -> None:
        """Restart it on the server (Jupyter's API has no `now`: the server asks
        the kernel to stop, then kills it)."""
        if self.remote_id is None:
            raise KernelStartFailed("The remote kernel was never started.")
        await self.api.restart(self.remote_id)

    async def shutdown(self) -> None:
        """Shut it down on the server; errors are logged (the server may be gone)."""
        if self.remote_id is None or self.gone:
            return
        try:
            await self.api.shutdown(self.remote_id)
        except KernelError as exc:
            log.warning(
                "shutting down a remote kernel failed",
                kernel_id=self.kernel_id,
                remote_id=self.remote_id,
                error=exc.message,
            )


class _Wire:
    """The WebSocket client and the framing, imported when the first remote
    kernel connects (websockets and jupyter_server come with `hdsp[gateway]`)."""

    def __init__(self) -> None:
        try:
            import websockets.asyncio.client as ws_client
            import websockets.exceptions as ws_errors
            from jupyter_client.jsonutil import json_default
            from jupyter_server.services.kernels.connection.base import (
                deserialize_binary_message,
                deserialize_msg_from_ws_v1,
                serialize_msg_to_ws_v1,
            )
        except ImportError as exc:
            raise KernelStartFailed(
                f"Kernels on a Jupyter server need websockets and jupyter_server ({exc}): "
                "pip install 'hdsp[gateway]'."
            ) from None
        self.connect: Callable[..., Any] = ws_client.connect
        self.closed: type[Exception] = ws_errors.ConnectionClosed
        self.invalid_status: type[Exception] = ws_errors.InvalidStatus
        self.failures: tuple[type[BaseException], ...] = (
            OSError,
            TimeoutError,
            ws_errors.WebSocketException,
        )
        self.json_default: Callable[[Any], Any] = json_default
        self.to_v1: Callable[..., bytes] = serialize_msg_to_ws_v1
        self.from_v1: Callable[[bytes], tuple[str, list[bytes]]] = deserialize_msg_from_ws_v1
        self.from_binary: Callable[[bytes], dict[str, Any]] = deserialize_binary_message


class WebSocketKernelConnection:
    """A :class:`~.connection.KernelConnection` over a Jupyter server's kernel
    WebSocket (see the module docstring)."""

    def __init__(
        self,
        api: ServerApi,
        remote_id: str | None,
        *,
        kernel_id: str,
        on_status: StatusCallback,
        on_gone: Callable[[], None] | None = None,
    ) -> None:
        """`remote_id`: the kernel's id on the server; None when it is to be
        started first (set `remote_id` before `run`)."""
        from jupyter_client.session import Session

        self._api = api
        self.remote_id = check_remote_id(remote_id) if remote_id is not None else ""
        self._kernel_id = kernel_id
        self._on_status = on_status
        self._on_gone = on_gone
        #: Signs nothing (the server signs what it passes to the kernel); its
        #: `session` is the WebSocket's session_id, the same across reconnects.
        self._session = Session(key=b"", username="hdsp", session=uuid.uuid4().hex)
        self._wire: _Wire | None = None
        self._ws: Any = None
        #: Set and replaced whenever the WebSocket comes or goes.
        self._changed = anyio.Event()
        # The server's own status messages carry our session id.
        self._router = MessageRouter(on_status, own_session=self.session_id)
        self._tg: TaskGroup | None = None
        #: What waits to be sent, in order (made when the connection runs).
        self._outbox: MemoryObjectSendStream[tuple[str, dict[str, Any]]] | None = None
        self._check_now = anyio.Event()
        self._closing = False
        self.gone = False
        #: Times the WebSocket dropped and came back (for logs and tests).
        self.reconnects = 0

    @property
    def session_id(self) -> str:
        return str(self._session.session)

    @property
    def connected(self) -> bool:
        return self._ws is not None

    # ---- lifetime ---------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        check_remote_id(self.remote_id)
        self._wire = _Wire()
        try:
            ws = await self._connect()
        except KernelError:
            raise
        except self._wire.failures as exc:
            raise KernelStartFailed(self._connect_failure(exc)) from None
        send, receive = anyio.create_memory_object_stream[tuple[str, dict[str, Any]]](_OUTBOX)
        self._outbox = send
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._link, ws)
                tg.start_soon(self._write_loop, receive)
                tg.start_soon(self._poll_loop)
                task_status.started()
        finally:
            self._closing = True
            self._tg = None
            send.close()
            receive.close()
            current, self._ws = self._ws, None
            if current is not None:
                with anyio.move_on_after(2, shield=True):
                    await current.close()

    async def _connect(self) -> Any:
        wire = self._wire
        assert wire is not None
        url = self._api.channels_url(self.remote_id, self.session_id)
        return await wire.connect(
            url,
            additional_headers=self._api.target.headers(),
            subprotocols=[V1_SUBPROTOCOL],
            max_size=_MAX_MESSAGE,
            open_timeout=self._api.target.request_timeout,
            ping_interval=_WS_PING_INTERVAL,
            ping_timeout=_WS_PING_TIMEOUT,
            close_timeout=2,
            user_agent_header="hdsp",
        )

    def _connect_failure(self, exc: BaseException) -> str:
        wire = self._wire
        status = None
        if wire is not None and isinstance(exc, wire.invalid_status):
            status = getattr(getattr(exc, "response", None), "status_code", None)
        where = f"the Jupyter server at {self._api.target.shown}"
        if status == 404:
            return f"{where} has no kernel {self.remote_id} (it was shut down or culled there)."
        if status in (401, 403):
            return f"{where} refused the kernel's WebSocket ({status}): check its token."
        return f"Cannot open the kernel's WebSocket on {where}: {type(exc).__name__}: {exc}"

    # ---- the link, and coming back --------------------------------------------------

    def _set(self, ws: Any) -> None:
        if ws is not None and self._ws is None and self.reconnects == 0:
            log.info(
                "kernel websocket open",
                kernel_id=self._kernel_id,
                protocol="v1" if ws.subprotocol == V1_SUBPROTOCOL else "json",
            )
        self._ws = ws
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def _link(self, ws: Any) -> None:
        """Read the WebSocket; when it drops, reconnect (same session id: the
        server replays what it kept), until the server no longer has the kernel
        or the connection is cancelled."""
        while True:
            self._set(ws)
            await self._read(ws)
            self._set(None)
            if self._closing or self.gone:
                return
            log.warning(
                "kernel websocket dropped; reconnecting",
                kernel_id=self._kernel_id,
                close_code=getattr(ws, "close_code", None),
            )
            await self._on_status(KERNEL_LINK_DROPPED)
            found = await self._reconnect()
            if found is None:
                return
            ws = found
            self.reconnects += 1
            log.info("kernel websocket back", kernel_id=self._kernel_id, times=self.reconnects)
            self._check_now.set()

    async def _reconnect(self) -> Any:
        wire = self._wire
        assert wire is not None
        delay = _RECONNECT_FIRST
        while not self.gone:
            try:
                return await self._connect()
            except wire.failures as exc:
                if isinstance(exc, wire.invalid_status):
                    # 404: the kernel may be gone; its status says for sure.
                    await self._check_status()
                    if self.gone:
                        return None
                log.debug(
                    "kernel websocket reconnect failed",
                    kernel_id=self._kernel_id,
                    error=f"{type(exc).__name__}: {exc}",
                )
            await anyio.sleep(delay)
            delay = min(delay * 2, _RECONNECT_MAX)
        return None

    async def _wait_link(self, old: Any = None) -> Any:
        """The WebSocket once there is one that is not `old`."""
        while True:
            changed = self._changed
            ws = self._ws
            if ws is not None and ws is not old:
                return ws
            await changed.wait()

    # ---- the kernel's status, from the server ----------------------------------------

    async def _poll_loop(self) -> None:
        interval = self._api.target.poll_interval
        while not self.gone:
            with anyio.move_on_after(interval):
                await self._check_now.wait()
            self._check_now = anyio.Event()
            await self._check_status()

    async def _check_soon(self) -> None:
        await anyio.sleep(_CHECK_SOON)
        self._check_now.set()

    async def _check_status(self) -> None:
        if self.gone:
            return
        try:
            model = await self._api.kernel(self.remote_id)
        except KernelError as exc:
            # The server is unreachable, or refused: not the kernel's death.
            log.debug("remote kernel status unknown", kernel_id=self._kernel_id, error=exc.message)
            return
        if model is None:
            await self._report_gone()
        elif model.get("execution_state") == "dead":
            await self._on_status("dead")

    async def _report_gone(self) -> None:
        if self.gone:
            return
        self.gone = True
        log.warning(
            "remote kernel gone from its server",
            kernel_id=self._kernel_id,
            remote_id=self.remote_id,
            server=self._api.target.shown,
        )
        if self._on_gone is not None:
            self._on_gone()
        await self._on_status(KERNEL_GONE)

    # ---- the handshake ----------------------------------------------------------------

    def expect_rebind(self) -> None:
        self._router.rebind()

    async def handshake(self, *, certain: bool) -> None:
        """Wait for the WebSocket, then for a kernel_info_request on control to
        be answered and its iopub idle to arrive: the WebSocket carries every
        channel, so no output or input request of the next execution can be
        lost (the server waits for the kernel itself before it accepts us)."""
        await self._wait_link()
        while True:
            replied = anyio.Event()
            published = anyio.Event()
            msg = self._session.msg("kernel_info_request", {})
            msg_id = msg["header"]["msg_id"]
            self._router.add(msg_id, kernel_info_routes(replied, published))
            try:
                self._send("control", msg)
                with anyio.move_on_after(_HANDSHAKE_RETRY):
                    await replied.wait()
                    await published.wait()
                    return
            finally:
                self.forget(msg_id)

    # ---- requests ---------------------------------------------------------------------

    def execute(self, code: str, *, allow_stdin: bool, routes: Routes, silent: bool = False) -> str:
        content = {
            "code": code,
            "silent": silent,
            "store_history": not silent,
            "user_expressions": {},
            "allow_stdin": allow_stdin,
            "stop_on_error": True,
        }
        msg = self._session.msg("execute_request", content)
        msg_id: str = msg["header"]["msg_id"]
        self._router.add(msg_id, routes)
        try:
            self._send("shell", msg)
        except BaseException:
            self.forget(msg_id)
            raise
        return msg_id

    def forget(self, msg_id: str) -> None:
        self._router.forget(msg_id)

    def send_input(self, text: str) -> None:
        self._send("stdin", self._session.msg("input_reply", {"value": text}))

    def request_interrupt(self) -> None:
        """The server's REST interrupt (a signal or a message, as the kernelspec
        says), sent from the connection's task group."""
        if self._tg is not None:
            self._tg.start_soon(self._interrupt)

    async def _interrupt(self) -> None:
        try:
            await self._api.interrupt(self.remote_id)
        except KernelError as exc:
            log.warning(
                "interrupting a remote kernel failed", kernel_id=self._kernel_id, error=exc.message
            )

    async def ping(self) -> None:
        """Nothing to wait for: a remote kernel's liveness is its server's to
        judge, reported through the status callback; the WebSocket's own
        keepalive finds a dead link and the connection comes back by itself."""

    def _send(self, channel: str, msg: dict[str, Any]) -> None:
        if self.gone:
            raise KernelNotFound(
                f"The Jupyter server at {self._api.target.shown} no longer has the kernel "
                f"{self.remote_id}."
            )
        if self._outbox is None:
            raise KernelNotFound("The kernel's connection is not open.")
        try:
            self._outbox.send_nowait((channel, msg))
        except anyio.WouldBlock:
            raise KernelServerUnreachable(
                f"{_OUTBOX} messages wait for the Jupyter server at {self._api.target.shown} "
                "to come back; try again later."
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise KernelNotFound("The kernel's connection is closed.") from None

    # ---- writing and reading ------------------------------------------------------------

    def _encode(self, ws: Any, channel: str, msg: dict[str, Any]) -> str | bytes:
        wire = self._wire
        assert wire is not None
        if ws.subprotocol == V1_SUBPROTOCOL:
            frame: bytes = wire.to_v1(msg, channel, self._session.pack)
            return frame
        return json.dumps({**msg, "channel": channel}, default=wire.json_default)

    async def _write_loop(
        self, outbox: MemoryObjectReceiveStream[tuple[str, dict[str, Any]]]
    ) -> None:
        wire = self._wire
        assert wire is not None
        async for channel, msg in outbox:
            ws = await self._wait_link()
            while True:
                try:
                    await ws.send(self._encode(ws, channel, msg))
                    break
                except wire.closed:
                    # Not written: it goes on the WebSocket that comes back.
                    ws = await self._wait_link(old=ws)

    async def _read(self, ws: Any) -> None:
        wire = self._wire
        assert wire is not None
        try:
            async for raw in ws:
                try:
                    channel, msg = self._decode(ws, raw)
                except Exception as exc:
                    log.warning(
                        "unreadable kernel message dropped",
                        kernel_id=self._kernel_id,
                        error=f"{type(exc).__name__}: {exc}",
                    )
                    continue
                try:
                    await self._dispatch(channel, msg)
                except Exception:
                    log.exception("handling a kernel message failed", kernel_id=self._kernel_id)
        except wire.closed:
            pass

    def _decode(self, ws: Any, raw: str | bytes) -> tuple[str, dict[str, Any]]:
        wire = self._wire
        assert wire is not None
        if isinstance(raw, str):
            msg = json.loads(raw)
            return str(msg.get("channel")), msg
        if ws.subprotocol == V1_SUBPROTOCOL:
            channel, parts = wire.from_v1(raw)
            unpack = self._session.unpack
            msg = {
                "header": unpack(parts[0]),
                "parent_header": unpack(parts[1]),
                "metadata": unpack(parts[2]),
                "content": unpack(parts[3]),
                "buffers": parts[4:],
            }
            return str(channel), msg
        msg = wire.from_binary(raw)
        return str(msg.get("channel")), msg

    async def _dispatch(self, channel: str, msg: dict[str, Any]) -> None:
        header = msg.get("header")
        if not isinstance(header, dict) or not isinstance(msg.get("content"), dict):
            raise ValueError("not a Jupyter message")
        if channel == "iopub":
            await self._router.iopub(msg)
            if header.get("msg_type") == "shutdown_reply" and self._tg is not None:
                # Someone shut the kernel down (or restarts it): ask the server soon.
                self._tg.start_soon(self._check_soon)
        elif channel in ("shell", "control"):
            self._router.reply(msg)
        elif channel == "stdin" and not self._router.stdin(msg):
            # Nobody waits for it (the execution ended): answer, or it blocks the kernel.
            self.send_input("")
