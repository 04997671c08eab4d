"""The limits on tool calls (hdsp.daemon.tasks.call_limits) and the shared saves
of a turn's state (hdsp.daemon.tasks.turn_saves), issue 32: a task's calls and
the daemon's wait for a slot beyond their limits, settings resize the limits,
a call past the cap says why it did not run, and concurrent saves share one
write that carries every change made before it."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hdsp.daemon.config import Settings
from hdsp.daemon.config.tool_calls import ToolCallLimits
from hdsp.daemon.conversation import TextBlock
from hdsp.daemon.tasks.call_limits import CallLimits, not_run
from hdsp.daemon.tasks.turn import CallState
from hdsp.daemon.tasks.turn_saves import CoalescedSaves

pytestmark = pytest.mark.anyio


class Gauge:
    """How many holders are inside at once, and the most there were."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0

    async def hold(self, slots: object, release: anyio.Event) -> None:
        async with slots.slot():  # type: ignore[attr-defined]
            self.now += 1
            self.most = max(self.most, self.now)
            await release.wait()
            self.now -= 1


async def test_a_task_runs_at_most_its_share_and_the_daemon_at_most_its_own() -> None:
    limits = CallLimits(ToolCallLimits(max_concurrent_per_task=2, max_concurrent=3))
    first, second = limits.for_task(), limits.for_task()
    gauge_first, gauge_second = Gauge(), Gauge()
    release = anyio.Event()
    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(gauge_first.hold, first, release)
            tg.start_soon(gauge_second.hold, second, release)
        await anyio.wait_all_tasks_blocked()
        # Each task has 2 slots, the daemon 3: the rest wait (back-pressure).
        assert gauge_first.now <= 2 and gauge_second.now <= 2
        assert gauge_first.now + gauge_second.now == 3
        release.set()
    assert gauge_first.now == gauge_second.now == 0
    assert gauge_first.most <= 2 and gauge_second.most <= 2


async def test_new_settings_resize_the_limits() -> None:
    limits = CallLimits(ToolCallLimits(max_concurrent_per_task=1, max_concurrent=1))
    slots = limits.for_task()
    limits.apply(ToolCallLimits(max_per_reply=7, max_concurrent_per_task=4, max_concurrent=3))
    assert limits.per_reply == 7
    gauge, release = Gauge(), anyio.Event()
    async with anyio.create_task_group() as tg:
        for _ in range(6):
            tg.start_soon(gauge.hold, slots, release)
        await anyio.wait_all_tasks_blocked()
        assert gauge.now == 3  # the daemon's 3, under the task's 4
        release.set()


def test_the_settings_have_the_documented_defaults_and_refuse_nonsense() -> None:
    limits = Settings().tool_calls
    assert (limits.max_per_reply, limits.max_concurrent_per_task, limits.max_concurrent) == (
        64,
        8,
        32,
    )
    with pytest.raises(ValueError, match="max_per_reply"):
        Settings.model_validate({"tool_calls": {"max_per_reply": 0}})


def test_a_call_past_the_cap_says_why_it_did_not_run_and_what_to_do() -> None:
    call = CallState(id="c1", name="read_file", arguments={"path": "a"})
    not_run(call, 64, 800)
    assert call.status == "done" and call.is_error
    assert call.result is not None
    (block,) = call.result
    assert isinstance(block, TextBlock)
    assert "only the first 64 tool calls of one reply" in block.text
    assert "this reply had 800" in block.text
    assert "ask for them again in a later reply" in block.text


class Store:
    """A turn state (a version number) and the writes of it, committed on demand."""

    def __init__(self) -> None:
        self.version = 0
        self.written: list[int] = []
        self.commit = anyio.Event()

    async def write(self) -> None:
        self.written.append(self.version)

    async def flush(self) -> None:
        await self.commit.wait()


async def test_concurrent_saves_share_writes_and_each_returns_after_its_change_is_written() -> None:
    store = Store()
    saves = CoalescedSaves(store.write, store.flush)
    saves.concurrent = True
    returned: dict[int, int] = {}  # change -> writes made when its save returned

    async def change_and_save(n: int) -> None:
        store.version = max(store.version, n)
        await saves.save()
        returned[n] = len(store.written)
        # What was written by then carries this change.
        assert max(store.written) >= n

    async with anyio.create_task_group() as tg:
        tg.start_soon(change_and_save, 1)
        await anyio.wait_all_tasks_blocked()  # the first write waits for its commit
        for n in range(2, 12):
            tg.start_soon(change_and_save, n)
        await anyio.wait_all_tasks_blocked()
        assert store.written == [1]
        store.commit.set()
    # Eleven changes, two writes: the first, then one with all the others.
    assert store.written == [1, 11]
    assert set(returned) == set(range(1, 12))


async def test_a_lone_save_is_written_at_once_without_waiting_for_its_commit() -> None:
    store = Store()
    saves = CoalescedSaves(store.write, store.flush)
    store.version = 5
    with anyio.fail_after(5):
        await saves.save()  # (the commit never comes: it does not wait for it)
    assert store.written == [5]


@settings(derandomize=True, max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=20))
def test_every_change_is_in_a_write_made_before_its_save_returned(delays: list[int]) -> None:
    async def main() -> None:
        store = Store()
        store.commit.set()
        saves = CoalescedSaves(store.write, store.flush)
        saves.concurrent = True

        async def change_and_save(n: int, delay: int) -> None:
            for _ in range(delay):
                await anyio.lowlevel.checkpoint()
            store.version = max(store.version, n)
            await saves.save()
            assert max(store.written) >= n

        async with anyio.create_task_group() as tg:
            for n, delay in enumerate(delays, start=1):
                tg.start_soon(change_and_save, n, delay)
        assert len(store.written) <= len(delays)

    anyio.run(main)
