"""One kernel the service uses, started or attached: its state, its executions,
its liveness, interrupt and restart.

A `Kernel` talks to its kernel only through its connection (:mod:`.connection`),
and to the kernel's process, when hdsp started it, through a
:class:`~.process.KernelProcess`; a kernel hdsp attached to has no process and is
never restarted, signalled or killed by hdsp. Its lifetime (connecting, the
handshake, shutting down, the events that say so) is the service's.

Executions take turns (a FIFO lock, with a bound on how many may wait). Past its
time limit an execution is interrupted; if the kernel is not idle within
`interrupt_grace`, a kernel hdsp started is restarted (its state is lost, and
the result says so). Cancelling the caller does the same, shielded. A sandboxed
kernel is interrupted with an `interrupt_request` message: a SIGINT would reach
the sandbox's launcher, not the kernel.

Liveness: every `heartbeat_interval` the kernel's heartbeat must echo, and a
process hdsp started must still run. A dead kernel is reported (`kernelStatus`
dead) and ends the execution that waited on it (status "died").

A kernel on a Jupyter server (:mod:`.gateway`) is watched by its server: the
connection passes on what the server says. `restarting` (the kernel died there
and the server starts it anew) ends the running execution "died" and the new
kernel is the task's from then on, its variables gone; `dead` (the server could
not restart it) is a death; KERNEL_GONE (the server no longer has it: culled or
shut down there) ends the execution and hands the kernel to `on_gone`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import structlog

from hdsp.protocol import Event, ExecutionResult, KernelState, KernelStatus

from .connection import (
    KERNEL_GONE,
    KERNEL_LINK_DROPPED,
    KERNEL_REPLACED,
    KernelConnection,
    Routes,
    StatusCallback,
)
from .errors import (
    KernelBusy,
    KernelDead,
    KernelError,
    KernelNotFound,
    KernelNotOwned,
    KernelOverloaded,
    KernelStartFailed,
)
from .execution import Emit, Execution, InputCallback, OutputCallback
from .process import KernelHandle

__all__ = ["Kernel", "KernelPolicy", "OnDied", "OnRestarted"]

log = structlog.get_logger("hdsp.kernels")

#: How long a restart after a cancel may take (shielded cleanup has a deadline).
_RESTART_BUDGET = 15.0

#: Told (the kernel, the task whose execution saw it) after a restart.
OnRestarted = Callable[["Kernel", str | None], None]
#: Told when the kernel was declared dead (its process exited, its heartbeat
#: stopped), or, for one hdsp attached to, restarted where it runs.
OnDied = Callable[["Kernel"], Awaitable[None]]


@dataclass(frozen=True)
class KernelPolicy:
    """How the service treats each of its kernels."""

    interrupt_grace: float = 5.0
    heartbeat_interval: float = 1.0
    heartbeat_misses: int = 3
    output_interval: float = 0.05
    #: How long a restarted kernel has to answer.
    startup_timeout: float = 60.0
    #: Executions that may wait for one kernel.
    max_queued: int = 64


async def _unpublished(event: Event) -> None:
    """Where a silent execution's events go: nowhere."""


