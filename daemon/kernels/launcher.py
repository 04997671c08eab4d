"""How a kernel hdsp starts is launched: the seam the daemon's sandbox plugs into.

The kernel service does not know the sandbox (they are the same layer); the daemon
hands it a :class:`KernelLauncher`, and the service starts kernels through
:class:`~.manager.LaunchingKernelManager`, jupyter_client's manager with its one place that
builds the kernel's command line (`format_kernel_cmd`, which the local
provisioner calls at every start and restart) wrapped by the launcher. The
environment is the launcher's too, so the kernel inherits nothing it did not choose.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

__all__ = ["KernelLauncher"]


class KernelLauncher(Protocol):
    def kernel_refusal(self) -> str | None:
        """Why no kernel may start now (what to install or set), or None."""
        ...

    def kernel_command(self, argv: Sequence[str], *, cwd: Path, sockets: Path) -> list[str]:
        """`argv` wrapped to run in `cwd`, able to write its sockets in `sockets`:
        the kernel's own directory, holding only its connection file and sockets,
        inside the folder of every kernel's directories (which it must not see)."""
        ...

    def kernel_environment(self) -> dict[str, str]:
        """The kernel's whole environment."""
        ...

    @property
    def interrupts_by_message(self) -> bool:
        """Whether the kernel must be interrupted with an `interrupt_request`
        (a signal to the launched process would not reach it whole)."""
        ...
