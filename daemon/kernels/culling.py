"""The idle policy: kernels hdsp started for tasks are shut down once they and
their tasks have been idle for a while, to give their memory back (Jupyter
Server's cull_idle_timeout, ``kernels.cull_idle_seconds``). Kernels hdsp
attached to are someone else's: never culled. Each task the kernel served is
told (:meth:`~.bindings.TaskBindings.culled`), and its next code starts a new one.

The culler runs in the kernel service's task group (`tg.start_soon(culler.run)`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import anyio
import structlog

from .bindings import TaskBindings
from .kernel import Kernel

__all__ = ["KernelCuller"]

log = structlog.get_logger("hdsp.kernels")


class KernelCuller:
    """Culls the kernels of `kernels` idle `after` seconds; `stop(kernel)` shuts one down."""

    def __init__(
        self,
        *,
        after: float,
        kernels: Mapping[str, Kernel],
        bindings: TaskBindings,
        stop: Callable[[Kernel], Awaitable[None]],
    ) -> None:
        self.after = after
        self._kernels = kernels
        self._bindings = bindings
        self._stop = stop

    async def run(self) -> None:
        """Shut down the kernels hdsp started for tasks once they and their tasks
        have been idle for `after` seconds, until cancelled."""
        after = self.after
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

    async def _cull(self, k: Kernel, idle: float) -> None:
        note = (
            f"The kernel {k.name} ({k.id}) was shut down after {idle / 60:.0f} min idle, "
            "to give its memory back (kernels.cull_idle_seconds): its variables and "
            "imports are gone. The next code run starts a new kernel."
        )
        k.closing = True  # from now on no code starts in it; the tasks get a new one
        tasks = await self._bindings.culled(k.id, note)
        log.info("kernel culled", kernel_id=k.id, idle_seconds=round(idle), tasks=tasks)
        await self._stop(k)
