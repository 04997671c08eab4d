"""Reading tasks for clients: the list of tasks, a task's snapshot and its
messages page by page (ListTasks, GetTask, GetTaskPage).

Reads come from the store after the journal flushed what it holds; a loaded
task's item, state, queue and the messages it is streaming come from memory,
which is newer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import msgspec

from hdsp.daemon.errors import BadRequest, CommandError, WrongState
from hdsp.daemon.store import Journal, Store
from hdsp.protocol import (
    MAX_TASK_PAGE,
    ClineMessage,
    HistoryItem,
    TaskList,
    TaskPage,
    TaskSnapshot,
    TaskState,
)

from .errors import AskAnswered, TaskNotFound
from .loaded import LoadedTasks
from .queued import decode_queued

__all__ = ["TaskReads", "stored_messages"]

_item_decoder = msgspec.json.Decoder(HistoryItem)
_message_decoder = msgspec.json.Decoder(ClineMessage)


def stored_messages(
    bodies: Sequence[bytes], partial: dict[int, ClineMessage], *, as_stored: bool
) -> list[ClineMessage]:
    """A task's stored UI messages, with the ones still streaming (`partial`: newer
    in memory than stored) taken from memory. `as_stored`, for a reply: while none
    streams, the stored JSON is spliced in as it is (the journal encoded and
    scrubbed it once) as `msgspec.Raw`, not decoded to be encoded again: only for
    encoding."""
    if as_stored and not partial:
        return cast(list[ClineMessage], [msgspec.Raw(b) for b in bodies])
    return [partial.get(m.ts, m) for m in (_message_decoder.decode(b) for b in bodies)]


class TaskReads:
    """ListTasks, GetTask and GetTaskPage over the store and the loaded tasks."""

    def __init__(self, store: Store, journal: Journal, loaded: LoadedTasks) -> None:
        self._store = store
        self._journal = journal
        self._loaded = loaded

    async def list_tasks(
        self, cursor: str | None, limit: int, id_prefix: str | None = None
    ) -> TaskList:
        if limit < 1 or limit > 1000:
            raise BadRequest("limit must be between 1 and 1000.")
        store = self._store
        if id_prefix is not None:
            if cursor is not None:
                raise BadRequest("idPrefix gives one page: send it without cursor.")
            await self._journal.flush_for_read()
            rows = await store.read(store.db.tasks_with_prefix, id_prefix, limit)
            return TaskList(tasks=[self._live_item(_item_decoder.decode(r[4])) for r in rows])
        before: int | None = None
        if cursor is not None:
            try:
                before = int(cursor)
            except ValueError:
                raise BadRequest(
                    f"Invalid cursor {cursor!r}: pass the nextCursor of a previous ListTasks.",
                ) from None
        await self._journal.flush_for_read()
        rows = await store.read(store.db.list_tasks, before, limit + 1)
        items = [_item_decoder.decode(r[4]) for r in rows[:limit]]
        items = [self._live_item(i) for i in items]
        next_cursor = str(rows[limit - 1][1]) if len(rows) > limit else None
        return TaskList(tasks=items, next_cursor=next_cursor)

    async def why_no_ask(self, task_id: str, ask_ts: int) -> CommandError:
        """Why no ask `ask_ts` waits in the task `task_id`, which is not loaded
        (a waiting ask keeps its task loaded): no such task, the ask was
        answered already, or none waits."""
        store = self._store
        await self._journal.flush_for_read()
        row = await store.read(store.db.get_task, task_id)
        if row is None:
            return TaskNotFound(task_id)
        body = await store.read(store.db.ui_message, task_id, ask_ts)
        if body is not None:
            message = _message_decoder.decode(body)
            if message.type == "ask" and message.is_answered:
                return AskAnswered(ask_ts, task_id)
        return WrongState(f"No ask waits in task {task_id}.")

    def _live_item(self, item: HistoryItem) -> HistoryItem:
        task = self._loaded.get(item.id)
        return task.item if task is not None else item

    async def snapshot(self, task_id: str, *, as_stored: bool = False) -> TaskSnapshot:
        """The task and its messages (`as_stored`: as their stored JSON, for a reply
        that is encoded at once; see `stored_messages`)."""
        store = self._store
        await self._journal.flush_for_read()
        snap = await store.read(store.db.snapshot, task_id)
        if snap is None:
            raise TaskNotFound(task_id)
        row, bodies, head_seq = snap
        task = self._loaded.get(task_id)
        messages = stored_messages(
            bodies, task.messages.partial if task is not None else {}, as_stored=as_stored
        )
        item = _item_decoder.decode(row[4])
        state = TaskState(row[3])
        if task is not None:
            item, state = task.item, task.state
            queue = list(task.queue)
        else:
            queue = decode_queued(await store.read(store.db.queued_messages, task_id))
        pending = task.pending_ask if task is not None else None
        return TaskSnapshot(
            item=item,
            state=state,
            messages=messages,
            head_seq=head_seq,
            queue=queue,
            pending_ask=pending,
        )

    async def page(
        self, task_id: str, start: int, after_ts: int | None, limit: int, *, as_stored: bool = False
    ) -> TaskPage:
        """Up to `limit` of a task's UI messages, as `snapshot` has them, from
        index `start` or after the message `after_ts` (a previous page's cursor)."""
        if not 1 <= limit <= MAX_TASK_PAGE:
            raise BadRequest(f"limit must be between 1 and {MAX_TASK_PAGE}.")
        if start < 0:
            raise BadRequest("start must be 0 or more.")
        store = self._store
        await self._journal.flush_for_read()
        read = await store.read(store.db.message_page, task_id, start, after_ts, limit)
        if read is None:
            raise TaskNotFound(task_id)
        total, first, rows, head_seq = read
        if first > total:
            raise BadRequest(
                f"start {first} is past the end of the task's history ({total} messages).",
            )
        task = self._loaded.get(task_id)
        partial = task.messages.partial if task is not None else {}
        messages = stored_messages([body for _, body in rows], partial, as_stored=as_stored)
        more = first + len(rows) < total
        return TaskPage(
            messages=messages,
            start=first,
            total=total,
            next_cursor=str(rows[-1][0]) if more and rows else None,
            head_seq=head_seq,
        )
