"""The ZeroMQ edge: `control` (ROUTER) for handshakes, commands and replies, and
`events` (PUB) for task events. Frames are decoded once here; a bad frame gets an
error reply (when its sender can be addressed) and nothing else is disturbed."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog
import zmq
import zmq.asyncio
from anyio.abc import TaskStatus

from hdsp.daemon.errors import CommandError
from hdsp.protocol import (
    PROTOCOL_VERSION,
    Ack,
    AckData,
    Connect,
    Disconnect,
    ErrorCode,
    ErrorInfo,
    FrameError,
    Ping,
    Pong,
    Reply,
    TaskCommand,
    __version__,
    decode_client_message,
    encode,
    ordering_key,
)

from .dispatch import Dispatcher, Overloaded
from .sessions import Session, Sessions

__all__ = ["CAPABILITIES", "SYNC_PREFIX", "Server"]

log = structlog.get_logger("hdsp.server")

CAPABILITIES = ["replay", "events.prevSeq", "events.sync"]

#: Topics that start with this are sync probes, never task ids: the daemon answers a
#: subscription to one by publishing an empty object on it.
SYNC_PREFIX = b"\x00sync."

#: Gives up the CPU for a moment. A reply goes out on zmq's I/O thread, which the
#: kernel wakes on this thread's CPU; there it waits until this thread sleeps or
#: its time slice runs out. After a reply this thread often goes on working (a
#: turn's model request takes a millisecond and more of Python to build), and the
#: reply used to reach the client only then. Yielding once lets the I/O thread
#: send it first; it costs about a microsecond when nothing else waits.
_yield_cpu: Callable[[], None] = getattr(os, "sched_yield", lambda: None)

#: Handles one command for one session; returns the result or raises CommandError.
Handler = Callable[[TaskCommand, Session], Awaitable[Any]]


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
    ) -> None:
        self.control_endpoint = control_endpoint
        self.events_endpoint = events_endpoint
        self._handle = handle
        self._head_seq = head_seq
        self.max_message_size = max_message_size
        self._pub_hwm = pub_hwm
        self.sessions = Sessions()
        self.dispatcher = Dispatcher()
        self._ctx: zmq.asyncio.Context | None = None
        self._router: zmq.asyncio.Socket | None = None
        self._pub: zmq.asyncio.Socket | None = None
        self._accepting = True

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        ctx = self._ctx = zmq.asyncio.Context()
        router = ctx.socket(zmq.ROUTER)
        # XPUB, so that the daemon sees subscriptions: a client proves its
        # subscriptions are in effect by subscribing to a sync topic of its own and
        # waiting for the daemon to publish on it (see `SYNC_PREFIX`).
        pub = ctx.socket(zmq.XPUB)
        try:
            for sock in (router, pub):
                sock.setsockopt(zmq.LINGER, 0)
            router.setsockopt(zmq.MAXMSGSIZE, self.max_message_size)
            router.setsockopt(zmq.SNDHWM, 10_000)
            router.setsockopt(zmq.RCVHWM, 10_000)
            pub.setsockopt(zmq.SNDHWM, self._pub_hwm)
            pub.setsockopt(zmq.XPUB_VERBOSE, 1)
            router.bind(self.control_endpoint)
            pub.bind(self.events_endpoint)
            for endpoint in (self.control_endpoint, self.events_endpoint):
                if endpoint.startswith("ipc://"):
                    os.chmod(endpoint.removeprefix("ipc://"), 0o600)
            self._router, self._pub = router, pub
            async with anyio.create_task_group() as tg:
                await tg.start(self.dispatcher.run)
                tg.start_soon(self._subscription_loop, pub)
                task_status.started()
                await self._receive_loop(router)
        finally:
            self._router = self._pub = None
            router.close(linger=0)
            pub.close(linger=1000)
            ctx.term()
            for endpoint in (self.control_endpoint, self.events_endpoint):
                if endpoint.startswith("ipc://"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(endpoint.removeprefix("ipc://"))

    def stop_accepting(self) -> None:
        """Commands from now on get `shutting_down` (replies still go out)."""
        self._accepting = False

    async def publish(self, topic: bytes, body: bytes) -> None:
        if self._pub is not None:
            # PUB never blocks: a subscriber past its high-water mark misses events
            # and repairs the gap with Replay.
            await self._pub.send_multipart((topic, body))

    async def _subscription_loop(self, pub: zmq.asyncio.Socket) -> None:
        while True:
            msg = await pub.recv()
            # b"\x01" + topic subscribes, b"\x00" + topic unsubscribes.
            if msg[:1] == b"\x01" and msg[1:].startswith(SYNC_PREFIX):
                await self.publish(msg[1:], b"{}")

    async def _send(self, envelope: list[bytes], message: Any) -> None:
        if self._router is None:
            return
        try:
            await self._router.send_multipart([*envelope, encode(message)])
        except zmq.ZMQError as exc:
            log.warning("reply not sent", error=str(exc))

    async def _error(
        self,
        envelope: list[bytes],
        request_id: str | None,
        code: ErrorCode,
        message: str,
        *,
        path: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        err = ErrorInfo(code=code, message=message, path=path, details=details)
        await self._send(envelope, Reply(request_id=request_id, ok=False, error=err))

    async def _receive_loop(self, router: zmq.asyncio.Socket) -> None:
        while True:
            frames = await router.recv_multipart()
            identity = frames[0]
            # A REQ peer puts an empty delimiter before its frame; keep it for the reply.
            delimited = len(frames) > 2 and frames[1] == b""
            envelope = frames[:2] if delimited else frames[:1]
            body = frames[2:] if delimited else frames[1:]
            if len(body) != 1:
                await self._error(
                    envelope,
                    None,
                    ErrorCode.INVALID_REQUEST,
                    f"Expected one JSON object in one frame, got {len(body)} frames.",
                )
                continue
            await self._on_frame(identity, envelope, body[0])

    async def _on_frame(self, identity: bytes, envelope: list[bytes], frame: bytes) -> None:
        try:
            message = decode_client_message(frame)
        except FrameError as exc:
            await self._error(envelope, exc.request_id, exc.code, exc.message, path=exc.path)
            return
        match message:
            case Connect():
                await self._on_connect(identity, envelope, message)
            case Disconnect():
                self.sessions.disconnect(identity)
            case TaskCommand():
                await self._on_command(identity, envelope, message)

    async def _on_connect(self, identity: bytes, envelope: list[bytes], msg: Connect) -> None:
        if msg.protocol_version != PROTOCOL_VERSION:
            await self._error(
                envelope,
                None,
                ErrorCode.UNSUPPORTED_VERSION,
                f"This daemon speaks protocol {PROTOCOL_VERSION}, the client "
                f"{msg.protocol_version}; install matching versions of hdsp.",
            )
            return
        session = self.sessions.connect(identity, msg.client)
        log.info("client connected", client_id=session.client_id, client=msg.client.name)
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
            )
        )
        await self._send(envelope, ack)

    async def _on_command(self, identity: bytes, envelope: list[bytes], cmd: TaskCommand) -> None:
        session = self.sessions.get(identity)
        if session is None or session.client_id != cmd.client_id:
            await self._error(
                envelope,
                cmd.request_id,
                ErrorCode.NOT_CONNECTED,
                "Send Connect first (the handshake); commands before it are refused.",
            )
            return
        if not self._accepting:
            await self._error(
                envelope, cmd.request_id, ErrorCode.SHUTTING_DOWN, "The daemon is shutting down."
            )
            return

        if isinstance(cmd.data, Ping):
            # Answered here, never queued: a liveness probe must answer while the
            # daemon is alive, however busy its handlers are (and it costs nothing).
            pong = Pong(server_time=int(time.time() * 1000))
            await self._send(envelope, Reply(request_id=cmd.request_id, ok=True, result=pong))
            return

        async def job() -> None:
            await self._run_command(envelope, cmd, session)

        try:
            self.dispatcher.submit(ordering_key(cmd.data), job)
        except Overloaded:
            await self._error(
                envelope,
                cmd.request_id,
                ErrorCode.OVERLOADED,
                "The daemon has too many commands waiting; retry shortly.",
            )

    async def _run_command(self, envelope: list[bytes], cmd: TaskCommand, session: Session) -> None:
        with structlog.contextvars.bound_contextvars(client_id=session.client_id):
            try:
                result = await self._handle(cmd, session)
            except CommandError as exc:
                await self._error(
                    envelope, cmd.request_id, exc.code, exc.message, details=exc.details
                )
            except Exception:
                log.exception("command failed", command=type(cmd.data).__name__)
                await self._error(
                    envelope,
                    cmd.request_id,
                    ErrorCode.INTERNAL,
                    "The daemon failed on this command; its log has the details.",
                )
            else:
                await self._send(envelope, Reply(request_id=cmd.request_id, ok=True, result=result))
                # A command's work often goes on past its reply (a turn's model
                # request); Ping's reply, sent as the loop goes idle, needs no help.
                _yield_cpu()
