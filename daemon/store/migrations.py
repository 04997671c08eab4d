"""Schema migrations, numbered the same on both backends: migration N makes the
same tables on SQLite and on PostgreSQL, each in its own SQL. How many have been
applied is SQLite's `PRAGMA user_version`, and on PostgreSQL the one row of the
`hdsp_schema` table; each runs once, in its own transaction (PostgreSQL's DDL is
transactional too). Never edit a shipped migration: add one, for both backends.

A migration is SQL, and optionally then a function that fills what it made from
the rows already there (on the same connection, in the same transaction).

PostgreSQL's schema: `bigint` for SQLite's INTEGER (times are milliseconds),
`bytea` for BLOB, and the C collation on ids, so that text sorts by its bytes as
in SQLite (a task id prefix is a range of the index: see
`Database.tasks_with_prefix`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .blobs import BLOB_MARKER, referenced_hashes
from .dialect import Connection, Dialect

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Migration"]


@dataclass(frozen=True, slots=True)
class Migration:
    #: The SQL for each backend: statements separated by semicolons.
    sqlite: str
    postgresql: str
    #: Runs after the SQL, in its transaction.
    fill: Callable[[Connection, Dialect], None] | None = None

    def script(self, dialect: Dialect) -> str:
        return self.sqlite if dialect.name == "sqlite" else self.postgresql

    @classmethod
    def portable(cls, sql: str) -> Migration:
        """A migration whose SQL is the same on both backends."""
        return cls(sqlite=sql, postgresql=sql)


def _task_column(column: str) -> Migration:
    """Add a nullable BLOB (on PostgreSQL: bytea) column to `tasks`."""
    return Migration(
        sqlite=f"ALTER TABLE tasks ADD COLUMN {column} BLOB;",
        postgresql=f"ALTER TABLE tasks ADD COLUMN {column} bytea;",
    )


def _own_referenced_blobs(conn: Connection, dialect: Dialect) -> None:
    """Give each task the blobs its records already refer to where an image
    belongs (records written before migration 4)."""
    owners: set[tuple[str, str]] = set()
    for table, owner in (
        ("ui_messages", "task_id"),
        ("api_messages", "task_id"),
        ("events", "topic"),
    ):
        rows = conn.execute(
            f"SELECT {owner}, body FROM {table} WHERE {dialect.holds('body')}", (BLOB_MARKER,)
        )
        owners.update((task, sha) for task, body in rows for sha in referenced_hashes(bytes(body)))
    conn.executemany(
        "INSERT INTO task_blobs (task_id, sha256) VALUES (?, ?) ON CONFLICT DO NOTHING",
        sorted(owners),
    )


MIGRATIONS: list[Migration] = [
    # 1: tasks, their two histories, and the event log.
    Migration(
        sqlite="""
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
        postgresql="""
        CREATE TABLE tasks (
            id       text COLLATE "C" PRIMARY KEY,
            number   bigint NOT NULL UNIQUE,
            ts       bigint NOT NULL,
            state    text NOT NULL,
            item     bytea NOT NULL
        );
        CREATE TABLE ui_messages (
            task_id  text COLLATE "C" NOT NULL REFERENCES tasks(id),
            ts       bigint NOT NULL,
            body     bytea NOT NULL,
            PRIMARY KEY (task_id, ts)
        );
        CREATE TABLE api_messages (
            task_id  text COLLATE "C" NOT NULL REFERENCES tasks(id),
            idx      bigint NOT NULL,
            body     bytea NOT NULL,
            PRIMARY KEY (task_id, idx)
        );
        -- seq: assigned by the journal, the one writer (no sequence: a sequence
        -- leaves a gap for each rolled-back transaction; see store/postgres.py).
        CREATE TABLE events (
            seq      bigint PRIMARY KEY,
            topic    text COLLATE "C" NOT NULL,
            ts       bigint NOT NULL,
            body     bytea NOT NULL
        );
        CREATE INDEX events_by_topic ON events(topic, seq);
        """,
    ),
    # 2: where an unfinished agent turn stands (phase, tool calls and their
    # status), so that a restarted daemon resumes it instead of starting over.
    _task_column("turn"),
    # 3: images stored once, by content (see store/blobs.py); records refer to
    # them as hdsp-blob: URIs. Rows written before keep their images inline.
    Migration(
        sqlite="""
        CREATE TABLE blobs (
            sha256      TEXT PRIMARY KEY,      -- hex digest of data
            media_type  TEXT NOT NULL,         -- '' when the writer did not say
            size        INTEGER NOT NULL,      -- bytes of data
            data        BLOB NOT NULL
        ) WITHOUT ROWID;
        """,
        postgresql="""
        CREATE TABLE blobs (
            sha256      text COLLATE "C" PRIMARY KEY,
            media_type  text NOT NULL,
            size        bigint NOT NULL,
            data        bytea NOT NULL
        );
        """,
    ),
    # 4: which task stored which blob: a task reads back only its own (a record
    # can name any sha256; see store/blobs.py).
    Migration(
        sqlite="""
        CREATE TABLE task_blobs (
            task_id     TEXT NOT NULL,         -- a task's id; an event's topic
            sha256      TEXT NOT NULL,
            PRIMARY KEY (task_id, sha256)
        ) WITHOUT ROWID;
        """,
        postgresql="""
        CREATE TABLE task_blobs (
            task_id     text COLLATE "C" NOT NULL,
            sha256      text COLLATE "C" NOT NULL,
            PRIMARY KEY (task_id, sha256)
        );
        """,
        fill=_own_referenced_blobs,
    ),
    # 5: retention by age finds the old events without reading the whole log.
    Migration.portable("CREATE INDEX events_by_ts ON events(ts);"),
    # 6: messages sent to a busy task that wait for it (a JSON list of
    # QueuedMessage; NULL when none waits), so that a crash loses none.
    _task_column("queued"),
    # 7: checkpoints (issue 20): each a commit of its workspace's shadow git
    # repository, tied to its task and the message that shows it; and the code
    # each task ran in its kernel, in order, for a restore that replays it.
    Migration(
        sqlite="""
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
        postgresql="""
        CREATE TABLE checkpoints (
            task_id  text COLLATE "C" NOT NULL,
            number   bigint NOT NULL,
            body     bytea NOT NULL,
            PRIMARY KEY (task_id, number)
        );
        CREATE TABLE kernel_executions (
            task_id  text COLLATE "C" NOT NULL,
            seq      bigint NOT NULL,
            body     bytea NOT NULL,
            PRIMARY KEY (task_id, seq)
        );
        """,
    ),
    # 8: restores "with kernel" whose replay waits for the user's approval (issue
    # 20), so that a daemon that dies meanwhile asks again after its restart.
    Migration(
        sqlite="""
        CREATE TABLE pending_replays (
            task_id  TEXT PRIMARY KEY,
            body     BLOB NOT NULL             -- PendingReplay, JSON
        ) WITHOUT ROWID;
        """,
        postgresql="""
        CREATE TABLE pending_replays (
            task_id  text COLLATE "C" PRIMARY KEY,
            body     bytea NOT NULL
        );
        """,
    ),
]

SCHEMA_VERSION = len(MIGRATIONS)
