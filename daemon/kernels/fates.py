"""What befalls a kernel outside hdsp's doing, and what its tasks are told.

A kernel hdsp attached to (a notebook's) that died or went away is detached
from, never restarted; one restarted where it runs stays attached. A kernel
hdsp started on a Jupyter server that the server culled or shut down is
reported as a culled kernel; one the server restarted, as a restart. Each task
bound to the kernel gets a note for its next code (:mod:`.bindings`), and for a
notebook's kernel `on_notebook_kernel` records it in the task's history.

A :class:`~.kernel.Kernel` is handed these as its callbacks when it is made
(:mod:`.starting`).
"""

from __future__ import annotations

import structlog

from .bindings import OnCulled, TaskBindings
from .kernel import Kernel

__all__ = ["KernelFates"]

log = structlog.get_logger("hdsp.kernels")


class KernelFates:
    def __init__(self, bindings: TaskBindings, on_notebook_kernel: OnCulled | None = None):
        self._bindings = bindings
        self._on_notebook_kernel = on_notebook_kernel

    def restarted(self, k: Kernel, running_task: str | None) -> None:
        note = "The kernel was restarted; its variables are gone."
        self._bindings.note(k.id, note, except_task=running_task)

    async def attached_died(self, k: Kernel) -> None:
        """A kernel hdsp attached to (a notebook's) died or its connection went
        away (Lab shut it down, restarted it, or its server stopped). It is not
        hdsp's to restart: hdsp detaches from it, and each task bound to it is
        told (a note for the model, a `notebook_kernel` message in its history)
        that its next code runs in a kernel of its own. A prompt from the
        notebook attaches its kernel again."""
        note = (
            f"The notebook's kernel {k.name} ({k.id}), which runs outside hdsp, "
            f"{k.death_reason or 'stopped answering'} (it was shut down or restarted where "
            "it runs, e.g. in JupyterLab). hdsp detached from it and did not restart it. "
            "Its variables are out of reach: the task's next code runs in a new kernel of "
            "the task's own, in the workspace, until a message from the notebook attaches "
            "its kernel again."
        )
        log.warning("attached kernel lost", kernel_id=k.id, reason=k.death_reason)
        await self._tell_tasks(k, note, replace_notes=True)
        k.closing = True  # no code starts in it any more
        k.stop_requested.set()  # detach (never a shutdown: it has no process of hdsp's)

    async def remote_gone(self, k: Kernel) -> None:
        """The Jupyter server no longer has a kernel hdsp started there (it culled
        it for idling, or someone shut it down there): its tasks are told, as of
        a kernel hdsp culled, and the next code run starts a new one."""
        note = (
            f"The kernel {k.name} ({k.id}) on the Jupyter server {k.server_url} was shut down "
            "there (the server culls idle kernels, or someone shut it down): its variables "
            "and imports are gone. The next code run starts a new kernel."
        )
        k.closing = True  # no code starts in it any more; the tasks get a new one
        tasks = await self._bindings.culled(k.id, note)
        log.warning("remote kernel gone", kernel_id=k.id, server=k.server_url, tasks=tasks)
        k.stop_requested.set()  # its owner releases it (nothing left to shut down)

    async def remote_restarted(self, k: Kernel) -> None:
        """A kernel hdsp started on a Jupyter server came back as a new process
        that hdsp did not restart (it died there and the server restarted it):
        its tasks are told that their variables are gone."""
        note = (
            f"The kernel {k.name} ({k.id}) on the Jupyter server {k.server_url} died there "
            "and the server restarted it: its variables and imports are gone."
        )
        log.warning("remote kernel restarted by its server", kernel_id=k.id)
        self._bindings.note(k.id, note)

    async def attached_restarted(self, k: Kernel) -> None:
        """A kernel hdsp attached to was restarted where it runs (JupyterLab's
        Restart): hdsp stays attached (same connection file), and its tasks are
        told that the variables are gone."""
        note = (
            f"The notebook's kernel {k.name} ({k.id}), which runs outside hdsp, was restarted "
            "where it runs (e.g. in JupyterLab): its variables and imports are gone. The "
            "task's code still runs in it."
        )
        log.warning("attached kernel restarted elsewhere", kernel_id=k.id)
        await self._tell_tasks(k, note, replace_notes=False)

    async def _tell_tasks(self, k: Kernel, note: str, *, replace_notes: bool) -> None:
        """Note `note` for the model of each task bound to `k` (for its next code)
        and have `on_notebook_kernel` record it in the task's history."""
        tasks = sorted(self._bindings.tasks_of(k.id))
        if replace_notes:
            for task_id in tasks:
                self._bindings.drop_notes(task_id)
        self._bindings.note(k.id, note)
        if self._on_notebook_kernel is not None:
            for task_id in tasks:
                try:
                    await self._on_notebook_kernel(task_id, note)
                except Exception:
                    log.exception("recording what befell a kernel failed", task_id=task_id)
