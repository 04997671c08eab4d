"""The working directory of a kernel hdsp starts on this machine.

A task's kernel works in the task's workspace, which the task manager checked
when the task began. A kernel a client starts (`hdsp kernels start`, MCP's
`start_kernel`, a raw `StartKernel`) follows the same rule as a workspace
(:mod:`hdsp.daemon.workspace_rules`, the one copy of it): its directory must be
named, absolute, a directory, and neither the root, the daemon's user's home
itself nor inside hdspd's own directories; symlinks are resolved before the
check and the resolved path is the one used. A missing directory is refused,
never replaced by the daemon's own working directory (under systemd: $HOME).
The sandbox then binds that directory as it binds a task's workspace, so such a
kernel sees what a task's kernel sees, no more.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import anyio

from hdsp.daemon.workspace_rules import broad_directory

from .errors import KernelStartFailed

__all__ = ["kernel_workdir"]


async def kernel_workdir(given: str | None, private_dirs: Sequence[Path], *, for_task: bool) -> str:
    """The directory a local kernel starts in, from the one it was given (a
    task's workspace when `for_task`, else a client's choice, checked here).

    Raises:
        KernelStartFailed: none given, a relative path, not a directory, or
            (for a client's kernel) too broad a directory.
    """
    if not given:
        raise KernelStartFailed(
            "No kernel was started: give the kernel's directory (StartKernel's cwd, an "
            "absolute path; `hdsp kernels start` sends the directory it runs in)."
        )
    if not os.path.isabs(given):
        raise KernelStartFailed(
            f"No kernel was started: its directory must be an absolute path, not {given!r} "
            "(a client resolves a relative one where it runs)."
        )
    workdir = given if for_task else await anyio.to_thread.run_sync(os.path.realpath, given)
    if not await anyio.Path(workdir).is_dir():
        raise KernelStartFailed(f"The working directory {workdir} is not a directory.")
    if for_task:
        return workdir
    problem = await anyio.to_thread.run_sync(broad_directory, workdir, private_dirs)
    if problem is not None:
        raise KernelStartFailed(
            f"Refusing {workdir} as the kernel's directory: it is {problem}, and code in the "
            "kernel could read and write all of it. Start it in a project's directory "
            "(hdsp kernels start --cwd DIR)."
        )
    return workdir
