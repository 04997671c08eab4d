"""jupyter_client's kernel manager with the kernel command hdsp builds: an
ipykernel whose output queue drops nothing (see :mod:`.kernel_command`), wrapped
by a launcher (see :mod:`.launcher`). Imported when the first kernel starts:
jupyter_client is not needed before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager

from .kernel_command import with_unbounded_iopub
from .launcher import KernelLauncher

__all__ = ["LaunchingKernelManager", "UnboundedIopubKernelManager"]


class UnboundedIopubKernelManager(AsyncKernelManager):
    """An AsyncKernelManager whose ipykernel queues all its output."""

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        return with_unbounded_iopub(super().format_kernel_cmd(extra_arguments))


class LaunchingKernelManager(UnboundedIopubKernelManager):
    """An AsyncKernelManager whose kernel command goes through a launcher."""

    def __init__(
        self, *, launcher: KernelLauncher, workdir: Path, sockets: Path, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.hdsp_launcher = launcher
        self.hdsp_workdir = workdir
        self.hdsp_sockets = sockets

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        argv: list[str] = super().format_kernel_cmd(extra_arguments)
        return self.hdsp_launcher.kernel_command(
            argv, cwd=self.hdsp_workdir, sockets=self.hdsp_sockets
        )
