"""What a kernel holds: its variables, listed or one in depth (:mod:`.variables`
runs the probes; this finds the kernel, by id or as a task's, and scrubs what
comes back)."""

from __future__ import annotations

import functools

import msgspec

from hdsp.daemon.scrubber import scrubber
from hdsp.protocol import ExecutionResult, KernelState, VariableList

from .bindings import TaskBindings
from .errors import KernelNotFound
from .registry import KernelRegistry
from .variables import InspectionLimits, VariableInspection, describe_variable, list_variables

__all__ = ["KernelInspector"]

_scrubbed = msgspec.json.Decoder(VariableList)


class KernelInspector:
    def __init__(
        self, *, kernels: KernelRegistry, bindings: TaskBindings, limits: InspectionLimits
    ) -> None:
        self._kernels = kernels
        self._bindings = bindings
        self._limits = limits

    async def execute_silently(
        self, kernel_id: str, code: str, time_limit: float
    ) -> ExecutionResult:
        """Run `code` as Jupyter's silent execution, never behind other code
        (KernelBusy at once) and never interrupting anything: past `time_limit`
        the result is given up on (status "timeout"). For inspections that bound
        themselves inside the kernel."""
        return await self._kernels.require(kernel_id).execute_silently(code, time_limit=time_limit)

    async def list_variables(
        self, kernel_id: str, *, include_private: bool = False
    ) -> VariableInspection:
        """The kernel's variables (see :mod:`.variables`)."""
        self._kernels.require(kernel_id)
        run = functools.partial(self.execute_silently, kernel_id)
        return await list_variables(run, include_private=include_private, limits=self._limits)

    async def describe_variable(self, kernel_id: str, name: str) -> VariableInspection:
        """One variable of the kernel in depth (see :mod:`.variables`)."""
        self._kernels.require(kernel_id)
        run = functools.partial(self.execute_silently, kernel_id)
        return await describe_variable(run, name, limits=self._limits)

    async def list_task_variables(
        self, *, task_id: str | None, kernel_id: str | None, include_private: bool = False
    ) -> VariableList:
        """ListVariables: a kernel's variables, by id or as the kernel a task's
        code runs in. No kernel is started for a task that has none yet."""
        if kernel_id is None and task_id is not None:
            bound = self._kernels.get_live(self._bindings.kernel_of(task_id))
            if bound is None:
                return VariableList(
                    status="no_kernel", message="The task has no kernel yet: it ran no code."
                )
            kernel_id = bound.id
        if kernel_id is None:
            raise KernelNotFound("ListVariables needs a taskId or a kernelId.")
        k = self._kernels.require(kernel_id)
        if k.status is KernelState.DEAD:
            return VariableList(kernel_id=k.id, status="error", message=k.dead_message())
        found = await self.list_variables(k.id, include_private=include_private)
        if found.listing is not None:
            # The user's values may hold a key the daemon knows: scrubbed, as
            # kernel output is everywhere else.
            listing = msgspec.structs.replace(found.listing, kernel_id=k.id)
            return _scrubbed.decode(scrubber.scrub_json(msgspec.json.encode(listing)))
        status = found.status if found.status in ("busy", "timeout") else "error"
        return VariableList(kernel_id=k.id, status=status, message=found.message)
