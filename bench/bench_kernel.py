"""Execution overhead: `execute("1+1")` through hdsp's KernelService against
jupyter_client's AsyncKernelClient directly, on the same ipykernel.

One kernel serves both (the service attaches to it through its connection file),
so the kernel's own cost is the same on each side and the difference is what
hdsp adds: routing, the execution's task group, coalesced output, status events.
Both wait for the same thing: the execute_reply and the kernel's idle status.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager

from hdsp.daemon.kernels import KernelService
from hdsp.protocol import Event

from .harness import Figure, Result, percentile

__all__ = ["run"]

CODE = "1+1"


async def _direct(kc: AsyncKernelClient, n: int) -> list[float]:
    """jupyter_client alone: send, then read shell and iopub until both are done."""
    samples: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        msg_id = kc.execute(CODE)
        replied = idle = False
        while not replied:
            reply: dict[str, Any] = await kc.get_shell_msg()
            replied = reply["parent_header"].get("msg_id") == msg_id
        while not idle:
            msg: dict[str, Any] = await kc.get_iopub_msg()
            idle = (
                msg["parent_header"].get("msg_id") == msg_id
                and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"
            )
        samples.append(time.perf_counter() - t0)
    return samples


async def _hdsp(service: KernelService, kernel_id: str, n: int) -> list[float]:
    samples: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        await service.execute(kernel_id, CODE)
        samples.append(time.perf_counter() - t0)
    return samples


async def measure(n: int, warm: int) -> tuple[list[float], list[float]]:
    """(hdsp, direct) seconds per execution, alternating in rounds."""
    root = Path(tempfile.mkdtemp(prefix="hdsp-bk", dir="/tmp"))
    km = AsyncKernelManager(
        kernel_name="python3",
        transport="ipc",
        ip=str(root / "k"),
        connection_file=str(root / "kernel.json"),
    )
    await km.start_kernel(cwd=str(root))
    kc = km.client()
    kc.start_channels(hb=False)
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    service = KernelService(emit, runtime_dir=root / "svc")
    hdsp: list[float] = []
    direct: list[float] = []
    try:
        await kc.wait_for_ready(timeout=60)
        async with anyio.create_task_group() as tg:
            await tg.start(service.run)
            info = await service.attach_kernel(km.connection_file)
            # The service sees the direct client's iopub traffic too, and the direct
            # client the service's: drain it so neither reads the other's messages.
            await _hdsp(service, info.kernel_id, warm)
            await _direct(kc, warm)
            for _ in range(5):
                await _flush_iopub(kc)
                hdsp += await _hdsp(service, info.kernel_id, n // 5)
                await _flush_iopub(kc)
                direct += await _direct(kc, n // 5)
                events.clear()
            await service.aclose()
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
        shutil.rmtree(root, ignore_errors=True)
    return hdsp, direct


async def _flush_iopub(kc: AsyncKernelClient) -> None:
    """Drop iopub messages the direct client got for the service's executions."""
    while await kc.iopub_channel.msg_ready():
        await kc.get_iopub_msg()


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> Result:
    n = 50 if quick else 200
    hdsp, direct = await measure(n, warm=10 if quick else 30)
    us = [s * 1e6 for s in hdsp]
    base = [s * 1e6 for s in direct]
    result = Result(
        name="kernel execute",
        description="execute('1+1') via KernelService vs jupyter_client directly (same ipykernel)",
        hdsp={"execute": Figure.of(us, "µs", p99=True)},
        baseline={"jupyter_client": Figure.of(base, "µs", p99=True)},
    )
    result.ratios["p50"] = (percentile(us, 50) / percentile(base, 50), 1.25, "<=")
    result.ratios["p99"] = (percentile(us, 99) / percentile(base, 99), 1.5, "<=")
    return result


if __name__ == "__main__":
    r = anyio.run(partial(run, Path("."), Path("."), quick=False), backend="asyncio")
    for key, fig in {**r.hdsp, **r.baseline}.items():
        print(f"{key}: p50 {fig.median:.0f} µs, p99 {fig.p99:.0f} µs (min {fig.min:.0f})")
    print({k: round(v[0], 3) for k, v in r.ratios.items()})
