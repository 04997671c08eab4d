"""The async client: `async with connect() as client:`.

The client finds the daemon through its discovery file, says `Connect`, sends
commands with request ids and awaits their replies, and follows events. Event
streams are gap-free: each stream replays what it missed (from a cursor, across a
gap on the live stream) and drops duplicates by `seq`, so its user sees every
durable event once and in order.
"""

from __future__ import annotations

import base64
import itertools
import logging
import math
import os
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar, cast

import anyio
import anyio.lowlevel
import msgspec
import zmq
import zmq.asyncio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from hdsp.protocol import (
    PROTOCOL_VERSION,
    Ack,
    AckData,
    AgentList,
    AnswerDocumentEdit,
    AttachKernel,
    BlobData,
    CallTool,
    CallToolData,
    CancelTask,
    CheckpointDiff,
    CheckpointList,
    CheckpointRestoreResult,
    ClientInfo,
    CloseTask,
    Command,
    CommandBase,
    CommandList,
    CondenseTask,
    Connect,
    CreateTask,
    CreateTaskData,
    DeleteMessage,
    DeleteMessageData,
    DeleteQueuedMessage,
    DiffCheckpoints,
    DiffCheckpointsData,
    Disconnect,
    DocumentEditAnswer,
    DocumentEditTaken,
    DocumentRoute,
    DocumentsHosted,
    EditMessage,
    EditMessageData,
    ErrorCode,
    ExecuteCode,
    ExecutionResult,
    ForkTask,
    ForkTaskData,
    FrameError,
    GetBlob,
    GetBlobData,
    GetCommands,
    GetCommandsData,
    GetModes,
    GetModesData,
    GetStatus,
    GetSystemPrompt,
    GetSystemPromptData,
    GetTask,
    GetTaskData,
    GetTaskPage,
    GetTaskPageData,
    HostDocuments,
    InterruptKernel,
    KernelInfo,
    KernelList,
    KernelRef,
    ListAgents,
    ListCheckpoints,
    ListCheckpointsData,
    ListKernels,
    ListMcpServers,
    ListRemoteKernels,
    ListTasks,
    ListTasksData,
    ListVariables,
    McpServerList,
    McpServerStatus,
    ModeList,
    OfferedMcpServer,
    Ping,
    Pong,
    PromptContext,
    RemoteKernelList,
    Replay,
    ReplayData,
    ReplayPage,
    Reply,
    RespondToAsk,
    RespondToAskData,
    RestartKernel,
    RestartMcpServer,
    RestoreCheckpoint,
    RestoreCheckpointData,
    ResumeTask,
    RewindTask,
    RewindTaskData,
    SendMessage,
    SendMessageData,
    Shutdown,
    ShutdownKernel,
    StartKernel,
    StartNewTask,
    StartNewTaskData,
    StatusResult,
    SwitchMode,
    SwitchModeData,
    SystemPromptText,
    TaskCommand,
    TaskConfiguration,
    TaskEvent,
    TaskList,
    TaskPage,
    TaskRef,
    TaskSnapshot,
    ToolCallResult,
    TrustMcpServer,
    UpdateTodoList,
    UpdateTodoListData,
    VariableList,
    __version__,
    command_name,
    command_spec,
    decode_control_frame,
    decode_event,
    encode,
)
from hdsp.protocol.settings import (
    DeleteProfile,
    DeleteSecret,
    ExportSettings,
    GetModels,
    GetModelsData,
    GetSettings,
    ImportResult,
    ImportSettings,
    ImportSettingsData,
    ListProfiles,
    ModelList,
    ProfileData,
    ProfileInfo,
    ProfileList,
    ProfileNameData,
    SaveProfile,
    SaveProfileData,
    SecretInfo,
    SecretNameData,
    SelectProfile,
    SetSecret,
    SetSecretData,
    SettingsExport,
    SettingsView,
    UpdateSettings,
    UpdateSettingsData,
)

from .discovery import find_daemon
from .errors import (
    ClientError,
    CommandFailed,
    ConnectionLost,
    DaemonNotRunning,
    NotAuthenticated,
    ProtocolError,
    RemoteConfigError,
)
from .remotes import ClientKeys, Remote, load_client_keys, resolve_remote

__all__ = ["Client", "EventStream", "connect"]

_log = logging.getLogger("hdsp.client")

T = TypeVar("T")
#: The result type of a command.
R = TypeVar("R")

_SYNC_PREFIX = b"\x00sync."
#: Events buffered per stream before the client drops and later replays them.
STREAM_BUFFER = 10_000
#: Events read from the socket at a time without waiting (see `_read_events`).
_EVENT_BATCH = 256
#: A stream quiet for this long checks the log for events it may have missed.
IDLE_CHECK = 5.0
#: The longest a re-handshake waits before it says Connect again.
HANDSHAKE_BACKOFF_MAX = 60.0
#: ZeroMQ heartbeats on a remote's sockets (ms): a daemon that answers none for
#: the timeout (a host or a network gone) counts as gone, as a closed connection.
_HEARTBEAT_IVL_MS = 10_000
_HEARTBEAT_TIMEOUT_MS = 30_000
#: How a CURVE handshake can fail, as the socket's monitor reports it.
_HANDSHAKE_FAILURES = (
    zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)


class _Pending:
    __slots__ = ("done", "lost", "reply")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.reply: Reply | None = None
        #: The daemon went away while this waited.
        self.lost = False


