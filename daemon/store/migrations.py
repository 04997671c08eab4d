"""Schema migrations. `PRAGMA user_version` holds how many have been applied;
each runs once, in its own transaction. Never edit a shipped migration: add one.

A migration is SQL, or SQL and then a function that fills what it made from
the rows already there (on the same connection, in the same transaction)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from .blobs import BLOB_MARKER, referenced_hashes

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Migration"]

#: SQL, or SQL and a function to run after it.
Migration = str | tuple[str, Callable[[sqlite3.Connection], None]]


def _own_referenced_blobs(conn: sqlite3.Connection) -> None:
    """Give each task the blobs its records already refer to where an image
    belongs (records written before migration 4)."""
    owners: set[tuple[str, str]] = set()
    for table, owner in (
        ("ui_messages", "task_id"),
        ("api_messages", "task_id"),
        ("events", "topic"),
    ):
        rows = conn.execute(
            f"SELECT {owner}, body FROM {table} WHERE instr(body, ?) > 0", (BLOB_MARKER,)
        )
        owners.update((task, sha) for task, body in rows for sha in referenced_hashes(bytes(body)))
    conn.executemany(
        "INSERT INTO task_blobs (task_id, sha256) VALUES (?, ?) ON CONFLICT DO NOTHING",
        sorted(owners),
    )


MIGRATIONS: list[Migration] = [
    # 1: tasks, their two histories, and the event log.
    """
    CREATE TABLE tasks (
        id       TEXT PRIMARY KEY,
        number   INTEGER NOT NULL UNIQUE,
        ts       INTEGER NOT NULL,
        state    TEXT NOT NULL,
        item     BLOB NOT NULL             -- HistoryItem, JSON
    );
    CREATE TABLE ui_messages (
        task_id  TEXT NOT NULL REFERENCES tasks(id),
        ts       INTEGER NOT NULL,
        body     BLOB NOT NULL,            -- ClineMessage, JSON
        PRIMARY KEY (task_id, ts)
    ) WITHOUT ROWID;
    CREATE TABLE api_messages (
        task_id  TEXT NOT NULL REFERENCES tasks(id),
        idx      INTEGER NOT NULL,
        body     BLOB NOT NULL,            -- ApiMessage, JSON
        PRIMARY KEY (task_id, idx)
    ) WITHOUT ROWID;
    CREATE TABLE events (
        seq      INTEGER PRIMARY KEY,      -- global, gap-free
        topic    TEXT NOT NULL,            -- task id, '' for daemon-wide events
        ts       INTEGER NOT NULL,         -- milliseconds, for age-based retention
        body     BLOB NOT NULL             -- the TaskEvent envelope as published
    );
    CREATE INDEX events_by_topic ON events(topic, seq);
    """,
    # 2: where an unfinished agent turn stands (phase, tool calls and their
    # status), so that a restarted daemon resumes it instead of starting over.
    """
    ALTER TABLE tasks ADD COLUMN turn BLOB;
    """,
    # 3: images stored once, by content (see store/blobs.py); records refer to
    # them as hdsp-blob: URIs. Rows written before keep their images inline.
    """
    CREATE TABLE blobs (
        sha256      TEXT PRIMARY KEY,      -- hex digest of data
        media_type  TEXT NOT NULL,         -- '' when the writer did not say
        size        INTEGER NOT NULL,      -- bytes of data
        data        BLOB NOT NULL
    ) WITHOUT ROWID;
    """,
    # 4: which task stored which blob: a task reads back only its own (a record
    # can name any sha256; see store/blobs.py).
    (
        """
        CREATE TABLE task_blobs (
            task_id     TEXT NOT NULL,         -- a task's id; an event's topic
            sha256      TEXT NOT NULL,
            PRIMARY KEY (task_id, sha256)
        ) WITHOUT ROWID;
        """,
        _own_referenced_blobs,
    ),
    # 5: retention by age finds the old events without reading the whole log.
    """
    CREATE INDEX events_by_ts ON events(ts);
    """,
    # 6: messages sent to a busy task that wait for it (a JSON list of
    # QueuedMessage; NULL when none waits), so that a crash loses none.
    """
    ALTER TABLE tasks ADD COLUMN queued BLOB;
    """,
    # 7: checkpoints (issue 20): each a commit of its workspace's shadow git
    # repository, tied to its task and the message that shows it; and the code
    # each task ran in its kernel, in order, for a restore that replays it.
    """
    CREATE TABLE checkpoints (
        task_id  TEXT NOT NULL,
        number   INTEGER NOT NULL,         -- 1, 2, ... within the task
        body     BLOB NOT NULL,            -- CheckpointInfo, JSON
        PRIMARY KEY (task_id, number)
    ) WITHOUT ROWID;
    CREATE TABLE kernel_executions (
        task_id  TEXT NOT NULL,
        seq      INTEGER NOT NULL,         -- 1, 2, ... within the task
        body     BLOB NOT NULL,            -- ExecutionRecord, JSON
        PRIMARY KEY (task_id, seq)
    ) WITHOUT ROWID;
    """,
    # 8: restores "with kernel" whose replay waits for the user's approval (issue
    # 20), so that a daemon that dies meanwhile asks again after its restart.
    """
    CREATE TABLE pending_replays (
        task_id  TEXT PRIMARY KEY,
        body     BLOB NOT NULL             -- PendingReplay, JSON
    ) WITHOUT ROWID;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)