class Kernel:
    def __init__(
        self,
        *,
        kernel_id: str,
        name: str,
        connection_file: str | None,
        connect: Callable[[StatusCallback], KernelConnection],
        process: KernelHandle | None,
        policy: KernelPolicy,
        emit: Emit,
        on_restarted: OnRestarted,
        cwd: str | None = None,
        started_for: str | None = None,
        on_died: OnDied | None = None,
        on_replaced: OnDied | None = None,
        on_gone: OnDied | None = None,
        server_url: str | None = None,
        remote_id: str | None = None,
    ) -> None:
        """`connect` makes the kernel's connection, given where the kernel's
        execution states go; `emit` publishes events (and never raises)."""
        self.id = kernel_id
        self.name = name
        self.connection_file = connection_file
        self.process = process
        self.cwd = cwd
        #: A kernel on a Jupyter server: the server (as shown) and its id there.
        self.server_url = server_url
        self.remote_id = remote_id
        #: The task this kernel was started for (released with it).
        self.started_for = started_for
        self.conn = connect(self._on_execution_state)
        self.status = KernelState.STARTING
        #: Counts restarts: a death seen in an earlier life is not this life's.
        self.life = 0
        self.death_reason: str | None = None
        #: kernelStarted was published; status changes are published from then on.
        self.announced = False
        #: Going away: no code starts in it any more.
        self.closing = False
        self.current: Execution | None = None
        self.waiting = 0
        #: When it last ran code or was started (anyio's clock), for culling.
        self.last_active = anyio.current_time()
        self.stop_requested = anyio.Event()
        self.stopped = anyio.Event()
        self._policy = policy
        self._emit = emit
        self._on_restarted = on_restarted
        self._on_died = on_died
        self._on_replaced = on_replaced
        self._on_gone = on_gone
        # fast_acquire: an uncontended lock is taken without a trip through the loop.
        self._lock = anyio.Lock(fast_acquire=True)
        self._restart_lock = anyio.Lock()

    @property
    def remote(self) -> bool:
        """Whether it runs on a Jupyter server (see :mod:`.gateway`)."""
        return self.remote_id is not None

    @property
    def owned(self) -> bool:
        """Whether hdsp started it (and so may restart and shut it down)."""
        return self.process is not None

    def dead_message(self) -> str:
        how = "RestartKernel restarts it" if self.owned else "restart it where it was started"
        return f"The kernel {self.id} is dead ({self.death_reason or 'unknown cause'}); {how}."

    def abandon(self, reason: str) -> None:
        """The kernel goes away under the execution running in it, if any."""
        if self.current is not None:
            self.death_reason = reason
            self.current.end("died")

    # ---- status and liveness ------------------------------------------------------

    async def set_status(self, status: KernelState) -> None:
        if self.status is status:
            return
        self.status = status
        if self.announced and not self.closing:
            await self._emit(KernelStatus(payload=(self.id, status)))

    async def _on_execution_state(self, state: str) -> None:
        """The kernel published its execution state. A kernel's own "starting" can
        arrive after our handshake; starting and restarting are the service's to
        say, busy and idle the kernel's."""
        if state == KERNEL_REPLACED:
            # A new process answers on the kernel's ports: restarted elsewhere
            # (hdsp's own restarts are expected and not reported).
            if self._restart_lock.locked():
                return
            if self.status is KernelState.RESTARTING:
                # Its server brought it back after it died there (and its tasks
                # were told when it died).
                self.death_reason = None
                await self.set_status(KernelState.IDLE)
            elif self._on_replaced is not None:
                await self._on_replaced(self)
            return
        if state == KERNEL_GONE:
            await self._gone()
            return
        if state == KERNEL_LINK_DROPPED:
            if self.current is not None:
                self.current.connection_dropped = True
            return
        if state == "restarting":
            # Only a Jupyter server says this: the kernel died there and the
            # server starts it anew (hdsp's own restarts do not say it).
            if not self._restart_lock.locked() and self.status is not KernelState.DEAD:
                await self._died_on_server()
            return
        if state == "dead":
            # A Jupyter server could not bring the kernel back.
            await self._declare_dead(
                self.life, "it died on its Jupyter server, which could not restart it"
            )
            return
        if self.status in (KernelState.DEAD, KernelState.RESTARTING):
            return
        status = {"busy": KernelState.BUSY, "idle": KernelState.IDLE}.get(state)
        if status is not None:
            await self.set_status(status)

    async def watch_liveness(self) -> None:
        """Declare the kernel dead when its process exits or its heartbeat stops
        answering; runs until cancelled."""
        interval = self._policy.heartbeat_interval
        misses = 0
        while True:
            await anyio.sleep(interval)
            if self.status in (KernelState.DEAD, KernelState.RESTARTING) or (
                self._restart_lock.locked()
            ):
                misses = 0
                continue
            life = self.life
            if self.process is not None and not await self.process.is_alive():
                await self._declare_dead(life, "its process exited")
                continue
            with anyio.move_on_after(interval * 2) as waited:
                await self.conn.ping()
            if not waited.cancelled_caught:
                misses = 0
                continue
            misses += 1
            if misses >= self._policy.heartbeat_misses:
                await self._declare_dead(life, f"it missed {misses} heartbeats")

    async def _died_on_server(self) -> None:
        self.life += 1
        self.death_reason = "it died on its Jupyter server, which restarts it"
        log.warning("remote kernel died; its server restarts it", kernel_id=self.id)
        await self.set_status(KernelState.RESTARTING)
        if self.current is not None:
            self.current.end("died")
        if self._on_replaced is not None:
            await self._on_replaced(self)

    async def _server_restart_done(self) -> None:
        """Wait until a kernel its server restarts is back and answers (the next
        execution must not go to a kernel between two lives)."""
        try:
            with anyio.fail_after(self._policy.startup_timeout):
                # (Its own `starting` may come before or after the server's
                # `restarting`: the answer to a kernel_info is what counts.)
                await self.conn.handshake(certain=True)
        except TimeoutError:
            raise KernelDead(
                f"The kernel {self.id} died on its Jupyter server and did not come back within "
                f"{self._policy.startup_timeout:g} s."
            ) from None
        if self.status is KernelState.RESTARTING and not self._restart_lock.locked():
            self.death_reason = None
            await self.set_status(KernelState.IDLE)

    async def _gone(self) -> None:
        if self.closing:
            return
        self.death_reason = (
            "its Jupyter server no longer has it (it culls idle kernels, or it was shut down there)"
        )
        await self.set_status(KernelState.DEAD)
        if self.current is not None:
            self.current.end("died")
        if self._on_gone is not None:
            await self._on_gone(self)

    async def _declare_dead(self, life: int, reason: str) -> None:
        if (
            self.life != life
            or self.closing
            or self.status in (KernelState.DEAD, KernelState.RESTARTING)
        ):
            return
        self.death_reason = reason
        log.warning("kernel died", kernel_id=self.id, reason=reason)
        await self.set_status(KernelState.DEAD)
        if self.current is not None:
            self.current.end("died")
        if self._on_died is not None:
            await self._on_died(self)

    # ---- interrupt and restart --------------------------------------------------

    async def interrupt(self) -> None:
        if self.status is KernelState.DEAD:
            return
        if self.process is not None and not self.process.interrupts_by_message:
            await self.process.signal_interrupt()
        else:
            # Not our process to signal, or the signal would end its sandbox.
            self.conn.request_interrupt()

    async def restart(self, *, now: bool) -> None:
        """Restart a kernel hdsp started (`now`: kill it rather than ask it to
        stop). Its state is lost; the execution running in it ends "restarted"."""
        if self.process is None:
            raise KernelNotOwned(
                f"The kernel {self.id} was attached, not started, by hdsp: restart it where "
                "it was started (for example in JupyterLab)."
            )
        async with self._restart_lock:
            self.life += 1
            await self.set_status(KernelState.RESTARTING)
            if self.current is not None:
                self.current.end("restarted")
            try:
                # The restarted kernel binds anew and our sockets reconnect.
                self.conn.expect_rebind()
                await self.process.restart(now=now)
                with anyio.fail_after(self._policy.startup_timeout):
                    await self.conn.handshake(certain=True)
            except Exception as exc:
                self.death_reason = f"a restart failed: {exc}"
                self.status = KernelState.DEAD
                await self._emit(KernelStatus(payload=(self.id, KernelState.DEAD)))
                raise KernelStartFailed(f"The kernel {self.id} did not restart: {exc}") from exc
            self.death_reason = None
            await self.set_status(KernelState.IDLE)
            self._on_restarted(self, self.current.task_id if self.current is not None else None)
            log.info("kernel restarted", kernel_id=self.id)

    # ---- executing --------------------------------------------------------------

    async def execute(
        self,
        code: str,
        *,
        time_limit: float,
        on_output: OutputCallback | None = None,
        on_input: InputCallback | None = None,
        task_id: str | None = None,
    ) -> ExecutionResult:
        """Run `code` after the executions queued before it (see
        :meth:`KernelService.execute`)."""
        if self.waiting >= self._policy.max_queued:
            raise KernelOverloaded(
                f"{self.waiting} executions wait for kernel {self.id} already; try again later."
            )
        self.waiting += 1
        queued = True
        try:
            async with self._lock:
                self.waiting -= 1
                queued = False
                return await self._execute_locked(code, time_limit, on_output, on_input, task_id)
        finally:
            if queued:
                self.waiting -= 1

    async def execute_silently(self, code: str, *, time_limit: float) -> ExecutionResult:
        """Run `code` as Jupyter's silent execution (no execution count, not in
        the history, no events), never behind other code: a kernel that runs
        something (ours, or a notebook's cell) raises KernelBusy at once. Past
        `time_limit`, or cancelled, the result is given up on and nothing is
        interrupted: the code must bound itself (an interrupt would stop the
        user's code if theirs ran first)."""
        if self._lock.locked() or self.status in (KernelState.BUSY, KernelState.STARTING):
            raise KernelBusy(f"The kernel {self.id} is running code.")
        async with self._lock:
            return await self._execute_locked(code, time_limit, None, None, None, silent=True)

    async def _execute_locked(
        self,
        code: str,
        time_limit: float,
        on_output: OutputCallback | None,
        on_input: InputCallback | None,
        task_id: str | None,
        *,
        silent: bool = False,
    ) -> ExecutionResult:
        if self.status is KernelState.RESTARTING and not self._restart_lock.locked():
            await self._server_restart_done()
        if self.closing:
            raise KernelNotFound(f"The kernel {self.id} was shut down.")
        if self.status is KernelState.DEAD:
            raise KernelDead(self.dead_message())
        ex = Execution(
            kernel_id=self.id,
            code=code,
            task_id=task_id,
            emit=_unpublished if silent else self._emit,
            on_output=on_output,
            on_input=on_input,
            send_input=self.conn.send_input,
            interval=self._policy.output_interval,
        )
        routes = Routes(
            iopub=ex.on_iopub, reply=ex.on_reply, stdin=ex.on_input_request, quiet=silent
        )
        ex.msg_id = self.conn.execute(
            code, allow_stdin=on_input is not None, routes=routes, silent=silent
        )
        self.current = ex
        if not silent:  # (an inspection is not work that keeps a kernel from culling)
            self.last_active = anyio.current_time()
        try:
            async with anyio.create_task_group() as etg:
                etg.start_soon(ex.flush_loop)
                if on_input is not None:  # else the kernel is told it cannot ask
                    etg.start_soon(ex.input_loop)
                with anyio.move_on_after(time_limit):
                    await ex.done.wait()
                etg.cancel_scope.cancel()
            if not ex.done.is_set():
                ex.stopped_by = "timeout"
                log.info("execution timed out", kernel_id=self.id, seconds=time_limit)
                if not silent:
                    await self._stop_execution(ex)
        except anyio.get_cancelled_exc_class():
            ex.stopped_by = ex.stopped_by or "cancelled"
            if silent:
                raise
            budget = self._policy.interrupt_grace + _RESTART_BUDGET
            with anyio.move_on_after(budget, shield=True):
                if not ex.done.is_set():
                    await self._stop_execution(ex)
                await ex.flush()
            raise
        finally:
            self.conn.forget(ex.msg_id)
            if self.current is ex:
                self.current = None
            if not silent:
                self.last_active = anyio.current_time()
            ex.close()
        await ex.flush()
        return ex.result()

    async def _stop_execution(self, ex: Execution) -> None:
        """Interrupt; if the kernel is not done within the grace period, restart it."""
        try:
            await self.interrupt()
        except Exception as exc:
            log.warning("interrupting the kernel failed", kernel_id=self.id, error=str(exc))
        with anyio.move_on_after(self._policy.interrupt_grace):
            await ex.done.wait()
        if ex.done.is_set() or not self.owned or self.closing:
            return
        log.warning("kernel ignored the interrupt; restarting it", kernel_id=self.id)
        try:
            await self.restart(now=True)
            ex.kernel_restarted = True
        except KernelError as exc:
            log.warning("restart after a timeout failed", kernel_id=self.id, error=exc.message)
