"""The `Client`'s typed requests about kernels: :class:`KernelRequests`."""

from __future__ import annotations

import os
from typing import Literal

from hdsp.protocol import (
    AttachKernel,
    ExecuteCode,
    ExecutionResult,
    InterruptKernel,
    KernelInfo,
    KernelList,
    KernelRef,
    ListKernels,
    ListRemoteKernels,
    ListVariables,
    RemoteKernelList,
    RestartKernel,
    ShutdownKernel,
    StartKernel,
    VariableList,
)

from .client_requests import Requests

__all__ = ["KernelRequests"]


class KernelRequests(Requests):
    """Start, attach, interrupt, restart and stop kernels; run code in one and
    read its variables."""

    async def list_kernels(self) -> KernelList:
        return await self.request(ListKernels())

    async def start_kernel(
        self,
        kernel_name: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        *,
        provider: Literal["local", "gateway"] | None = None,
        profile: str | None = None,
    ) -> KernelInfo:
        """Start a kernel (by kernelspec name, "python3" by default) in the
        directory `cwd` (by default the caller's working directory; a relative
        path is taken from it too, symlinks resolved), or on the Jupyter server
        of the settings (`provider` "gateway"; a `profile`'s kernels settings
        when named). The daemon refuses `/`, the home directory itself and its
        own directories as a kernel's directory, as it does for a workspace.
        For a remote daemon `cwd` is a directory on its host, absolute."""
        return await self.request(
            StartKernel(
                kernel_name=kernel_name,
                cwd=self._kernel_directory(cwd),
                provider=provider,
                profile=profile,
            )
        )

    def _kernel_directory(self, cwd: str | os.PathLike[str] | None) -> str | None:
        """A kernel's directory as `_workspace` makes a workspace, symlinks resolved
        for the local daemon; a remote daemon given none is sent none (a kernel on
        its Jupyter server needs none, and it refuses a local one without)."""
        if self.remote is not None:
            return None if cwd is None else self._workspace(cwd)
        return os.path.realpath(self._workspace(cwd))

    async def attach_kernel(
        self,
        connection_file: str | os.PathLike[str] | None = None,
        *,
        remote_kernel_id: str | None = None,
        profile: str | None = None,
    ) -> KernelInfo:
        """Use a kernel that runs already: by its connection file (absolute
        path), or by its id on the Jupyter server of the settings (or of
        `profile`; `list_remote_kernels` lists them)."""
        path = None if connection_file is None else os.fspath(connection_file)
        return await self.request(
            AttachKernel(connection_file=path, remote_kernel_id=remote_kernel_id, profile=profile)
        )

    async def list_remote_kernels(self, profile: str | None = None) -> RemoteKernelList:
        """The kernels and sessions of the Jupyter server of the settings (or of
        `profile`)."""
        return await self.request(ListRemoteKernels(profile=profile))

    async def interrupt_kernel(self, kernel_id: str) -> KernelRef:
        return await self.request(InterruptKernel(kernel_id=kernel_id))

    async def restart_kernel(self, kernel_id: str) -> KernelRef:
        return await self.request(RestartKernel(kernel_id=kernel_id))

    async def shutdown_kernel(self, kernel_id: str) -> KernelRef:
        return await self.request(ShutdownKernel(kernel_id=kernel_id))

    async def execute_code(
        self, kernel_id: str, code: str, *, timeout: float | None = None
    ) -> ExecutionResult:
        """Run `code` in a kernel and return its outputs once it is done; past
        `timeout` seconds (the daemon's default when None) the kernel is
        interrupted. The command's own reply waits as long (`request`'s timeout)."""
        return await self.request(ExecuteCode(kernel_id=kernel_id, code=code, timeout=timeout))

    async def list_variables(
        self,
        task_id: str | None = None,
        *,
        kernel_id: str | None = None,
        include_private: bool = False,
    ) -> VariableList:
        """The variables of a task's kernel (or of a kernel by id), read with a
        silent inspection; `status` says when the kernel was busy or has none."""
        return await self.request(
            ListVariables(task_id=task_id, kernel_id=kernel_id, include_private=include_private)
        )