class Client:
    """A connection to hdspd. Make one with `connect()`."""

    def __init__(
        self,
        tg: TaskGroup,
        control: zmq.asyncio.Socket,
        events: zmq.asyncio.Socket,
        *,
        remote: _Remote | None = None,
    ):
        self._tg = tg
        #: The remote daemon this client talks to over TCP (None: the local one).
        self.remote = None if remote is None else remote.remote
        self._keys = None if remote is None else remote.keys
        self._control = control
        self._events = events
        self._pending: dict[str, _Pending] = {}
        self._ids = itertools.count(1)
        self._prefix = uuid.uuid4().hex[:8]
        self._streams: set[EventStream] = set()
        self._syncs: dict[bytes, anyio.Event] = {}
        self._ack_waiter: _Pending | None = None
        self._closed = False
        self._info: ClientInfo | None = None
        #: Set while the daemon is connected and has acknowledged this client.
        self._acked = anyio.Event()
        #: Set while the daemon is away (a new one once it is back).
        self._lost = anyio.Event()
        self.ack: AckData | None = None
        #: How often the client re-connected to a daemon that went away.
        self.reconnects = 0
        #: Messages from the daemon that this client could not decode (skipped).
        self.unreadable = 0
        self._handshaking = anyio.Lock()
        #: Whether the control socket's connection is up (as its monitor last said).
        self._connection_up = True
        #: The re-handshake under way (cancelled when the daemon goes away again).
        self._rehandshake_scope: anyio.CancelScope | None = None
        #: When the re-handshake under way sent its first Connect (monotonic).
        self._handshake_since: float | None = None
        #: Why the daemon refused the last re-handshake (or a remote's CURVE
        #: handshake failed), if it did.
        self._handshake_refused: ClientError | None = None
        #: Seconds a command may wait for its reply; None waits for ever.
        self.timeout: float | None = 30.0
        #: Seconds to wait for the Ack of a re-handshake before saying Connect
        #: again (then twice as long each time, up to `HANDSHAKE_BACKOFF_MAX`).
        self.handshake_timeout: float = 10.0

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
        if reply is None:  # the CURVE handshake failed first
            raise self._handshake_refused or ConnectionLost("The handshake was cut off.")
        if isinstance(reply, Reply) and reply.error is not None:
            raise CommandFailed.from_info(reply.error)
        assert isinstance(reply, Ack)
        self._info = info
        self._accept(reply.data)
        return reply.data

    def _accept(self, ack: AckData) -> None:
        """The daemon acknowledged this client (its latest Connect wins: each
        Connect replaces the session the daemon keeps for this socket)."""
        self.ack = ack
        self._handshake_refused = None
        if self._lost.is_set():
            self._lost = anyio.Event()
        self._acked.set()

    async def _watch_connection(self, monitor: zmq.asyncio.Socket) -> None:
        """Follow the control socket's connection: when the daemon goes away, fail
        the commands that wait; when it is back (ZeroMQ reconnects by itself, with
        backoff), say Connect again and let every event stream catch up."""
        from zmq.utils.monitor import parse_monitor_message

        lost = False
        stale: AckData | None = None
        while True:
            report = parse_monitor_message(await monitor.recv_multipart())
            event = report["event"]
            if event & _HANDSHAKE_FAILURES:
                self._refused(event, int(report["value"]))
            elif event == zmq.EVENT_DISCONNECTED:
                lost = True
                self._connection_up = False
                self._lost.set()
                stale = self.ack
                if self._acked.is_set():
                    self._acked = anyio.Event()
                if self._rehandshake_scope is not None:
                    self._rehandshake_scope.cancel()  # its Connect went with the connection
                for pending in self._pending.values():
                    pending.lost = True
                    pending.done.set()
            elif event == zmq.EVENT_CONNECTED and lost:
                lost = False
                self._connection_up = True
                # In a task of its own: it retries for as long as the connection
                # is up, and this watcher must see the connection drop meanwhile.
                self._tg.start_soon(self._rehandshake, stale)

    def _refused(self, event: int, value: int) -> None:
        """A remote's CURVE handshake failed: say why, to the handshake that
        waits (at once, not at its deadline) and to the commands that wait."""
        remote, keys = self.remote, self._keys
        assert remote is not None and keys is not None  # (only TCP has CURVE)
        where = f"hdspd at {remote.address} (remote {remote.name!r})"
        if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            message = (
                f"{where} refused this client's key (ZAP status {value}): the key is not "
                "authorised there. Ask the daemon's admin to run, on its host: "
                f"hdspd keys authorize NAME -- '{keys.public.decode()}' (NAME: who you are)."
            )
        elif event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
            message = (
                f"Could not authenticate with {where}: what answers there does not speak "
                "CURVE (is it hdspd, with tcp.listen set?)."
            )
        else:
            message = (
                f"Could not authenticate with {where}: the CURVE handshake failed, most "
                f"likely because the remote's server key ({remote.server_key}) is not that "
                "daemon's. `hdspd keys` on its host prints the right one; `hdsp remote add "
                f"{remote.name} {remote.address} --server-key='KEY'` saves it."
            )
        self._handshake_refused = NotAuthenticated(message)
        waiter = self._ack_waiter
        if waiter is not None and waiter.reply is None:
            waiter.done.set()

    @property
    def connected(self) -> bool:
        """Whether the daemon is connected and has acknowledged this client."""
        return self._acked.is_set()

    async def wait_connection_lost(self) -> None:
        """Return once the daemon goes away (at once if it is away now)."""
        await self._lost.wait()

    async def wait_connected(self) -> None:
        """Return once the daemon is connected and has acknowledged this client
        (after a restart: once the client has said Connect again)."""
        while not self._acked.is_set():
            await self._acked.wait()

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
                msg = decode_control_frame(frame)  # a reply's result stays JSON
            except FrameError as exc:
                self._unreadable(exc)
                continue
            if isinstance(msg, Ack):
                if self._ack_waiter is not None:
                    self._ack_waiter.reply = msg  # type: ignore[assignment]
                    self._ack_waiter.done.set()
                elif self._info is not None and not self._closed and not self._lost.is_set():
                    # The answer to a Connect said again while the daemon was
                    # slow: the daemon now knows this client by its clientId.
                    self._accept(msg.data)
            elif isinstance(msg, Reply):
                pending = self._pending.get(msg.request_id or "")
                if pending is None and msg.request_id is None and self._ack_waiter is not None:
                    pending = self._ack_waiter
                if pending is not None:
                    pending.reply = msg
                    pending.done.set()

    def _unreadable(self, exc: FrameError) -> None:
        """A frame this client cannot decode (most likely from a newer daemon): it
        is skipped, but counted and logged, never dropped in silence."""
        self.unreadable += 1
        _log.warning(
            "skipped a message this client cannot read (%s at %s); if this repeats, "
            "install the same hdsp version as the daemon (`hdsp daemon status`)",
            exc.message,
            exc.path,
        )

    async def _read_events(self) -> None:
        # Waiting costs far more than reading: after each wait, take what else has
        # arrived straight from the socket, a bounded batch at a time so that the
        # streams' readers get to run in between.
        drain: zmq.Socket[bytes] = zmq.Socket.shadow(self._events.underlying)
        while True:
            self._on_event(*await self._events.recv_multipart())
            for _ in range(_EVENT_BATCH):
                try:
                    topic, body = drain.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self._on_event(topic, body)
            await anyio.lowlevel.checkpoint()

    def _on_event(self, topic: bytes, body: bytes) -> None:
        if topic.startswith(_SYNC_PREFIX):
            waiter = self._syncs.get(topic)
            if waiter is not None:
                waiter.set()
            return
        try:
            event = decode_event(body)
        except FrameError as exc:
            self._unreadable(exc)
            return
        task_topic = topic.decode()
        for stream in self._streams:
            if stream.task_id is None or stream.task_id == task_topic:
                stream._deliver(event)

    # ---- commands -----------------------------------------------------------

    def _workspace(self, workspace: str | os.PathLike[str] | None) -> str:
        """The workspace to send: for the local daemon, absolute from this
        process's working directory (its default); a remote daemon works in
        directories on its own host, which must be named, and absolute."""
        if self.remote is None:
            return _absolute_workspace(workspace)
        path = None if workspace is None else os.fspath(workspace)
        if path is None or not os.path.isabs(path):
            raise CommandFailed(
                ErrorCode.INVALID_REQUEST,
                f"A remote daemon (remote {self.remote.name!r}) works in directories on its "
                "own host: name one there, as an absolute path (--workspace /srv/project).",
            )
        return path

    async def request(self, command: CommandBase[R], *, timeout: float | None = None) -> R:
        """Send a command and return its result, decoded to the command's result type
        (its row in the protocol's table; `GetTask(...)` returns a TaskSnapshot).

        Across a daemon restart: a command the daemon refused as `not_connected`
        (or as `unknown_client`, sent under a clientId a new handshake replaced)
        was not carried out and is sent again after a new handshake; an idempotent
        one (GetTask, Replay, ...) is also sent again when the daemon went away
        before replying. Others raise ConnectionLost: they may have run."""
        if self._closed or self.ack is None:
            raise ConnectionLost("The client is closed.")
        limit = self.timeout if timeout is None else timeout
        name = command_name(command)
        spec = command_spec(command)
        reply: Reply | None = None
        started = time.monotonic()
        tries = 0
        went_away = False
        with anyio.move_on_after(limit):
            while True:
                if not self._acked.is_set():  # (waiting on a set Event still yields)
                    await self._acked.wait()
                tries += 1
                sent_as = self.ack
                reply = await self._exchange(command)
                if reply is None and not self._closed:
                    went_away = True
                    if spec.idempotent:
                        continue  # the daemon went away first; ask again once it is back
                if reply is not None and reply.error is not None:
                    if reply.error.code == ErrorCode.NOT_CONNECTED:
                        await self._rehandshake(self.ack)
                        continue
                    if reply.error.code == ErrorCode.UNKNOWN_CLIENT and self.ack is not sent_as:
                        continue  # sent with the clientId of a handshake since replaced
                break
        if reply is None:
            waited = time.monotonic() - started
            if self._closed:
                raise ConnectionLost("The client was closed while a command waited.")
            if went_away and not spec.idempotent:
                raise ConnectionLost(
                    f"hdspd went away while {name} waited for its reply ({waited:.3g} s "
                    "after it was sent); it may or may not have been carried out."
                )
            if self._handshake_refused is not None and not self._acked.is_set():
                raise self._handshake_refused
            since = self._handshake_since
            if since is not None and not self._acked.is_set():
                sent = f"sent {tries} time(s) without a reply" if tries else "not sent"
                raise ConnectionLost(
                    f"hdspd is connected but has not answered the handshake for "
                    f"{time.monotonic() - since:.3g} s (overloaded or stopped?); the client "
                    f"keeps saying Connect ({name} was {sent})."
                )
            if went_away or not self._acked.is_set():
                sent = f"sent {tries} time(s) without a reply" if tries else "not sent"
                raise ConnectionLost(
                    f"hdspd went away and was not back after {waited:.3g} s ({name} was {sent})."
                )
            raise ConnectionLost(f"hdspd did not answer {name} within {waited:.3g} s.")
        if not reply.ok:
            if reply.error is None:
                raise ProtocolError("The daemon sent an error reply without an error.")
            raise CommandFailed.from_info(reply.error)
        try:
            if isinstance(reply.result, msgspec.Raw):  # decoded once, into its type
                result: R = msgspec.json.decode(reply.result, type=spec.result)
            else:
                result = msgspec.convert(reply.result, spec.result, from_attributes=False)
        except msgspec.DecodeError as exc:
            raise ProtocolError(f"Unreadable result of {name}: {exc}") from exc
        return result

    async def _exchange(self, command: CommandBase[Any]) -> Reply | None:
        """Send once and wait for the reply; None when the daemon went away first."""
        assert self.ack is not None
        request_id = f"{self._prefix}-{next(self._ids)}"
        data = cast(Command, command)  # (every CommandBase is one of the Command union)
        frame = encode(TaskCommand(client_id=self.client_id, request_id=request_id, data=data))
        if self.ack.max_message_size and len(frame) > self.ack.max_message_size:
            raise CommandFailed(
                ErrorCode.TOO_LARGE,
                f"The command is {len(frame)} bytes, above the daemon's limit of "
                f"{self.ack.max_message_size} (hdspd --max-message-size); it was not sent.",
                {"maxMessageSize": self.ack.max_message_size, "size": len(frame)},
            )
        pending = self._pending[request_id] = _Pending()
        try:
            await self._control.send(frame)
            await pending.done.wait()
        finally:
            self._pending.pop(request_id, None)
        if pending.lost and pending.reply is None:
            return None
        return pending.reply

    async def _rehandshake(self, stale: AckData | None) -> None:
        """Say Connect again (a restarted daemon does not know this client), unless
        it was done already since the caller saw the `stale` Ack fail.

        A daemon slow to answer (overloaded, stopped in a debugger) is waited for
        as long as the connection is up: Connect is said again after
        `handshake_timeout`, then after twice as long each time (up to
        `HANDSHAKE_BACKOFF_MAX`), and whichever Ack comes, however late, is
        taken. The connection dropping ends the attempt; the next one starts
        when it is back."""
        async with self._handshaking:
            if self._info is None or self._closed or not self._connection_up:
                return  # (the next connection starts a re-handshake of its own)
            if self._acked.is_set() and self.ack is not stale:
                return  # someone else did it meanwhile
            if self._acked.is_set():
                self._acked = anyio.Event()  # (waiters of a cleared one keep theirs)
            frame = encode(Connect(protocol_version=PROTOCOL_VERSION, client=self._info))
            waiter = self._ack_waiter = _Pending()
            self._handshake_since = time.monotonic()
            wait = self.handshake_timeout
            try:
                with anyio.CancelScope() as self._rehandshake_scope:
                    while True:
                        await self._control.send(frame)
                        with anyio.move_on_after(wait):
                            await waiter.done.wait()
                            break
                        _log.warning(
                            "hdspd has not answered the handshake for %.3g s; saying Connect again",
                            time.monotonic() - self._handshake_since,
                        )
                        wait = min(wait * 2, HANDSHAKE_BACKOFF_MAX)
            finally:
                self._ack_waiter = None
                self._rehandshake_scope = None
                self._handshake_since = None
            reply = waiter.reply
            if reply is None:
                return  # the connection dropped (or the client closed) first
            if isinstance(reply, Reply):
                info = reply.error
                if info is not None:
                    self._handshake_refused = CommandFailed.from_info(info)
                    _log.warning("hdspd refused the handshake: %s", info.message)
                return
            assert isinstance(reply, Ack)
            self._accept(reply.data)
            self.reconnects += 1
            for stream in list(self._streams):
                stream._resync()

    async def start_task(
        self,
        text: str,
        *,
        profile: str | None = None,
        workspace: str | os.PathLike[str] | None = None,
        mode: str | None = None,
        images: list[str] | None = None,
        kernel_id: str | None = None,
        approvals: dict[str, Any] | None = None,
        allow_broad_workspace: bool = False,
        context: PromptContext | None = None,
        agent: str | None = None,
        mcp_servers: list[OfferedMcpServer] | None = None,
        kernel_provider: Literal["local", "gateway"] | None = None,
    ) -> TaskRef:
        """Start a task in `workspace` (by default the caller's working
        directory; a relative path is taken from it too). `approvals` overrides
        the daemon's auto-approval settings for this task (for example
        {"always_allow_write": True}). The daemon refuses `/`, the home directory
        itself and its own directories as a workspace unless
        `allow_broad_workspace` says that one was meant. `context` says what the
        message is about (a notebook, its active cell; see `PromptContext`);
        `agent` names the agent the task runs (seed 002); `mcp_servers` are MCP
        servers this client offers the task (kept in hdspd's memory only);
        `kernel_provider` where its kernels run (local, or gateway: a Jupyter
        server)."""
        config = TaskConfiguration(
            api_config_name=profile,
            workspace=self._workspace(workspace),
            mode=mode,
            kernel_id=kernel_id,
            approvals=approvals,
            allow_broad_workspace=allow_broad_workspace,
            agent=agent,
            kernel_provider=kernel_provider,
        )
        data = StartNewTaskData(
            text=text,
            configuration=config,
            images=images,
            context=context,
            mcp_servers=mcp_servers,
        )
        return await self.request(StartNewTask(data=data))

    async def send_message(
        self,
        task_id: str,
        text: str | None = None,
        *,
        images: list[str] | None = None,
        steer: bool = False,
        context: PromptContext | None = None,
        mcp_servers: list[OfferedMcpServer] | None = None,
    ) -> TaskRef:
        """Send a message; to a working task it waits for the turn to end, or, with
        `steer`, joins the running turn before its next model request. `context`
        says what it is about (see `PromptContext`); `mcp_servers`, if given,
        replace the MCP servers this client offered the task."""
        data = SendMessageData(
            text=text,
            images=images,
            delivery="steer" if steer else "queue",
            context=context,
            mcp_servers=mcp_servers,
        )
        return await self.request(SendMessage(task_id=task_id, data=data))

    async def respond_to_ask(
        self,
        task_id: str,
        ask_ts: int,
        response: str = "yesButtonClicked",
        text: str | None = None,
        *,
        images: list[str] | None = None,
        context: PromptContext | None = None,
    ) -> TaskRef:
        """Answer a waiting ask: "yesButtonClicked", "noButtonClicked" or
        "messageResponse" (with text); `context`: what an answer with text is
        about (a notebook, a cell), as a message's."""
        data = msgspec.convert(
            {"askTs": ask_ts, "response": response, "text": text, "images": images},
            RespondToAskData,
        )
        if context is not None:
            data = msgspec.structs.replace(data, context=context)
        return await self.request(RespondToAsk(task_id=task_id, data=data))

    async def delete_queued_message(self, task_id: str, message_id: str) -> TaskRef:
        return await self.request(DeleteQueuedMessage(task_id=task_id, data=message_id))

    async def cancel_task(self, task_id: str) -> TaskRef:
        return await self.request(CancelTask(task_id=task_id))

    async def close_task(self, task_id: str) -> TaskRef:
        return await self.request(CloseTask(task_id=task_id))

    async def condense_task(self, task_id: str) -> TaskRef:
        """Condense the task's conversation now (see `CondenseTask`)."""
        return await self.request(CondenseTask(task_id=task_id))

    async def rewind_task(self, task_id: str, ts: int, *, include: bool = True) -> TaskRef:
        """Take the task back to its message `ts` (removing it too with `include`)."""
        data = RewindTaskData(task_id=task_id, ts=ts, include=include)
        return await self.request(RewindTask(data=data))

    async def edit_message(
        self,
        task_id: str,
        ts: int,
        text: str,
        *,
        images: list[str] | None = None,
        context: PromptContext | None = None,
    ) -> TaskRef:
        """Replace the user's message `ts` with `text` (about `context`, if given)
        and go on from there."""
        data = EditMessageData(task_id=task_id, ts=ts, text=text, images=images, context=context)
        return await self.request(EditMessage(data=data))

    async def delete_message(self, task_id: str, ts: int) -> TaskRef:
        """Delete the user's message `ts` from the task's history (see DeleteMessage)."""
        data = DeleteMessageData(task_id=task_id, ts=ts)
        return await self.request(DeleteMessage(data=data))

    async def fork_task(self, task_id: str, ts: int) -> TaskRef:
        """A new task with this one's history up to its message `ts`: its TaskRef."""
        return await self.request(ForkTask(data=ForkTaskData(task_id=task_id, ts=ts)))

    async def create_task(
        self,
        title: str,
        *,
        workspace: str | os.PathLike[str] | None = None,
        mode: str | None = None,
    ) -> TaskRef:
        """A task that runs no model turn and waits, for `call_tool` (CreateTask);
        `workspace` defaults to this process's working directory."""
        data = CreateTaskData(title=title, workspace=self._workspace(workspace), mode=mode)
        return await self.request(CreateTask(data=data))

    async def call_tool(
        self,
        task_id: str,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        kernel_id: str | None = None,
    ) -> ToolCallResult:
        """Run one of hdsp's tools in the task as its model would (CallTool): the
        approval policy decides, and an ask waits for any client's answer; so
        the reply waits without a time limit (cancel the task to stop it)."""
        data = CallToolData(tool=tool, arguments=dict(arguments), kernel_id=kernel_id)
        return await self.request(CallTool(task_id=task_id, data=data), timeout=math.inf)

    async def list_checkpoints(self, task_id: str) -> CheckpointList:
        """The task's checkpoints, oldest first (see ListCheckpoints)."""
        return await self.request(ListCheckpoints(data=ListCheckpointsData(task_id=task_id)))

    async def diff_checkpoints(
        self, task_id: str, checkpoint: int, to: int | None = None
    ) -> CheckpointDiff:
        """What changed from checkpoint `checkpoint` to `to` (None: to the files now)."""
        data = DiffCheckpointsData(task_id=task_id, checkpoint=checkpoint, to=to)
        return await self.request(DiffCheckpoints(data=data))

    async def restore_checkpoint(
        self,
        task_id: str,
        checkpoint: int,
        *,
        restore: Literal["files", "history", "both"] = "files",
        with_kernel: bool = False,
        skip: Sequence[int] = (),
        timeout: float | None = None,
    ) -> CheckpointRestoreResult:
        """Restore a checkpoint (see RestoreCheckpoint). With `with_kernel`, the
        reply waits for someone to answer the task's replay ask."""
        data = RestoreCheckpointData(
            task_id=task_id,
            checkpoint=checkpoint,
            restore=restore,
            with_kernel=with_kernel,
            skip=list(skip),
        )
        return await self.request(RestoreCheckpoint(data=data), timeout=timeout)

    async def resume_task(self, task_id: str) -> TaskRef:
        return await self.request(ResumeTask(data=task_id))

    async def list_tasks(
        self, *, cursor: str | None = None, limit: int = 50, id_prefix: str | None = None
    ) -> TaskList:
        """A page of tasks, newest first; with `id_prefix`, only (up to `limit` of)
        those whose id starts with it."""
        data = ListTasksData(cursor=cursor, limit=limit, id_prefix=id_prefix)
        return await self.request(ListTasks(data=data))

    async def get_task(self, task_id: str) -> TaskSnapshot:
        return await self.request(GetTask(data=GetTaskData(task_id=task_id)))

    async def get_task_page(
        self,
        task_id: str,
        *,
        start: int | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> TaskPage:
        """Up to `limit` of a task's messages, oldest first, from index `start` (0
        by default) or after a previous page (its `next_cursor`); the last page has
        no `next_cursor`."""
        data = GetTaskPageData(task_id=task_id, start=start, cursor=cursor, limit=limit)
        return await self.request(GetTaskPage(data=data))

    async def replay(
        self, since_seq: int, *, task_id: str | None = None, limit: int = 1000
    ) -> ReplayPage:
        return await self.request(
            Replay(data=ReplayData(since_seq=since_seq, task_id=task_id, limit=limit))
        )

    async def get_blob(
        self, sha256: str, *, offset: int = 0, length: int | None = None
    ) -> BlobData:
        """Part of an image stored once (from a `hdsp-blob:` reference): as many
        bytes from `offset` on as fit in one reply (see hdsp.protocol.blobs)."""
        result: BlobData = await self.request(
            GetBlob(data=GetBlobData(sha256=sha256, offset=offset, length=length))
        )
        return result

    async def host_documents(
        self,
        host_id: str,
        route: DocumentRoute,
        paths: list[str],
        *,
        lease_seconds: float = 60.0,
    ) -> DocumentsHosted:
        """Declare this client a document host of the notebooks at `paths`
        (absolute), replacing what `host_id` declared before (see
        hdsp.protocol.documents); an empty list withdraws it."""
        cmd = HostDocuments(
            host_id=host_id, route=route, paths=list(paths), lease_seconds=lease_seconds
        )
        result: DocumentsHosted = await self.request(cmd)
        return result

    async def answer_document_edit(self, answer: DocumentEditAnswer) -> bool:
        """Answer a `documentEditRequested`; False when the daemon no longer waits."""
        result: DocumentEditTaken = await self.request(AnswerDocumentEdit(data=answer))
        return result.taken

    async def blob(self, sha256: str) -> tuple[str, bytes]:
        """The media type and the bytes of a whole blob, fetched in as many
        replies as its size takes."""
        first = await self.get_blob(sha256)
        parts = [base64.b64decode(first.data)]
        got = len(parts[0])
        while got < first.size:
            page = await self.get_blob(sha256, offset=got)
            chunk = base64.b64decode(page.data)
            if not chunk:
                raise ProtocolError(f"The daemon sent no bytes of blob {sha256} at {got}.")
            parts.append(chunk)
            got += len(chunk)
        return first.media_type, b"".join(parts)

    async def ping(self) -> Pong:
        return await self.request(Ping())

    async def status(self) -> StatusResult:
        return await self.request(GetStatus())

    async def shutdown(self) -> None:
        return await self.request(Shutdown())

    # ---- kernels --------------------------------------------------------------

    async def list_kernels(self) -> KernelList:
        return await self.request(ListKernels())

    async def start_kernel(
        self,
        kernel_name: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        *,
        provider: Literal["local", "gateway"] | None = None,
        profile: str | None = None,
    ) -> KernelInfo:
        """Start a kernel (by kernelspec name, "python3" by default) in the
        directory `cwd` (an absolute path; the daemon's own by default), or on
        the Jupyter server of the settings (`provider` "gateway"; a `profile`'s
        kernels settings when named)."""
        where = None if cwd is None else os.fspath(cwd)
        return await self.request(
            StartKernel(kernel_name=kernel_name, cwd=where, provider=provider, profile=profile)
        )

    async def attach_kernel(
        self,
        connection_file: str | os.PathLike[str] | None = None,
        *,
        remote_kernel_id: str | None = None,
        profile: str | None = None,
    ) -> KernelInfo:
        """Use a kernel that runs already: by its connection file (absolute
        path), or by its id on the Jupyter server of the settings (or of
        `profile`; `list_remote_kernels` lists them)."""
        path = None if connection_file is None else os.fspath(connection_file)
        return await self.request(
            AttachKernel(connection_file=path, remote_kernel_id=remote_kernel_id, profile=profile)
        )

    async def list_remote_kernels(self, profile: str | None = None) -> RemoteKernelList:
        """The kernels and sessions of the Jupyter server of the settings (or of
        `profile`)."""
        return await self.request(ListRemoteKernels(profile=profile))

    async def interrupt_kernel(self, kernel_id: str) -> KernelRef:
        return await self.request(InterruptKernel(kernel_id=kernel_id))

    async def restart_kernel(self, kernel_id: str) -> KernelRef:
        return await self.request(RestartKernel(kernel_id=kernel_id))

    async def shutdown_kernel(self, kernel_id: str) -> KernelRef:
        return await self.request(ShutdownKernel(kernel_id=kernel_id))

    async def execute_code(
        self, kernel_id: str, code: str, *, timeout: float | None = None
    ) -> ExecutionResult:
        """Run `code` in a kernel and return its outputs once it is done; past
        `timeout` seconds (the daemon's default when None) the kernel is
        interrupted. The command's own reply waits as long (`request`'s timeout)."""
        return await self.request(ExecuteCode(kernel_id=kernel_id, code=code, timeout=timeout))

    async def list_variables(
        self,
        task_id: str | None = None,
        *,
        kernel_id: str | None = None,
        include_private: bool = False,
    ) -> VariableList:
        """The variables of a task's kernel (or of a kernel by id), read with a
        silent inspection; `status` says when the kernel was busy or has none."""
        return await self.request(
            ListVariables(task_id=task_id, kernel_id=kernel_id, include_private=include_private)
        )

    # ---- MCP servers --------------------------------------------------------------

    async def list_mcp_servers(
        self, workspace: str | None = None, *, start: bool = False
    ) -> McpServerList:
        """The MCP servers a task in `workspace` has, with their state; `start`
        starts those not started and waits until each connected or failed."""
        return await self.request(ListMcpServers(workspace=workspace, start=start))

    async def restart_mcp_server(self, name: str, workspace: str | None = None) -> McpServerStatus:
        """Restart an MCP server; the reply waits until it connected or failed."""
        return await self.request(RestartMcpServer(name=name, workspace=workspace))

    async def trust_mcp_server(
        self, name: str, workspace: str, *, trusted: bool = True, fingerprint: str | None = None
    ) -> McpServerStatus:
        """Trust (or stop trusting) a server of `workspace`'s .hdsp/mcp.json as it
        is written now; with `fingerprint` (its status's), only if it still is
        what that status described (else CommandFailed, invalid_state)."""
        return await self.request(
            TrustMcpServer(name=name, workspace=workspace, trusted=trusted, fingerprint=fingerprint)
        )

    # ---- settings, profiles, secrets ------------------------------------------

    async def get_settings(self) -> SettingsView:
        """The daemon's settings document; secrets only as names and whether set."""
        return await self.request(GetSettings())

    async def update_settings(self, patch: Mapping[str, Any]) -> SettingsView:
        """Change settings with a JSON Merge Patch (`None` removes a key). An invalid
        result is refused whole: CommandFailed, its `details["errors"]` listing fields."""
        data = UpdateSettingsData(patch=dict(patch))
        return await self.request(UpdateSettings(data=data))

    async def list_profiles(self) -> ProfileList:
        return await self.request(ListProfiles())

    async def save_profile(
        self,
        name: str,
        *,
        provider: str,
        model: str,
        base_url: str | None = None,
        options: Mapping[str, Any] | None = None,
        secret: str | None = None,
        select: bool = False,
    ) -> ProfileInfo:
        """Save (or replace) a provider profile; `secret` is the NAME of the secret
        holding its key (`set_secret`), never the key. `select` makes it current."""
        profile = ProfileData(
            name=name,
            provider=provider,
            model=model,
            base_url=base_url,
            options=dict(options or {}),
            secret=secret,
        )
        cmd = SaveProfile(data=SaveProfileData(profile=profile, select=select))
        return await self.request(cmd)

    async def delete_profile(self, name: str) -> ProfileList:
        return await self.request(DeleteProfile(data=ProfileNameData(name=name)))

    async def select_profile(self, name: str) -> ProfileList:
        """Make `name` the profile new tasks use when they name none."""
        return await self.request(SelectProfile(data=ProfileNameData(name=name)))

    async def set_secret(self, name: str, value: str) -> SecretInfo:
        """Store a secret in the daemon's keyring. The value goes over the local
        socket once and is never sent back."""
        cmd = SetSecret(data=SetSecretData(name=name, value=value))
        return await self.request(cmd)

    async def delete_secret(self, name: str) -> SecretInfo:
        return await self.request(DeleteSecret(data=SecretNameData(name=name)))

    async def export_settings(self) -> SettingsExport:
        """The settings to copy elsewhere: secrets only as names."""
        return await self.request(ExportSettings())

    async def import_settings(
        self, settings: Mapping[str, Any], *, merge: bool = True
    ) -> ImportResult:
        """Apply a settings document; what does not validate is left out and listed
        in `rejected`."""
        data = ImportSettingsData(settings=dict(settings), merge=merge)
        return await self.request(ImportSettings(data=data))

    async def get_models(self, provider: str | None = None) -> ModelList:
        """The daemon's model table (with the settings' overrides)."""
        cmd = GetModels(data=GetModelsData(provider=provider))
        return await self.request(cmd)

    async def get_modes(self, workspace: str | os.PathLike[str] | None = None) -> ModeList:
        """The modes a task can be in (with `workspace`'s own, from its
        `.hdsp/modes.yaml`); `problems` says why a custom mode was left out."""
        data = GetModesData(workspace=_absolute_workspace(workspace) if workspace else None)
        return await self.request(GetModes(data=data))

    async def list_agents(self) -> AgentList:
        """The agents a task can run (`start_task(agent=...)`) and call."""
        return await self.request(ListAgents())

    async def get_commands(self, workspace: str | os.PathLike[str] | None = None) -> CommandList:
        """The slash commands (global, and `workspace`'s `.hdsp/commands/`)."""
        data = GetCommandsData(workspace=_absolute_workspace(workspace) if workspace else None)
        return await self.request(GetCommands(data=data))

    async def get_system_prompt(
        self,
        task_id: str | None = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
        mode: str | None = None,
    ) -> SystemPromptText:
        """The exact system prompt of the task's next request, or, without a
        task, of a new task in `workspace` and `mode`."""
        data = GetSystemPromptData(
            task_id=task_id,
            workspace=None if task_id else self._workspace(workspace),
            mode=mode,
        )
        return await self.request(GetSystemPrompt(data=data))

    async def switch_mode(self, task_id: str, mode: str) -> TaskRef:
        return await self.request(SwitchMode(task_id=task_id, data=SwitchModeData(mode=mode)))

    async def update_todo_list(self, task_id: str, markdown: str) -> TaskRef:
        """Replace the task's todo list with a markdown checklist (`- [ ] item`,
        `- [-] in progress`, `- [x] done`); the model is told of the edit."""
        data = UpdateTodoListData(markdown=markdown)
        return await self.request(UpdateTodoList(task_id=task_id, data=data))

    # ---- events -------------------------------------------------------------

    def events(
        self,
        task_id: str | None = None,
        *,
        since_seq: int | None = None,
        buffer: int = STREAM_BUFFER,
    ) -> EventStream:
        """Events of one task (or all), as an async context manager and iterator.

        With `since_seq`, the stream starts with every durable event after it (from
        the log), then goes on live; without, it starts live. Live-only partial
        updates have no seq and are passed through as they come.
        """
        return EventStream(self, task_id, since_seq, buffer)

    async def caught_up(self, task_id: str) -> None:
        """Return once every event of `task_id` the daemon emitted before this call
        is in this client's open event streams. A reply can overtake the events
        of what it answers (they travel on the event socket, some queued behind a
        commit): the daemon publishes what it queued before it answers a read (a
        page of one message), and a subscription's round trip then passes behind
        all of it."""
        await self.get_task_page(task_id, limit=1)
        await self._sync_subscriptions()

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
    def __init__(
        self, client: Client, task_id: str | None, since_seq: int | None, buffer: int
    ) -> None:
        self._client = client
        self.task_id = task_id
        #: The seq of the last durable event delivered (of this stream's topic).
        self.last_seq = since_seq
        # None in the stream means: the connection came back, catch up from the log.
        send, receive = anyio.create_memory_object_stream[TaskEvent | None](buffer)
        self._send: MemoryObjectSendStream[TaskEvent | None] = send
        self._receive: MemoryObjectReceiveStream[TaskEvent | None] = receive
        self._resync_pending = False
        self._ready: deque[TaskEvent] = deque()
        #: Where the catch-up from the log stands, while one is under way: the seq
        #: to read on from and the seq to stop before (None: the log's end). The
        #: log is read a page at a time as the reader takes events, so a stream
        #: from an old seq holds one page of the backlog, not all of it.
        self._fill_from: int | None = None
        self._fill_up_to: int | None = None
        #: The live event that showed a gap: delivered once the gap is filled
        #: (as it is if the log no longer has what it missed: pruned).
        self._after_fill: TaskEvent | None = None
        self._filled_gap: TaskEvent | None = None
        self._topic = (task_id or "").encode()
        #: Live events dropped because the reader fell behind (replayed later).
        self.dropped = 0
        #: Gaps found on the live stream and filled from the log.
        self.gaps = 0
        #: Catch-ups after the daemon came back.
        self.resyncs = 0

    async def __aenter__(self) -> EventStream:
        c = self._client
        c._streams.add(self)
        c._events.subscribe(self._topic)
        await c._sync_subscriptions()
        if self.last_seq is not None:
            self._start_fill(up_to=None)
            await self._fill_page()  # the first page now: an expired cursor fails here
        return self

    @property
    def buffered(self) -> int:
        """Events this stream holds that the reader has not taken yet."""
        return len(self._ready) + self._receive.statistics().current_buffer_used

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

    def _resync(self) -> None:
        try:
            self._send.send_nowait(None)
        except anyio.WouldBlock:
            self._resync_pending = True  # taken up when the reader drains the buffer
        except anyio.BrokenResourceError:
            pass

    def _deliver(self, event: TaskEvent) -> None:
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            # The user reads too slowly: drop, and catch up from the log once the
            # buffer is drained.
            self.dropped += 1
            self._resync_pending = True
        except anyio.BrokenResourceError:
            pass

    def _start_fill(self, up_to: int | None, then: TaskEvent | None = None) -> None:
        """Catch up from the log: every durable event after `last_seq` (before
        `up_to`), read a page at a time as the reader goes; then `then`."""
        assert self.last_seq is not None
        self._fill_from = self.last_seq
        self._fill_up_to = up_to
        self._after_fill = then

    async def _fill_page(self) -> None:
        """Queue the next page of the catch-up; end it after its last page."""
        cursor, up_to = self._fill_from, self._fill_up_to
        if cursor is None:
            return
        page = await self._client.replay(cursor, task_id=self.task_id)
        done = not page.more
        for event in page.events:
            assert event.seq is not None
            if up_to is not None and event.seq >= up_to:
                done = True
                break
            self._ready.append(event)
            cursor = event.seq
        self._fill_from = cursor
        if done or not page.events:
            self._fill_from = None
            if self._after_fill is not None:
                self._ready.append(self._after_fill)
                self._filled_gap, self._after_fill = self._after_fill, None

    def _is_gap(self, event: TaskEvent) -> bool:
        assert event.seq is not None
        if self.last_seq is None:
            return False
        if self.task_id is None:
            return event.seq > self.last_seq + 1
        return (event.prev_seq or 0) > self.last_seq

    async def _next_live(self) -> TaskEvent | None:
        """The next live event; None when the stream must catch up from the log
        first (events were dropped, the daemon came back, or the stream has been
        quiet for a while: the live stream cannot show a gap at its very end)."""
        try:
            return self._receive.receive_nowait()
        except anyio.WouldBlock:
            if self._resync_pending:
                return None
        with anyio.move_on_after(IDLE_CHECK):
            return await self._receive.receive()
        self._resync_pending = self.last_seq is not None
        return None

    def __aiter__(self) -> AsyncIterator[TaskEvent]:
        return self

    async def __anext__(self) -> TaskEvent:
        while True:
            event: TaskEvent | None
            if self._ready:
                event = self._ready.popleft()
            elif self._fill_from is not None:
                await self._fill_page()
                continue
            else:
                try:
                    event = await self._next_live()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    raise StopAsyncIteration from None
            if event is None:
                # Catch up from the log: after a reconnect, dropped events, or a
                # quiet spell.
                self._resync_pending = False
                self.resyncs += 1
                await self._client._sync_subscriptions()
                if self.last_seq is not None:
                    self._start_fill(up_to=None)
                continue
            if event.seq is None:
                return event
            if self.last_seq is not None and event.seq <= self.last_seq:
                continue  # already delivered (replay and live overlap)
            if event is not self._filled_gap and self._is_gap(event):
                self.gaps += 1
                self._start_fill(up_to=event.seq, then=event)
                continue
            self.last_seq = event.seq
            return event


@dataclass(frozen=True)
class _Remote:
    """A remote daemon and the keys to reach it."""

    remote: Remote
    keys: ClientKeys


def _remote_target(runtime_dir: Path | str | None, remote: str | None) -> _Remote | None:
    """The remote to connect to: `remote`, else HDSP_REMOTE when no runtime dir
    is given; None for the local daemon."""
    if remote is not None and runtime_dir is not None:
        raise RemoteConfigError("Give a runtime dir (the local daemon) or a remote, not both.")
    if remote is None and runtime_dir is None:
        remote = os.environ.get("HDSP_REMOTE") or None
    if remote is None:
        return None
    return _Remote(remote=resolve_remote(remote), keys=load_client_keys())


def _secure(sock: zmq.asyncio.Socket, target: _Remote) -> None:
    """CURVE on a socket to a remote: the daemon's public key (checked in the
    handshake) and this client's key pair (which the daemon's ZAP handler
    checks against its authorised keys); heartbeats to notice a host gone."""
    sock.setsockopt(zmq.CURVE_SERVERKEY, target.remote.server_key.encode())
    sock.setsockopt(zmq.CURVE_PUBLICKEY, target.keys.public)
    sock.setsockopt(zmq.CURVE_SECRETKEY, target.keys.secret)
    sock.setsockopt(zmq.HEARTBEAT_IVL, _HEARTBEAT_IVL_MS)
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, _HEARTBEAT_TIMEOUT_MS)
    if target.remote.address.startswith("tcp://["):
        sock.setsockopt(zmq.IPV6, 1)


