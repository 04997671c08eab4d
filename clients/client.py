"""The async client: `async with connect() as client:`.

The client finds the daemon through its discovery file, says `Connect`, sends
commands with request ids and awaits their replies, and follows events. Event
streams are gap-free: each stream replays what it missed (from a cursor, across a
gap on the live stream) and drops duplicates by `seq`, so its user sees every
durable event once and in order.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import anyio
import msgspec
import zmq
import zmq.asyncio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from hdsp.protocol import (
    COMMANDS,
    PROTOCOL_VERSION,
    Ack,
    AckData,
    CancelTask,
    ClientInfo,
    CloseTask,
    Command,
    Connect,
    DeleteQueuedMessage,
    Disconnect,
    ErrorCode,
    FrameError,
    GetStatus,
    GetTask,
    GetTaskData,
    ListTasks,
    ListTasksData,
    Ping,
    Pong,
    Replay,
    ReplayData,
    ReplayPage,
    Reply,
    RespondToAsk,
    RespondToAskData,
    ResumeTask,
    SendMessage,
    SendMessageData,
    Shutdown,
    StartNewTask,
    StartNewTaskData,
    StatusResult,
    TaskCommand,
    TaskConfiguration,
    TaskEvent,
    TaskList,
    TaskRef,
    TaskSnapshot,
    __version__,
    command_name,
    decode_event,
    decode_server_message,
    encode,
)

from .discovery import find_daemon
from .errors import CommandFailed, ConnectionLost, DaemonNotRunning, ProtocolError

__all__ = ["Client", "EventStream", "connect"]

T = TypeVar("T")

_SYNC_PREFIX = b"\x00sync."
#: Events buffered per stream before the client drops and later replays them.
STREAM_BUFFER = 10_000


class _Pending:
    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.reply: Reply | None = None


class Client:
    """A connection to hdspd. Make one with `connect()`."""

    def __init__(self, tg: TaskGroup, control: zmq.asyncio.Socket, events: zmq.asyncio.Socket):
        self._tg = tg
        self._control = control
        self._events = events
        self._pending: dict[str, _Pending] = {}
        self._ids = itertools.count(1)
        self._prefix = uuid.uuid4().hex[:8]
        self._streams: set[EventStream] = set()
        self._syncs: dict[bytes, anyio.Event] = {}
        self._ack_waiter: _Pending | None = None
        self._closed = False
        self.ack: AckData | None = None
        #: Seconds a command may wait for its reply; None waits for ever.
        self.timeout: float | None = 30.0

    @property
    def client_id(self) -> str:
        assert self.ack is not None
        return self.ack.client_id

    # ---- lifetime -----------------------------------------------------------

    async def _handshake(self, info: ClientInfo) -> AckData:
        """Say Connect and wait for the Ack (the caller sets the deadline)."""
        waiter = self._ack_waiter = _Pending()
        try:
            await self._control.send(
                encode(Connect(protocol_version=PROTOCOL_VERSION, client=info))
            )
            await waiter.done.wait()
        finally:
            self._ack_waiter = None
        reply = waiter.reply
        assert reply is not None
        if isinstance(reply, Reply) and reply.error is not None:
            raise CommandFailed.from_info(reply.error)
        assert isinstance(reply, Ack)
        self.ack = reply.data
        return reply.data

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.ack is not None:
            with anyio.move_on_after(1, shield=True):
                await self._control.send(encode(Disconnect(client_id=self.ack.client_id)))
        for pending in self._pending.values():
            pending.done.set()
        for stream in list(self._streams):
            stream._close()
        self._tg.cancel_scope.cancel()

    async def _read_control(self) -> None:
        while True:
            frame = await self._control.recv()
            try:
                msg = decode_server_message(frame)
            except FrameError:
                continue  # a newer daemon's message this client cannot read
            if isinstance(msg, Ack):
                if self._ack_waiter is not None:
                    self._ack_waiter.reply = msg  # type: ignore[assignment]
                    self._ack_waiter.done.set()
            elif isinstance(msg, Reply):
                pending = self._pending.get(msg.request_id or "")
                if pending is None and msg.request_id is None and self._ack_waiter is not None:
                    pending = self._ack_waiter
                if pending is not None:
                    pending.reply = msg
                    pending.done.set()

    async def _read_events(self) -> None:
        while True:
            topic, body = await self._events.recv_multipart()
            if topic.startswith(_SYNC_PREFIX):
                waiter = self._syncs.get(topic)
                if waiter is not None:
                    waiter.set()
                continue
            try:
                event = decode_event(body)
            except FrameError:
                continue
            task_topic = topic.decode()
            for stream in self._streams:
                if stream.task_id is None or stream.task_id == task_topic:
                    stream._deliver(event)

    # ---- commands -----------------------------------------------------------

    async def request(self, command: Command, *, timeout: float | None = None) -> Any:
        """Send a command and return its result, decoded to the command's result type."""
        if self._closed or self.ack is None:
            raise ConnectionLost("The client is closed.")
        request_id = f"{self._prefix}-{next(self._ids)}"
        pending = self._pending[request_id] = _Pending()
        frame = encode(TaskCommand(client_id=self.client_id, request_id=request_id, data=command))
        if self.ack.max_message_size and len(frame) > self.ack.max_message_size:
            del self._pending[request_id]
            raise CommandFailed(
                ErrorCode.INVALID_REQUEST,
                f"The command is {len(frame)} bytes, above the daemon's limit of "
                f"{self.ack.max_message_size}.",
            )
        limit = self.timeout if timeout is None else timeout
        try:
            await self._control.send(frame)
            with anyio.move_on_after(limit):
                await pending.done.wait()
        finally:
            self._pending.pop(request_id, None)
        reply = pending.reply
        if reply is None:
            if self._closed:
                raise ConnectionLost("The client was closed while a command waited.")
            raise ConnectionLost(
                f"hdspd did not answer {command_name(command)} within {limit:g} s."
            )
        if not reply.ok:
            if reply.error is None:
                raise ProtocolError("The daemon sent an error reply without an error.")
            raise CommandFailed.from_info(reply.error)
        result_type = COMMANDS[command_name(command)].result
        try:
            return msgspec.convert(reply.result, result_type, from_attributes=False)
        except msgspec.ValidationError as exc:
            raise ProtocolError(f"Unreadable result of {command_name(command)}: {exc}") from exc

    async def start_task(
        self,
        text: str,
        *,
        profile: str | None = None,
        workspace: str | os.PathLike[str] | None = None,
        mode: str | None = None,
        images: list[str] | None = None,
    ) -> TaskRef:
        config = TaskConfiguration(
            api_config_name=profile,
            workspace=os.fspath(workspace) if workspace is not None else None,
            mode=mode,
        )
        data = StartNewTaskData(text=text, configuration=config, images=images)
        result: TaskRef = await self.request(StartNewTask(data=data))
        return result

    async def send_message(
        self, task_id: str, text: str | None = None, *, images: list[str] | None = None
    ) -> TaskRef:
        cmd = SendMessage(task_id=task_id, data=SendMessageData(text=text, images=images))
        result: TaskRef = await self.request(cmd)
        return result

    async def respond_to_ask(
        self,
        task_id: str,
        ask_ts: int,
        response: str = "yesButtonClicked",
        text: str | None = None,
        *,
        images: list[str] | None = None,
    ) -> TaskRef:
        """Answer a waiting ask: "yesButtonClicked", "noButtonClicked" or
        "messageResponse" (with text)."""
        data = msgspec.convert(
            {"askTs": ask_ts, "response": response, "text": text, "images": images},
            RespondToAskData,
        )
        result: TaskRef = await self.request(RespondToAsk(task_id=task_id, data=data))
        return result

    async def delete_queued_message(self, task_id: str, message_id: str) -> TaskRef:
        result: TaskRef = await self.request(DeleteQueuedMessage(task_id=task_id, data=message_id))
        return result

    async def cancel_task(self, task_id: str) -> TaskRef:
        result: TaskRef = await self.request(CancelTask(task_id=task_id))
        return result

    async def close_task(self, task_id: str) -> TaskRef:
        result: TaskRef = await self.request(CloseTask(task_id=task_id))
        return result

    async def resume_task(self, task_id: str) -> TaskRef:
        result: TaskRef = await self.request(ResumeTask(data=task_id))
        return result

    async def list_tasks(self, *, cursor: str | None = None, limit: int = 50) -> TaskList:
        result: TaskList = await self.request(
            ListTasks(data=ListTasksData(cursor=cursor, limit=limit))
        )
        return result

    async def get_task(self, task_id: str) -> TaskSnapshot:
        result: TaskSnapshot = await self.request(GetTask(data=GetTaskData(task_id=task_id)))
        return result

    async def replay(
        self, since_seq: int, *, task_id: str | None = None, limit: int = 1000
    ) -> ReplayPage:
        result: ReplayPage = await self.request(
            Replay(data=ReplayData(since_seq=since_seq, task_id=task_id, limit=limit))
        )
        return result

    async def ping(self) -> Pong:
        result: Pong = await self.request(Ping())
        return result

    async def status(self) -> StatusResult:
        result: StatusResult = await self.request(GetStatus())
        return result

    async def shutdown(self) -> None:
        await self.request(Shutdown())

    # ---- events -------------------------------------------------------------

    def events(self, task_id: str | None = None, *, since_seq: int | None = None) -> EventStream:
        """Events of one task (or all), as an async context manager and iterator.

        With `since_seq`, the stream starts with every durable event after it (from
        the log), then goes on live; without, it starts live. Live-only partial
        updates have no seq and are passed through as they come.
        """
        return EventStream(self, task_id, since_seq)

    async def _sync_subscriptions(self) -> None:
        """Return once every subscription made so far is in effect at the daemon."""
        timeout = self.timeout if self.timeout is not None else 10.0
        topic = _SYNC_PREFIX + uuid.uuid4().hex.encode()
        waiter = self._syncs[topic] = anyio.Event()
        self._events.subscribe(topic)
        try:
            with anyio.fail_after(timeout):
                await waiter.wait()
        except TimeoutError:
            raise ConnectionLost("hdspd did not confirm the event subscription.") from None
        finally:
            self._events.unsubscribe(topic)
            del self._syncs[topic]


