"""The statements that change tasks and their API history, as `Write`s for the
journal (so they commit together with the events that announce them)."""

from __future__ import annotations

from hdsp.protocol import HistoryItem, encode

from .database import Write

__all__ = ["append_api_message", "insert_task", "update_task"]


def insert_task(item: HistoryItem) -> Write:
    return (
        "INSERT INTO tasks (id, number, ts, state, item) VALUES (?, ?, ?, ?, ?)",
        (item.id, item.number, item.ts, item.state or "idle", encode(item)),
    )


def update_task(item: HistoryItem) -> Write:
    return (
        "UPDATE tasks SET state = ?, item = ? WHERE id = ?",
        (item.state or "idle", encode(item), item.id),
    )


def append_api_message(task_id: str, index: int, body: bytes) -> Write:
    """Insert or replace message `index` of a task's API history (replacing is how
    non-destructive context management tags old messages)."""
    return (
        "INSERT INTO api_messages (task_id, idx, body) VALUES (?, ?, ?) "
        "ON CONFLICT (task_id, idx) DO UPDATE SET body = excluded.body",
        (task_id, index, body),
    )
