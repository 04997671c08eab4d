"""Schema migrations. `PRAGMA user_version` holds how many have been applied;
each runs once, in its own transaction. Never edit a shipped migration: add one."""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

MIGRATIONS: list[str] = [
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
    # 4: messages sent to a busy task that wait for it (a JSON list of
    # QueuedMessage; NULL when none waits), so that a crash loses none.
    """
    ALTER TABLE tasks ADD COLUMN queued BLOB;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)
