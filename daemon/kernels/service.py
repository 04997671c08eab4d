"""The kernel service: every Jupyter kernel the daemon uses, started or attached.

The parts, along jupyter_client's seams: each kernel is a :class:`~.kernel.Kernel`
(its state, executions, liveness, interrupt and restart); one hdsp starts has a
process (:mod:`.process`, jupyter_client's KernelManager); every kernel has a
connection (:mod:`.connection`: channels, handshake, heartbeat, routing), through
which alone it is talked to, so that a kernel served elsewhere (a gateway) can
plug in; which task runs code in which kernel is the bindings' (:mod:`.bindings`).
The service is the collection (jupyter_client's MultiKernelManager), made of
objects that each own one part: the kernels by id (:mod:`.registry`); starting,
attaching and owning them (:mod:`.starting`); what befalls them and what their
tasks are told (:mod:`.fates`); each task's kernel (:mod:`.task_kernels`) and the
spares (:mod:`.pool`); the idle policy (:mod:`.culling`); their variables
(:mod:`.inspection`). The service wires them and is the face the daemon's
commands call.

Ownership: the service runs in the daemon's task group (`await tg.start(svc.run)`)
and owns one task group; each kernel is owned by one task in it (see
:mod:`.starting`), which runs its connection and its liveness watch, and on the
way out (shutdown, daemon stop, cancellation) releases it under a shielded
deadline: a kernel hdsp started is shut down, one it attached to (a notebook's)
is only detached from, never killed. Different kernels run code at the same time.

A dead kernel is noted for the tasks bound to it; `restart_kernel` brings it
back, and `kernel_for_task` does so before the task's next code runs.

Kernels on a Jupyter server (:mod:`.gateway`) are kernels like the others, with
a WebSocket connection and a process half of REST calls; where a task's kernel
runs is the providers' to say (:mod:`.providers`). One the server culled or
shut down is reported to its tasks as a culled kernel, and the next code run
starts a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

import anyio
import structlog
from anyio.abc import TaskStatus

from hdsp.protocol import (
    ExecutionResult,
    KernelInfo,
    KernelRef,
    KernelState,
    RemoteKernelList,
)

from .bindings import OnCulled, TaskBindings, TaskBusy
from .culling import KernelCuller
from .execution import Emit, InputCallback, OutputCallback
from .fates import KernelFates
from .inspection import KernelInspector
from .kernel import KernelPolicy
from .launcher import KernelLauncher
from .pool import KernelPool
from .process import remove_leftover_dirs
from .providers import KernelProviders
from .registry import KernelRegistry, quiet_emit
from .remote_listing import list_remote_kernels
from .starting import KernelStarter
from .task_kernels import TaskKernel, TaskKernels
from .variables import InspectionLimits

__all__ = ["KernelService", "TaskKernel"]

log = structlog.get_logger("hdsp.kernels")


class KernelService:
    def __init__(
        self,
        emit: Emit,
        *,
        runtime_dir: Path,
        default_kernel: str = "python3",
        private_dirs: Sequence[Path] = (),
        default_time_limit: float = 120.0,
        interrupt_grace: float = 5.0,
        heartbeat_interval: float = 1.0,
        heartbeat_misses: int = 3,
        output_interval: float = 0.05,
        startup_timeout: float = 60.0,
        attach_timeout: float = 20.0,
        max_queued: int = 64,
        cull_idle_after: float | None = None,
        launcher: KernelLauncher | None = None,
        task_busy: TaskBusy | None = None,
        on_culled: OnCulled | None = None,
        on_notebook_kernel: OnCulled | None = None,
        inspection_limits: InspectionLimits | None = None,
        providers: KernelProviders | None = None,
        pool_size: Callable[[], int] = lambda: 0,
        launch_profile: Callable[[], Hashable] = lambda: None,
    ) -> None:
        """`task_busy` says whether a task is working (its kernel is never culled
        then); `on_culled` is told (task id, note) when a task's kernel was culled,
        to record it in the task's history. `cull_idle_after`: seconds a kernel
        hdsp started for a task may sit idle, with its tasks idle too, before it is
        shut down to give its memory back; None: never. `on_notebook_kernel` is told
        (task id, note) when a kernel the task used that runs outside hdsp (a
        notebook's) died or went away (hdsp detached from it without restarting
        it), or was restarted where it runs. `providers` says where kernels run
        (None: always here). `private_dirs`: hdspd's own directories, which no
        kernel a client starts may work in (nor the root, nor the home itself).
        `pool_size`: how many spare kernels to keep per workspace and
        `launch_profile` (the sandbox's settings), see :mod:`.pool`."""
        self.runtime_dir = runtime_dir
        self.default_time_limit = default_time_limit
        emit = quiet_emit(emit)
        bindings = TaskBindings(task_busy=task_busy, on_culled=on_culled)
        self._kernels = KernelRegistry(bindings)
        self._starter = KernelStarter(
            kernels=self._kernels,
            bindings=bindings,
            fates=KernelFates(bindings, on_notebook_kernel),
            policy=KernelPolicy(
                interrupt_grace=interrupt_grace,
                heartbeat_interval=heartbeat_interval,
                heartbeat_misses=heartbeat_misses,
                output_interval=output_interval,
                startup_timeout=startup_timeout,
                max_queued=max_queued,
            ),
            emit=emit,
            runtime_dir=runtime_dir,
            default_kernel=default_kernel,
            private_dirs=private_dirs,
            startup_timeout=startup_timeout,
            attach_timeout=attach_timeout,
            launcher=launcher,
            providers=providers,
        )
        self.pool = KernelPool(
            size=pool_size,
            profile=launch_profile,
            kernels=self._kernels,
            start=self._starter.start_spare,
            stop=self._starter.stop,
            cull_after=cull_idle_after,
        )
        self._culler = (
            KernelCuller(
                after=cull_idle_after,
                kernels=self._kernels,
                bindings=bindings,
                stop=self._starter.stop,
            )
            if cull_idle_after is not None
            else None
        )
        #: Each task's kernel.
        self.tasks = TaskKernels(
            kernels=self._kernels,
            bindings=bindings,
            starter=self._starter,
            pool=self.pool,
        )
        #: The kernels' variables.
        self.inspector = KernelInspector(
            kernels=self._kernels,
            bindings=bindings,
            limits=inspection_limits or InspectionLimits(),
        )
        self._closed = anyio.Event()

        # The commands' face: each the method of the part that owns it.
        self.list_kernels = self._kernels.list_kernels
        self.has_kernel = self._kernels.has_kernel
        self.statistics = self._kernels.statistics
        #: Starting and attaching (see .starting).
        self.start_kernel = self._starter.start_kernel
        self.start_remote_kernel = self._starter.start_remote_kernel
        self.attach = self._starter.attach
        self.attach_kernel = self._starter.attach_kernel
        self.attach_remote_kernel = self._starter.attach_remote_kernel
        self.check_provider = self._starter.check_provider
        #: Variables (see .inspection).
        self.execute_silently = self.inspector.execute_silently
        self.list_variables = self.inspector.list_variables
        self.describe_variable = self.inspector.describe_variable
        self.list_task_variables = self.inspector.list_task_variables
        #: Each task's kernel (see .task_kernels).
        self.bind_task = self.tasks.bind_task
        self.kernel_for_task = self.tasks.kernel_for_task
        self.prewarm_for_task = self.tasks.prewarm_for_task
        self.describe_for_task = self.tasks.describe_for_task
        self.release_task = self.tasks.release_task

    # ---- lifetime -----------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own every kernel until `aclose()` (or cancellation, which releases
        them all the same, shielded)."""
        await anyio.Path(self.runtime_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
        if left := await anyio.to_thread.run_sync(remove_leftover_dirs, self.runtime_dir):
            log.info("removed what kernels of an earlier run left", entries=left)
        async with anyio.create_task_group() as tg:
            with self._starter.serving(tg):
                if self._culler is not None:
                    tg.start_soon(self._culler.run)
                await tg.start(self.pool.run)
                task_status.started()
                await self._closed.wait()
            tg.cancel_scope.cancel()

    async def aclose(self) -> None:
        """Shut down every kernel hdsp started, detach from the others, and end
        `run()`. Kernel events are published on the way."""
        await self._starter.aclose()
        self._closed.set()

    # ---- queries ------------------------------------------------------------

    def kernel_info(self, kernel_id: str) -> KernelInfo:
        return self._kernels.info(self._kernels.require(kernel_id))

    # ---- a Jupyter server's kernels, stopping ----------------------------------

    async def list_remote_kernels(self, profile: str | None = None) -> RemoteKernelList:
        """The kernels and sessions of the Jupyter server of the settings (or of
        `profile`), each kernel with hdsp's id for it when hdsp uses it."""
        target = await self._starter.gateway(profile)
        used = {
            k.remote_id: k.id
            for k in self._kernels.values()
            if k.server_url == target.shown and k.announced and not k.closing
        }
        return await list_remote_kernels(target, used)

    async def shutdown_kernel(self, kernel_id: str) -> KernelRef:
        """Shut down a kernel hdsp started; detach from one it attached to."""
        k = self._kernels.require(kernel_id)
        await self._starter.stop(k)
        return KernelRef(kernel_id=kernel_id, status=KernelState.DEAD)

    # ---- interrupt and restart --------------------------------------------------

    async def interrupt_kernel(self, kernel_id: str) -> KernelRef:
        k = self._kernels.require(kernel_id)
        await k.interrupt()
        return KernelRef(kernel_id=k.id, status=k.status)

    async def restart_kernel(self, kernel_id: str) -> KernelRef:
        """Restart a kernel hdsp started (a dead one too). Its state is lost; an
        execution running in it ends with status "restarted"."""
        k = self._kernels.require(kernel_id)
        await k.restart(now=k.status is KernelState.DEAD)
        return KernelRef(kernel_id=k.id, status=k.status)

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
        k = self._kernels.require(kernel_id)
        limit = self.default_time_limit if time_limit is None else time_limit
        return await k.execute(
            code, time_limit=limit, on_output=on_output, on_input=on_input, task_id=task_id
        )
