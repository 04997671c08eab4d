"""Kernel execution: `execute("1+1")` from a client through hdsp to its outputs and
the kernel's idle state, against a client talking to the same kind of kernel
directly.

hdsp: `ExecuteCode` through `hdsp.client` to the running hdspd, which started the
kernel (`StartKernel`, ipc transport) and answers once the kernel has replied
and gone idle, with the outputs. Timed from the request to its decoded result.

Fair baseline (`kernel execute, lean client`): a lean direct client on an
ipykernel started the same way: `execute` on jupyter_client's session, then the
shell and iopub sockets read directly (`recv_multipart`, `feed_identities`,
`deserialize`), as hdspd reads them, until the reply and the idle status of the
request have come. Timed from the send to the idle status.

Old baseline (`kernel execute`): jupyter_client's `get_shell_msg` and
`get_iopub_msg`, slower than reading the sockets: it flatters hdsp.

Same-kernel baseline (`kernel execute, lean client on hdspd's kernel`): the
lean client, connected with the connection file hdspd reports (`KernelInfo`)
to the very kernel hdspd started and executes on: the same process, sandbox,
history database and sockets. The only difference left between the two sides
is hdspd itself (its command path, and reading the kernel's replies). Why it
is needed: against a kernel of its own, the lean client was at times slower
than the whole hdsp path (ratios 0.81-0.99), which hdsp's path, the lean
client's reads plus the daemon's work, cannot honestly be. The two kernels
are not alike: hdspd's runs through its sandbox launcher and the
unbounded-iopub start-up of `kernel_command`, in another working directory,
and starts its own way; the baseline's is `ipykernel_launcher` as
jupyter_client starts it. Busy time inside two kernel processes, each with
its own CPU caches and its own place in the scheduler of a loaded 2-core
machine, differed by more than hdspd's share. On one kernel, that difference
is gone.

The kernels run side by side, and the sides alternate execution by execution,
so that the machine's load falls on both alike (rounds of many executions let
a burst of load land on one side: ratios of 0.4-0.75 came from that).

Like-for-like kernels: IPython writes every execution to a history database,
one SQLite commit each. hdspd's kernel runs in the sandbox, where ~/.ipython is
not writable, so IPython keeps its history in a fresh database under the
sandbox's /tmp, which is a tmpfs: its commits never wait for a disk. The
baseline's kernel used to write to ~/.ipython/profile_default/history.sqlite,
shared by every kernel on the machine (every test run's), whose writes hold the
lock the next execution needs; then to a fresh IPYTHONDIR under the real /tmp,
on disk, where each commit's fsync took 5-10 ms on this loaded machine: the
lean client on a kernel of its own measured 8.7-17 ms against 3.9-5.4 ms for the
same client on hdspd's kernel, or on a kernel whose history is in memory. That
was the whole of the ratios below 1. So the baseline's kernel gets a fresh
IPYTHONDIR on a tmpfs too (/dev/shm; the real /tmp where there is none).

Like-for-like processes: hdspd moves the objects of its start-up out of the
cyclic garbage collector's sight (`gc.freeze`); the lean client, in this
process with every benchmark's imports, would otherwise pay for full
collections over them. So this process freezes them too while it measures.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager

from hdsp.client import Client, connect
from hdsp.protocol import ExecuteCode, ExecutionResult, KernelInfo, ShutdownKernel, StartKernel

from .harness import Result, latency_result

__all__ = ["run"]

CODE = "1+1"
#: Starting a kernel can take seconds on a busy machine.
_START = 120.0


async def _executions(
    kc: AsyncKernelClient,
    n: int,
    read_shell: Callable[[], Awaitable[dict[str, Any]]],
    read_iopub: Callable[[], Awaitable[dict[str, Any]]],
) -> list[float]:
    """`n` executions of CODE, each timed from the send until the reply and the
    idle status of the request have been read (by the two readers given)."""
    samples: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        msg_id = kc.execute(CODE)
        replied = idle = False
        while not replied:
            reply = await read_shell()
            replied = reply["parent_header"].get("msg_id") == msg_id
        while not idle:
            msg = await read_iopub()
            idle = (
                msg["parent_header"].get("msg_id") == msg_id
                and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"
            )
        samples.append(time.perf_counter() - t0)
    return samples


async def _direct(kc: AsyncKernelClient, n: int) -> list[float]:
    """jupyter_client alone: send, then read shell and iopub until both are done."""
    return await _executions(kc, n, kc.get_shell_msg, kc.get_iopub_msg)


async def _lean(kc: AsyncKernelClient, n: int) -> list[float]:
    """The lean direct client: the sockets read as hdspd reads them."""
    session = kc.session
    shell = kc.shell_channel.socket
    iopub = kc.iopub_channel.socket

    async def read(sock: Any) -> dict[str, Any]:
        _, raw = session.feed_identities(await sock.recv_multipart())
        msg: dict[str, Any] = session.deserialize(raw)
        return msg

    return await _executions(kc, n, lambda: read(shell), lambda: read(iopub))


async def _hdsp(client: Client, kernel_id: str, n: int) -> list[float]:
    samples: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        result: ExecutionResult = await client.request(ExecuteCode(kernel_id=kernel_id, code=CODE))
        samples.append(time.perf_counter() - t0)
        assert result.status == "ok", result
    return samples


def _ipython_dir(root: Path) -> Path:
    """A fresh IPYTHONDIR on a tmpfs (/dev/shm), as the sandboxed kernel's is."""
    tmpfs = "/dev/shm" if os.path.isdir("/dev/shm") else str(root)
    return Path(tempfile.mkdtemp(prefix="hdsp-bk-ipython", dir=tmpfs))