class EventStream:
    def __init__(self, client: Client, task_id: str | None, since_seq: int | None) -> None:
        self._client = client
        self.task_id = task_id
        #: The seq of the last durable event delivered (of this stream's topic).
        self.last_seq = since_seq
        send, receive = anyio.create_memory_object_stream[TaskEvent](STREAM_BUFFER)
        self._send: MemoryObjectSendStream[TaskEvent] = send
        self._receive: MemoryObjectReceiveStream[TaskEvent] = receive
        self._ready: deque[TaskEvent] = deque()
        self._topic = (task_id or "").encode()
        self.dropped = 0

    async def __aenter__(self) -> EventStream:
        c = self._client
        c._streams.add(self)
        c._events.subscribe(self._topic)
        await c._sync_subscriptions()
        if self.last_seq is not None:
            await self._fill(up_to=None)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close()

    def _close(self) -> None:
        c = self._client
        if self in c._streams:
            c._streams.discard(self)
            if not c._closed:
                c._events.unsubscribe(self._topic)
            self._send.close()
            self._receive.close()

    def _deliver(self, event: TaskEvent) -> None:
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            # The user reads too slowly: drop, and the gap is replayed later.
            self.dropped += 1
        except anyio.BrokenResourceError:
            pass

    async def _fill(self, up_to: int | None) -> None:
        """Queue every durable event after `last_seq` from the log (up to `up_to`)."""
        assert self.last_seq is not None
        cursor = self.last_seq
        while True:
            page = await self._client.replay(cursor, task_id=self.task_id)
            for event in page.events:
                assert event.seq is not None
                if up_to is not None and event.seq >= up_to:
                    return
                self._ready.append(event)
                cursor = event.seq
            if not page.more:
                return

    def _is_gap(self, event: TaskEvent) -> bool:
        assert event.seq is not None
        if self.last_seq is None:
            return False
        if self.task_id is None:
            return event.seq > self.last_seq + 1
        return (event.prev_seq or 0) > self.last_seq

    def __aiter__(self) -> AsyncIterator[TaskEvent]:
        return self

    async def __anext__(self) -> TaskEvent:
        while True:
            if self._ready:
                event = self._ready.popleft()
            else:
                try:
                    event = await self._receive.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    raise StopAsyncIteration from None
            if event.seq is None:
                return event
            if self.last_seq is not None and event.seq <= self.last_seq:
                continue  # already delivered (replay and live overlap)
            if self._is_gap(event):
                await self._fill(up_to=event.seq)
                self._ready.append(event)
                continue
            self.last_seq = event.seq
            return event


