"""One kernel's wire: the Jupyter messaging protocol to one kernel.

jupyter_client splits a kernel into its process (a KernelManager: launch,
signal, restart, kill; here :mod:`.process`) and its connection (a KernelClient:
the channels and the session that signs messages). The kernel service talks to
a kernel only through a :class:`KernelConnection`, so a kernel served elsewhere
(a Jupyter Server or Kernel Gateway, over a websocket) can take the place of
the ZeroMQ connection here, :class:`ZmqKernelConnection` (the WebSocket one is
:class:`~.gateway.WebSocketKernelConnection`).

Routing: one reader per channel (iopub, shell, stdin, control) routes each
message by its parent's msg_id to whoever sent the request (an execution, the
handshake), as :class:`Routes` registered with the request. Readers never
block on a route. Of the messages nobody waits for, an iopub `status` goes to
`on_status` (the service's view of busy and idle); an `input_request` is
answered with an empty line, or the kernel would wait for it for ever.

Backpressure: a PUB socket drops messages a subscriber has no room for, so the
iopub queue is deep (`IOPUB_QUEUE` messages): a reader that waits a while loses
nothing.

Ownership: `run()` connects, reads until it is cancelled, and disconnects on
the way out; the service runs it in the kernel's task group.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import structlog
import zmq
import zmq.asyncio
from anyio.abc import TaskStatus

from .errors import KernelStartFailed

__all__ = [
    "IOPUB_QUEUE",
    "KERNEL_GONE",
    "KERNEL_LINK_DROPPED",
    "KERNEL_REPLACED",
    "KernelConnection",
    "MessageRouter",
    "Route",
    "Routes",
    "StatusCallback",
    "ZmqKernelConnection",
    "kernel_info_routes",
]

log = structlog.get_logger("hdsp.kernels")

#: A kernel spec's name as jupyter_client allows it (kernelspec._is_valid_kernel_name).
_KERNEL_NAME = re.compile(r"[a-zA-Z0-9._\-]{1,64}")

#: Gets one message of the kernel (never blocks).
Route = Callable[[Mapping[str, Any]], None]
#: Not a Jupyter state: the kernel's messages come from a new session (the
#: process behind the connection file was restarted, by hdsp or elsewhere).
KERNEL_REPLACED = "hdsp:replaced"
#: Not a Jupyter state: the server a remote kernel ran on no longer has it (it
#: culled it, or it was shut down there).
KERNEL_GONE = "hdsp:gone"
#: Not a Jupyter state: the link to a remote kernel's server dropped (it comes
#: back by itself; what the server sent at that moment may be lost).
KERNEL_LINK_DROPPED = "hdsp:link-dropped"

#: Told each `execution_state` the kernel publishes ("busy", "idle", "starting";
#: a Jupyter server adds "restarting" and "dead" for a kernel that died there),
#: KERNEL_REPLACED when another kernel process answers on the same ports, and
#: KERNEL_GONE when a remote kernel's server no longer has it.
StatusCallback = Callable[[str], Awaitable[None]]

#: A handshake request unanswered this long is sent again, and then after twice
#: as long each time, up to `_HANDSHAKE_RETRY_MAX`.
_HANDSHAKE_RETRY = 0.5
_HANDSHAKE_RETRY_MAX = 4.0
#: Messages a channel's socket queues while its reader is behind. ZeroMQ's
#: default (1,000) is too few for iopub: a kernel printing line by line fills it
#: in a moment while the reader waits on the service (a busy journal, a loaded
#: machine), and a PUB socket drops what does not fit: outputs, and the idle
#: status that ends an execution, which then waits out its time limit. Bounded
#: all the same (about 100 MB of small messages). The kernel's own PUB queue
#: fills while our I/O thread is starved: a kernel hdsp starts queues without
#: bound (see :mod:`.kernel_command`); one we attach to may drop (ZeroMQ's
#: 1,000).
IOPUB_QUEUE = 100_000
#: How many times to ask a kernel whose iopub connected again which session it
#: is, while its control socket reconnects (about a minute, see `_HANDSHAKE_RETRY`).
_SESSION_ASKS = 18
#: How long to wait for the stdin connection of a kernel we attach to, which
#: may have been made before we could watch for it.
_STDIN_FALLBACK = 1.0
#: How long to wait for it, once the kernel answered, for a kernel we started:
#: it binds every socket before it answers and our socket reconnects every
#: 100 ms, so the connection is up within a fraction of a second; a monitor that
#: still saw nothing missed it (the kernel was bound before our connect, when
#: the loop reached us late: the start then waited out its 60 s time limit).
_STDIN_AFTER_REPLY = 10.0


@dataclass(frozen=True)
class Routes:
    """Who gets the messages whose parent is one request."""

    #: Its iopub messages (outputs, status), until the request is forgotten.
    iopub: Route | None = None
    #: Its reply (on shell, or on control for a control request), once.
    reply: Route | None = None
    #: The kernel's input requests for it (`input()`), until forgotten.
    stdin: Route | None = None
    #: The kernel's busy and idle for this request are not the kernel's status
    #: (a silent inspection must not look like work to clients).
    quiet: bool = False


class KernelConnection(Protocol):
    """What the kernel service needs of one kernel's wire."""

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect (started when the channels are open), read and route every
        message until cancelled, then disconnect."""
        ...

    async def handshake(self, *, certain: bool) -> None:
        """Return once the kernel answers and every channel is live, so that no
        output or input request of the next execution can be lost. `certain`:
        the kernel has just bound its sockets (it was started or restarted),
        rather than running before we connected. Deadlines are the caller's."""
        ...

    def expect_rebind(self) -> None:
        """The kernel is about to bind its sockets anew (a restart); the next
        `handshake` waits for the connection to come back."""
        ...

    def execute(self, code: str, *, allow_stdin: bool, routes: Routes, silent: bool = False) -> str:
        """Send an execute request, its routes in place before any reply can
        come; returns its msg_id. `silent`: Jupyter's silent execution (no
        execution count, not in the history, no execute_input or result)."""
        ...

    def forget(self, msg_id: str) -> None:
        """Drop the routes of a request; what still comes for it is ignored."""
        ...

    def send_input(self, text: str) -> None:
        """Answer the kernel's pending input request."""
        ...

    def request_interrupt(self) -> None:
        """Ask the kernel to interrupt what it runs (an `interrupt_request`)."""
        ...

    async def ping(self) -> None:
        """Return when the kernel's heartbeat echoed a ping. Deadlines are the
        caller's; a ping cancelled before its echo leaves the connection fit to
        ping again."""
        ...


