"""Each task's kernel: the one it is bound to (:mod:`.bindings`), restarted if
it died, a spare (:mod:`.pool`) or a new one on its first code, and released
with the task. What the task is told of it (it died, was restarted, was culled
or replaced since its last code) comes with it, as notes for the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anyio
import structlog

from hdsp.protocol import KernelState

from .bindings import TaskBindings
from .errors import KernelDead, KernelError
from .gateway import shown_url
from .kernel import Kernel
from .pool import KernelPool
from .registry import KernelRegistry
from .starting import KernelStarter

__all__ = ["TaskKernel", "TaskKernels"]

log = structlog.get_logger("hdsp.kernels")

#: What the model is told of a kernel on a Jupyter server.
_REMOTE_NOTE = (
    "It runs on that server, not on this machine: it does not see the workspace's files "
    "(the file tools do), and files it writes stay on the server."
)


@dataclass(frozen=True)
class TaskKernel:
    """The kernel a task's code runs in, and what the task should be told about
    it (it died, was restarted or replaced since the task last ran code)."""

    kernel_id: str
    name: str
    cwd: str | None
    notes: list[str]


@dataclass(frozen=True)
class TaskKernels:
    """Finds each task its kernel among `kernels`, started (or taken from `pool`)
    by `starter`, as `bindings` say."""

    kernels: KernelRegistry
    bindings: TaskBindings
    starter: KernelStarter
    pool: KernelPool

    def bind_task(self, task_id: str, kernel_id: str) -> None:
        """Make `task_id`'s code run in `kernel_id` from now on. A kernel hdsp
        started for the task that nothing uses any more (a prompt from a notebook
        moved the task to the notebook's kernel) is shut down."""
        previous = self.bindings.bind(task_id, self.kernels.require(kernel_id).id)
        old = self.kernels.get(previous) if previous not in (None, kernel_id) else None
        if (
            old is not None
            and old.owned
            and old.started_for == task_id
            and not old.closing
            and old.current is None
            and old.waiting == 0
            and not self.bindings.tasks_of(old.id)
        ):
            log.info("kernel released: its task moved", kernel_id=old.id, task_id=task_id)
            old.stop_requested.set()  # its owner shuts it down

    async def kernel_for_task(self, task_id: str, workspace: Path | str) -> TaskKernel:
        """The task's kernel: its bound one, restarted if it died, or a new one
        started in the task's workspace on first use."""
        notes = self.bindings.take_notes(task_id)
        kernel_id = self.bindings.kernel_of(task_id)
        k = self.kernels.get_live(kernel_id)
        if kernel_id is not None and k is None and not notes:
            notes.append(
                f"The kernel this task used ({kernel_id}) was shut down; a new one was "
                "started, so earlier variables and imports are gone."
            )
        if k is None:
            k = await self._take_spare(task_id, workspace)
        if k is None:
            info = await self.starter.start_kernel(cwd=str(workspace), for_task=task_id)
            k = self.kernels[info.kernel_id]
        elif k.status is KernelState.DEAD:
            if not k.owned:
                raise KernelDead(k.dead_message())
            reason = k.death_reason or "unknown cause"
            await k.restart(now=True)
            self.bindings.drop_notes(task_id)
            notes.append(
                f"The kernel had died ({reason}) and was restarted before this code ran: "
                "earlier variables and imports are gone."
            )
        return TaskKernel(kernel_id=k.id, name=k.name, cwd=k.cwd, notes=notes)

    async def release_task(self, task_id: str) -> None:
        """Forget the task's binding; shut down the kernel started for it when no
        other task uses it."""
        self.bindings.drop_notes(task_id)
        kernel_id = self.bindings.unbind(task_id)
        k = self.kernels.get(kernel_id) if kernel_id is not None else None
        if k is None:
            return
        if k.owned and k.started_for == task_id and not self.bindings.tasks_of(k.id):
            if not k.closing:  # (culled meanwhile: stopping already)
                await self.starter.stop(k)

    # ---- spare kernels (see .pool) ---------------------------------------------

    def prewarm_for_task(self, task_id: str, workspace: Path | str) -> None:
        """The task started: have its kernel start now (a spare), so that it is
        ready by its first code. Nothing for a task whose kernels run elsewhere."""
        launcher = self.starter.launcher
        refused = launcher is not None and launcher.kernel_refusal() is not None
        if self._runs_here(task_id) and not refused:
            self.pool.warm(self.starter.default_kernel, str(workspace))

    def _runs_here(self, task_id: str) -> bool:
        providers = self.starter.providers
        try:
            return providers is None or providers.for_task(task_id) is None
        except KernelError:
            return False

    async def _take_spare(self, task_id: str, workspace: Path | str) -> Kernel | None:
        if self.starter.closing or not self._runs_here(task_id):
            return None
        k = await self.pool.take(
            self.starter.default_kernel, str(workspace), wait=self.starter.startup_timeout
        )
        if k is None:
            return None
        k.started_for = task_id
        k.last_active = anyio.current_time()
        self.bindings.bind(task_id, k.id)
        await self.starter.announce(k)
        return k

    # ---- the system prompt ------------------------------------------------------

    def describe_for_task(self, task_id: str, workspace: Path | str) -> str:
        """One line for the system prompt: which kernel the task's code runs in."""
        k = self.kernels.get(self.bindings.kernel_of(task_id) or "")
        if k is None or k.closing:
            providers = self.starter.providers
            try:
                server = providers.for_task(task_id) if providers else None
            except KernelError:
                server = None
            if server is not None:
                name = server.kernel_name or "the server's default kernel"
                return (
                    f"{name} on the Jupyter server {shown_url(server.url)}, started on first use "
                    f"of execute_code. {_REMOTE_NOTE}"
                )
            return (
                f"{self.starter.default_kernel}, started on first use of execute_code, "
                f"working directory {workspace}"
            )
        if k.remote:
            origin = "started by hdsp" if k.owned else "attached (it runs outside hdsp)"
            return (
                f"{k.name} (id {k.id}, {origin}) on the Jupyter server {k.server_url}, status "
                f"{k.status.value}. {_REMOTE_NOTE}"
            )
        origin = "started by hdsp" if k.owned else "attached (it runs outside hdsp)"
        where = f"working directory {k.cwd}" if k.cwd else "working directory unknown"
        return f"{k.name} (id {k.id}, {origin}), {where}, status {k.status.value}"
