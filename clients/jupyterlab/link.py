"""The server extension's one link to hdspd, and the event feeds it serves.

One `DaemonLink` owns one `hdsp.client` connection for the life of the Jupyter
server, in one task group (`run`). While hdspd is away the link says so
(`reconnecting`, or `down` with a hint when there is no daemon to reconnect to) and
comes back by itself: ZeroMQ reconnects to a restarted daemon and the client says
Connect again; with no daemon at all, the link tries to connect again every few
seconds (and, if allowed, starts hdspd once).

Each browser WebSocket gets a feed of its own (`serve_feed`, a task in the link's
group): the connection's state, then the durable events after the socket's `since`
and the live ones, read through an `EventStream` of its own. A feed's frames wait
in a bounded queue; while it is full the feed waits (its EventStream drops live
events and later replays them from the log, so no other feed waits with it), and a
browser that makes no room for STALL_LIMIT seconds has its socket closed with a
reason (it reconnects with the last seq it saw) rather than make the server
buffer without end.

Events are passed through as the daemon sent them; nothing here logs their
contents.
"""

from __future__ import annotations

import enum
import logging
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Protocol, TypeVar

import anyio
import msgspec
from anyio.abc import TaskGroup, TaskStatus

from hdsp.protocol import CommandBase, StatusResult, TaskEvent, encode

from ..client import Client, connect
from ..discovery import find_daemon, runtime_dir
from ..errors import ClientError, ConnectionLost, CursorExpired, DaemonNotRunning

__all__ = [
    "FEED_BUFFER",
    "DaemonDown",
    "DaemonLink",
    "FeedSink",
    "LinkState",
    "SinkClosed",
]

_log = logging.getLogger("hdsp.client.jupyterlab")

R = TypeVar("R")

#: Frames one browser socket may have waiting to be written.
FEED_BUFFER = 1000
#: Seconds a feed waits for room in a full queue before it counts the browser as
#: fallen behind (it stopped reading) and closes its socket.
STALL_LIMIT = 10.0
#: Events an EventStream buffers for one feed (it replays from the log past that).
STREAM_BUFFER = 5000
#: Seconds between attempts to connect while no daemon answers.
RETRY_FIRST = 0.25
RETRY_MAX = 2.0
#: Seconds a reconnecting link waits for the daemon's handshake before it drops the
#: connection and connects anew (a daemon that is back but never acknowledged us).
REHANDSHAKE_LIMIT = 30.0
#: Seconds between two starts of hdspd (`start_daemon`), so one that cannot start
#: is not started again and again.
RESPAWN_INTERVAL = 30.0
#: Seconds a command from the browser may wait for its reply.
COMMAND_TIMEOUT = 30.0

#: Close codes of a browser socket (4000-4999 are the application's own).
CLOSE_FELL_BEHIND = 1013  # "try again later": reconnect with since = the last seq seen
CLOSE_CURSOR_EXPIRED = 4410  # since is older than the daemon keeps: reload the tasks
CLOSE_INTERNAL_ERROR = 1011  # the feed failed: the server's log says why

NOT_RUNNING_HINT = "hdspd is not running: start it with `hdspd` or `systemctl --user start hdspd`."


class LinkState(enum.StrEnum):
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    DOWN = "down"


class DaemonDown(Exception):
    """The link has no daemon to send a command to now; `hint` says why."""

    def __init__(self, hint: str) -> None:
        super().__init__(hint)
        self.hint = hint


class SinkClosed(Exception):
    """The browser's socket is closed; its feed ends."""


class FeedSink(Protocol):
    """Where one feed's frames go: a browser's WebSocket."""

    async def send_frame(self, text: str) -> None:
        """Send one text frame (raises SinkClosed once the socket is closed); returns
        when the frame has been handed to the network."""
        ...

    def close_sink(self, code: int, reason: str) -> None: ...


class _Frame(msgspec.Struct, frozen=True):
    text: str
    #: The seq of the durable event the frame carries.
    seq: int | None = None


def _event_frame(event: TaskEvent) -> _Frame:
    return _Frame(encode({"kind": "event", "event": event}).decode(), event.seq)


def _connection_frame(state: LinkState, hint: str | None) -> _Frame:
    return _Frame(encode({"kind": "connection", "state": state.value, "hint": hint}).decode())


