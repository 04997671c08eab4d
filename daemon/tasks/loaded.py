"""The loaded tasks: which tasks are in memory, the lease a command holds on
one while it uses it, and unloading.

A task is loaded (a :class:`Task` in memory, its API history with it) while it
works, and for a while after: the `max_idle_loaded` idle tasks used most recently
stay loaded, and the least recently used idle task beyond them is unloaded. An
idle task is one whose turn is over with nothing left waiting: no ask, no queued
message, no open turn; its history, state and item are all in the store, and the
few counters the store has no place for (tool usage, context size, consecutive
mistakes) stay behind in a small :class:`TaskCarry`. A command that needs
the task loads it again from the store. So the daemon's memory grows with the
tasks that work, not with every task it has run since it started.

A command uses a task under a lease: ``async with loaded.lease(task_id) as task``
loads it if need be and keeps it loaded until the block ends, when the task
settles (see :meth:`LoadedTasks.settle`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import msgspec
from anyio.abc import TaskGroup

from hdsp.daemon.conversation import ApiMessage
from hdsp.daemon.memory import give_back
from hdsp.daemon.store import INLINE_BYTES, Database, TaskRow
from hdsp.protocol import HistoryItem, TaskState, ToolUsageEntry

from .deps import TaskDeps
from .errors import TaskNotFound
from .queued import decode_queued
from .task import Task

__all__ = ["GIVE_BACK_AFTER_UNLOADS", "MAX_IDLE_LOADED", "LoadedTasks", "TaskCarry"]

_item_decoder = msgspec.json.Decoder(HistoryItem)
_api_decoder = msgspec.json.Decoder(ApiMessage)

#: Idle tasks kept loaded, the most recently used; the others are unloaded.
MAX_IDLE_LOADED = 16
#: Unloads after which the memory they freed is given back to the system (see
#: hdsp.daemon.memory): a full collection costs milliseconds, so not after each.
GIVE_BACK_AFTER_UNLOADS = 64


class TaskCarry(msgspec.Struct, kw_only=True, gc=False):
    """What an unloaded task keeps in memory: the counters the store has no place
    for, which a user sees (tool usage, context size in `taskCompleted` and
    `taskTokenUsageUpdated`) or which guard the next turn (mistakes, repetition)."""

    tool_usage: dict[str, ToolUsageEntry] = {}
    context_tokens: int = 0
    mistakes: int = 0
    #: The last tool call: its name and a digest of its arguments.
    last_call: tuple[str, bytes] | None = None
    repeats: int = 0


_NOTHING_CARRIED = TaskCarry()


def _carry(task: Task) -> TaskCarry | None:
    """What to keep of `task` when it is unloaded; None: nothing."""
    calls = task.calls
    carry = TaskCarry(
        tool_usage=calls.tool_usage,
        context_tokens=task.context_tokens,
        mistakes=calls.mistakes,
        last_call=calls.last_call,
        repeats=calls.repeats,
    )
    return None if carry == _NOTHING_CARRIED else carry


def _restore(task: Task, carry: TaskCarry) -> None:
    """Give `task` back what `carry` kept when it was unloaded."""
    task.context_tokens = carry.context_tokens
    calls = task.calls
    calls.tool_usage, calls.mistakes = carry.tool_usage, carry.mistakes
    calls.last_call, calls.repeats = carry.last_call, carry.repeats


def _read_task(
    db: Database, task_id: str, max_bytes: int | None = None
) -> tuple[TaskRow | None, list[bytes], int, bytes | None] | None:
    """A task's row, API history, newest message ts and queued messages, with one
    trip to the reader; None if its history passes `max_bytes` (if given)."""
    row = db.get_task(task_id)
    if row is None:
        return None, [], 0, None
    bodies = db.api_messages(task_id, max_bytes)
    if bodies is None:
        return None
    return row, bodies, db.last_message_ts(task_id), db.queued_messages(task_id)


def _read_history(db: Database, task_id: str) -> tuple[list[bytes], int, bytes | None]:
    return db.api_messages(task_id), db.last_message_ts(task_id), db.queued_messages(task_id)


class LoadedTasks:
    """The tasks in memory, by id, and the least recently used idle ones among
    them. Built on the task manager's :class:`TaskDeps`, which every task it
    loads or creates shares."""

    def __init__(self, deps: TaskDeps) -> None:
        self._deps = deps
        #: Idle tasks beyond this many are unloaded, the least recently used first.
        self.max_idle_loaded = MAX_IDLE_LOADED
        #: Where memory is given back after unloads (the manager's task group,
        #: once it runs).
        self.task_group: TaskGroup | None = None
        self._tasks: dict[str, Task] = {}
        #: Loaded tasks that are idle, least recently used first (values unused).
        self._idle: OrderedDict[str, None] = OrderedDict()
        #: What unloaded tasks keep in memory (only those with something to keep).
        self._carried: dict[str, TaskCarry] = {}
        #: Tasks unloaded since memory was last given back.
        self._unloads = 0

    # ---- what is loaded -------------------------------------------------------

    def get(self, task_id: str) -> Task | None:
        """The task if it is loaded now (no lease: for a look, not for a command)."""
        return self._tasks.get(task_id)

    def is_busy(self, task_id: str) -> bool:
        """Whether `task_id` is working now (a turn runs); False for a task not loaded."""
        task = self._tasks.get(task_id)
        return task is not None and task.busy

    def kernel_choice(self, task_id: str) -> tuple[str | None, str | None]:
        """The loaded task's kernel provider (or None) and profile; (None, None)
        for a task not loaded."""
        task = self._tasks.get(task_id)
        if task is None:
            return None, None
        return task.item.kernel_provider, task.item.api_config_name

    def __contains__(self, task_id: str) -> bool:
        return task_id in self._tasks

    def __iter__(self) -> Iterator[Task]:
        return iter(list(self._tasks.values()))

    def statistics(self) -> dict[str, int]:
        return {
            "loaded": len(self._tasks),
            "running": sum(1 for t in self._tasks.values() if t.state is TaskState.RUNNING),
            "idle_loaded": len(self._idle),
        }

    # ---- loading --------------------------------------------------------------

    @asynccontextmanager
    async def lease(self, task_id: str) -> AsyncIterator[Task]:
        """The task, loaded from the store if need be, kept loaded while the
        block runs; it settles when the block ends, however it ends."""
        task = await self.load(task_id)
        with self.settling(task):
            yield task

    @contextmanager
    def settling(self, task: Task) -> Iterator[None]:
        """Settle `task`, loaded already (by :meth:`load`), when the block ends."""
        try:
            yield
        finally:
            self.settle(task)

    async def load(self, task_id: str) -> Task:
        """The task, loaded from the store if need be. It is in use from now on:
        not unloaded until `settle` says it may be (prefer :meth:`lease`)."""
        task = self._tasks.get(task_id)
        if task is None:
            store = self._deps.store
            await self._deps.journal.flush_for_read()
            try:
                # Most histories are short: read on the loop's thread.
                found = store.read_now(_read_task, store.db, task_id, INLINE_BYTES)
            except anyio.WouldBlock:
                found = None
            if found is None:  # the reader is busy, or the history long: on a thread
                found = await store.read(_read_task, store.db, task_id)
            assert found is not None
            row, bodies, last_ts, queued = found
            if row is None:
                raise TaskNotFound(task_id)
            task = self._tasks.get(task_id)  # loaded by another command meanwhile?
            if task is None:
                task = self._tasks[task_id] = self._task_from_row(row, bodies, last_ts, queued)
        self._idle.pop(task_id, None)
        return task

    async def load_row(self, row: TaskRow) -> Task:
        """The task of `row` (read already), loaded with its history; in use
        from now on, as after :meth:`load`."""
        task_id = row[0]
        store = self._deps.store
        bodies, last_ts, queued = await store.read(_read_history, store.db, task_id)
        task = self._tasks.get(task_id)  # loaded by another command meanwhile?
        if task is None:
            task = self._tasks[task_id] = self._task_from_row(row, bodies, last_ts, queued)
        self._idle.pop(task_id, None)
        return task

    def create(self, item: HistoryItem) -> Task:
        """A new task `item` with no history yet, loaded and in use (its item's
        `ts` that of its first message to come)."""
        task = Task(self._deps, item, api=[], state=TaskState.IDLE, settle=self.settle)
        task.item = msgspec.structs.replace(item, ts=task.messages.next_ts())
        self._tasks[task.id] = task
        return task

    def _task_from_row(
        self, row: TaskRow, bodies: list[bytes], last_ts: int, queued: bytes | None
    ) -> Task:
        item = _item_decoder.decode(row[4])
        api = [_api_decoder.decode(b) for b in bodies]
        task = Task(
            self._deps,
            item,
            api=api,
            state=TaskState(row[3]),
            last_ts=last_ts,
            settle=self.settle,
            queued=decode_queued(queued),
        )
        carry = self._carried.pop(task.id, None)
        if carry is not None:
            _restore(task, carry)
        return task

    # ---- settling and unloading -------------------------------------------------

    def settle(self, task: Task) -> None:
        """`task` is done with for now (its turn ended, or a command that used it
        returned): if it is idle it becomes the most recently used idle task, and
        the least recently used ones beyond `max_idle_loaded` are unloaded."""
        if self._tasks.get(task.id) is not task:
            return  # closed meanwhile
        if not task.idle:
            self._idle.pop(task.id, None)  # busy again; it settles when its turn ends
            return
        self._idle[task.id] = None
        self._idle.move_to_end(task.id)
        while len(self._idle) > self.max_idle_loaded:
            task_id, _ = self._idle.popitem(last=False)
            victim = self._tasks.get(task_id)
            if victim is not None and victim.idle:
                self._unload(victim)

    def drop(self, task_id: str) -> None:
        """Let go of the task in memory (its history changed in the store under
        it): the next lease loads it again. What an unloaded task carries stays."""
        self._tasks.pop(task_id, None)
        self._idle.pop(task_id, None)

    def forget(self, task_id: str) -> None:
        """The task is closed: nothing of it stays in memory."""
        self.drop(task_id)
        self._carried.pop(task_id, None)

    def _unload(self, task: Task) -> None:
        del self._tasks[task.id]
        self._unloads += 1
        if self._unloads >= GIVE_BACK_AFTER_UNLOADS and self.task_group is not None:
            self._unloads = 0
            self.task_group.start_soon(give_back)
        carry = _carry(task)
        if carry is not None:
            self._carried[task.id] = carry
