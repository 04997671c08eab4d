"""Fixtures of the kernel tests."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from jupyter_client.manager import AsyncKernelManager

from tests.support.daemon_process import short_tmp_dir
from tests.support.kernel_helpers import kernel_dir


@pytest.fixture
async def notebook_kernel(tmp_path: Path) -> AsyncIterator[AsyncKernelManager]:
    """A kernel started outside hdsp (as JupyterLab starts a notebook's), for the
    service to attach to; shut down after the test."""
    root = short_tmp_dir()
    km = AsyncKernelManager(
        kernel_name="python3",
        transport="ipc",
        ip=str(root / "nb"),
        connection_file=str(root / "kernel-nb.json"),
    )
    await km.start_kernel(cwd=str(kernel_dir(tmp_path)))
    try:
        yield km
    finally:
        await km.shutdown_kernel(now=True)
        shutil.rmtree(root, ignore_errors=True)