#: Numbers the monitors' endpoints (see `_watch_connection`).
_monitor_numbers = itertools.count()


def _watch_connection(socket: zmq.asyncio.Socket) -> zmq.asyncio.Socket:
    """A monitor that reports when `socket`'s connection handshake succeeds.

    Each monitor gets an endpoint of its own: pyzmq's default names it by the
    socket, and libzmq frees a stopped monitor's endpoint later, on its reaper
    thread, so watching the same socket again at once (a rebind) could fail
    with "Address already in use" (CI)."""
    address = f"inproc://hdsp-monitor-{os.getpid()}-{next(_monitor_numbers)}"
    monitor: zmq.asyncio.Socket = socket.get_monitor_socket(
        zmq.EVENT_HANDSHAKE_SUCCEEDED, addr=address
    )
    return monitor


async def _connected(monitor: zmq.asyncio.Socket) -> None:
    from zmq.utils.monitor import parse_monitor_message

    while True:
        event = parse_monitor_message(await monitor.recv_multipart())
        if event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            return


def load_client(connection_file: str) -> Any:
    """A jupyter_client client for the running kernel `connection_file` describes.
    Its `kernel_name` is the kernel spec's name the file gives (Jupyter writes it),
    when it is one: the client's loader leaves it out."""
    from jupyter_client.asynchronous.client import AsyncKernelClient

    kc = AsyncKernelClient()
    try:
        kc.load_connection_file(connection_file)
        with open(connection_file, encoding="utf-8") as f:
            name = json.load(f).get("kernel_name")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise KernelStartFailed(
            f"Cannot read the connection file {connection_file}: {exc}"
        ) from None
    # (What a file says is untrusted: only a kernel spec's name, as Jupyter
    # allows them, is taken.)
    if isinstance(name, str) and _KERNEL_NAME.fullmatch(name):
        kc.kernel_name = name
    return kc


def _setter(event: anyio.Event) -> Route:
    """A route that only notes that a message came."""
    return lambda msg: event.set()


def _keeper(kept: list[Mapping[str, Any]], event: anyio.Event) -> Route:
    """A route that keeps the message in `kept` and notes that it came."""

    def route(msg: Mapping[str, Any]) -> None:
        kept.append(msg)
        event.set()

    return route


