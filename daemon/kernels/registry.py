"""The kernels the service holds, by id (jupyter_client's MultiKernelManager's
dict), and what a client is shown of each.

A kernel is in the registry from its start until its owner released it; a
command reaches it only once it is announced and while it is not closing (a
spare is in the registry, hidden). The registry only keeps and shows: starting
and stopping are :mod:`.starting`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import anyio

from hdsp.protocol import Event, KernelInfo

from .bindings import TaskBindings
from .errors import KernelNotFound
from .execution import Emit
from .kernel import Kernel

__all__ = ["KernelRegistry", "quiet_emit"]


def quiet_emit(emit: Emit) -> Emit:
    """`emit`, silent once the journal closed (the daemon is going down)."""

    async def quiet(event: Event) -> None:
        try:
            await emit(event)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            # The journal closed first (the daemon is going down): nobody listens.
            pass

    return quiet


class KernelRegistry(Mapping[str, Kernel]):
    """Every kernel by id, spares and closing ones too (a Mapping, as the pool
    reads it); `get` gives only the ones a command may reach."""

    def __init__(self, bindings: TaskBindings) -> None:
        self._bindings = bindings
        self._kernels: dict[str, Kernel] = {}

    def __getitem__(self, kernel_id: str) -> Kernel:
        return self._kernels[kernel_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._kernels)

    def __len__(self) -> int:
        return len(self._kernels)

    def add(self, k: Kernel) -> None:
        self._kernels[k.id] = k

    def remove(self, kernel_id: str) -> None:
        self._kernels.pop(kernel_id, None)

    # ---- what commands reach ------------------------------------------------------

    def get_live(self, kernel_id: str | None) -> Kernel | None:
        """The kernel `kernel_id` if a command may reach it (announced, not closing)."""
        k = self._kernels.get(kernel_id) if kernel_id is not None else None
        if k is None or k.closing or not k.announced:
            return None
        return k

    def require(self, kernel_id: str) -> Kernel:
        k = self.get_live(kernel_id)
        if k is None:
            raise KernelNotFound(f"No kernel {kernel_id!r}; ListKernels lists the kernels.")
        return k

    def find(self, matches: Callable[[Kernel], bool]) -> Kernel | None:
        """A live kernel that `matches` (one attached already, say)."""
        return next(
            (k for k in self._kernels.values() if not k.closing and k.announced and matches(k)),
            None,
        )

    # ---- what clients are shown ---------------------------------------------------

    def info(self, k: Kernel) -> KernelInfo:
        return KernelInfo(
            kernel_id=k.id,
            kernel_name=k.name,
            status=k.status,
            owned=k.owned,
            cwd=k.cwd,
            connection_file=k.connection_file,
            task_ids=sorted(self._bindings.tasks_of(k.id)),
            provider="gateway" if k.remote else "local",
            server_url=k.server_url,
            remote_id=k.remote_id,
        )

    def list_kernels(self) -> list[KernelInfo]:
        return [self.info(k) for k in self._kernels.values() if k.announced]

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
