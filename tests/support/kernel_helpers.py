"""Helpers for tests of the kernel service with a real ipykernel: the service run
in a task group, a recorder of the events it publishes (the journal's `emit`),
and a small PNG made here (no network, no plotting library)."""

from __future__ import annotations

import shutil
import struct
import zlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from hdsp.daemon.kernels import Execution, KernelService
from hdsp.protocol import Event, ExecutionOutput, KernelOutput, KernelState, KernelStatus
from tests.support.daemon_process import short_tmp_dir

__all__ = ["Collected", "EventRecorder", "running_service", "tiny_png"]


class EventRecorder:
    """Keeps every event the service emits; a test can wait for one."""

    def __init__(self, *, slow_outputs: bool = False) -> None:
        #: Take outputs only once the kernel has gone idle, as a busy journal
        #: might: the execution is over by then, and its flusher may be cancelled
        #: while it waits here.
        self.slow_outputs = slow_outputs
        self.events: list[Event] = []
        self._waiters: list[tuple[Callable[[Event], bool], anyio.Event]] = []

    async def emit(self, event: Event) -> None:
        if self.slow_outputs and isinstance(event, ExecutionOutput):
            await self.wait_for(
                lambda e: isinstance(e, KernelStatus) and e.payload[1] is KernelState.IDLE
            )
            for _ in range(5):  # the execution's owner runs meanwhile
                await anyio.lowlevel.checkpoint()
        self.events.append(event)
        for condition, ready in self._waiters:
            if not ready.is_set() and condition(event):
                ready.set()

    async def wait_for(self, condition: Callable[[Event], bool]) -> Event:
        """The first event (already seen or still to come) that meets `condition`."""
        for event in self.events:
            if condition(event):
                return event
        ready = anyio.Event()
        entry = (condition, ready)
        self._waiters.append(entry)
        try:
            await ready.wait()
        finally:
            self._waiters.remove(entry)
        return next(e for e in reversed(self.events) if condition(e))

    def of_type(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


@asynccontextmanager
async def running_service(
    recorder: EventRecorder | None = None, **options: Any
) -> AsyncIterator[tuple[KernelService, EventRecorder]]:
    """A KernelService owned by a task group, with a quick heartbeat, released
    (every kernel shut down) on the way out."""
    recorder = recorder if recorder is not None else EventRecorder()
    root = short_tmp_dir()
    options.setdefault("heartbeat_interval", 0.2)
    service = KernelService(recorder.emit, runtime_dir=root / "k", **options)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(service.run)
            try:
                yield service, recorder
            finally:
                with anyio.move_on_after(30, shield=True):
                    await service.aclose()
    finally:
        shutil.rmtree(root, ignore_errors=True)


class Collected:
    """An on_output callback that keeps what it was given."""

    def __init__(self) -> None:
        self.batches: list[list[KernelOutput]] = []
        self.first = anyio.Event()

    async def __call__(self, ex: Execution, new: Sequence[KernelOutput]) -> None:
        self.batches.append(list(new))
        self.first.set()

    def all(self) -> list[KernelOutput]:
        return [o for batch in self.batches for o in batch]

    def text(self) -> str:
        return "".join(o.text or "" for o in self.all() if o.output_type == "stream")


def tiny_png(width: int = 3, height: int = 2) -> bytes:
    """A valid RGB PNG of `width` x `height` red pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def kernel_dir(tmp_path: Path) -> Path:
    """A working directory for a kernel (its path may be long: only sockets care)."""
    path = tmp_path / "work"
    path.mkdir(exist_ok=True)
    return path