def _on_idle(event: anyio.Event) -> Route:
    """A route that notes that the kernel went idle after the request."""

    def route(msg: Mapping[str, Any]) -> None:
        if msg["header"]["msg_type"] == "status" and (
            msg["content"].get("execution_state") == "idle"
        ):
            event.set()

    return route


def _parent_id(msg: Mapping[str, Any]) -> str | None:
    parent = msg.get("parent_header") or {}
    value = parent.get("msg_id")
    return value if isinstance(value, str) else None


def kernel_info_routes(replied: anyio.Event, published: anyio.Event) -> Routes:
    """The routes of a handshake's kernel_info_request: `replied` at its reply,
    `published` when the kernel went idle after it (its iopub reaches us).
    Quiet: a handshake sends it again while nothing comes, and a kernel that
    answers late answers each, so the busy of one can come after the handshake
    returned; no code ran, and the kernel must not look busy (a spare that did
    was refused: CI)."""
    return Routes(iopub=_on_idle(published), reply=_setter(replied), quiet=True)


class MessageRouter:
    """The routing every connection shares (see the module docstring): each
    message goes by its parent's msg_id to the routes registered with the
    request; the kernel's execution states go to `on_status`, but a quiet
    request's; a new session on iopub is KERNEL_REPLACED. Never blocks on a
    route."""

    def __init__(self, on_status: StatusCallback, *, own_session: str | None = None) -> None:
        self._on_status = on_status
        #: The session of our own messages: a Jupyter server sends its own
        #: status messages (`restarting`, `dead`) under it, which are no kernel's.
        self._own_session = own_session
        self._iopub: dict[str, Route] = {}
        self._replies: dict[str, Route] = {}
        self._stdin: dict[str, Route] = {}
        self._quiet: set[str] = set()
        #: The session id of the kernel's own messages (a restarted kernel has a new one).
        self._kernel_session: str | None = None

    def add(self, msg_id: str, routes: Routes) -> None:
        if routes.iopub is not None:
            self._iopub[msg_id] = routes.iopub
        if routes.reply is not None:
            self._replies[msg_id] = routes.reply
        if routes.stdin is not None:
            self._stdin[msg_id] = routes.stdin
        if routes.quiet:
            self._quiet.add(msg_id)

    def forget(self, msg_id: str) -> None:
        # (Not from `_quiet`: a request that was given up on still runs, and its
        # busy and idle, when they come, stay out of the kernel's status.)
        self._iopub.pop(msg_id, None)
        self._replies.pop(msg_id, None)
        self._stdin.pop(msg_id, None)

    def rebind(self) -> None:
        """The kernel binds anew (a restart hdsp makes, which is no news)."""
        self._kernel_session = None
        self._quiet.clear()

    async def saw_session(self, session: object) -> None:
        """The kernel signed a message with `session`: a new one, after a known
        one, is a new kernel process (KERNEL_REPLACED)."""
        if (
            isinstance(session, str)
            and session
            and session != self._own_session
            and session != self._kernel_session
        ):
            known, self._kernel_session = self._kernel_session, session
            if known is not None:
                await self._on_status(KERNEL_REPLACED)

    async def iopub(self, msg: Mapping[str, Any]) -> None:
        parent = _parent_id(msg)
        route = self._iopub.get(parent) if parent is not None else None
        if route is not None:
            route(msg)
        await self.saw_session(msg["header"].get("session"))
        if msg["header"]["msg_type"] == "status":
            state = msg["content"].get("execution_state")
            if parent in self._quiet:
                if state == "idle":
                    self._quiet.discard(parent)
            elif isinstance(state, str):
                await self._on_status(state)

    def reply(self, msg: Mapping[str, Any]) -> None:
        parent = _parent_id(msg)
        route = self._replies.pop(parent, None) if parent is not None else None
        if route is not None:
            route(msg)

    def stdin(self, msg: Mapping[str, Any]) -> bool:
        """Route an input request; False when nobody waits for it (the execution
        ended), and the caller must answer it, or the kernel waits for ever."""
        parent = _parent_id(msg)
        route = self._stdin.get(parent) if parent is not None else None
        if route is not None:
            route(msg)
            return True
        return bool(msg["header"]["msg_type"] != "input_request")


