"""nbclient running a notebook: the reference the notebook tools' outputs are
compared with (in a kernel of its own, on `ipc://` under a short directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

__all__ = ["run_with_nbclient"]


async def run_with_nbclient(
    nb: Any, folder: Path, root: Path, *, name: str = "nbclient", cell_limit: float | None = None
) -> None:
    """Run `nb` in place with nbclient, in `folder`, its kernel's sockets named
    `name` under `root`; `cell_limit`: seconds a cell may run (None: no limit)."""
    km = AsyncKernelManager(
        kernel_name="python3",
        transport="ipc",
        ip=str(root / name),
        connection_file=str(root / f"kernel-{name}.json"),
    )
    client = NotebookClient(
        nb,
        km=km,
        timeout=None if cell_limit is None else int(cell_limit),
        interrupt_on_timeout=True,
        allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
    )
    try:
        await client.async_execute()
    finally:
        # nbclient leaves a kernel manager it was given (and its client) to its caller.
        if client.kc is not None:
            client.kc.stop_channels()
        await km.shutdown_kernel(now=True)
