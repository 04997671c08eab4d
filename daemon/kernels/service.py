"""The kernel service: every Jupyter kernel the daemon uses, started or attached.

The parts, along jupyter_client's seams: a kernel hdsp starts has a process
(:mod:`.process`, jupyter_client's KernelManager); every kernel has a connection
(:mod:`.connection`: its channels, handshake, heartbeat and the routing of its
messages), through which alone the service talks to it, so that a kernel served
elsewhere can plug in; which task runs code in which kernel is the bindings'
(:mod:`.bindings`). The service owns the kernels' lifetimes, runs executions,
interrupts and restarts, watches liveness and culls idle kernels.

Ownership: the service runs in the daemon's task group (`await tg.start(svc.run)`)
and owns one task group; each kernel is owned by one task in it (`_run_kernel`),
which runs its connection and its liveness watch, and on the way out (shutdown,
daemon stop, cancellation) releases it under a shielded deadline: a kernel hdsp
started is shut down, one it attached to (a notebook's) is only detached from,
never killed.

Executions of one kernel take turns (a FIFO lock, with a bound on how many may
wait); different kernels run at the same time.

Liveness: every `heartbeat_interval` the kernel's heartbeat must echo, and a
process hdsp started must still run. A dead kernel is reported (`kernelStatus`
dead), ends the execution that waited on it (status "died"), and is noted for
the tasks bound to it; `restart_kernel` brings it back.

Stopping code: past its time limit an execution is interrupted; if the kernel is
not idle within `interrupt_grace`, a kernel hdsp started is restarted (its state
is lost, and the result says so). Cancelling the caller does the same, shielded.
A sandboxed kernel is interrupted with an `interrupt_request` message: a SIGINT
would reach the sandbox's launcher, not the kernel.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from hdsp.daemon.errors import CommandError
from hdsp.protocol import (
    AttachKernel,
    ErrorCode,
    Event,
    ExecuteCode,
    ExecutionResult,
    InterruptKernel,
    KernelInfo,
    KernelList,
    KernelRef,
    KernelShutdown,
    KernelStarted,
    KernelState,
    KernelStatus,
    ListKernels,
    RestartKernel,
    ShutdownKernel,
    StartKernel,
)

from .bindings import OnCulled, TaskBindings, TaskBusy
from .connection import KernelConnection, Routes, ZmqKernelConnection
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
from .process import KernelProcess

__all__ = ["KernelService", "TaskKernel"]

log = structlog.get_logger("hdsp.kernels")

#: How long releasing one kernel may take (polite shutdown, then kill).
_RELEASE_DEADLINE = 10.0
#: How long a restart after a cancel may take (shielded cleanup has a deadline).
_RESTART_BUDGET = 15.0


@dataclass(eq=False)
class _Kernel:
    id: str
    name: str
    connection_file: str
    conn: KernelConnection
    #: The process, for a kernel hdsp started; None for one it attached to.
    process: KernelProcess | None = None
    cwd: str | None = None
    status: KernelState = KernelState.STARTING
    #: Counts restarts: a death seen in an earlier life is not this life's.
    life: int = 0
    death_reason: str | None = None
    #: kernelStarted was published; status changes are published from then on.
    announced: bool = False
    closing: bool = False
    current: Execution | None = None
    waiting: int = 0
    #: The task this kernel was started for (released with it).
    started_for: str | None = None
    #: When it last ran code or was started (anyio's clock), for culling.
    last_active: float = field(default_factory=anyio.current_time)
    #: fast_acquire: an uncontended lock is taken without a trip through the loop.
    lock: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))
    restart_lock: anyio.Lock = field(default_factory=anyio.Lock)
    stop_requested: anyio.Event = field(default_factory=anyio.Event)
    stopped: anyio.Event = field(default_factory=anyio.Event)

    @property
    def owned(self) -> bool:
        return self.process is not None


@dataclass(frozen=True)
class TaskKernel:
    """The kernel a task's code runs in, and what the task should be told about
    it (it died, was restarted or replaced since the task last ran code)."""

    kernel_id: str
    name: str
    cwd: str | None
    notes: list[str]


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
        task_busy: TaskBusy | None = None,
        on_culled: OnCulled | None = None,
    ) -> None:
        """`task_busy` says whether a task is working (its kernel is never culled
        then); `on_culled` is told (task id, note) when a task's kernel was culled,
        to record it in the task's history. `cull_idle_after`: seconds a kernel
        hdsp started for a task may sit idle, with its tasks idle too, before it is
        shut down to give its memory back; None: never."""
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
        self.cull_idle_after = cull_idle_after
        self._bindings = TaskBindings(task_busy=task_busy, on_culled=on_culled)
        self._kernels: dict[str, _Kernel] = {}
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
        return k is not None and k.announced and not k.closing

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
            task_ids=sorted(self._bindings.tasks_of(k.id)),
        )

    def _get(self, kernel_id: str) -> _Kernel:
        k = self._kernels.get(kernel_id)
        if k is None or k.closing or not k.announced:
            raise KernelNotFound(f"No kernel {kernel_id!r}; ListKernels lists the kernels.")
        return k

    # ---- the wire commands ----------------------------------------------------

    async def handle(self, command: Any) -> Any:
        """Run a kernel command from a client; errors become error replies."""
        try:
            match command:
                case ListKernels():
                    return KernelList(kernels=self.list_kernels())
                case StartKernel(kernel_name=name, cwd=cwd):
                    return await self.start_kernel(name, cwd)
                case AttachKernel(connection_file=path):
                    return await self.attach_kernel(path)
                case InterruptKernel(kernel_id=kernel_id):
                    return await self.interrupt_kernel(kernel_id)
                case RestartKernel(kernel_id=kernel_id):
                    return await self.restart_kernel(kernel_id)
                case ShutdownKernel(kernel_id=kernel_id):
                    return await self.shutdown_kernel(kernel_id)
                case ExecuteCode(kernel_id=kernel_id, code=code, timeout=timeout):
                    if timeout is not None and timeout <= 0:
                        raise CommandError(ErrorCode.INVALID_REQUEST, "timeout must be above 0.")
                    return await self.execute(kernel_id, code, time_limit=timeout)
        except KernelError as exc:
            raise CommandError(exc.code, exc.message) from None
        raise CommandError(
            ErrorCode.UNKNOWN_COMMAND, f"{type(command).__name__} is no kernel command."
        )

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
        kernel_id = str(uuid.uuid4())
        process = KernelProcess(
            kernel_id=kernel_id,
            kernel_name=name,
            workdir=workdir,
            runtime_dir=self.runtime_dir,
            launcher=launcher,
        )
        k = self._new_kernel(kernel_id, name, process.connection_file, process.client)
        k.process, k.cwd, k.started_for = process, workdir, for_task
        previous = self._bindings.kernel_of(for_task) if for_task is not None else None
        if for_task is not None:
            self._bindings.bind(for_task, k.id)
        try:
            info = await self._open(tg, k, process.start, self.startup_timeout)
        except BaseException:
            if for_task is not None:  # as it was
                if previous is not None:
                    self._bindings.bind(for_task, previous)
                else:
                    self._bindings.unbind(for_task)
            raise
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
        k = self._new_kernel(str(uuid.uuid4()), name, resolved, lambda: kc)

        async def nothing_to_launch() -> None:
            pass

        info = await self._open(tg, k, nothing_to_launch, self.attach_timeout)
        log.info("kernel attached", kernel_id=k.id, connection_file=resolved)
        return info

    def _new_kernel(
        self, kernel_id: str, name: str, connection_file: str, make_client: Callable[[], Any]
    ) -> _Kernel:
        on_status = functools.partial(self._on_execution_state, kernel_id)
        conn = ZmqKernelConnection(make_client, kernel_id=kernel_id, on_status=on_status)
        return _Kernel(id=kernel_id, name=name, connection_file=connection_file, conn=conn)

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
            async with anyio.create_task_group() as ktg:
                await ktg.start(k.conn.run)
                try:
                    with anyio.fail_after(limit):
                        await k.conn.handshake(certain=k.owned)
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
                    ktg.start_soon(self._watch_liveness, k)
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
            self._bindings.kernel_gone(k.id)
            k.stopped.set()

    async def _release(self, k: _Kernel) -> None:
        """The connection is closed already (its task ended); shut down the
        process hdsp started, and say the kernel is gone."""
        if k.process is not None:
            await k.process.shutdown()
        if k.announced:
            k.status = KernelState.DEAD
            await self._emit(KernelShutdown(payload=(k.id,)))
            log.info("kernel shut down" if k.owned else "kernel detached", kernel_id=k.id)

    # ---- liveness -------------------------------------------------------------

    async def _on_execution_state(self, kernel_id: str, state: str) -> None:
        """The kernel published its execution state. A kernel's own "starting" can
        arrive after our handshake; starting and restarting are the service's to
        say, busy and idle the kernel's."""
        k = self._kernels.get(kernel_id)
        if k is None or k.status in (KernelState.DEAD, KernelState.RESTARTING):
            return
        status = {"busy": KernelState.BUSY, "idle": KernelState.IDLE}.get(state)
        if status is not None:
            await self._set_status(k, status)

    async def _watch_liveness(self, k: _Kernel) -> None:
        misses = 0
        while True:
            await anyio.sleep(self.heartbeat_interval)
            if k.status in (KernelState.DEAD, KernelState.RESTARTING) or k.restart_lock.locked():
                misses = 0
                continue
            life = k.life
            if k.process is not None and not await k.process.is_alive():
                await self._declare_dead(k, life, "its process exited")
                continue
            with anyio.move_on_after(self.heartbeat_interval * 2) as waited:
                await k.conn.ping()
            if not waited.cancelled_caught:
                misses = 0
                continue
            misses += 1
            if misses >= self.heartbeat_misses:
                await self._declare_dead(k, life, f"it missed {misses} heartbeats")

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
        if k.process is not None and not k.process.interrupts_by_message:
            await k.process.signal_interrupt()
        else:
            # Not our process to signal, or the signal would end its sandbox.
            k.conn.request_interrupt()

    async def restart_kernel(self, kernel_id: str) -> KernelRef:
        """Restart a kernel hdsp started (a dead one too). Its state is lost; an
        execution running in it ends with status "restarted"."""
        k = self._get(kernel_id)
        await self._restart(k, now=k.status is KernelState.DEAD)
        return KernelRef(kernel_id=k.id, status=k.status)

    async def _restart(self, k: _Kernel, *, now: bool) -> None:
        if k.process is None:
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
                k.conn.expect_rebind()
                await k.process.restart(now=now)
                with anyio.fail_after(self.startup_timeout):
                    await k.conn.handshake(certain=True)
            except Exception as exc:
                k.death_reason = f"a restart failed: {exc}"
                k.status = KernelState.DEAD
                await self._emit(KernelStatus(payload=(k.id, KernelState.DEAD)))
                raise KernelStartFailed(f"The kernel {k.id} did not restart: {exc}") from exc
            k.death_reason = None
            await self._set_status(k, KernelState.IDLE)
            running = k.current.task_id if k.current is not None else None
            note = "The kernel was restarted; its variables are gone."
            self._bindings.note(k.id, note, except_task=running)
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
            send_input=k.conn.send_input,
            interval=self.output_interval,
        )
        routes = Routes(iopub=ex.on_iopub, reply=ex.on_reply, stdin=ex.on_input_request)
        ex.msg_id = k.conn.execute(code, allow_stdin=on_input is not None, routes=routes)
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
            k.conn.forget(ex.msg_id)
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
        self._bindings.bind(task_id, self._get(kernel_id).id)

    async def kernel_for_task(self, task_id: str, workspace: Path | str) -> TaskKernel:
        """The task's kernel: its bound one, restarted if it died, or a new one
        started in the task's workspace on first use."""
        notes = self._bindings.take_notes(task_id)
        kernel_id = self._bindings.kernel_of(task_id)
        k = self._kernels.get(kernel_id) if kernel_id is not None else None
        if k is not None and (k.closing or not k.announced):
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
            self._bindings.drop_notes(task_id)
            notes.append(
                f"The kernel had died ({reason}) and was restarted before this code ran: "
                "earlier variables and imports are gone."
            )
        return TaskKernel(kernel_id=k.id, name=k.name, cwd=k.cwd, notes=notes)

    def describe_for_task(self, task_id: str, workspace: Path | str) -> str:
        """One line for the system prompt: which kernel the task's code runs in."""
        k = self._kernels.get(self._bindings.kernel_of(task_id) or "")
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
        self._bindings.drop_notes(task_id)
        kernel_id = self._bindings.unbind(task_id)
        k = self._kernels.get(kernel_id) if kernel_id is not None else None
        if k is None:
            return
        if k.owned and k.started_for == task_id and not self._bindings.tasks_of(k.id):
            if not k.closing:
                await self._stop(k)

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
                    and not self._bindings.any_busy(k.id)
                ):
                    await self._cull(k, now - k.last_active)

    async def _cull(self, k: _Kernel, idle: float) -> None:
        note = (
            f"The kernel {k.name} ({k.id}) was shut down after {idle / 60:.0f} min idle, "
            "to give its memory back (kernels.cull_idle_seconds): its variables and "
            "imports are gone. The next code run starts a new kernel."
        )
        k.closing = True  # from now on no code starts in it; the tasks get a new one
        tasks = await self._bindings.culled(k.id, note)
        log.info("kernel culled", kernel_id=k.id, idle_seconds=round(idle), tasks=tasks)
        await self._stop(k)

    # ---- events -------------------------------------------------------------

    async def _emit(self, event: Event) -> None:
        try:
            await self._emit_event(event)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            # The journal closed first (the daemon is going down): nobody listens.
            pass
