"""The kernel service: every Jupyter kernel the daemon uses, started or attached.

Ownership: the service runs in the daemon's task group (`await tg.start(svc.run)`)
and owns one task group; each kernel is owned by one task in it (`_run_kernel`),
which holds the kernel's client, runs its socket readers and its heartbeat, and
on the way out (shutdown, daemon stop, cancellation) releases it under a shielded
deadline: a kernel hdsp started is shut down, one it attached to (a notebook's)
is only detached from, never killed.

Messages: one reader per socket (iopub, shell, stdin, control) routes each
message by its parent's msg_id to whoever waits for it (an execution, a
handshake). Executions of one kernel take turns (a FIFO lock, with a bound on
how many may wait); different kernels run at the same time.

Liveness: every `heartbeat_interval` the kernel's heartbeat socket must echo, and
a process hdsp started must still run. A dead kernel is reported
(`kernelStatus` dead), ends the execution that waited on it (status "died"), and
is noted for the tasks bound to it; `restart_kernel` brings it back.

Launching: a kernel hdsp starts is launched through the `launcher` the daemon
hands in (its sandbox, see :mod:`.launcher`), which wraps the kernel's command and
gives its environment; with none, the kernel runs unconfined with the daemon's
environment minus hdsp's own variables (tests of the service alone). A sandboxed
kernel is interrupted with an `interrupt_request` message: a SIGINT would reach
the sandbox's launcher, not the kernel.

Stopping code: past its time limit an execution is interrupted; if the kernel is
not idle within `interrupt_grace`, a kernel hdsp started is restarted (its state
is lost, and the result says so). Cancelling the caller does the same, shielded.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog
import zmq
import zmq.asyncio
from anyio.abc import TaskGroup, TaskStatus

from hdsp.protocol import (
    Event,
    ExecutionResult,
    KernelInfo,
    KernelRef,
    KernelShutdown,
    KernelStarted,
    KernelState,
    KernelStatus,
)

from .errors import (
    KernelDead,
    KernelError,
    KernelNotFound,
    KernelNotOwned,
    KernelOverloaded,
    KernelStartFailed,
)
from .execution import Emit, Execution, InputCallback, OutputCallback
from .launcher import KernelLauncher

__all__ = ["KernelService", "TaskKernel"]

log = structlog.get_logger("hdsp.kernels")

#: How long releasing one kernel may take (polite shutdown, then kill).
_RELEASE_DEADLINE = 10.0
#: Seconds the kernel gets to exit politely before it is terminated, then killed.
_SHUTDOWN_WAIT = 3.0
#: How long a restart after a cancel may take (shielded cleanup has a deadline).
_RESTART_BUDGET = 15.0
#: How long to wait for the stdin connection of a kernel we attach to, which
#: may have been made before we could watch for it.
_STDIN_FALLBACK = 1.0
#: A handshake request unanswered this long is sent again.
_HANDSHAKE_RETRY = 0.5
#: Unix socket paths must stay below the OS limit (107 bytes on Linux).
_MAX_IPC_PATH = 90
#: Notes kept for a task about what happened to its kernel while it was away.
_MAX_NOTES = 8
#: Environment variables a kernel never inherits from the daemon: the daemon's
#: settings and secrets (HDSP_API_KEY) and its systemd notification socket.
_PRIVATE_ENV = ("HDSP_", "NOTIFY_SOCKET")

_Handler = Callable[["_Kernel", Mapping[str, Any]], Awaitable[None]]
_Route = Callable[[Mapping[str, Any]], None]


@dataclass(eq=False)
class _Kernel:
    id: str
    name: str
    owned: bool
    connection_file: str
    cwd: str | None = None
    km: Any = None
    kc: Any = None
    status: KernelState = KernelState.STARTING
    #: Counts restarts: a death seen in an earlier life is not this life's.
    life: int = 0
    death_reason: str | None = None
    #: kernelStarted was published; status changes are published from then on.
    announced: bool = False
    closing: bool = False
    current: Execution | None = None
    waiting: int = 0
    tasks: set[str] = field(default_factory=set)
    #: The task this kernel was started for (released with it).
    started_for: str | None = None
    #: A directory made for its sockets when the runtime dir's path is too long.
    scratch_dir: str | None = None
    #: When it last ran code or was started (anyio's clock), for culling.
    last_active: float = field(default_factory=anyio.current_time)
    #: Interrupt with an interrupt_request message rather than a signal.
    interrupt_by_message: bool = False
    #: fast_acquire: an uncontended lock is taken without a trip through the loop.
    lock: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))
    restart_lock: anyio.Lock = field(default_factory=anyio.Lock)
    iopub_routes: dict[str, _Route] = field(default_factory=dict)
    shell_routes: dict[str, _Route] = field(default_factory=dict)
    stdin_routes: dict[str, _Route] = field(default_factory=dict)
    stop_requested: anyio.Event = field(default_factory=anyio.Event)
    stopped: anyio.Event = field(default_factory=anyio.Event)


@dataclass(frozen=True)
class TaskKernel:
    """The kernel a task's code runs in, and what the task should be told about
    it (it died, was restarted or replaced since the task last ran code)."""

    kernel_id: str
    name: str
    cwd: str | None
    notes: list[str]


def _watch_connection(socket: zmq.asyncio.Socket) -> zmq.asyncio.Socket:
    """A monitor that reports when `socket`'s connection handshake succeeds."""
    monitor: zmq.asyncio.Socket = socket.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
    return monitor


