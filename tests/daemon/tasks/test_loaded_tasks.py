"""The loaded tasks (hdsp.daemon.tasks.loaded): a lease loads a task from the
store and settles it when its block ends, however it ends; idle tasks beyond the
limit leave memory, the least recently used first, and come back with the
counters they carried; a closed task leaves nothing behind.

No daemon process: a real SQLite store and journal (tests/support/task_parts).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from hdsp.daemon.store import insert_task
from hdsp.daemon.tasks.errors import TaskNotFound
from hdsp.daemon.tasks.loaded import LoadedTasks
from hdsp.protocol import HistoryItem, TaskState
from tests.support.task_parts import TASK_ID, open_parts

pytestmark = pytest.mark.timeout(30)


@asynccontextmanager
async def _two_tasks(tmp_path: Path, max_idle_loaded: int) -> AsyncIterator[LoadedTasks]:
    """The loaded tasks of a store that holds TASK_ID and "task-2", both idle,
    keeping at most `max_idle_loaded` idle tasks loaded."""
    async with open_parts(tmp_path) as parts:
        item = HistoryItem(
            id="task-2",
            number=2,
            ts=2,
            task="task 2",
            workspace=str(parts.workspace),
            state=TaskState.IDLE,
        )
        await parts.journal.write(insert_task(item))
        loaded = LoadedTasks(parts.deps)
        loaded.max_idle_loaded = max_idle_loaded
        yield loaded


async def test_a_lease_loads_the_task_and_settles_it_when_the_block_ends(
    tmp_path: Path,
) -> None:
    async with open_parts(tmp_path) as parts:
        loaded = LoadedTasks(parts.deps)
        assert TASK_ID not in loaded
        async with loaded.lease(TASK_ID) as task:
            assert task.id == TASK_ID
            assert loaded.get(TASK_ID) is task
            # In use: not among the idle tasks that may be unloaded.
            assert loaded.statistics() == {"loaded": 1, "running": 0, "idle_loaded": 0}
        assert loaded.statistics() == {"loaded": 1, "running": 0, "idle_loaded": 1}
        async with loaded.lease(TASK_ID) as again:
            assert again is task  # loaded already: the same task


async def test_a_lease_settles_the_task_when_its_block_raises(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        loaded = LoadedTasks(parts.deps)
        with pytest.raises(RuntimeError, match="the command failed"):
            async with loaded.lease(TASK_ID):
                raise RuntimeError("the command failed")
        assert loaded.statistics()["idle_loaded"] == 1


async def test_a_lease_of_a_task_that_is_not_stored_is_refused(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        loaded = LoadedTasks(parts.deps)
        with pytest.raises(TaskNotFound):
            async with loaded.lease("no-such-task"):
                raise AssertionError("not reached")
        assert loaded.statistics()["loaded"] == 0


async def test_idle_tasks_beyond_the_limit_leave_and_come_back_with_their_counters(
    tmp_path: Path,
) -> None:
    async with _two_tasks(tmp_path, max_idle_loaded=1) as loaded:
        async with loaded.lease(TASK_ID) as first:
            first.context_tokens = 1234
            first.calls.mistakes = 2
        async with loaded.lease("task-2"):
            pass
        # The least recently used idle task went; the newest stays.
        assert TASK_ID not in loaded and "task-2" in loaded
        async with loaded.lease(TASK_ID) as back:
            assert back is not first  # loaded again, from the store
            assert (back.context_tokens, back.calls.mistakes) == (1234, 2)
        assert "task-2" not in loaded


async def test_a_task_in_use_is_not_unloaded(tmp_path: Path) -> None:
    async with _two_tasks(tmp_path, max_idle_loaded=0) as loaded:
        async with loaded.lease(TASK_ID):
            async with loaded.lease("task-2"):
                pass
            assert "task-2" not in loaded  # idle, beyond the limit: unloaded
            assert TASK_ID in loaded  # leased still
        assert TASK_ID not in loaded


async def test_a_forgotten_task_leaves_no_counters_behind(tmp_path: Path) -> None:
    async with _two_tasks(tmp_path, max_idle_loaded=0) as loaded:
        async with loaded.lease(TASK_ID) as task:
            task.context_tokens = 99
        assert TASK_ID not in loaded  # unloaded at once (no idle task is kept)
        loaded.forget(TASK_ID)
        async with loaded.lease(TASK_ID) as task:
            assert task.context_tokens == 0


async def test_a_dropped_task_is_loaded_again_from_the_store(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        loaded = LoadedTasks(parts.deps)
        async with loaded.lease(TASK_ID) as task:
            pass
        loaded.drop(TASK_ID)
        assert TASK_ID not in loaded
        async with loaded.lease(TASK_ID) as again:
            assert again is not task


async def test_a_created_task_is_loaded_and_in_use_until_it_settles(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        loaded = LoadedTasks(parts.deps)
        item = HistoryItem(id="new", number=2, ts=0, task="new", workspace=str(parts.workspace))
        task = loaded.create(item)
        assert loaded.get("new") is task
        assert task.item.ts > 0  # its first message's
        assert loaded.statistics()["idle_loaded"] == 0
        loaded.settle(task)
        assert loaded.statistics()["idle_loaded"] == 1
