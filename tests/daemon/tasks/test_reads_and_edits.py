"""Reads of tasks (hdsp.daemon.tasks.reads) and edits of a task's history
(hdsp.daemon.tasks.edits) over the loaded tasks, without a daemon process or a
model: a real SQLite store and journal (tests/support/task_parts).

Reads refuse bad paging and name a missing task; a loaded task's item comes
from memory. A rewind removes what came after its point in one transaction with
`taskRewound` and loads the task again; a fork copies the history up to its
point into a new, numbered task; an edit refuses a message that is not the
user's; nothing is edited while the daemon shuts down.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from hdsp.daemon.conversation import ApiMessage, TextBlock
from hdsp.daemon.errors import BadRequest, ShuttingDown
from hdsp.daemon.tasks.edits import HistoryEdits
from hdsp.daemon.tasks.errors import TaskNotFound
from hdsp.daemon.tasks.loaded import LoadedTasks
from hdsp.daemon.tasks.reads import TaskReads
from hdsp.protocol import Say, TaskCreated, TaskRewound, TaskState
from tests.support.task_parts import TASK_ID, Parts, open_parts

pytestmark = pytest.mark.timeout(30)


class Open:
    """A switch for `check_open`, as the manager's."""

    def __init__(self) -> None:
        self.closing = False

    def check(self) -> None:
        if self.closing:
            raise ShuttingDown("The daemon is shutting down.")


def _edits(parts: Parts, loaded: LoadedTasks, gate: Open, numbers: list[int]) -> HistoryEdits:
    def next_number() -> int:
        numbers.append(len(numbers) + 2)
        return numbers[-1]

    return HistoryEdits(
        parts.store,
        parts.journal,
        loaded,
        parts.deps.providers,
        check_open=gate.check,
        next_number=next_number,
    )


async def _conversation(loaded: LoadedTasks) -> list[int]:
    """Give the task two exchanges; the ts of its UI messages."""
    seen = []
    async with loaded.lease(TASK_ID) as task:
        for i, (say, role) in enumerate(
            [
                (Say.TEXT, "user"),
                (Say.TEXT, "assistant"),
                (Say.USER_FEEDBACK, "user"),
                (Say.TEXT, "assistant"),
            ]
        ):
            message = await task.messages.say(say, f"message {i}")
            await task.history.append(
                ApiMessage(role=role, content=[TextBlock(text=f"message {i}")], ts=message.ts)
            )
            seen.append(message.ts)
    return seen


async def test_reads_refuse_bad_paging_and_name_a_missing_task(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        reads = TaskReads(parts.store, parts.journal, LoadedTasks(parts.deps))
        for limit in (0, 1001):
            with pytest.raises(BadRequest, match="limit must be between 1 and 1000"):
                await reads.list_tasks(None, limit)
        with pytest.raises(BadRequest, match="Invalid cursor 'x'"):
            await reads.list_tasks("x", 10)
        with pytest.raises(BadRequest, match="without cursor"):
            await reads.list_tasks("1", 10, id_prefix="task")
        with pytest.raises(TaskNotFound):
            await reads.snapshot("no-such-task")
        with pytest.raises(TaskNotFound):
            await reads.page("no-such-task", 0, None, 10)
        with pytest.raises(BadRequest, match="start must be 0 or more"):
            await reads.page(TASK_ID, -1, None, 10)
        with pytest.raises(BadRequest, match="past the end"):
            await reads.page(TASK_ID, 5, None, 10)


async def test_a_loaded_tasks_item_comes_from_memory(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        loaded = LoadedTasks(parts.deps)
        reads = TaskReads(parts.store, parts.journal, loaded)
        stored = await reads.list_tasks(None, 10)
        assert [t.task for t in stored.tasks] == ["the task"]
        async with loaded.lease(TASK_ID) as task:
            task.item = msgspec.structs.replace(task.item, task="renamed in memory")
        listed = await reads.list_tasks(None, 10, id_prefix="task-")
        assert [t.task for t in listed.tasks] == ["renamed in memory"]
        snapshot = await reads.snapshot(TASK_ID)
        assert snapshot.item.task == "renamed in memory"


async def test_a_rewind_removes_what_came_after_and_loads_the_task_again(
    tmp_path: Path,
) -> None:
    async with open_parts(tmp_path) as parts:
        loaded = LoadedTasks(parts.deps)
        edits = _edits(parts, loaded, Open(), [])
        ts = await _conversation(loaded)
        before = loaded.get(TASK_ID)
        ref = await edits.rewind(TASK_ID, ts[2], include=True)
        assert ref.task_id == TASK_ID and ref.state is TaskState.IDLE
        assert [m.ts for m in await parts.stored_messages()] == ts[:2]
        rewound = [e.payload for e in await parts.of(TaskRewound) if isinstance(e, TaskRewound)]
        assert rewound == [(TASK_ID, ts[2])]
        again = loaded.get(TASK_ID)
        assert again is not None and again is not before
        assert [m.ts for m in again.history.messages] == ts[:2]


async def test_a_fork_copies_the_history_up_to_its_point_into_a_new_task(
    tmp_path: Path,
) -> None:
    async with open_parts(tmp_path) as parts:
        loaded = LoadedTasks(parts.deps)
        numbers: list[int] = []
        edits = _edits(parts, loaded, Open(), numbers)
        ts = await _conversation(loaded)
        ref = await edits.fork(TASK_ID, ts[1])
        assert ref.task_id != TASK_ID and ref.state is TaskState.IDLE
        assert numbers == [2]
        created = [e.payload for e in await parts.of(TaskCreated) if isinstance(e, TaskCreated)]
        assert created == [(ref.task_id,)]
        copied = await parts.stored_messages(ref.task_id)
        assert [m.text for m in copied] == ["message 0", "message 1"]
        reads = TaskReads(parts.store, parts.journal, loaded)
        assert (await reads.snapshot(ref.task_id)).item.number == 2
        # The original is as it was.
        assert [m.ts for m in await parts.stored_messages()] == ts


async def test_only_a_message_of_the_users_can_be_edited(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        loaded = LoadedTasks(parts.deps)
        edits = _edits(parts, loaded, Open(), [])
        ts = await _conversation(loaded)
        with pytest.raises(BadRequest, match="not a message of yours"):
            await edits.rewind_for_edit(TASK_ID, ts[1], "new text", None)
        edited = await edits.rewind_for_edit(TASK_ID, ts[2], "new text", None)
        assert edited.text == "new text"
        assert [m.ts for m in await parts.stored_messages()] == ts[:2]


async def test_nothing_is_edited_while_the_daemon_shuts_down(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        loaded = LoadedTasks(parts.deps)
        gate = Open()
        edits = _edits(parts, loaded, gate, [])
        ts = await _conversation(loaded)
        gate.closing = True
        with pytest.raises(ShuttingDown):
            await edits.rewind(TASK_ID, ts[2], include=True)
        with pytest.raises(ShuttingDown):
            await edits.delete_message(TASK_ID, ts[2])
        with pytest.raises(ShuttingDown):
            await edits.fork(TASK_ID, ts[2])
        assert [m.ts for m in await parts.stored_messages()] == ts