@asynccontextmanager
async def connect(
    runtime_dir: Path | str | None = None,
    *,
    name: str = "hdsp.client",
    kind: str = "library",
    timeout: float = 5.0,
) -> AsyncIterator[Client]:
    """Connect to the daemon whose discovery file is in `runtime_dir` (by default
    HDSP_RUNTIME_DIR or the per-user runtime dir)."""
    info = find_daemon(runtime_dir)
    ctx = zmq.asyncio.Context.instance()
    control = ctx.socket(zmq.DEALER)
    events = ctx.socket(zmq.SUB)
    try:
        for sock in (control, events):
            sock.setsockopt(zmq.LINGER, 0)
        control.connect(info.control)
        events.connect(info.events)
        async with anyio.create_task_group() as tg:
            client = Client(tg, control, events)
            tg.start_soon(client._read_control)
            tg.start_soon(client._read_events)
            try:
                with anyio.move_on_after(timeout) as scope:
                    await client._handshake(ClientInfo(name=name, version=__version__, kind=kind))
                if scope.cancelled_caught:
                    raise DaemonNotRunning(
                        f"hdspd did not answer the handshake within {timeout:g} s. Is it "
                        "running? `hdsp daemon status` tells; start it with `hdspd`."
                    )
                yield client
            finally:
                await client.aclose()
    except BaseExceptionGroup as group:
        # The task group is an implementation detail: hand the caller its own
        # exception, not a group of one.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    finally:
        control.close(linger=0)
        events.close(linger=0)