async def _connected(monitor: zmq.asyncio.Socket) -> None:
    from zmq.utils.monitor import parse_monitor_message

    while True:
        event = parse_monitor_message(await monitor.recv_multipart())
        if event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            return


def _setter(event: anyio.Event) -> _Route:
    """A route that only notes that a message came."""
    return lambda msg: event.set()


def _on_idle(event: anyio.Event) -> _Route:
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


class KernelService:
    def __init__(
        self,
        emit: Emit,
        *,
        runtime_dir: Path,
        default_kernel: str = "python3",
        default_cwd: str | None = None,
        default_time_limit: float = 120.0,
        interrupt_grace: float = 5.0,
        heartbeat_interval: float = 1.0,
        heartbeat_misses: int = 3,
        output_interval: float = 0.05,
        startup_timeout: float = 60.0,
        attach_timeout: float = 10.0,
        max_queued: int = 64,
        cull_idle_after: float | None = None,
        launcher: KernelLauncher | None = None,
    ) -> None:
        self._emit_event = emit
        self.launcher = launcher
        self.runtime_dir = runtime_dir
        self.default_kernel = default_kernel
        self.default_cwd = default_cwd
        self.default_time_limit = default_time_limit
        self.interrupt_grace = interrupt_grace
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_misses = heartbeat_misses
        self.output_interval = output_interval
        self.startup_timeout = startup_timeout
        self.attach_timeout = attach_timeout
        self.max_queued = max_queued
        #: Seconds a kernel hdsp started for a task may sit idle, with its tasks
        #: idle too, before it is shut down to give its memory back; None: never.
        self.cull_idle_after = cull_idle_after
        #: Whether a task is working (a turn runs); its kernel is never culled then.
        self.task_busy: Callable[[str], bool] = lambda task_id: False
        #: Told (task id, note) when a task's kernel was culled, to record it in
        #: the task's history.
        self.on_culled: Callable[[str, str], Awaitable[None]] | None = None
        self._kernels: dict[str, _Kernel] = {}
        self._task_kernels: dict[str, str] = {}
        self._notes: dict[str, list[str]] = {}
        self._tg: TaskGroup | None = None
        self._closing = False
        self._closed = anyio.Event()

    # ---- lifetime -----------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own every kernel until `aclose()` (or cancellation, which releases
        them all the same, shielded)."""
        await anyio.Path(self.runtime_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self.cull_idle_after is not None:
                tg.start_soon(self._cull_loop, self.cull_idle_after)
            try:
                task_status.started()
                await self._closed.wait()
            finally:
                self._closing = True
                self._tg = None
            tg.cancel_scope.cancel()

    async def aclose(self) -> None:
        """Shut down every kernel hdsp started, detach from the others, and end
        `run()`. Kernel events are published on the way."""
        self._closing = True
        async with anyio.create_task_group() as tg:
            for k in list(self._kernels.values()):
                tg.start_soon(self._stop, k)
        self._closed.set()

    # ---- queries ------------------------------------------------------------

    def list_kernels(self) -> list[KernelInfo]:
        return [self._info(k) for k in self._kernels.values() if k.announced]

    def kernel_info(self, kernel_id: str) -> KernelInfo:
        return self._info(self._get(kernel_id))

    def has_kernel(self, kernel_id: str) -> bool:
        k = self._kernels.get(kernel_id)
        return k is not None and not k.closing

    def statistics(self) -> dict[str, int]:
        kernels = list(self._kernels.values())
        return {
            "kernels": len(kernels),
            "owned": sum(1 for k in kernels if k.owned),
            "busy": sum(1 for k in kernels if k.current is not None),
            "waiting": sum(k.waiting for k in kernels),
        }

    def _info(self, k: _Kernel) -> KernelInfo:
        return KernelInfo(
            kernel_id=k.id,
            kernel_name=k.name,
            status=k.status,
            owned=k.owned,
            cwd=k.cwd,
            connection_file=k.connection_file,
            task_ids=sorted(k.tasks),
        )

    def _get(self, kernel_id: str) -> _Kernel:
        k = self._kernels.get(kernel_id)
        if k is None or k.closing:
            raise KernelNotFound(f"No kernel {kernel_id!r}; ListKernels lists the kernels.")
        return k

    # ---- starting, attaching, stopping ------------------------------------------

    async def start_kernel(
        self,
        kernel_name: str | None = None,
        cwd: str | None = None,
        *,
        for_task: str | None = None,
    ) -> KernelInfo:
        """Start a kernel by kernelspec name in `cwd`, over ipc."""
        tg = self._require_open()
        name = kernel_name or self.default_kernel
        workdir = str(await anyio.Path(cwd or self.default_cwd or os.getcwd()).absolute())
        if not await anyio.Path(workdir).is_dir():
            raise KernelStartFailed(f"The working directory {workdir} is not a directory.")
        launcher = self.launcher
        if launcher is not None and (refusal := launcher.kernel_refusal()) is not None:
            raise KernelStartFailed(f"No kernel was started. {refusal}")
        from jupyter_client.kernelspec import NoSuchKernel
        from jupyter_client.manager import AsyncKernelManager

        kernel_id = str(uuid.uuid4())
        short = kernel_id[:8]
        sockets = self.runtime_dir
        scratch: str | None = None
        if len(str(sockets / short)) + 4 > _MAX_IPC_PATH:
            scratch = tempfile.mkdtemp(prefix="hdsp-k", dir="/tmp")
            sockets = Path(scratch)
        options: dict[str, Any] = {
            "kernel_name": name,
            "transport": "ipc",
            "ip": str(sockets / short),
            "connection_file": str(sockets / f"kernel-{short}.json"),
        }
        km: AsyncKernelManager
        if launcher is not None:
            from .manager import LaunchingKernelManager

            km = LaunchingKernelManager(
                launcher=launcher, workdir=Path(workdir), sockets=sockets, **options
            )
            env = launcher.kernel_environment()
            env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        else:
            km = AsyncKernelManager(**options)
            env = _kernel_env()
        km.shutdown_wait_time = _SHUTDOWN_WAIT
        k = _Kernel(
            id=kernel_id,
            name=name,
            owned=True,
            cwd=workdir,
            connection_file=km.connection_file,
            km=km,
            started_for=for_task,
            scratch_dir=scratch,
            interrupt_by_message=launcher is not None and launcher.interrupts_by_message,
        )
        if for_task is not None:
            k.tasks.add(for_task)

        async def launch() -> None:
            try:
                await km.start_kernel(cwd=workdir, env=env)
            except NoSuchKernel:
                raise KernelStartFailed(
                    f"No kernelspec named {name!r}; `jupyter kernelspec list` shows them."
                ) from None
            except Exception as exc:
                raise KernelStartFailed(f"The kernel {name!r} did not start: {exc}") from exc
            k.kc = km.client()

        info = await self._open(tg, k, launch, self.startup_timeout)
        if for_task is not None:
            self._task_kernels[for_task] = k.id
        log.info("kernel started", kernel_id=k.id, kernel_name=name, cwd=workdir)
        return info

    async def attach_kernel(self, connection_file: str) -> KernelInfo:
        """Use a running kernel through its connection file. hdsp never shuts it
        down; `shutdown_kernel` and the daemon's stop only detach."""
        tg = self._require_open()
        path = await anyio.Path(connection_file).expanduser()
        if not await path.is_file():
            raise KernelStartFailed(f"There is no connection file at {path}.")
        resolved = str(await path.resolve())
        for other in self._kernels.values():
            if other.connection_file == resolved and not other.closing and other.announced:
                return self._info(other)
        from jupyter_client.asynchronous.client import AsyncKernelClient

        kc = AsyncKernelClient()
        try:
            kc.load_connection_file(resolved)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise KernelStartFailed(f"Cannot read the connection file {resolved}: {exc}") from None
        name = str(getattr(kc, "kernel_name", "") or "") or "unknown"
        k = _Kernel(id=str(uuid.uuid4()), name=name, owned=False, connection_file=resolved, kc=kc)

        async def launch() -> None:
            pass

        info = await self._open(tg, k, launch, self.attach_timeout)
        log.info("kernel attached", kernel_id=k.id, connection_file=resolved)
        return info

    async def shutdown_kernel(self, kernel_id: str) -> KernelRef:
        """Shut down a kernel hdsp started; detach from one it attached to."""
        k = self._get(kernel_id)
        await self._stop(k)
        return KernelRef(kernel_id=kernel_id, status=KernelState.DEAD)

    async def _stop(self, k: _Kernel) -> None:
        k.stop_requested.set()
        await k.stopped.wait()

    def _require_open(self) -> TaskGroup:
        if self._tg is None or self._closing:
            raise KernelStartFailed("The kernel service is not running (is the daemon stopping?).")
        return self._tg

    async def _open(
        self, tg: TaskGroup, k: _Kernel, launch: Callable[[], Awaitable[None]], limit: float
    ) -> KernelInfo:
        self._kernels[k.id] = k
        try:
            await tg.start(self._run_kernel, k, launch, limit)
        finally:
            if not k.announced:
                self._kernels.pop(k.id, None)
        return self._info(k)

    async def _run_kernel(
        self,
        k: _Kernel,
        launch: Callable[[], Awaitable[None]],
        limit: float,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        failure: KernelError | None = None
        try:
            await launch()
            kc = k.kc
            kc.start_channels(shell=True, iopub=True, stdin=True, hb=False, control=True)
            # A kernel we started binds its sockets after this; one we attach to
            # may be connected already, so its event may have passed.
            stdin_monitor = _watch_connection(kc.stdin_channel.socket)
            async with anyio.create_task_group() as ktg:
                ktg.start_soon(self._read, k, kc.iopub_channel, self._on_iopub)
                ktg.start_soon(self._read, k, kc.shell_channel, self._on_shell)
                ktg.start_soon(self._read, k, kc.stdin_channel, self._on_stdin)
                ktg.start_soon(self._read, k, kc.control_channel, self._on_control)
                try:
                    with anyio.fail_after(limit):
                        await self._handshake(k, stdin_monitor, certain=k.owned)
                except TimeoutError:
                    failure = KernelStartFailed(
                        f"The kernel did not answer within {limit:g} s ({k.connection_file})."
                    )
                    ktg.cancel_scope.cancel()
                else:
                    if k.status is KernelState.STARTING:
                        k.status = KernelState.IDLE
                    k.announced = True
                    k.last_active = anyio.current_time()
                    await self._emit(KernelStarted(payload=(self._info(k),)))
                    ktg.start_soon(self._heartbeat, k)
                    task_status.started()
                    await k.stop_requested.wait()
                    ktg.cancel_scope.cancel()
            if failure is not None:
                raise failure
        finally:
            k.closing = True
            if k.current is not None:
                k.death_reason = "it was shut down"
                k.current.end("died")
            with anyio.move_on_after(_RELEASE_DEADLINE, shield=True):
                await self._release(k)
            self._kernels.pop(k.id, None)
            k.stopped.set()

    async def _release(self, k: _Kernel) -> None:
        if k.kc is not None:
            try:
                k.kc.stop_channels()
            except Exception:
                log.exception("closing a kernel's channels failed", kernel_id=k.id)
        if k.owned and k.km is not None and k.km.has_kernel:
            try:
                await k.km.shutdown_kernel(now=False)
            except Exception:
                log.exception("kernel shutdown failed; killing it", kernel_id=k.id)
                try:
                    await k.km.shutdown_kernel(now=True)
                except Exception:
                    log.exception("killing the kernel failed", kernel_id=k.id)
        if k.scratch_dir is not None:
            shutil.rmtree(k.scratch_dir, ignore_errors=True)
        if k.announced:
            k.status = KernelState.DEAD
            await self._emit(KernelShutdown(payload=(k.id,)))
            log.info("kernel shut down" if k.owned else "kernel detached", kernel_id=k.id)

    async def _handshake(self, k: _Kernel, stdin_monitor: Any, *, certain: bool) -> None:
        """Wait until the kernel answers on control, its iopub reaches us and our
        stdin socket is connected. Closes `stdin_monitor`.

        The kernel sends `input()` requests to our stdin socket through a ROUTER,
        which silently drops a message to a peer not connected yet: so the stdin
        connection must be up before any code runs. `stdin_monitor` reports it;
        when the connection may have come up before the monitor (`certain` is
        False: attaching to a running kernel), a short wait is enough.

        kernel_info goes on the control channel, which a kernel serves while its
        shell is busy (attaching to a notebook's kernel that runs a cell works).
        The iopub status of that request proves our subscription is live, so no
        output of the first execution can be lost to a slow subscriber; waiting
        for its idle leaves the kernel idle when the handshake returns.
        """
        try:
            await self._kernel_info(k)
            with anyio.move_on_after(None if certain else _STDIN_FALLBACK):
                await _connected(stdin_monitor)
        finally:
            k.kc.stdin_channel.socket.disable_monitor()
            stdin_monitor.close(linger=0)

    async def _kernel_info(self, k: _Kernel) -> None:
        while True:
            replied = anyio.Event()
            published = anyio.Event()
            msg = k.kc.session.msg("kernel_info_request", {})
            msg_id = msg["header"]["msg_id"]
            k.shell_routes[msg_id] = _setter(replied)
            k.iopub_routes[msg_id] = _on_idle(published)
            try:
                k.kc.control_channel.send(msg)
                with anyio.move_on_after(_HANDSHAKE_RETRY):
                    await replied.wait()
                    await published.wait()
                    return
            finally:
                k.shell_routes.pop(msg_id, None)
                k.iopub_routes.pop(msg_id, None)

    # ---- reading the kernel's sockets -------------------------------------------

    async def _read(self, k: _Kernel, channel: Any, handle: _Handler) -> None:
        socket: zmq.asyncio.Socket = channel.socket
        session = k.kc.session
        while True:
            try:
                frames = await socket.recv_multipart()
            except zmq.ZMQError as exc:
                if not k.closing:
                    log.warning("kernel socket failed", kernel_id=k.id, error=str(exc))
                return
            try:
                _, raw = session.feed_identities(frames)
                msg = session.deserialize(raw)
            except Exception as exc:
                log.warning("unreadable kernel message dropped", kernel_id=k.id, error=str(exc))
                continue
            try:
                await handle(k, msg)
            except Exception:
                log.exception("handling a kernel message failed", kernel_id=k.id)

    async def _on_iopub(self, k: _Kernel, msg: Mapping[str, Any]) -> None:
        parent = _parent_id(msg)
        route = k.iopub_routes.get(parent) if parent is not None else None
        if route is not None:
            route(msg)
        if msg["header"]["msg_type"] == "status" and k.status not in (
            KernelState.DEAD,
            KernelState.RESTARTING,
        ):
            # A kernel's own "starting" can arrive after our handshake; starting and
            # restarting are the service's to say, busy and idle the kernel's.
            state = {"busy": KernelState.BUSY, "idle": KernelState.IDLE}.get(
                msg["content"].get("execution_state")
            )
            if state is not None:
                await self._set_status(k, state)

    async def _on_shell(self, k: _Kernel, msg: Mapping[str, Any]) -> None:
        parent = _parent_id(msg)
        route = k.shell_routes.pop(parent, None) if parent is not None else None
        if route is not None:
            route(msg)

    # Replies to requests sent on control (the handshake) route like shell replies.
    _on_control = _on_shell

    async def _on_stdin(self, k: _Kernel, msg: Mapping[str, Any]) -> None:
        parent = _parent_id(msg)
        route = k.stdin_routes.get(parent) if parent is not None else None
        if route is not None:
            route(msg)
        elif msg["header"]["msg_type"] == "input_request":
            # Nobody waits for it (the execution ended): answer, or it blocks the kernel.
            k.kc.input("")

    # ---- liveness -------------------------------------------------------------

    async def _heartbeat(self, k: _Kernel) -> None:
        info = k.kc.get_connection_info()
        if info["transport"] == "tcp":
            url = f"tcp://{info['ip']}:{info['hb_port']}"
        else:
            url = f"{info['transport']}://{info['ip']}-{info['hb_port']}"
        context: zmq.asyncio.Context = k.kc.context
        sock: zmq.asyncio.Socket | None = None
        misses = 0
        try:
            while True:
                await anyio.sleep(self.heartbeat_interval)
                if k.status in (KernelState.DEAD, KernelState.RESTARTING) or (
                    k.restart_lock.locked()
                ):
                    misses = 0
                    continue
                life = k.life
                if k.km is not None and not await k.km.is_alive():
                    await self._declare_dead(k, life, "its process exited")
                    continue
                if sock is None:
                    sock = context.socket(zmq.REQ)
                    sock.linger = 0
                    sock.connect(url)
                await sock.send(b"ping")
                with anyio.move_on_after(self.heartbeat_interval * 2) as waited:
                    await sock.recv()
                if not waited.cancelled_caught:
                    misses = 0
                    continue
                # A REQ socket that lost its reply cannot send again: start over.
                sock.close(linger=0)
                sock = None
                misses += 1
                if misses >= self.heartbeat_misses:
                    await self._declare_dead(k, life, f"it missed {misses} heartbeats")
        finally:
            if sock is not None:
                sock.close(linger=0)

    async def _declare_dead(self, k: _Kernel, life: int, reason: str) -> None:
        if k.life != life or k.closing or k.status in (KernelState.DEAD, KernelState.RESTARTING):
            return
        k.death_reason = reason
        log.warning("kernel died", kernel_id=k.id, reason=reason)
        await self._set_status(k, KernelState.DEAD)
        if k.current is not None:
            k.current.end("died")

    async def _set_status(self, k: _Kernel, status: KernelState) -> None:
        if k.status is status:
            return
        k.status = status
        if k.announced and not k.closing:
            await self._emit(KernelStatus(payload=(k.id, status)))

    # ---- interrupt and restart --------------------------------------------------

    async def interrupt_kernel(self, kernel_id: str) -> KernelRef:
        k = self._get(kernel_id)
        await self._interrupt(k)
        return KernelRef(kernel_id=k.id, status=k.status)

    async def _interrupt(self, k: _Kernel) -> None:
        if k.status is KernelState.DEAD:
            return
        if k.km is not None and not k.interrupt_by_message:
            await k.km.interrupt_kernel()
        else:
            # Not our process to signal, or the signal would end its sandbox: ask
            # the kernel (ipykernel serves this on control).
            k.kc.control_channel.send(k.kc.session.msg("interrupt_request", {}))

    async def restart_kernel(self, kernel_id: str) -> KernelRef:
        """Restart a kernel hdsp started (a dead one too). Its state is lost; an
        execution running in it ends with status "restarted"."""
        k = self._get(kernel_id)
        await self._restart(k, now=k.status is KernelState.DEAD)
        return KernelRef(kernel_id=k.id, status=k.status)

    async def _restart(self, k: _Kernel, *, now: bool) -> None:
        if not k.owned or k.km is None:
            raise KernelNotOwned(
                f"The kernel {k.id} was attached, not started, by hdsp: restart it where "
                "it was started (for example in JupyterLab)."
            )
        async with k.restart_lock:
            k.life += 1
            await self._set_status(k, KernelState.RESTARTING)
            if k.current is not None:
                k.current.end("restarted")
            try:
                # The restarted kernel binds anew and our sockets reconnect.
                stdin_monitor = _watch_connection(k.kc.stdin_channel.socket)
                await k.km.restart_kernel(now=now)
                with anyio.fail_after(self.startup_timeout):
                    await self._handshake(k, stdin_monitor, certain=True)
            except Exception as exc:
                k.death_reason = f"a restart failed: {exc}"
                k.status = KernelState.DEAD
                await self._emit(KernelStatus(payload=(k.id, KernelState.DEAD)))
                raise KernelStartFailed(f"The kernel {k.id} did not restart: {exc}") from exc
            k.death_reason = None
            await self._set_status(k, KernelState.IDLE)
            self._note_tasks(k, "The kernel was restarted; its variables are gone.")
            log.info("kernel restarted", kernel_id=k.id)

    # ---- executing --------------------------------------------------------------

    async def execute(
        self,
        kernel_id: str,
        code: str,
        *,
        time_limit: float | None = None,
        on_output: OutputCallback | None = None,
        on_input: InputCallback | None = None,
        task_id: str | None = None,
    ) -> ExecutionResult:
        """Run `code` after the executions queued before it, and return its result.

        Outputs go to `on_output` (and out as `executionOutput` events) as they
        come, coalesced. `input()` calls `on_input`; without it, the code cannot
        read input. Past `time_limit` seconds (the default limit when None) the
        kernel is interrupted, then restarted if it does not stop. Cancelling the
        caller stops the code the same way before the cancellation goes on.
        """
        k = self._get(kernel_id)
        if k.waiting >= self.max_queued:
            raise KernelOverloaded(
                f"{k.waiting} executions wait for kernel {k.id} already; try again later."
            )
        k.waiting += 1
        queued = True
        try:
            async with k.lock:
                k.waiting -= 1
                queued = False
                return await self._execute_locked(k, code, time_limit, on_output, on_input, task_id)
        finally:
            if queued:
                k.waiting -= 1

    async def _execute_locked(
        self,
        k: _Kernel,
        code: str,
        time_limit: float | None,
        on_output: OutputCallback | None,
        on_input: InputCallback | None,
        task_id: str | None,
    ) -> ExecutionResult:
        if k.closing:
            raise KernelNotFound(f"The kernel {k.id} was shut down.")
        if k.status is KernelState.DEAD:
            raise KernelDead(self._dead_message(k))
        limit = self.default_time_limit if time_limit is None else time_limit
        ex = Execution(
            kernel_id=k.id,
            code=code,
            task_id=task_id,
            emit=self._emit,
            on_output=on_output,
            on_input=on_input,
            send_input=k.kc.input,
            interval=self.output_interval,
        )
        # Sending is synchronous and routes are in place before the next await,
        # so no reply can come before someone waits for it.
        ex.msg_id = k.kc.execute(code, store_history=True, allow_stdin=on_input is not None)
        k.iopub_routes[ex.msg_id] = ex.on_iopub
        k.shell_routes[ex.msg_id] = ex.on_reply
        k.stdin_routes[ex.msg_id] = ex.on_input_request
        k.current = ex
        k.last_active = anyio.current_time()
        try:
            async with anyio.create_task_group() as etg:
                etg.start_soon(ex.flush_loop)
                if on_input is not None:  # else the kernel is told it cannot ask
                    etg.start_soon(ex.input_loop)
                with anyio.move_on_after(limit):
                    await ex.done.wait()
                etg.cancel_scope.cancel()
            if not ex.done.is_set():
                ex.stopped_by = "timeout"
                log.info("execution timed out", kernel_id=k.id, seconds=limit)
                await self._stop_execution(k, ex)
        except anyio.get_cancelled_exc_class():
            ex.stopped_by = ex.stopped_by or "cancelled"
            with anyio.move_on_after(self.interrupt_grace + _RESTART_BUDGET, shield=True):
                if not ex.done.is_set():
                    await self._stop_execution(k, ex)
                await ex.flush()
            raise
        finally:
            k.iopub_routes.pop(ex.msg_id, None)
            k.shell_routes.pop(ex.msg_id, None)
            k.stdin_routes.pop(ex.msg_id, None)
            if k.current is ex:
                k.current = None
            k.last_active = anyio.current_time()
            ex.close()
        await ex.flush()
        return ex.result()

    async def _stop_execution(self, k: _Kernel, ex: Execution) -> None:
        """Interrupt; if the kernel is not done within the grace period, restart it."""
        try:
            await self._interrupt(k)
        except Exception as exc:
            log.warning("interrupting the kernel failed", kernel_id=k.id, error=str(exc))
        with anyio.move_on_after(self.interrupt_grace):
            await ex.done.wait()
        if ex.done.is_set() or not k.owned or k.closing:
            return
        log.warning("kernel ignored the interrupt; restarting it", kernel_id=k.id)
        try:
            await self._restart(k, now=True)
            ex.kernel_restarted = True
        except KernelError as exc:
            log.warning("restart after a timeout failed", kernel_id=k.id, error=exc.message)

    def _dead_message(self, k: _Kernel) -> str:
        how = "RestartKernel restarts it" if k.owned else "restart it where it was started"
        return f"The kernel {k.id} is dead ({k.death_reason or 'unknown cause'}); {how}."

    # ---- tasks ------------------------------------------------------------------

    def bind_task(self, task_id: str, kernel_id: str) -> None:
        """Make `task_id`'s code run in `kernel_id` from now on."""
        k = self._get(kernel_id)
        old = self._kernels.get(self._task_kernels.get(task_id, ""))
        if old is not None:
            old.tasks.discard(task_id)
        self._task_kernels[task_id] = kernel_id
        k.tasks.add(task_id)

    async def kernel_for_task(self, task_id: str, workspace: Path | str) -> TaskKernel:
        """The task's kernel: its bound one, restarted if it died, or a new one
        started in the task's workspace on first use."""
        notes = self._notes.pop(task_id, [])
        kernel_id = self._task_kernels.get(task_id)
        k = self._kernels.get(kernel_id) if kernel_id is not None else None
        if k is not None and k.closing:
            k = None
        if kernel_id is not None and k is None and not notes:
            notes.append(
                f"The kernel this task used ({kernel_id}) was shut down; a new one was "
                "started, so earlier variables and imports are gone."
            )
        if k is None:
            info = await self.start_kernel(cwd=str(workspace), for_task=task_id)
            k = self._kernels[info.kernel_id]
        elif k.status is KernelState.DEAD:
            if not k.owned:
                raise KernelDead(self._dead_message(k))
            reason = k.death_reason or "unknown cause"
            await self._restart(k, now=True)
            self._notes.pop(task_id, None)
            notes.append(
                f"The kernel had died ({reason}) and was restarted before this code ran: "
                "earlier variables and imports are gone."
            )
        return TaskKernel(kernel_id=k.id, name=k.name, cwd=k.cwd, notes=notes)

    def describe_for_task(self, task_id: str, workspace: Path | str) -> str:
        """One line for the system prompt: which kernel the task's code runs in."""
        k = self._kernels.get(self._task_kernels.get(task_id, ""))
        if k is None or k.closing:
            return (
                f"{self.default_kernel}, started on first use of execute_code, "
                f"working directory {workspace}"
            )
        origin = "started by hdsp" if k.owned else "attached (it runs outside hdsp)"
        where = f"working directory {k.cwd}" if k.cwd else "working directory unknown"
        return f"{k.name} (id {k.id}, {origin}), {where}, status {k.status.value}"

    async def release_task(self, task_id: str) -> None:
        """Forget the task's binding; shut down the kernel started for it when no
        other task uses it."""
        self._notes.pop(task_id, None)
        kernel_id = self._task_kernels.pop(task_id, None)
        k = self._kernels.get(kernel_id) if kernel_id is not None else None
        if k is None:
            return
        k.tasks.discard(task_id)
        if k.owned and k.started_for == task_id and not k.tasks and not k.closing:
            await self._stop(k)

    def _note_tasks(self, k: _Kernel, note: str) -> None:
        running = k.current.task_id if k.current is not None else None
        for task_id in k.tasks:
            if task_id != running:
                notes = self._notes.setdefault(task_id, [])
                if len(notes) < _MAX_NOTES:
                    notes.append(note)

    # ---- culling --------------------------------------------------------------

    async def _cull_loop(self, after: float) -> None:
        """Shut down the kernels hdsp started for tasks once they and their tasks
        have been idle for `after` seconds (Jupyter Server's cull_idle_timeout).
        Kernels hdsp attached to are someone else's: never culled."""
        while True:
            await anyio.sleep(min(60.0, after / 4))
            now = anyio.current_time()
            for k in list(self._kernels.values()):
                if (
                    k.owned
                    and k.announced
                    and not k.closing
                    and k.current is None
                    and k.waiting == 0
                    and now - k.last_active >= after
                    and not any(self.task_busy(t) for t in k.tasks)
                ):
                    await self._cull(k, now - k.last_active)

    async def _cull(self, k: _Kernel, idle: float) -> None:
        note = (
            f"The kernel {k.name} ({k.id}) was shut down after {idle / 60:.0f} min idle, "
            "to give its memory back (kernels.cull_idle_seconds): its variables and "
            "imports are gone. The next code run starts a new kernel."
        )
        k.closing = True  # from now on no code starts in it; the tasks get a new one
        tasks = sorted(k.tasks)
        for task_id in tasks:
            self._notes[task_id] = [note]
        log.info("kernel culled", kernel_id=k.id, idle_seconds=round(idle), tasks=tasks)
        if self.on_culled is not None:
            for task_id in tasks:
                try:
                    await self.on_culled(task_id, note)
                except Exception:
                    log.exception("recording a culled kernel failed", task_id=task_id)
        await self._stop(k)

    # ---- events -------------------------------------------------------------

    async def _emit(self, event: Event) -> None:
        try:
            await self._emit_event(event)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            # The journal closed first (the daemon is going down): nobody listens.
            pass


def _kernel_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_PRIVATE_ENV)}
    # debugpy's warning about frozen modules is noise on every kernel's stderr.
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return env
