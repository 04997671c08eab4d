"""The ZeroMQ edge: `control` (ROUTER) for handshakes, commands and replies, and
`events` (XPUB) for task events. Frames are decoded once here; a bad frame gets an
error reply (when its sender can be addressed) and nothing else is disturbed.

Each frame is handled inside its own error boundary: whatever a frame holds, and
whatever a handler raises, the receive loop carries on (an unexpected failure
becomes an `internal` reply and a log line). Frames above `max_message_size` get
`too_large`; ZeroMQ's own `MAXMSGSIZE` is set well above it
(`transport_limit`), as a backstop: a frame is received whole before the daemon
can look at it, so the hard cap bounds what one frame may cost.

Which clients are there (`live_clients`, for GetStatus) follows the control
socket's connections as ZeroMQ reports them (see `sessions`); heartbeats close
a connection whose peer stopped answering.

With `tcp` (the `tcp.listen` setting), both sockets also listen on TCP, only
under CURVE, with ZAP deciding who comes in (see `curve`): the same sockets,
so sessions, replies, events and the limits work alike on both, and a TCP
client's session carries the name its key is authorised under.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

import anyio
import anyio.lowlevel
import structlog
import zmq
import zmq.asyncio
from anyio.abc import TaskStatus
from zmq.utils.monitor import parse_monitor_message

from hdsp.daemon.errors import HdspError, ShuttingDown, wire_error
from hdsp.protocol import (
    PROTOCOL_VERSION,
    SYNC_PREFIX,
    Ack,
    AckData,
    Connect,
    Disconnect,
    EventsSynced,
    FrameError,
    Ping,
    Pong,
    Reply,
    TaskCommand,
    TaskEvent,
    __version__,
    command_spec,
    decode_client_message,
    encode,
    ordering_key,
    request_id_of,
)

from .connections import shut_down_tcp
from .curve import TcpBindFailed, TcpListener, ZapHandler
from .dispatch import Dispatcher, DispatcherFull
from .publishing import EventPublisher
from .refusals import (
    FrameFailed,
    FrameRefused,
    FrameTooLarge,
    NotConnected,
    UnknownClient,
    VersionUnsupported,
)
from .sessions import Session, Sessions
from .subscriptions import SubscriptionGuard

__all__ = ["CAPABILITIES", "HEARTBEAT_IVL_MS", "SYNC_PREFIX", "Server", "transport_limit"]

log = structlog.get_logger("hdsp.server")

CAPABILITIES = ["replay", "events.prevSeq", "events.sync"]


#: Gives up the CPU for a moment. A reply goes out on zmq's I/O thread, which the
#: kernel wakes on this thread's CPU; there it waits until this thread sleeps or
#: its time slice runs out. After a reply this thread often goes on working (a
#: turn's model request takes a millisecond and more of Python to build), and the
#: reply used to reach the client only then. Yielding once lets the I/O thread
#: send it first; it costs about a microsecond when nothing else waits.
_yield_cpu: Callable[[], None] = getattr(os, "sched_yield", lambda: None)

#: Handles one command for one session; returns the result or raises CommandError.
Handler = Callable[[TaskCommand, Session], Awaitable[Any]]

#: Frames received in a row before the receive loop lets other tasks run (a
#: ready ZeroMQ socket never makes `await recv()` wait).
_FRAMES_PER_TURN = 32

#: ZeroMQ heartbeats on the control socket (ms): a peer that answers none for
#: three intervals (a host gone, over TCP) has its connection closed, and so
#: its session ends. (A killed process's ipc connection closes at once.)
HEARTBEAT_IVL_MS = 10_000

#: How often the authorised keys file is looked at for revoked keys (seconds).
_REVOCATION_CHECK_SECONDS = 1.0

#: What the control socket's monitor reports.
_CONNECTION_EVENTS = zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED
#: As a plain int: a bitwise test of pyzmq's flag enum costs microseconds.
_POLLIN = int(zmq.POLLIN)


def _peer_pid(frame: zmq.Frame) -> int | None:
    """The peer's pid, as the kernel told ZeroMQ (SO_PEERCRED): an ipc peer's
    "Peer-Address" is "<host>:<uid>:<gid>:<pid>". (Only on ipc: a TCP peer's is
    its IP address, which has colons too.)"""
    try:
        address = str(frame.get("Peer-Address"))
    except zmq.ZMQError:
        return None
    parts = address.split(":")
    return int(parts[3]) if len(parts) == 4 and parts[3].isdigit() else None


def _user_id(frame: zmq.Frame) -> str | None:
    """The name a TCP peer authenticated as (its CURVE key's, in the authorised
    keys file: the ZAP handler's answer, which libzmq puts on every frame of
    that connection); None on ipc, where there is no ZAP."""
    try:
        user = str(frame.get("User-Id"))
    except zmq.ZMQError:
        return None
    return user or None


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def transport_limit(max_message_size: int) -> int:
    """ZeroMQ's hard cap on a frame, above which it cuts the connection: twice the
    daemon's own limit plus 1 MiB, so a frame somewhat too large still reaches the
    daemon and gets `too_large`, while one frame can never cost more than this."""
    return 2 * max_message_size + (1 << 20)


class Server:
    def __init__(
        self,
        *,
        control_endpoint: str,
        events_endpoint: str,
        handle: Handler,
        head_seq: Callable[[], int],
        max_message_size: int = 64 * 1024 * 1024,
        pub_hwm: int = 100_000,
        max_subscriptions: int = 1024,
        tcp: TcpListener | None = None,
        heartbeat_ms: int = HEARTBEAT_IVL_MS,
    ) -> None:
        self.control_endpoint = control_endpoint
        self.events_endpoint = events_endpoint
        #: TCP endpoints beside the ipc:// ones, under CURVE (None: no TCP).
        self.tcp = tcp
        self._heartbeat_ms = heartbeat_ms
        self._handle = handle
        self._head_seq = head_seq
        self.max_message_size = max_message_size
        self._pub_hwm = pub_hwm
        self.sessions = Sessions()
        self.dispatcher = Dispatcher()
        self._ctx: zmq.asyncio.Context | None = None
        self._router: zmq.asyncio.Socket | None = None
        self._connections: zmq.Socket[bytes] | None = None
        self._pub: EventPublisher | None = None
        self._accepting = True
        self.subscriptions = SubscriptionGuard(
            endpoint=events_endpoint,
            on_subscribe=self._on_subscribe,
            max_per_peer=max_subscriptions,
            tcp_endpoint=None if tcp is None else tcp.events,
        )

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        ctx = self._ctx = zmq.asyncio.Context()
        router = ctx.socket(zmq.ROUTER)
        # XPUB, so that the daemon sees subscriptions: a client proves its
        # subscriptions are in effect by subscribing to a sync topic of its own and
        # waiting for the daemon to publish on it (see `SYNC_PREFIX`).
        pub = ctx.socket(zmq.XPUB)
        monitor: zmq.asyncio.Socket | None = None
        zap: ZapHandler | None = None
        try:
            for sock in (router, pub):
                sock.setsockopt(zmq.LINGER, 0)
            router.setsockopt(zmq.MAXMSGSIZE, transport_limit(self.max_message_size))
            router.setsockopt(zmq.SNDHWM, 10_000)
            router.setsockopt(zmq.RCVHWM, 10_000)
            router.setsockopt(zmq.HEARTBEAT_IVL, self._heartbeat_ms)
            router.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3 * self._heartbeat_ms)
            pub.setsockopt(zmq.SNDHWM, self._pub_hwm)
            SubscriptionGuard.configure(pub)
            monitor = self._monitor(ctx, router)
            router.bind(self.control_endpoint)
            pub.bind(self.events_endpoint)
            for endpoint in (self.control_endpoint, self.events_endpoint):
                if endpoint.startswith("ipc://"):
                    os.chmod(endpoint.removeprefix("ipc://"), 0o600)
            if self.tcp is not None:
                zap = ZapHandler(ctx, self.tcp.authorized)
                zap.start()  # before the binds: no handshake goes unchecked
                self._bind_tcp(router, pub, self.tcp)
            self._router, self._pub = router, EventPublisher(pub)
            async with anyio.create_task_group() as tg:
                if zap is not None:
                    await tg.start(zap.serve)
                    tg.start_soon(self._watch_revocations)
                await tg.start(self.dispatcher.run)
                tg.start_soon(self.subscriptions.run, pub)
                tg.start_soon(self._follow_connections, monitor)
                task_status.started()
                await self._receive_loop(router)
        finally:
            self._router = self._pub = self._connections = None
            router.close(linger=0)
            if monitor is not None:
                monitor.close(linger=0)
            pub.close(linger=1000)
            if zap is not None:
                zap.stop()
            ctx.term()
            for endpoint in (self.control_endpoint, self.events_endpoint):
                if endpoint.startswith("ipc://"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(endpoint.removeprefix("ipc://"))

    def _bind_tcp(
        self, router: zmq.asyncio.Socket, pub: zmq.asyncio.Socket, tcp: TcpListener
    ) -> None:
        """Bind the TCP endpoints under CURVE. A socket's options apply to the
        binds after them, so its ipc:// endpoint, bound before, stays as it was:
        no CURVE, no ZAP, no heartbeats on events."""
        for sock in (router, pub):
            tcp.secure(sock)
        # A subscription comes inside a CURVE MESSAGE command, 33 bytes more.
        pub.setsockopt(zmq.MAXMSGSIZE, SubscriptionGuard.max_frame(curve=True))
        # A subscriber that vanished (a host gone) is dropped, and its subscriptions.
        pub.setsockopt(zmq.HEARTBEAT_IVL, self._heartbeat_ms)
        pub.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3 * self._heartbeat_ms)
        for sock, endpoint in ((router, tcp.control), (pub, tcp.events)):
            try:
                sock.bind(endpoint)
            except zmq.ZMQError as exc:
                raise TcpBindFailed(
                    f"hdspd cannot listen on {endpoint} (tcp.listen is {tcp.address!r}; "
                    f"events take the next port): {exc.strerror}."
                ) from None
        log.info("listening on tcp under CURVE", control=tcp.control, events=tcp.events)

    async def _watch_revocations(self) -> None:
        """Cut the TCP connections of clients whose key was revoked (or
        replaced): ZAP only sees new handshakes, and a connection made before
        the revocation would stay open."""
        tcp = self.tcp
        assert tcp is not None
        while True:
            await anyio.sleep(_REVOCATION_CHECK_SECONDS)
            revoked = tcp.authorized.take_revoked()
            if revoked:
                self._cut_revoked(tcp, revoked)

    def _cut_revoked(self, tcp: TcpListener, revoked: set[str]) -> None:
        """Shut down the revoked clients' control connections, any control
        connection that has said no Connect yet, and every events connection
        (which carry no name the daemon can see: the others reconnect by
        themselves, and their streams replay what they missed)."""
        self._read_connection_events()
        keep = {
            session.connection
            for session in self.sessions
            if session.user is not None
            and session.user not in revoked
            and session.connection is not None
        }
        control = shut_down_tcp(_port(tcp.control), keep=keep)
        events = shut_down_tcp(_port(tcp.events))
        log.warning(
            "tcp clients cut: their keys were revoked",
            users=sorted(revoked),
            control_connections=control,
            events_connections=events,
        )

    def _monitor(self, ctx: zmq.asyncio.Context, router: zmq.asyncio.Socket) -> zmq.asyncio.Socket:
        """A socket that receives the control socket's connections opening and
        closing (unbounded: an event lost would keep a gone client counted)."""
        address = f"inproc://hdsp-control-monitor-{id(self)}"
        router.monitor(address, _CONNECTION_EVENTS)
        monitor = ctx.socket(zmq.PAIR)
        monitor.setsockopt(zmq.LINGER, 0)
        monitor.setsockopt(zmq.RCVHWM, 0)
        monitor.connect(address)
        self._connections = zmq.Socket.shadow(monitor.underlying)
        return monitor

    async def _follow_connections(self, monitor: zmq.asyncio.Socket) -> None:
        while True:
            await monitor.poll()  # readable
            self._read_connection_events()

    def _read_connection_events(self) -> None:
        """Apply the connection events ZeroMQ has reported so far (also before a
        Connect is bound to its connection, and before clients are counted)."""
        if self._connections is None:
            return
        # Nothing to read, the common case (GetStatus asks each time): said by
        # the socket's events, without the exception a failed read raises.
        if not cast(int, self._connections.getsockopt(zmq.EVENTS)) & _POLLIN:
            return
        while True:
            try:
                event = parse_monitor_message(self._connections.recv_multipart(zmq.NOBLOCK))
            except zmq.Again:
                return
            if event["event"] == zmq.EVENT_ACCEPTED:
                self.sessions.opened(int(event["value"]))
            elif event["event"] == zmq.EVENT_DISCONNECTED:
                self.sessions.closed(int(event["value"]))

    def live_clients(self) -> int:
        """How many clients are connected, on the daemon's own evidence."""
        self._read_connection_events()
        return self.sessions.live()

    def stop_accepting(self) -> None:
        """Commands from now on get `shutting_down` (replies still go out)."""
        self._accepting = False

    async def publish(self, topic: bytes, body: bytes) -> None:
        if self._pub is not None:
            # PUB never blocks: a subscriber past its high-water mark misses events
            # and repairs the gap with Replay.
            await self._pub.publish(topic, body)

    async def publish_batch(self, frames: Sequence[tuple[bytes, bytes]]) -> None:
        """Publish a journal batch's events in order (see `EventPublisher`)."""
        if self._pub is not None:
            await self._pub.publish_batch(frames)

    async def _on_subscribe(self, topic: bytes) -> None:
        if topic.startswith(SYNC_PREFIX):
            # A valid event, not a bare `{}`: a client subscribed to everything
            # receives every client's probes, and must be able to read them.
            synced = EventsSynced(payload=(topic.decode("utf-8", "replace"),))
            await self.publish(topic, encode(TaskEvent(data=synced)))

    async def _send(self, envelope: list[bytes], message: Any) -> None:
        if self._router is None:
            return
        try:
            await self._router.send_multipart([*envelope, encode(message)])
        except zmq.ZMQError as exc:
            log.warning("reply not sent", error=str(exc))
        except Exception:  # a reply that cannot be encoded: a bug, never the end
            log.exception("reply not encoded", message=type(message).__name__)

    async def _send_frame(self, envelope: list[bytes], frame: bytes) -> None:
        if self._router is None:
            return
        try:
            await self._router.send_multipart([*envelope, frame])
        except zmq.ZMQError as exc:
            log.warning("reply not sent", error=str(exc))

    async def _error_reply(
        self, envelope: list[bytes], request_id: str | None, exc: Exception
    ) -> None:
        """The error reply for what a command raised, or why a frame was refused
        (see :func:`wire_error`)."""
        await self._send(envelope, Reply(request_id=request_id, ok=False, error=wire_error(exc)))

    async def _receive_loop(self, router: zmq.asyncio.Socket) -> None:
        while True:
            for _ in range(_FRAMES_PER_TURN):
                received = await router.recv_multipart(copy=False)
                frames = [frame.bytes for frame in received]
                # A REQ peer puts an empty delimiter before its frame; keep it for the reply.
                delimited = len(frames) > 2 and frames[1] == b""
                envelope = frames[:2] if delimited else frames[:1]
                try:
                    await self._on_frames(envelope, frames[len(envelope) :], received[0])
                except Exception:
                    # The error boundary of one frame: the loop, the connection and
                    # every other client go on.
                    log.exception("frame failed", size=sum(map(len, frames)))
                    await self._error_reply(envelope, None, FrameFailed())
            await anyio.lowlevel.checkpoint()

    async def _on_frames(
        self, envelope: list[bytes], body: list[bytes], origin: zmq.Frame | None = None
    ) -> None:
        """`origin`: a frame as ZeroMQ received it (it tells the connection)."""
        if len(body) != 1:
            await self._error_reply(
                envelope,
                None,
                FrameRefused(f"Expected one JSON object in one frame, got {len(body)} frames."),
            )
            return
        frame = body[0]
        if len(frame) > self.max_message_size:
            await self._error_reply(
                envelope,
                request_id_of(frame),
                FrameTooLarge(
                    f"The frame is {len(frame)} bytes, above the daemon's limit of "
                    f"{self.max_message_size} (maxMessageSize in the Ack); it was not read.",
                    details={"maxMessageSize": self.max_message_size, "size": len(frame)},
                ),
            )
            return
        await self._on_frame(envelope[0], envelope, frame, origin)

    async def _on_frame(
        self, identity: bytes, envelope: list[bytes], frame: bytes, origin: zmq.Frame | None
    ) -> None:
        try:
            message = decode_client_message(frame)
        except FrameError as exc:
            await self._error_reply(envelope, exc.request_id, exc)
            return
        match message:
            case Connect():
                await self._on_connect(identity, envelope, message, origin)
            case Disconnect():
                self.sessions.disconnect(identity)
            case TaskCommand():
                await self._on_command(identity, envelope, message)

    async def _on_connect(
        self,
        identity: bytes,
        envelope: list[bytes],
        msg: Connect,
        origin: zmq.Frame | None = None,
    ) -> None:
        if msg.protocol_version != PROTOCOL_VERSION:
            await self._error_reply(
                envelope,
                None,
                VersionUnsupported(
                    f"This daemon speaks protocol {PROTOCOL_VERSION}, the client "
                    f"{msg.protocol_version}; install matching versions of hdsp."
                ),
            )
            return
        connection = peer_pid = user = None
        if origin is not None:
            self._read_connection_events()  # its connection's opening, at least
            connection = origin.get(zmq.SRCFD)
            user = _user_id(origin)
            peer_pid = _peer_pid(origin) if user is None else None
        if user is not None and self.tcp is not None and not self.tcp.authorized.allows(user):
            # Authenticated before its key was revoked, and not cut yet.
            await self._error_reply(
                envelope,
                None,
                NotConnected(
                    f"The key this connection authenticated with ({user!r}) is no longer "
                    "authorised; the handshake is refused."
                ),
            )
            return
        session = self.sessions.connect(
            identity, msg.client, connection=connection, peer_pid=peer_pid, user=user
        )
        log.info(
            "client connected",
            client_id=session.client_id,
            client=msg.client.name,
            user=user,
            pid=peer_pid,
            said_pid=msg.client.pid,
        )
        ack = Ack(
            data=AckData(
                client_id=session.client_id,
                pid=os.getpid(),
                ppid=os.getppid(),
                protocol_version=PROTOCOL_VERSION,
                server_version=__version__,
                head_seq=self._head_seq(),
                capabilities=CAPABILITIES,
                max_message_size=self.max_message_size,
                user=session.user,
            )
        )
        await self._send(envelope, ack)

    async def _on_command(self, identity: bytes, envelope: list[bytes], cmd: TaskCommand) -> None:
        session = self.sessions.get(identity)
        if session is None:
            await self._error_reply(
                envelope,
                cmd.request_id,
                NotConnected("Send Connect first (the handshake); commands before it are refused."),
            )
            return
        if session.client_id != cmd.client_id:
            await self._error_reply(
                envelope,
                cmd.request_id,
                UnknownClient(
                    f"Unknown clientId {cmd.client_id[:64]!r}: send the clientId this "
                    "connection's Ack gave (or Connect again for a new one)."
                ),
            )
            return
        if not self._accepting:
            await self._error_reply(
                envelope, cmd.request_id, ShuttingDown("The daemon is shutting down.")
            )
            return

        if isinstance(cmd.data, Ping):
            # Answered here, never queued: a liveness probe must answer while the
            # daemon is alive, however busy its handlers are (and it costs nothing).
            pong = Pong(server_time=int(time.time() * 1000))
            await self._send(envelope, Reply(request_id=cmd.request_id, ok=True, result=pong))
            return

        async def job() -> None:
            try:
                await self._run_command(envelope, cmd, session)
            except Exception:  # (_run_command catches all; a worker must never die)
                log.exception("command job failed", command=type(cmd.data).__name__)

        try:
            self.dispatcher.submit(ordering_key(cmd.data), job)
        except DispatcherFull as exc:
            await self._error_reply(envelope, cmd.request_id, exc)

    async def _run_command(self, envelope: list[bytes], cmd: TaskCommand, session: Session) -> None:
        # The client's id in every log line of the command (bound_contextvars
        # would copy the whole context first, twice, for each command).
        tokens = structlog.contextvars.bind_contextvars(client_id=session.client_id)
        try:
            try:
                result = await self._handle(cmd, session)
                reply = encode(Reply(request_id=cmd.request_id, ok=True, result=result))
            except Exception as exc:
                if not isinstance(exc, HdspError):
                    log.exception("command failed", command=type(cmd.data).__name__)
                await self._error_reply(envelope, cmd.request_id, exc)
            else:
                await self._send_frame(envelope, reply)
                # A command's work often goes on past its reply (a turn's model
                # request). One that only reads (idempotent: GetStatus, ListTasks,
                # GetTask...) leaves the loop idle, which sends its reply: it needs
                # no help, and on a loaded machine a yield gives the CPU away.
                if not command_spec(cmd.data).idempotent:
                    _yield_cpu()
        finally:
            structlog.contextvars.reset_contextvars(**tokens)