def _absolute_workspace(workspace: str | os.PathLike[str] | None) -> str:
    """The workspace to send: absolute, from the caller's working directory
    (FileNotFoundError if that no longer exists)."""
    return os.path.abspath(os.getcwd() if workspace is None else workspace)


@asynccontextmanager
async def connect(
    runtime_dir: Path | str | None = None,
    *,
    remote: str | None = None,
    name: str = "hdsp.client",
    kind: str = "library",
    timeout: float = 5.0,
) -> AsyncIterator[Client]:
    """Connect to the daemon whose discovery file is in `runtime_dir` (by default
    HDSP_RUNTIME_DIR or the per-user runtime dir), or to the remote daemon named
    `remote` (`hdsp remote add`: TCP under CURVE, with this client's key pair).
    Given neither, HDSP_REMOTE names a remote when it is set."""
    target = _remote_target(runtime_dir, remote)
    if target is None:
        info = find_daemon(runtime_dir)
        control_endpoint, events_endpoint = info.control, info.events
    else:
        control_endpoint, events_endpoint = target.remote.control, target.remote.events
    ctx = zmq.asyncio.Context.instance()
    control = ctx.socket(zmq.DEALER)
    events = ctx.socket(zmq.SUB)
    monitor: zmq.asyncio.Socket | None = None
    try:
        for sock in (control, events):
            sock.setsockopt(zmq.LINGER, 0)
            # ZeroMQ reconnects by itself when the daemon comes back; back off to 5 s.
            sock.setsockopt(zmq.RECONNECT_IVL, 100)
            sock.setsockopt(zmq.RECONNECT_IVL_MAX, 5000)
            if target is not None:
                _secure(sock, target)
        watched = zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED
        if target is not None:
            watched |= _HANDSHAKE_FAILURES
        monitor = control.get_monitor_socket(watched)
        control.connect(control_endpoint)
        events.connect(events_endpoint)
        async with anyio.create_task_group() as tg:
            client = Client(tg, control, events, remote=target)
            tg.start_soon(client._read_control)
            tg.start_soon(client._read_events)
            tg.start_soon(client._watch_connection, monitor)
            try:
                with anyio.move_on_after(timeout) as scope:
                    await client._handshake(
                        ClientInfo(name=name, version=__version__, kind=kind, pid=os.getpid())
                    )
                if scope.cancelled_caught and target is not None:
                    raise DaemonNotRunning(
                        f"hdspd at {target.remote.address} (remote {target.remote.name!r}) "
                        f"did not answer within {timeout:g} s: is it running there, with "
                        "tcp.listen set, and can this machine reach that port and the next?"
                    )
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
        if monitor is not None:
            control.disable_monitor()
            monitor.close(linger=0)
        control.close(linger=0)
        events.close(linger=0)
