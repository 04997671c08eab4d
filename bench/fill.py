"""A big store, written quickly: tasks, their UI messages and an event log, as
the daemon writes them (the same schema and row formats), with plain sqlite3
batched inserts (going through the journal would take minutes for 1M events)."""

from __future__ import annotations

import sqlite3
import time
import uuid
from pathlib import Path

from hdsp.daemon.store.sqlite import SqliteDatabase
from hdsp.protocol import (
    ClineMessage,
    HistoryItem,
    MessageEvent,
    MessagePayload,
    TaskEvent,
    TaskState,
    encode,
)

__all__ = ["fill_store", "task_ids"]

_TEXT = "The mean of column x is 4.2; here is how it was computed."


def task_ids(count: int) -> list[str]:
    """The ids `fill_store` gives its tasks (random-looking, as uuid4s are)."""
    return [
        str(uuid.UUID(int=(i * 0x9E3779B97F4A7C15_9E3779B97F4A7C15) % (1 << 128), version=4))
        for i in range(1, count + 1)
    ]


def fill_store(
    database: Path, *, tasks: int, events: int, messages_per_task: int = 4, age_days: float = 1
) -> list[str]:
    """Write `tasks` tasks with `messages_per_task` UI messages each, and an event
    log of `events` message events spread round the tasks, `age_days` old (inside
    the default retention). Returns the task ids."""
    database.parent.mkdir(parents=True, exist_ok=True)
    SqliteDatabase(database, check_seconds=0).close()
    ids = task_ids(tasks)
    conn = sqlite3.connect(database, isolation_level=None)
    now = int((time.time() - age_days * 86400) * 1000)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        for n, task_id in enumerate(ids, start=1):
            item = HistoryItem(
                id=task_id, number=n, ts=now + n, task=f"task {n}", state=TaskState.IDLE
            )
            conn.execute(
                "INSERT INTO tasks (id, number, ts, state, item) VALUES (?, ?, ?, ?, ?)",
                (task_id, n, now + n, "idle", encode(item)),
            )
            conn.executemany(
                "INSERT INTO ui_messages (task_id, ts, body) VALUES (?, ?, ?)",
                [
                    (
                        task_id,
                        now + m,
                        encode(ClineMessage(ts=now + m, type="say", say="text", text=_TEXT)),
                    )
                    for m in range(messages_per_task)
                ],
            )
        conn.execute("COMMIT")
        last: dict[str, int] = {}
        batch: list[tuple[int, str, int, bytes]] = []
        for seq in range(1, events + 1):
            task_id = ids[seq % len(ids)] if ids else ""
            msg = ClineMessage(ts=now + seq, type="say", say="text", text=_TEXT)
            event = MessageEvent(payload=(MessagePayload(task_id, "created", msg),))
            body = encode(TaskEvent(data=event, seq=seq, prev_seq=last.get(task_id, 0)))
            last[task_id] = seq
            batch.append((seq, task_id, now + seq // 1000, body))
            if len(batch) == 50_000 or seq == events:
                conn.execute("BEGIN")
                conn.executemany(
                    "INSERT INTO events (seq, topic, ts, body) VALUES (?, ?, ?, ?)", batch
                )
                conn.execute("COMMIT")
                batch = []
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return ids