async def measure(
    runtime_dir: Path, n: int, warm: int
) -> tuple[list[float], list[float], list[float], list[float]]:
    """(hdsp, jupyter_client, lean, lean on hdspd's kernel) seconds per execution,
    alternating execution by execution."""
    root = Path(tempfile.mkdtemp(prefix="hdsp-bk", dir="/tmp"))
    km = AsyncKernelManager(
        kernel_name="python3",
        transport="ipc",
        ip=str(root / "k"),
        connection_file=str(root / "kernel.json"),
    )
    hdsp: list[float] = []
    direct: list[float] = []
    lean: list[float] = []
    same: list[float] = []
    # A private history database on a tmpfs, as the sandboxed kernel has (see the
    # module doc).
    history = _ipython_dir(root)
    gc.collect()
    gc.freeze()  # as hdspd does after its start-up (see the module doc)
    await km.start_kernel(cwd=str(root), env={**os.environ, "IPYTHONDIR": str(history)})
    kc = km.client()
    kc.start_channels(hb=False)
    try:
        await kc.wait_for_ready(timeout=_START)
        async with connect(runtime_dir, name="bench-kernel") as client:
            info: KernelInfo = await client.request(StartKernel(cwd=str(root)), timeout=_START)
            assert info.connection_file is not None, info
            same_kc = AsyncKernelClient()
            same_kc.load_connection_file(info.connection_file)
            same_kc.start_channels(hb=False)
            try:
                await same_kc.wait_for_ready(timeout=_START)
                await _hdsp(client, info.kernel_id, warm)
                await _direct(kc, warm)
                await _lean(kc, warm)
                await _lean(same_kc, warm)
                for _ in range(n):  # paired: one of each in turn
                    hdsp += await _hdsp(client, info.kernel_id, 1)
                    same += await _lean(same_kc, 1)
                    lean += await _lean(kc, 1)
                    direct += await _direct(kc, 1)
            finally:
                same_kc.stop_channels()
                await client.request(ShutdownKernel(kernel_id=info.kernel_id), timeout=_START)
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(history, ignore_errors=True)
        gc.unfreeze()
    return hdsp, direct, lean, same


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> list[Result]:
    n = 50 if quick else 1000  # enough for a p99 that is not one sample's luck
    hdsp, direct, lean, same = await measure(runtime_dir, n, warm=10 if quick else 50)
    return [
        latency_result(
            "kernel execute, lean client on hdspd's kernel",
            "execute('1+1') from a client through hdspd vs the lean direct client on the "
            "very kernel hdspd executes on (its connection file): only hdspd differs",
            ("execute", hdsp),
            ("lean_same_kernel", same),
            target=1.15,
        ),
        latency_result(
            "kernel execute, lean client",
            "execute('1+1') from a client through hdspd vs a lean direct kernel client "
            "reading the shell and iopub sockets as hdspd does, on a kernel of its own",
            ("execute", hdsp),
            ("lean_direct", lean),
            target=1.15,
        ),
        latency_result(
            "kernel execute",
            "(old) execute('1+1') from a client through hdspd vs jupyter_client's "
            "get_shell_msg/get_iopub_msg",
            ("execute", hdsp),
            ("jupyter_client", direct),
            target=1.15,
        ),
    ]
