"""Edits of a task's history: rewind it to a message (RewindTask), replace a
message of the user's (EditMessage), delete a message (DeleteMessage), and fork
a new task from it (ForkTask).

What goes and what comes back is planned in :mod:`.rewind` and :mod:`.deletion`
from the histories as stored; here the plan is written, in one transaction with
the event that tells clients, and the task is loaded again from the store.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import msgspec
import structlog

from hdsp.daemon.conversation import ApiMessage
from hdsp.daemon.errors import BadRequest
from hdsp.daemon.llm.registry import Providers
from hdsp.daemon.store import (
    Journal,
    Store,
    Write,
    delete_api_messages_from,
    delete_ui_message,
    delete_ui_messages_from,
    insert_task,
    save_queued,
    save_ui_message,
    update_task,
)
from hdsp.protocol import (
    ClineMessage,
    PromptContext,
    Say,
    SendMessageData,
    TaskCreated,
    TaskMessagesDeleted,
    TaskRef,
    TaskRewound,
    TaskState,
)

from .commits import committed_unless_failing
from .deletion import plan_delete
from .loaded import LoadedTasks
from .prompt_size import check_prompt_size
from .rewind import plan_rewind
from .task import Task
from .turn import api_write, turn_write

__all__ = ["HistoryEdits"]

log = structlog.get_logger("hdsp.tasks")

_message_decoder = msgspec.json.Decoder(ClineMessage)
_message_encoder = msgspec.json.Encoder()


class HistoryEdits:
    """Rewind, edit, delete and fork. `check_open` refuses while the daemon
    shuts down; `next_number` numbers a forked task as the manager numbers
    every new one."""

    def __init__(
        self,
        store: Store,
        journal: Journal,
        loaded: LoadedTasks,
        providers: Providers,
        *,
        check_open: Callable[[], None],
        next_number: Callable[[], int],
    ) -> None:
        self._store = store
        self._journal = journal
        self._loaded = loaded
        self._providers = providers
        self._check_open = check_open
        self._next_number = next_number

    async def rewind(self, task_id: str, ts: int, *, include: bool) -> TaskRef:
        """Take the task back to its message `ts` (see RewindTask): a running turn
        is cancelled first, then the messages after the point are removed, what
        their summaries and truncations hid comes back, in one transaction with the
        `taskRewound` event; the task is loaded again from the store."""
        self._check_open()
        async with self._loaded.lease(task_id) as task:
            await task.stop()
            ui, api = await self._history_of(task)
            plan = plan_rewind(ui, api, ts, include=include)
            writes: list[Write] = []
            if plan.ui_from_ts is not None:
                writes.append(delete_ui_messages_from(task_id, plan.ui_from_ts))
            writes.append(delete_api_messages_from(task_id, plan.api_kept))
            for index, message in plan.restored.items():
                writes.append(api_write(task_id, index, message)[1])
            writes.append(turn_write(task_id, None))
            # What waited for the task went with the rewind.
            writes.append(save_queued(task_id, None))
            item = msgspec.structs.replace(task.item, state=TaskState.IDLE)
            writes.append(update_task(item))
            await self._journal.emit(
                TaskRewound(payload=(task_id, plan.ui_from_ts or ts + 1)), *writes
            )
            await committed_unless_failing(self._store, self._journal)
        # What is in memory (queue, partial messages) went with the rewind.
        state = await self._reloaded(task_id)
        log.info("task rewound", task_id=task_id, ts=ts, include=include)
        return TaskRef(task_id=task_id, state=state)

    async def rewind_for_edit(
        self,
        task_id: str,
        ts: int,
        text: str,
        images: list[str] | None,
        context: PromptContext | None = None,
    ) -> SendMessageData:
        """The first half of EditMessage: check that the user's message `ts` may
        be replaced and rewind the task to before it. The message to send in
        its place is returned (sending it is the second half)."""
        self._check_open()
        loaded = self._loaded.get(task_id)  # (else the current profile's model is named)
        check_prompt_size(text, self._providers, loaded.item.api_config_name if loaded else None)
        await self._journal.flush_for_read()
        body = await self._store.read(self._store.db.ui_message, task_id, ts)
        message = None if body is None else _message_decoder.decode(body)
        if message is None or message.say != Say.USER_FEEDBACK:
            raise BadRequest(
                f"Message {ts} of task {task_id} is not a message of yours that can be "
                "edited (the task's first message cannot: fork the task instead).",
            )
        await self.rewind(task_id, ts, include=True)
        return SendMessageData(text=text, images=images, context=context)

    async def delete_message(self, task_id: str, ts: int) -> TaskRef:
        """Delete the message `ts` (see DeleteMessage): a running turn is
        cancelled first, then the message goes from both histories (a tool call
        with its result and all its messages, a summary that condensed it), in one
        transaction with the `taskMessagesDeleted` event; the task is loaded again
        from the store. A turn saved to be resumed goes too if a call of it goes."""
        self._check_open()
        async with self._loaded.lease(task_id) as task:
            was_busy = task.busy
            await task.stop()
            ui, api = await self._history_of(task)
            plan = plan_delete(ui, api, ts)
            writes: list[Write] = [delete_ui_message(task_id, gone) for gone in plan.ui_removed]
            writes.append(delete_api_messages_from(task_id, plan.api_from))
            for offset, message in enumerate(plan.api_tail):
                writes.append(api_write(task_id, plan.api_from + offset, message)[1])
            if was_busy or (plan.tool_calls and task.turn is not None):
                # The turn was cancelled (or its call is gone): nothing of it is
                # to be resumed.
                writes.append(turn_write(task_id, None))
                item = msgspec.structs.replace(task.item, state=TaskState.IDLE)
                writes.append(update_task(item))
            await self._journal.emit(
                TaskMessagesDeleted(payload=(task_id, plan.ui_removed)), *writes
            )
            await committed_unless_failing(self._store, self._journal)
        state = await self._reloaded(task_id)
        log.info("message deleted", task_id=task_id, ts=ts, removed=len(plan.ui_removed))
        return TaskRef(task_id=task_id, state=state)

    async def fork(self, task_id: str, ts: int) -> TaskRef:
        """A new task with the history of `task_id` up to its message `ts` (ForkTask)."""
        self._check_open()
        async with self._loaded.lease(task_id) as task:
            ui, api = await self._history_of(task)
        plan = plan_rewind(ui, api, ts, include=False)
        new_id = str(uuid.uuid4())
        item = msgspec.structs.replace(
            task.item,
            id=new_id,
            number=self._next_number(),
            ts=int(time.time() * 1000),
            state=TaskState.IDLE,
            tokens_in=0,
            tokens_out=0,
            total_cost=0.0,
            cache_reads=None,
            cache_writes=None,
            child_ids=None,
            parent_task_id=None,
            root_task_id=None,
        )
        writes: list[Write] = [insert_task(item)]
        for shown in ui[: plan.ui_kept]:
            writes.append(save_ui_message(new_id, shown.ts, _message_encoder.encode(shown)))
        for index, sent in enumerate(api[: plan.api_kept]):
            writes.append(api_write(new_id, index, plan.restored.get(index, sent))[1])
        await self._journal.emit(TaskCreated(payload=(new_id,)), *writes)
        await committed_unless_failing(self._store, self._journal)
        log.info("task forked", task_id=task_id, ts=ts, new_task_id=new_id)
        return TaskRef(task_id=new_id, state=TaskState.IDLE)

    async def _reloaded(self, task_id: str) -> TaskState:
        """Load the task again from the store (its history changed there); its state."""
        self._loaded.drop(task_id)
        async with self._loaded.lease(task_id) as task:
            pass
        return task.state

    async def _history_of(self, task: Task) -> tuple[list[ClineMessage], list[ApiMessage]]:
        """The task's UI messages as stored and its API history."""
        await self._journal.flush_for_read()
        bodies = await self._store.read(self._store.db.ui_messages, task.id)
        return [_message_decoder.decode(b) for b in bodies], list(task.history.messages)
