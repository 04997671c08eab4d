"""The process of a kernel hdsp starts: jupyter_client's KernelManager half.

jupyter_client splits a kernel into its process (a KernelManager) and its
connection (a KernelClient, here :mod:`.connection`). A `KernelProcess` is the
process half for a kernel hdsp starts, over ipc sockets in a directory of its
own inside the daemon's runtime directory (0700, holding only its connection
file and sockets, removed at shutdown), so that a sandbox can show a kernel its
own sockets and no other kernel's. It is launched through the `launcher` the
daemon hands in (its sandbox, see :mod:`.launcher`), which wraps the kernel's
command and gives its environment; with none, the kernel runs unconfined with
the daemon's environment minus hdsp's own variables (tests of the service
alone). A kernel hdsp attaches to has no process here: it is someone else's. A
kernel hdsp starts on a Jupyter server has a process half made of REST calls
(:class:`~.gateway.RemoteKernelProcess`); both are a :class:`KernelHandle`,
what a kernel needs of its process.

jupyter_client is imported when the first kernel starts: it is not needed before.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any, Protocol

import structlog

from .errors import KernelStartFailed
from .launcher import KernelLauncher

__all__ = ["KernelHandle", "KernelProcess", "kernel_environment", "remove_leftover_dirs"]

log = structlog.get_logger("hdsp.kernels")

#: Seconds the kernel gets to exit politely before it is terminated, then killed.
_SHUTDOWN_WAIT = 3.0
#: Unix socket paths must stay within the OS limit (107 bytes on Linux); a
#: kernel's are `<runtime_dir>/<8 hex>/s-<1..5>`.
_MAX_IPC_PATH = 107
#: Environment variables a kernel never inherits from the daemon: the daemon's
#: settings and secrets (HDSP_API_KEY) and its systemd notification socket.
_PRIVATE_ENV = ("HDSP_", "NOTIFY_SOCKET")


class KernelHandle(Protocol):
    """What a kernel hdsp started needs of its process, wherever it runs."""

    #: Interrupt with an `interrupt_request` message, not `signal_interrupt`.
    interrupts_by_message: bool

    async def is_alive(self) -> bool: ...

    async def signal_interrupt(self) -> None: ...

    async def restart(self, *, now: bool) -> None: ...

    async def shutdown(self) -> None:
        """Stop it for good; errors are logged, never raised."""
        ...


def kernel_environment() -> dict[str, str]:
    """The environment of an unconfined kernel: the daemon's, less hdsp's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_PRIVATE_ENV)}
    # debugpy's warning about frozen modules is noise on every kernel's stderr.
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return env


def remove_leftover_dirs(folder: Path) -> int:
    """Remove what kernels of an earlier run of hdspd left in `folder` (the
    folder of every kernel's own directory): a kill -9 of the daemon leaves
    their directories behind, and their kernels died with it (the sandbox's
    --die-with-parent). Only one hdspd runs on a runtime dir (its lock), so at
    its start nothing there is anyone's. Returns how many it removed; blocking."""
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return 0
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
        removed += 1
    return removed


class KernelProcess:
    """One kernel process hdsp starts (by kernelspec name, in `workdir`), from
    its launch to its shutdown."""

    def __init__(
        self,
        *,
        kernel_id: str,
        kernel_name: str,
        workdir: str,
        runtime_dir: Path,
        launcher: KernelLauncher | None,
    ) -> None:
        from jupyter_client.manager import AsyncKernelManager

        from .manager import LaunchingKernelManager, UnboundedIopubKernelManager

        self.kernel_id = kernel_id
        self.kernel_name = kernel_name
        self.workdir = workdir
        short = kernel_id[:8]
        #: The kernel's own directory: its connection file and sockets, nothing else.
        self.sockets = sockets = runtime_dir / short
        self._made_sockets = False
        longest = len(str(sockets / "s-5"))
        if longest > _MAX_IPC_PATH:
            raise KernelStartFailed(
                f"The kernels' directory {runtime_dir} is too long for a Unix socket path "
                f"({longest} > {_MAX_IPC_PATH} bytes); choose a shorter runtime dir."
            )
        options: dict[str, Any] = {
            "kernel_name": kernel_name,
            "transport": "ipc",
            "ip": str(sockets / "s"),
            "connection_file": str(sockets / f"kernel-{short}.json"),
        }
        km: AsyncKernelManager
        if launcher is not None:
            km = LaunchingKernelManager(
                launcher=launcher, workdir=Path(workdir), sockets=sockets, **options
            )
            self._env = launcher.kernel_environment()
            self._env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        else:
            km = UnboundedIopubKernelManager(**options)
            self._env = kernel_environment()
        km.shutdown_wait_time = _SHUTDOWN_WAIT
        self._km = km
        self.connection_file: str = km.connection_file
        #: Interrupt with an interrupt_request message rather than a signal: a
        #: SIGINT would reach the sandbox's launcher, not the kernel.
        self.interrupts_by_message = launcher is not None and launcher.interrupts_by_message

    async def start(self) -> None:
        from jupyter_client.kernelspec import NoSuchKernel

        name = self.kernel_name
        try:
            # A fresh one, the kernel's own (a leftover of a crash is not reused).
            os.mkdir(self.sockets, 0o700)
            self._made_sockets = True
        except OSError as exc:
            raise KernelStartFailed(f"The kernel {name!r} did not start: {exc}") from None
        try:
            await self._km.start_kernel(cwd=self.workdir, env=self._env)
        except NoSuchKernel:
            raise KernelStartFailed(
                f"No kernelspec named {name!r}; `jupyter kernelspec list` shows them."
            ) from None
        except Exception as exc:
            raise KernelStartFailed(f"The kernel {name!r} did not start: {exc}") from exc

    def client(self) -> Any:
        """A jupyter_client AsyncKernelClient for the kernel's sockets."""
        return self._km.client()

    async def is_alive(self) -> bool:
        alive: bool = await self._km.is_alive()
        return alive

    async def signal_interrupt(self) -> None:
        """Interrupt the kernel the way its kernelspec says (SIGINT for ipykernel)."""
        await self._km.interrupt_kernel()

    async def restart(self, *, now: bool) -> None:
        """Restart the process (`now`: kill it rather than ask it to stop); it binds
        the same sockets anew. jupyter_client's errors pass through."""
        await self._km.restart_kernel(now=now)

    async def shutdown(self) -> None:
        """Ask the kernel to stop, then kill it if it does not; remove its own
        directory. Errors are logged: a kernel going away must not stop the rest."""
        if self._km.has_kernel:
            try:
                await self._km.shutdown_kernel(now=False)
            except Exception:
                log.exception("kernel shutdown failed; killing it", kernel_id=self.kernel_id)
                try:
                    await self._km.shutdown_kernel(now=True)
                except Exception:
                    log.exception("killing the kernel failed", kernel_id=self.kernel_id)
        if self._made_sockets:
            shutil.rmtree(self.sockets, ignore_errors=True)
            self._made_sockets = False