class DaemonLink:
    """The link to hdspd (see the module's docstring). `run` owns it."""

    def __init__(
        self,
        runtime_dir: Path | str | None = None,
        *,
        start_daemon: bool = False,
        daemon_env: Mapping[str, str] | None = None,
        name: str = "jupyterlab",
        feed_buffer: int = FEED_BUFFER,
        stall_limit: float = STALL_LIMIT,
        log: logging.Logger | None = None,
    ) -> None:
        self._runtime_dir = runtime_dir
        self._start_daemon = start_daemon
        self._daemon_env = dict(daemon_env or {})
        self._name = name
        self._feed_buffer = feed_buffer
        self._stall_limit = stall_limit
        self._log = log or _log
        self._client: Client | None = None
        self._tg: TaskGroup | None = None
        self.state = LinkState.DOWN
        self.hint: str | None = "Connecting to hdspd…"
        #: Set (and replaced) whenever `state` or `hint` changes.
        self._changed = anyio.Event()
        self._started = anyio.Event()
        #: The hdspd this link started (`start_daemon`), if any.
        self.started_daemon: subprocess.Popen[bytes] | None = None
        self._spawned_at: float | None = None

    # ---- state ------------------------------------------------------------------

    def _set(self, state: LinkState, hint: str | None) -> None:
        if (state, hint) == (self.state, self.hint):
            return
        if state != self.state:
            self._log.info("hdsp: the link to hdspd is %s", state.value)
        self.state, self.hint = state, hint
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def wait_changed(self) -> None:
        await self._changed.wait()

    async def wait_started(self) -> None:
        await self._started.wait()

    # ---- the connection -----------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep the link up until cancelled (the Jupyter server stops)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            self._started.set()
            task_status.started()
            try:
                await self._keep_connected()
            finally:
                tg.cancel_scope.cancel()
                self._tg = None

    async def _keep_connected(self) -> None:
        retry = RETRY_FIRST
        while True:
            try:
                # Always the daemon on this machine (a runtime dir named, so
                # HDSP_REMOTE does not apply): notebooks and kernels are here.
                local = runtime_dir(self._runtime_dir)
                async with connect(local, name=self._name, kind="jupyterlab") as client:
                    client.timeout = COMMAND_TIMEOUT
                    retry = RETRY_FIRST
                    self._client = client
                    try:
                        await self._follow(client)
                    finally:
                        self._client = None
            except DaemonNotRunning as exc:
                hint = self._down_hint(exc)
            except ClientError as exc:
                hint = f"hdspd did not accept the connection: {exc}"
            else:
                hint = "hdspd did not acknowledge the connection again; connecting anew."
            self._set(LinkState.DOWN, hint)
            await anyio.sleep(retry)
            retry = min(RETRY_MAX, retry * 2)

    def _down_hint(self, exc: DaemonNotRunning) -> str:
        message = str(exc)
        if "is not running" in message:
            message = NOT_RUNNING_HINT
        if self._start_daemon:
            message = self._spawn_daemon() or message
        return message

    async def _follow(self, client: Client) -> None:
        """Report the client's connection; return when it cannot come back by itself
        (a daemon is there but has not acknowledged this client for a long while)."""
        while True:
            self._set(LinkState.CONNECTED, None)
            await client.wait_connection_lost()
            self._set(LinkState.RECONNECTING, "hdspd went away; reconnecting…")
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_discovery, tg.cancel_scope)
                await client.wait_connected()
                tg.cancel_scope.cancel()
            if not client.connected:
                return

    async def _watch_discovery(self, give_up: anyio.CancelScope) -> None:
        """While the client waits to reconnect: say `down` (with how to start hdspd)
        when there is no daemon to reconnect to, `reconnecting` when there is; cancel
        `give_up` when a daemon has been there for REHANDSHAKE_LIMIT seconds without
        acknowledging the client."""
        present_since: float | None = None
        while True:
            try:
                find_daemon(self._runtime_dir)
            except DaemonNotRunning as exc:
                present_since = None
                self._set(LinkState.DOWN, self._down_hint(exc))
            else:
                now = anyio.current_time()
                if present_since is None:
                    present_since = now
                    self._set(LinkState.RECONNECTING, "hdspd is back; reconnecting…")
                elif now - present_since > REHANDSHAKE_LIMIT:
                    give_up.cancel()
                    return
            await anyio.sleep(RETRY_FIRST if present_since is None else RETRY_MAX)

    def _spawn_daemon(self) -> str | None:
        """Start hdspd (HdspExtension.start_daemon), once while it stays up; the
        daemon outlives this server, as one started by hand would."""
        if self.started_daemon is not None and self.started_daemon.poll() is None:
            return "Starting hdspd…"
        now = anyio.current_time()
        if self._spawned_at is not None and now - self._spawned_at < RESPAWN_INTERVAL:
            code = None if self.started_daemon is None else self.started_daemon.returncode
            return f"hdspd exited (code {code}) after it was started; {NOT_RUNNING_HINT}"
        self._spawned_at = now
        env = dict(os.environ) | self._daemon_env
        if self._runtime_dir is not None:
            env["HDSP_RUNTIME_DIR"] = os.fspath(self._runtime_dir)
        try:
            self.started_daemon = subprocess.Popen(
                [sys.executable, "-m", "hdsp.daemon"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            return f"Could not start hdspd ({exc}). {NOT_RUNNING_HINT}"
        self._log.info("hdsp: started hdspd (pid %d)", self.started_daemon.pid)
        return "Starting hdspd…"

    # ---- commands -------------------------------------------------------------------

    def _connected_client(self) -> Client:
        client = self._client
        if client is None or self.state != LinkState.CONNECTED:
            raise DaemonDown(self.hint or NOT_RUNNING_HINT)
        return client

    async def request(self, command: CommandBase[R]) -> R:
        """Send a command to hdspd; DaemonDown when the link is not connected,
        ClientError (CommandFailed, ConnectionLost, ...) as the client raises it."""
        return await self._connected_client().request(command)

    async def status(self) -> StatusResult | None:
        """The daemon's status, or None when it is not connected."""
        try:
            return await self._connected_client().status()
        except (DaemonDown, ConnectionLost):
            return None

    async def blob(self, sha256: str) -> tuple[str, bytes]:
        return await self._connected_client().blob(sha256)

    # ---- feeds --------------------------------------------------------------------

    def serve_feed(self, sink: FeedSink, since: int | None) -> anyio.CancelScope:
        """Start feeding `sink` (state, then events after `since`; live only when
        None); cancel the returned scope when the socket closes."""
        if self._tg is None:
            if self._started.is_set():  # run() has ended: the server is stopping
                raise DaemonDown("The hdsp extension has stopped; restart the Jupyter server.")
            raise DaemonDown("The hdsp extension is starting; try again.")
        scope = anyio.CancelScope()
        self._tg.start_soon(self._serve_feed, sink, since, scope)
        return scope

    async def _serve_feed(
        self, sink: FeedSink, since: int | None, scope: anyio.CancelScope
    ) -> None:
        """One socket's feed. Whatever fails in it closes that socket (1011) and
        is logged: it is a child of the link's task group, and must never take
        the link, and every other window's feed, down with it."""
        try:
            await self._feed(sink, since, scope)
        except Exception:
            self._log.exception("hdsp: an event feed failed; its socket is closed")
            sink.close_sink(CLOSE_INTERNAL_ERROR, "the hdsp extension's feed failed; reconnect")

    async def _feed(self, sink: FeedSink, since: int | None, scope: anyio.CancelScope) -> None:
        with scope:
            send, receive = anyio.create_memory_object_stream[_Frame](self._feed_buffer)
            written = since

            async def put(frame: _Frame) -> None:
                with anyio.move_on_after(self._stall_limit) as waited:
                    try:
                        await send.send(frame)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        # The socket closed as this frame was put: the feed ends.
                        scope.cancel()
                        return
                if waited.cancelled_caught:
                    resume = "" if written is None else f"?since={written}"
                    sink.close_sink(
                        CLOSE_FELL_BEHIND,
                        f"this window stopped reading for {self._stall_limit:g} s; "
                        f"reconnect with hdsp/events{resume}",
                    )
                    scope.cancel()

            async with anyio.create_task_group() as tg, send, receive:
                tg.start_soon(self._feed_state, put)
                tg.start_soon(self._feed_events, put, since, sink, scope)
                try:
                    async for frame in receive:
                        await sink.send_frame(frame.text)
                        if frame.seq is not None:
                            written = frame.seq
                except SinkClosed:
                    pass
                tg.cancel_scope.cancel()

    async def _feed_state(self, put: Callable[[_Frame], Awaitable[None]]) -> None:
        seen: tuple[LinkState, str | None] | None = None
        while True:
            changed = self._changed
            if (self.state, self.hint) != seen:
                seen = (self.state, self.hint)
                await put(_connection_frame(*seen))
            await changed.wait()

    async def _wait_client(self) -> Client:
        while self._client is None or self.state != LinkState.CONNECTED:
            await self.wait_changed()
        return self._client

    async def wait_client(self) -> Client:
        """The client, once the link is connected (for a service of the extension
        that follows events of its own, as the document host does)."""
        return await self._wait_client()

    async def _feed_events(
        self,
        put: Callable[[_Frame], Awaitable[None]],
        since: int | None,
        sink: FeedSink,
        scope: anyio.CancelScope,
    ) -> None:
        last = since
        while True:
            client = await self._wait_client()
            try:
                if last is None:
                    last = (await client.status()).head_seq  # live from here on, gap-free
                async with client.events(since_seq=last, buffer=STREAM_BUFFER) as stream:
                    async for event in stream:
                        await put(_event_frame(event))
                        if event.seq is not None:
                            last = event.seq
            except CursorExpired as exc:
                sink.close_sink(
                    CLOSE_CURSOR_EXPIRED,
                    f"since={last} is older than the daemon's log (oldest seq "
                    f"{exc.oldest_seq}); reload the tasks and connect without since",
                )
                scope.cancel()
                return
            except (ClientError, DaemonDown) as exc:
                self._log.debug(
                    "hdsp: an event feed was interrupted (%s); resuming after seq %s",
                    type(exc),
                    last,
                )
            if self._client is client and self.state == LinkState.CONNECTED:
                await anyio.sleep(RETRY_FIRST)  # the stream ended on a live link: not in a loop
