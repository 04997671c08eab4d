"""The statements that change tasks and their API history, as `Write`s for the
journal (so they commit together with the events that announce them)."""

from __future__ import annotations

from hdsp.protocol import HistoryItem, encode

from .database import Write

__all__ = ["append_api_message", "insert_task", "save_turn", "save_ui_message", "update_task"]


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


def save_turn(task_id: str, turn: bytes | None) -> Write:
    """Record where the task's unfinished turn stands (None: no turn is open)."""
    return ("UPDATE tasks SET turn = ? WHERE id = ?", (turn, task_id))


def save_ui_message(task_id: str, ts: int, body: bytes) -> Write:
    """Store the current text of a message still streaming, with no event: what a
    restart after a crash knows of it (partial updates themselves are live-only)."""
    return (
        "INSERT INTO ui_messages (task_id, ts, body) VALUES (?, ?, ?) "
        "ON CONFLICT (task_id, ts) DO UPDATE SET body = excluded.body",
        (task_id, ts, body),
    )
