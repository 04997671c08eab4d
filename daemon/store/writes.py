"""The statements that change tasks and their API history, as `Write`s for the
journal (so they commit together with the events that announce them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from hdsp.protocol import HistoryItem, encode

from .database import Write

__all__ = [
    "append_api_message",
    "delete_api_messages_from",
    "delete_ui_message",
    "delete_ui_messages_from",
    "insert_task",
    "latest_writes",
    "save_queued",
    "save_turn",
    "save_ui_message",
    "update_task",
]

_UPDATE_TASK = "UPDATE tasks SET state = ?, item = ? WHERE id = ?"
_UPSERT_API = (
    "INSERT INTO api_messages (task_id, idx, body) VALUES (?, ?, ?) "
    "ON CONFLICT (task_id, idx) DO UPDATE SET body = excluded.body"
)
_SAVE_TURN = "UPDATE tasks SET turn = ? WHERE id = ?"
_SAVE_QUEUED = "UPDATE tasks SET queued = ? WHERE id = ?"
_UPSERT_UI = (
    "INSERT INTO ui_messages (task_id, ts, body) VALUES (?, ?, ?) "
    "ON CONFLICT (task_id, ts) DO UPDATE SET body = excluded.body"
)

#: Writes that set one row's columns whatever they held: of two with the same key
#: (the statement and where its row's key sits among the parameters) only the
#: later one counts.
_KEYS: dict[str, tuple[int, ...]] = {
    _UPDATE_TASK: (2,),
    _UPSERT_API: (0, 1),
    _SAVE_TURN: (1,),
    _SAVE_QUEUED: (1,),
    _UPSERT_UI: (0, 1),
}
#: The same, as functions from a write's parameters to its row's key (a key per
#: write of every batch: a generator and a tuple each cost twice as much).
_ROW_KEY: dict[str, Callable[[Sequence[Any]], object]] = {
    sql: itemgetter(*positions) for sql, positions in _KEYS.items()
}


def insert_task(item: HistoryItem) -> Write:
    return (
        "INSERT INTO tasks (id, number, ts, state, item) VALUES (?, ?, ?, ?, ?)",
        (item.id, item.number, item.ts, item.state or "idle", encode(item)),
    )


def update_task(item: HistoryItem) -> Write:
    return (_UPDATE_TASK, (item.state or "idle", encode(item), item.id))


def append_api_message(task_id: str, index: int, body: bytes) -> Write:
    """Insert or replace message `index` of a task's API history (replacing is how
    non-destructive context management tags old messages)."""
    return (_UPSERT_API, (task_id, index, body))


def save_turn(task_id: str, turn: bytes | None) -> Write:
    """Record where the task's unfinished turn stands (None: no turn is open)."""
    return (_SAVE_TURN, (turn, task_id))


def save_queued(task_id: str, queued: bytes | None) -> Write:
    """Record the messages that wait for the task (None: none waits)."""
    return (_SAVE_QUEUED, (queued, task_id))


def save_ui_message(task_id: str, ts: int, body: bytes) -> Write:
    """Store a UI message as it now is (the journal does so for each message event;
    a task, for the text of a message still streaming, which has no event)."""
    return (_UPSERT_UI, (task_id, ts, body))


def delete_ui_messages_from(task_id: str, ts: int) -> Write:
    """Remove a task's UI messages from `ts` on (a rewind)."""
    return ("DELETE FROM ui_messages WHERE task_id = ? AND ts >= ?", (task_id, ts))


def delete_ui_message(task_id: str, ts: int) -> Write:
    """Remove one of a task's UI messages (DeleteMessage)."""
    return ("DELETE FROM ui_messages WHERE task_id = ? AND ts = ?", (task_id, ts))


def delete_api_messages_from(task_id: str, index: int) -> Write:
    """Remove a task's API messages from `index` on (a rewind)."""
    return ("DELETE FROM api_messages WHERE task_id = ? AND idx >= ?", (task_id, index))


def latest_writes(writes: list[Write]) -> list[Write]:
    """`writes` without those a later one of the batch overwrites: a turn saves its
    state and its task several times over, and a streamed message is created and
    finished in one batch. An earlier write stays when any other statement comes
    between the two (it might read or delete the row)."""
    seen: set[tuple[str, object]] = set()
    kept: list[Write] = []
    keys = _ROW_KEY
    for write in reversed(writes):
        sql, params = write
        row_key = keys.get(sql)
        if row_key is None:
            seen.clear()
        else:
            key = (sql, row_key(params))
            if key in seen:
                continue
            seen.add(key)
        kept.append(write)
    kept.reverse()
    return kept
