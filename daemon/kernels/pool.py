"""Spare kernels, started ahead of need, so that a task's first code does not
wait for a (sandboxed) kernel to start (nteract's runtimed keeps prewarmed
environments the same way).

A spare is started for a *key*: the kernelspec, the workspace, and the launch
profile (the sandbox's settings). The sandbox binds the workspace when the
process starts, so a spare serves only tasks of the same workspace, started
under the same sandbox settings; one started under settings changed since is
never handed out. A spare has never run code: until a task takes it, it is
hidden (not announced: no command reaches it), and a task takes it once, for
good; what it leaves behind (variables, files in its private /tmp) goes with
it when the task lets it go, since a kernel never goes back to the pool.

Bounds: at most `size()` spares per key (``kernels.pool_size``; 0: no pool),
at most `_MAX_KEYS` keys (the oldest key's spares are shut down first), one
start at a time, none while memory is short (:func:`hdsp.daemon.memory.memory_short`);
a spare idle past `cull_after` seconds is shut down like any idle kernel.

When a task starts, the pool is asked to warm its key (`warm`): its kernel
starts while the model thinks about its first reply. Taking a spare warms the
key again, in the background, `REFILL_DELAY` later (the start's CPU would slow
down the task's first code).

The pool runs in the kernel service's task group (`await tg.start(pool.run)`);
the service starts and stops the kernels, the pool only chooses.
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field

import anyio
import structlog
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from hdsp.daemon.memory import memory_short
from hdsp.protocol import KernelState

from .kernel import Kernel

__all__ = ["REFILL_DELAY", "KernelPool", "PoolKey"]

log = structlog.get_logger("hdsp.kernels")

#: (kernelspec name, workspace, launch profile).
PoolKey = tuple[str, str, Hashable]

#: How many keys (workspaces, settings) the pool keeps spares for at once.
_MAX_KEYS = 4
#: How many warm requests may wait; more are dropped (they are hints).
_MAX_REQUESTS = 16
#: Seconds a spare that replaces one taken waits before it starts: a kernel's
#: start is a second of CPU, which the task's first code would share.
REFILL_DELAY = 1.0


@dataclass
class _Spare:
    kernel_id: str | None = None
    starting: bool = False
    ready: anyio.Event = field(default_factory=anyio.Event)
    born: float = field(default_factory=anyio.current_time)


class KernelPool:
    """`start(name, workspace)` starts a hidden kernel (one in `kernels`, the
    service's, not announced) and returns its id; `stop(kernel)` shuts it down."""

    def __init__(
        self,
        *,
        size: Callable[[], int],
        profile: Callable[[], Hashable],
        kernels: Mapping[str, Kernel],
        start: Callable[[str, str], Awaitable[str]],
        stop: Callable[[Kernel], Awaitable[None]],
        cull_after: float | None = None,
        short_of_memory: Callable[[], bool] = memory_short,
    ) -> None:
        self._size = size
        self._profile = profile
        self._kernels = kernels
        self._start = start
        self._stop_kernel = stop
        self.cull_after = cull_after
        self._short_of_memory = short_of_memory
        #: Spares by key, oldest key first.
        self._spares: OrderedDict[PoolKey, list[_Spare]] = OrderedDict()
        #: Keys to start spares for (open while `run` runs).
        self._requests: MemoryObjectSendStream[tuple[PoolKey, float]] | None = None
        self.started = 0
        self.taken = 0

    def key(self, name: str, workspace: str) -> PoolKey:
        return (name, os.path.abspath(workspace), self._profile())

    def size(self) -> int:
        try:
            return max(0, int(self._size()))
        except Exception:  # settings being replaced: no pool this once
            return 0

    def spare_ids(self) -> list[str]:
        return [s.kernel_id for ss in self._spares.values() for s in ss if s.kernel_id]

    # ---- asked by the service -------------------------------------------------

    def warm(self, name: str, workspace: str, *, delay: float = 0.0) -> None:
        """Have spares ready for `name` in `workspace`: they start in the
        background (after `delay` seconds), and a `take` from now on waits for them."""
        size = self.size()
        key = self.key(name, workspace)
        spares = self._spares.get(key, [])
        if len(spares) >= size:
            return
        if self._short_of_memory():
            log.info("no spare kernel: memory is short", workspace=key[1])
            return
        added = [_Spare() for _ in range(size - len(spares))]
        if self._requests is None:
            return  # not running
        try:
            self._requests.send_nowait((key, anyio.current_time() + delay))
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # a hint: the next task's start asks again
        self._spares[key] = [*spares, *added]
        self._spares.move_to_end(key)

    async def take(self, name: str, workspace: str, *, wait: float) -> Kernel | None:
        """A spare for `name` in `workspace` under the current settings, waiting up
        to `wait` seconds for one that is starting; None when there is none. The
        caller announces it and binds it to its task: it is no spare any more."""
        key = self.key(name, workspace)
        spares = self._spares.get(key)
        taken: Kernel | None = None
        while spares and taken is None:
            ready = [s for s in spares if s.kernel_id is not None]
            spare = ready[0] if ready else spares[0]
            if spare.kernel_id is None:
                with anyio.move_on_after(wait):
                    await spare.ready.wait()
                if not spare.ready.is_set():
                    log.info("spare kernel still starting", workspace=workspace, waited=wait)
                    break  # still starting: the task starts its own
            self._drop(key, spare)
            if spare.kernel_id is not None:
                taken = self._usable(spare.kernel_id)
                if taken is None:
                    k = self._kernels.get(spare.kernel_id)
                    log.info(
                        "spare kernel not usable",
                        kernel_id=spare.kernel_id,
                        status=None if k is None else k.status.value,
                        life=None if k is None else k.life,
                        announced=None if k is None else k.announced,
                        closing=None if k is None else k.closing,
                        running=None if k is None else k.current is not None,
                    )
                    await self._stop(spare.kernel_id)
        if taken is not None:
            self.taken += 1
            log.info("spare kernel taken", kernel_id=taken.id, workspace=workspace)
            self.warm(name, workspace, delay=REFILL_DELAY)
        return taken

    def _usable(self, kernel_id: str) -> Kernel | None:
        """The spare `kernel_id` if it is alive, idle, and never ran code."""
        k = self._kernels.get(kernel_id)
        if (
            k is None
            or k.announced  # a spare is hidden: no command could reach it
            or k.closing
            or k.life != 0
            or k.current is not None
            or k.status is not KernelState.IDLE
        ):
            return None
        return k

    async def _stop(self, kernel_id: str) -> None:
        k = self._kernels.get(kernel_id)
        if k is not None and not k.announced:
            await self._stop_kernel(k)

    # ---- the owner ----------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start spares as asked, one at a time, and cull idle ones, until cancelled."""
        send, incoming = anyio.create_memory_object_stream[tuple[PoolKey, float]](_MAX_REQUESTS)
        async with anyio.create_task_group() as tg, send, incoming:
            if self.cull_after is not None:
                tg.start_soon(self._cull_loop, self.cull_after)
            self._requests = send
            try:
                task_status.started()
                async for key, not_before in incoming:
                    await anyio.sleep_until(not_before)
                    await self._fill(key)
            finally:
                self._requests = None
            tg.cancel_scope.cancel()

    async def _fill(self, key: PoolKey) -> None:
        """Start the spares `warm` put down for `key`, one after the other."""
        name, workspace, _ = key
        await self._evict(keep=key)
        while True:
            spares = self._spares.get(key, [])
            spare = next((s for s in spares if not s.starting), None)
            if spare is None:
                break
            spare.starting = True
            try:
                if key != self.key(name, workspace):
                    raise RuntimeError("the sandbox settings changed")
                spare.kernel_id = await self._start(name, workspace)
            except Exception as exc:
                log.warning("a spare kernel did not start", workspace=workspace, error=str(exc))
                self._drop(key, spare)
            finally:
                spare.ready.set()
            if spare.kernel_id is not None:
                spare.born = anyio.current_time()  # idle from now, not from the ask
                self.started += 1
                log.info("spare kernel ready", kernel_id=spare.kernel_id, workspace=workspace)

    def _drop(self, key: PoolKey, spare: _Spare) -> None:
        spares = self._spares.get(key)
        if spares is not None and spare in spares:
            spares.remove(spare)
            if not spares:
                del self._spares[key]

    async def _evict(self, *, keep: PoolKey) -> None:
        while len(self._spares) > _MAX_KEYS:
            oldest = next(k for k in self._spares if k != keep)
            for spare in self._spares.pop(oldest):
                spare.starting = True  # (no other key's spare is starting meanwhile)
                spare.ready.set()
                if spare.kernel_id is not None:
                    await self._stop(spare.kernel_id)

    async def _cull_loop(self, after: float) -> None:
        while True:
            await anyio.sleep(min(60.0, after / 4) if math.isfinite(after) else 60.0)
            now = anyio.current_time()
            short = self._short_of_memory()
            for key, spares in list(self._spares.items()):
                for spare in list(spares):
                    if spare.kernel_id is None or not (short or now - spare.born >= after):
                        continue
                    self._drop(key, spare)
                    log.info("spare kernel culled", kernel_id=spare.kernel_id, short=short)
                    await self._stop(spare.kernel_id)
