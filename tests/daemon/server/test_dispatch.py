"""The dispatcher: per-key order, concurrency across keys, bounded waiting."""

from __future__ import annotations

import anyio
import pytest

from hdsp.daemon.server import Dispatcher, DispatcherFull


async def test_same_key_in_order_other_keys_concurrently() -> None:
    d = Dispatcher()
    log: list[str] = []
    gate = anyio.Event()

    def job(name: str, wait: bool = False):  # type: ignore[no-untyped-def]
        async def run() -> None:
            log.append(f"start {name}")
            if wait:
                await gate.wait()
            log.append(f"end {name}")

        return run

    async with anyio.create_task_group() as tg:
        await tg.start(d.run)
        d.submit("t1", job("a1", wait=True))
        d.submit("t1", job("a2"))
        d.submit("t2", job("b1"))
        d.submit(None, job("free"))
        await anyio.wait_all_tasks_blocked()
        # a2 waits behind a1 on the same task; the others ran meanwhile.
        assert log == ["start a1", "start b1", "end b1", "start free", "end free"]
        gate.set()
        await anyio.wait_all_tasks_blocked()
        assert log[-3:] == ["end a1", "start a2", "end a2"]
        assert d.pending == 0
        tg.cancel_scope.cancel()


async def test_overload_is_refused_not_queued() -> None:
    d = Dispatcher(max_pending=3, lane_size=2)
    gate = anyio.Event()

    async def blocked() -> None:
        await gate.wait()

    async with anyio.create_task_group() as tg:
        await tg.start(d.run)
        d.submit("t", blocked)
        d.submit("t", blocked)
        with pytest.raises(DispatcherFull):
            d.submit("t", blocked)  # the lane is full
        d.submit(None, blocked)
        with pytest.raises(DispatcherFull):
            d.submit("u", blocked)  # the daemon-wide bound
        gate.set()
        await anyio.wait_all_tasks_blocked()
        assert d.pending == 0
        d.submit("t", blocked)  # room again
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()


async def test_workers_are_reused_and_a_slow_job_holds_up_no_other() -> None:
    d = Dispatcher(keep_idle=2)
    gate = anyio.Event()
    done: list[int] = []

    async def slow() -> None:
        await gate.wait()

    def quick(n: int):  # type: ignore[no-untyped-def]
        async def run() -> None:
            done.append(n)

        return run

    async with anyio.create_task_group() as tg:
        await tg.start(d.run)
        baseline = len(anyio.get_running_tasks())
        d.submit(None, slow)
        for n in range(20):
            d.submit(None, quick(n))
            await anyio.wait_all_tasks_blocked()
        # Every quick job ran past the slow one, one after another on a worker
        # that stayed for the next: two workers in all, not one task per job.
        assert done == list(range(20))
        assert len(anyio.get_running_tasks()) == baseline + 2
        gate.set()
        await anyio.wait_all_tasks_blocked()
        assert d.pending == 0
        # Many at once need many workers; afterwards only `keep_idle` stay.
        for n in range(50):
            d.submit(None, slow if n % 2 else quick(n))
        gate = anyio.Event()
        for _ in range(25):
            d.submit(None, slow)
        await anyio.wait_all_tasks_blocked()
        assert len(anyio.get_running_tasks()) > baseline + 25
        gate.set()
        await anyio.wait_all_tasks_blocked()
        assert len(anyio.get_running_tasks()) == baseline + 2
        tg.cancel_scope.cancel()
