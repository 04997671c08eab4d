"""The async client: `async with connect() as client:`.

The client finds the daemon through its discovery file, says `Connect`, sends
commands with request ids and awaits their replies, and follows events. This
module holds the connection: the handshake (said again when the daemon comes
back), the requests and their replies, and the event socket that feeds the
event streams (clients/event_stream.py: gap-free, each stream replays what it
missed and drops duplicates by `seq`). The typed requests (`start_task`,
`list_kernels`, `get_settings`, ...) are grouped by what they ask about in
client_tasks.py, client_kernels.py and client_daemon.py; `Client` is all of them.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import anyio
import anyio.lowlevel
import zmq
import zmq.asyncio
from anyio.abc import TaskGroup

from hdsp.protocol import (
    PROTOCOL_VERSION,
    Ack,
    AckData,
    ClientInfo,
    Command,
    CommandBase,
    Connect,
    Disconnect,
    ErrorCode,
    FrameError,
    Reply,
    TaskCommand,
    __version__,
    command_name,
    command_spec,
    decode_control_frame,
    decode_event,
    encode,
)

from .client_daemon import DaemonRequests
from .client_kernels import KernelRequests
from .client_tasks import TaskRequests
from .discovery import find_daemon
from .errors import (
    ClientError,
    CommandFailed,
    ConnectionLost,
    DaemonNotRunning,
    NotAuthenticated,
    RemoteConfigError,
)
from .event_stream import STREAM_BUFFER, EventStream
from .remotes import ClientKeys, Remote, load_client_keys, resolve_remote
from .replies import result_of

__all__ = ["Client", "EventStream", "connect"]

_log = logging.getLogger("hdsp.client")

T = TypeVar("T")
#: The result type of a command.
R = TypeVar("R")

_SYNC_PREFIX = b"\x00sync."
#: Events read from the socket at a time without waiting (see `_read_events`).
_EVENT_BATCH = 256
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


class Client(TaskRequests, KernelRequests, DaemonRequests):
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
        #: Why a remote that let this client in no longer does (its key was
        #: revoked or replaced): every wait ends with it, for good.
        self._shut_out: NotAuthenticated | None = None
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
        while self._shut_out is None:
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
        if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH and self._info is not None:
            self._end_shut_out(
                NotAuthenticated(
                    f"{where} no longer lets this client in: its key was revoked or replaced "
                    f"there (ZAP status {value}). To be let in again, ask the daemon's admin to "
                    f"run: hdspd keys authorize NAME -- '{keys.public.decode()}'."
                )
            )
            return
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

    def _end_shut_out(self, error: NotAuthenticated) -> None:
        """A remote that let this client in refused its key since: stop knocking
        (each try is a warning in the daemon's log) and end every wait with
        `error`: commands raise it, event streams and `wait_connected` too."""
        assert self.remote is not None
        self._shut_out = self._handshake_refused = error
        for sock, endpoint in (
            (self._control, self.remote.control),
            (self._events, self.remote.events),
        ):
            with suppress(zmq.ZMQError):
                sock.disconnect(endpoint)
        self._acked.set()  # (what waits for the daemon wakes up, and finds `_shut_out`)
        for pending in self._pending.values():
            pending.lost = True
            pending.done.set()
        for waiter in self._syncs.values():
            waiter.set()
        for stream in list(self._streams):
            stream._send.close()

    @property
    def connected(self) -> bool:
        """Whether the daemon is connected and has acknowledged this client."""
        return self._acked.is_set() and self._shut_out is None

    async def wait_connection_lost(self) -> None:
        """Return once the daemon goes away (at once if it is away now)."""
        await self._lost.wait()

    async def wait_connected(self) -> None:
        """Return once the daemon is connected and has acknowledged this client
        (after a restart: once the client has said Connect again). Raises
        NotAuthenticated once a remote no longer lets this client in."""
        while not self._acked.is_set():
            await self._acked.wait()
        if self._shut_out is not None:
            raise self._shut_out

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

    # ---- requests -----------------------------------------------------------

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
                if self._shut_out is not None:
                    raise self._shut_out
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
        return result_of(reply, command)

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
            if self._shut_out is not None:
                raise self._shut_out
        except TimeoutError:
            raise ConnectionLost("hdspd did not confirm the event subscription.") from None
        finally:
            self._events.unsubscribe(topic)
            del self._syncs[topic]


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