class ZmqKernelConnection:
    """A :class:`KernelConnection` over ZeroMQ, through a jupyter_client
    `AsyncKernelClient` that `make_client` gives when the connection starts to
    run (a kernel manager's `client()`, which needs the kernel started, or one
    loaded from a connection file)."""

    def __init__(
        self, make_client: Callable[[], Any], *, kernel_id: str, on_status: StatusCallback
    ) -> None:
        self._make_client = make_client
        self._kc: Any = None
        #: For log lines.
        self._kernel_id = kernel_id
        self._router = MessageRouter(on_status)
        self._stdin_monitor: zmq.asyncio.Socket | None = None
        self._heartbeat: zmq.asyncio.Socket | None = None
        self._closing = False

    # ---- lifetime ---------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        kc = self._kc = self._make_client()
        try:
            # The client's own context (jupyter_client makes one per client):
            # its sockets, made by start_channels, take this default.
            kc.context.setsockopt(zmq.RCVHWM, IOPUB_QUEUE)
            kc.start_channels(shell=True, iopub=True, stdin=True, hb=False, control=True)
            # A kernel we started binds its sockets after this; one we attach to
            # may be connected already, so its event may have passed.
            self.expect_rebind()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read, kc.iopub_channel, self._router.iopub)
                tg.start_soon(self._read, kc.shell_channel, self._on_reply)
                tg.start_soon(self._read, kc.stdin_channel, self._on_stdin)
                # Replies to requests sent on control route like shell replies.
                tg.start_soon(self._read, kc.control_channel, self._on_reply)
                tg.start_soon(self._ask_who_answers, kc.iopub_channel.socket)
                task_status.started()
        finally:
            self._closing = True
            self._stop_watching()
            if self._heartbeat is not None:
                self._heartbeat.close(linger=0)
                self._heartbeat = None
            try:
                kc.stop_channels()
            except Exception:
                log.exception("closing a kernel's channels failed", kernel_id=self._kernel_id)

    # ---- the handshake ------------------------------------------------------------

    def expect_rebind(self) -> None:
        self._router.rebind()
        self._stop_watching()
        self._stdin_monitor = _watch_connection(self._kc.stdin_channel.socket)

    async def handshake(self, *, certain: bool) -> None:
        """Wait until the kernel answers on control, its iopub reaches us and our
        stdin socket is connected.

        The kernel sends `input()` requests to our stdin socket through a ROUTER,
        which silently drops a message to a peer not connected yet: so the stdin
        connection must be up before any code runs. A socket monitor reports it;
        when the connection may have come up before the monitor (`certain` is
        False: attaching to a running kernel), a short wait is enough, and a
        bounded one when it should not have (see `_STDIN_AFTER_REPLY`).

        kernel_info goes on the control channel, which a kernel serves while its
        shell is busy (attaching to a notebook's kernel that runs a cell works).
        The iopub status of that request proves our subscription is live, so no
        output of the first execution can be lost to a slow subscriber; waiting
        for its idle leaves the kernel idle when the handshake returns.
        """
        try:
            await self._kernel_info()
            if self._stdin_monitor is not None:
                with anyio.move_on_after(_STDIN_AFTER_REPLY if certain else _STDIN_FALLBACK):
                    await _connected(self._stdin_monitor)
        finally:
            self._stop_watching()

    async def _kernel_info(self) -> None:
        """Ask kernel_info until the kernel answers one request and publishes the
        idle of one. The request is sent again while nothing comes (a request
        made before the kernel bound its sockets is lost), each time after a
        longer wait, and an answer to any of them counts: a kernel on a loaded
        machine may take longer than a retry to answer, and one that only ever
        answered a request already given up on was never reached (CI: attaching
        failed after 10 s, a start after 60, the kernel answering all along)."""
        replied = anyio.Event()
        published = anyio.Event()
        sent: list[str] = []
        wait = _HANDSHAKE_RETRY
        try:
            while True:
                msg = self._kc.session.msg("kernel_info_request", {})
                sent.append(msg["header"]["msg_id"])
                self._router.add(sent[-1], kernel_info_routes(replied, published))
                self._kc.control_channel.send(msg)
                with anyio.move_on_after(wait):
                    await replied.wait()
                    await published.wait()
                    return
                wait = min(wait * 2, _HANDSHAKE_RETRY_MAX)
        except BaseException:
            # The caller's limit ran out (or the start was cancelled): say how far
            # the handshake got, which is what tells a slow kernel from a lost
            # subscription.
            log.warning(
                "kernel handshake given up",
                kernel_id=self._kernel_id,
                requests=len(sent),
                replied=replied.is_set(),
                idle_seen=published.is_set(),
            )
            raise
        finally:
            for msg_id in sent:
                self.forget(msg_id)

    async def _ask_who_answers(self, iopub: zmq.asyncio.Socket) -> None:
        """Each time our iopub subscription connects, ask the kernel on control
        which session it is. A kernel restarted where it runs (JupyterLab's
        Restart Kernel) publishes its first statuses while our subscription
        comes back, and a SUB socket loses what comes before it is subscribed:
        the session its reply is signed with is never lost."""
        monitor = _watch_connection(iopub)
        try:
            while True:
                await _connected(monitor)
                await self._ask_session()
        finally:
            try:
                iopub.disable_monitor()
            except zmq.ZMQError:
                pass  # the socket closed first
            monitor.close(linger=0)

    async def _ask_session(self) -> None:
        """A quiet kernel_info_request on control (sent again while our control
        socket reconnects, for a while): its reply's session goes to the router."""
        replies: list[Mapping[str, Any]] = []
        replied = anyio.Event()
        sent: list[str] = []
        wait = _HANDSHAKE_RETRY
        try:
            for _ in range(_SESSION_ASKS):
                msg = self._kc.session.msg("kernel_info_request", {})
                sent.append(msg["header"]["msg_id"])
                self._router.add(sent[-1], Routes(reply=_keeper(replies, replied), quiet=True))
                self._kc.control_channel.send(msg)
                with anyio.move_on_after(wait):
                    await replied.wait()
                if replies:
                    await self._router.saw_session(replies[0]["header"].get("session"))
                    return
                wait = min(wait * 2, _HANDSHAKE_RETRY_MAX)
        finally:
            for msg_id in sent:
                self.forget(msg_id)

    def _stop_watching(self) -> None:
        if self._stdin_monitor is None:
            return
        monitor, self._stdin_monitor = self._stdin_monitor, None
        try:
            self._kc.stdin_channel.socket.disable_monitor()
        except zmq.ZMQError:
            pass  # the socket closed first
        monitor.close(linger=0)

    # ---- requests -----------------------------------------------------------------

    def execute(self, code: str, *, allow_stdin: bool, routes: Routes, silent: bool = False) -> str:
        # Sending is synchronous and the routes are in place before the next
        # await, so no reply can come before someone waits for it.
        msg_id: str = self._kc.execute(
            code, silent=silent, store_history=not silent, allow_stdin=allow_stdin
        )
        self._router.add(msg_id, routes)
        return msg_id

    def forget(self, msg_id: str) -> None:
        self._router.forget(msg_id)

    def send_input(self, text: str) -> None:
        self._kc.input(text)

    def request_interrupt(self) -> None:
        # ipykernel serves this on control, even while its shell is busy.
        self._kc.control_channel.send(self._kc.session.msg("interrupt_request", {}))

    # ---- liveness -----------------------------------------------------------------

    async def ping(self) -> None:
        if self._heartbeat is None:
            info = self._kc.get_connection_info()
            if info["transport"] == "tcp":
                url = f"tcp://{info['ip']}:{info['hb_port']}"
            else:
                url = f"{info['transport']}://{info['ip']}-{info['hb_port']}"
            context: zmq.asyncio.Context = self._kc.context
            self._heartbeat = context.socket(zmq.REQ)
            self._heartbeat.linger = 0
            self._heartbeat.connect(url)
        socket = self._heartbeat
        try:
            await socket.send(b"ping")
            await socket.recv()
        except BaseException:
            # A REQ socket that lost its reply cannot send again: start over.
            socket.close(linger=0)
            if self._heartbeat is socket:
                self._heartbeat = None
            raise

    # ---- reading ------------------------------------------------------------------

    async def _read(
        self, channel: Any, handle: Callable[[Mapping[str, Any]], Awaitable[None]]
    ) -> None:
        socket: zmq.asyncio.Socket = channel.socket
        session = self._kc.session
        while True:
            try:
                frames = await socket.recv_multipart()
            except zmq.ZMQError as exc:
                if not self._closing:
                    log.warning("kernel socket failed", kernel_id=self._kernel_id, error=str(exc))
                return
            try:
                _, raw = session.feed_identities(frames)
                msg = session.deserialize(raw)
            except Exception as exc:
                log.warning(
                    "unreadable kernel message dropped", kernel_id=self._kernel_id, error=str(exc)
                )
                continue
            try:
                await handle(msg)
            except Exception:
                log.exception("handling a kernel message failed", kernel_id=self._kernel_id)

    async def _on_reply(self, msg: Mapping[str, Any]) -> None:
        self._router.reply(msg)

    async def _on_stdin(self, msg: Mapping[str, Any]) -> None:
        if not self._router.stdin(msg):
            # Nobody waits for it (the execution ended): answer, or it blocks the kernel.
            self._kc.input("")
