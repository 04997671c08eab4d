"""The database: the store's SQL, written once over a backend's connections.

`Database` holds every statement and read the daemon makes; its two backends,
:class:`~.sqlite.SqliteDatabase` (the default: one file in the data dir) and
:class:`~.postgres.PostgresDatabase` (``store.url``), open the connections and
supply what differs: a :class:`~.dialect.Dialect`'s fragments, how the schema's
version is kept, which errors mean what (see :mod:`.health`), and what to tell a
person when something fails.

Each backend has one writer connection and one reader connection. Methods here
are synchronous and run on worker threads (see `Store`), or on the event loop's
thread where the backend is a local file (`inline`); the writer connection is
only ever used by the journal's writer, one batch at a time, and retention.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any, ClassVar, overload

import structlog

from hdsp.protocol import StorageState

from .blobs import (
    BLOB_MARKER,
    MIN_BLOB_CHARS,
    Blob,
    extract_blobs,
    referenced_hashes,
    resolve_references,
)
from .dialect import Connection, Dialect
from .errors import StoreTooNew
from .health import Fault
from .migrations import MIGRATIONS, SCHEMA_VERSION

__all__ = ["READ_BLOB_BUDGET", "STARTUP_CHECK_SECONDS", "Database", "EventRow", "TaskRow", "Write"]

#: How long the quick check at start-up may take; a bigger database is checked
#: that far, tables in the order they were made (tasks and UI messages first):
#: `hdspd check` checks all of it. A database of 10,000 messages takes ~110 ms.
STARTUP_CHECK_SECONDS = 0.03

log = structlog.get_logger("hdsp.store")

#: One statement of a batch: SQL (``?`` placeholders, see :mod:`.dialect`) and
#: its parameters.
Write = tuple[str, Sequence[Any]]

#: (id, number, ts, state, item JSON)
TaskRow = tuple[str, int, int, str, bytes]

#: An event row: (seq, topic, ts, body).
EventRow = tuple[int, str, int, bytes]


#: Bytes of base64 that one read for a client (a GetTask snapshot, a Replay page)
#: puts back in place of blob references: half the default frame limit. Past it,
#: references stay, and the client fetches those images with GetBlob.
READ_BLOB_BUDGET = 32 * 1024 * 1024

#: Statements whose last parameter is a record that may hold images: stored with
#: blob references instead (see `blobs`).
_RECORDS_WITH_IMAGES = ("INSERT INTO ui_messages ", "INSERT INTO api_messages ")
_INSERT_BLOB = (
    "INSERT INTO blobs (sha256, media_type, size, data) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (sha256) DO NOTHING"
)
_OWN_BLOB = "INSERT INTO task_blobs (task_id, sha256) VALUES (?, ?) ON CONFLICT DO NOTHING"
_INSERT_EVENT = "INSERT INTO events (seq, topic, ts, body) VALUES (?, ?, ?, ?)"


class _Images:
    """The blobs one batch stores, and which task stored each (a task reads back
    only the blobs it stored: see `blobs`)."""

    def __init__(self) -> None:
        self.blobs: dict[str, Blob] = {}
        self.owners: set[tuple[str, str]] = set()

    def extract(self, owner: str, body: bytes) -> bytes:
        body, found = extract_blobs(body)
        for blob in found:
            self.blobs.setdefault(blob.sha256, blob)
            self.owners.add((owner, blob.sha256))
        return body

    def record(self, sql: str, params: Sequence[Any]) -> Sequence[Any]:
        """`params` with the record's images replaced by references (its first
        parameter is its task's id)."""
        if not sql.startswith(_RECORDS_WITH_IMAGES) or not isinstance(params[-1], bytes):
            return params
        body = self.extract(str(params[0]), params[-1])
        return params if body is params[-1] else (*params[:-1], body)


class Batch:
    """One commit's statements, images stored as blobs (see `Database.batch`)."""

    __slots__ = ("images", "rows", "writes")

    def __init__(self, writes: Sequence[Write], events: Sequence[EventRow]) -> None:
        images = self.images = _Images()
        self.writes = [(sql, images.record(sql, params)) for sql, params in writes]
        rows: Sequence[EventRow] = events
        if any(len(body) >= MIN_BLOB_CHARS for *_, body in events):
            rows = [
                (seq, topic, ts, images.extract(topic, body)) for seq, topic, ts, body in events
            ]
        self.rows = rows

    def apply(self, conn: Connection) -> None:
        """Run the batch's statements on `conn`, in its open transaction: the
        blobs, the writes, then the event rows."""
        images = self.images
        if images.blobs:
            conn.executemany(
                _INSERT_BLOB,
                [(b.sha256, b.media_type, len(b.data), b.data) for b in images.blobs.values()],
            )
            conn.executemany(_OWN_BLOB, sorted(images.owners))
        # A run of the same statement goes in one executemany (a batch's message
        # upserts): in order, one prepared statement, no call per row.
        for sql, run in groupby(self.writes, key=itemgetter(0)):
            conn.executemany(sql, [params for _, params in run])
        if self.rows:
            conn.executemany(_INSERT_EVENT, self.rows)


class Database:
    #: The SQL fragments that differ between the backends.
    dialect: ClassVar[Dialect]
    #: The backend's errors (a commit or a read that fails raises one of these).
    errors: ClassVar[tuple[type[Exception], ...]]
    #: Whether a short read or commit may run on the event loop's thread: a local
    #: file answers in tens of microseconds, a server takes a round trip.
    inline: ClassVar[bool]
    #: Whether the backend keeps a log that the journal has checkpointed beside
    #: the writer (SQLite's WAL; see `checkpoint`).
    checkpoints_log: ClassVar[bool] = False
    #: Where the database is, for messages: a path, or a URL.
    where: str

    _writer: Connection
    _reader: Connection

    # ---- what the backend says ------------------------------------------------

    def classify(self, exc: BaseException) -> Fault | None:
        """What kind of storage fault `exc` (one of `errors`) is; None: none (a
        bug, such as a constraint a statement broke)."""
        raise NotImplementedError

    def advice(self, state: StorageState) -> str:
        """What a person can do about the storage in `state`."""
        raise NotImplementedError

    def read_failed_message(self, exc: BaseException) -> str:
        """Why a read failed with a fault that may pass, for an error reply."""
        raise NotImplementedError

    # ---- schema -------------------------------------------------------------

    def _stored_version(self) -> int:
        raise NotImplementedError

    def _run_script(self, script: str) -> None:
        """Run one migration's SQL on the writer, in the open transaction."""
        raise NotImplementedError

    def _set_version(self, version: int) -> None:
        """Record the schema's version, in the open transaction."""
        raise NotImplementedError

    def _too_new_advice(self) -> str:
        raise NotImplementedError

    def _migrate(self) -> None:
        version = self._stored_version()
        if version > SCHEMA_VERSION:
            raise StoreTooNew(
                f"The database {self.where} has schema version {version}, newer than this "
                f"hdsp understands ({SCHEMA_VERSION}). Upgrade hdsp, or "
                f"{self._too_new_advice()}."
            )
        conn = self._writer
        for number in range(version, SCHEMA_VERSION):
            migration = MIGRATIONS[number]
            conn.execute(self.dialect.begin_write)
            try:
                self._run_script(migration.script(self.dialect))
                if migration.fill is not None:
                    migration.fill(conn, self.dialect)
                self._set_version(number + 1)
                conn.execute("COMMIT")
            except BaseException:
                self._rollback(conn)
                raise
            log.info("database schema migrated", version=number + 1, database=self.where)

    def schema_version(self) -> int:
        return self._stored_version()

    def close(self) -> None:
        raise NotImplementedError

    def checkpoint(self) -> tuple[int, int]:
        """Keep the backend's log short, beside the writer (see `Journal`): SQLite's
        WAL. Returns (log pages, pages checkpointed); (0, 0) where the server
        does it itself."""
        return 0, 0

    # ---- writing (writer thread) -------------------------------------------

    def commit(self, writes: Sequence[Write], events: Sequence[EventRow]) -> None:
        """Apply one batch in one transaction: the writes, then the event rows.
        Images in UI and API messages and in events are stored once, as blobs in
        the same transaction, and the records refer to them (see `blobs`)."""
        raise NotImplementedError

    def _rollback(self, conn: Connection) -> None:
        """Roll back after a failure, keeping the failure's error (a rollback can
        fail too on a disk or a connection that fails; the next commit tries
        again)."""
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except self.errors:
                pass

    def prune_events(self, before_ts: int, keep_last: int) -> int:
        """Delete events older than `before_ts` (ms) or beyond the newest
        `keep_last`; the newest event always stays, so `seq` never goes back.
        Task histories are not touched. Blobs that no record refers to any more
        go in the same transaction (see `_drop_orphan_blobs`). Returns how many
        events were deleted."""
        conn = self._writer
        head = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]
        by_count = head - max(keep_last, 1)
        by_age = conn.execute(self.dialect.seq_before_ts, (before_ts,)).fetchone()[0]
        cutoff = min(max(by_count, by_age), head - 1)
        if cutoff <= 0:
            return 0
        conn.execute(self.dialect.begin_write)
        try:
            deleted = conn.execute("DELETE FROM events WHERE seq <= ?", (cutoff,)).rowcount
            orphans = self._drop_orphan_blobs(conn)
            conn.execute("COMMIT")
        except BaseException:
            self._rollback(conn)
            raise
        if orphans:
            log.info("blobs no record refers to were dropped", blobs=orphans)
        return int(deleted)

    def _drop_orphan_blobs(self, conn: Connection) -> int:
        """Delete the blobs no record refers to (in the caller's transaction): images
        of messages a rewind or DeleteMessage removed, once the events that showed
        them were pruned too (until then Replay still shows them). How many went.

        Only the records of tasks that stored blobs are read: a reference counts only
        in a record of a task that owns the blob (`task_blobs`, written with every
        record that refers to one, see `blobs`), since no other can read it back. So
        retention on a big log reads no record of a task without images."""
        referenced: set[tuple[str, str]] = set()
        holds = self.dialect.holds("body")
        owners = [task_id for (task_id,) in conn.execute("SELECT DISTINCT task_id FROM task_blobs")]
        for task_id in owners:
            for table, column in _BLOB_RECORDS:
                rows = conn.execute(
                    f"SELECT body FROM {table} WHERE {column} = ? AND {holds}",
                    (task_id, BLOB_MARKER),
                )
                for (body,) in rows:
                    referenced.update((task_id, sha) for sha in referenced_hashes(bytes(body)))
        kept = {
            sha
            for (task_id, sha) in conn.execute("SELECT task_id, sha256 FROM task_blobs")
            if (task_id, sha) in referenced
        }
        orphans = [(sha,) for (sha,) in conn.execute("SELECT sha256 FROM blobs") if sha not in kept]
        if orphans:
            conn.executemany("DELETE FROM blobs WHERE sha256 = ?", orphans)
            # Nobody owns what is gone: an image stored again later is owned anew.
            conn.executemany("DELETE FROM task_blobs WHERE sha256 = ?", orphans)
        return len(orphans)

    # ---- reading (reader thread) --------------------------------------------

    def head_seq(self) -> int:
        return int(self._reader.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])

    def oldest_seq(self) -> int:
        """The smallest seq still kept (1 while nothing was ever pruned)."""
        row = self._reader.execute("SELECT MIN(seq) FROM events").fetchone()
        return int(row[0]) if row[0] is not None else 1

    def last_seq_by_topic(self) -> dict[str, int]:
        """Every topic's newest seq (reads the whole log: `last_seq_of` reads one)."""
        rows = self._reader.execute("SELECT topic, MAX(seq) FROM events GROUP BY topic")
        return {topic: int(seq) for topic, seq in rows}

    def last_seq_of(self, topic: str) -> int:
        """The newest seq of one topic (0 if none is kept), through its index."""
        row = self._reader.execute(
            "SELECT MAX(seq) FROM events WHERE topic = ?", (topic,)
        ).fetchone()
        return int(row[0] or 0)

    def max_task_number(self) -> int:
        return int(self._reader.execute("SELECT COALESCE(MAX(number), 0) FROM tasks").fetchone()[0])

    def replay(self, since_seq: int, topic: str | None, limit: int) -> list[bytes]:
        if topic is None:
            rows = self._reader.execute(
                "SELECT topic, body FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                (since_seq, limit),
            )
        else:
            rows = self._reader.execute(
                "SELECT topic, body FROM events WHERE topic = ? AND seq > ? ORDER BY seq LIMIT ?",
                (topic, since_seq, limit),
            )
        records = [(str(owner), bytes(body)) for owner, body in rows]
        return resolve_references(records, self._owned_blobs, READ_BLOB_BUDGET)

    def list_tasks(self, before_number: int | None, limit: int) -> list[TaskRow]:
        if before_number is None:
            rows = self._reader.execute(
                "SELECT id, number, ts, state, item FROM tasks ORDER BY number DESC LIMIT ?",
                (limit,),
            )
        else:
            rows = self._reader.execute(
                "SELECT id, number, ts, state, item FROM tasks WHERE number < ? "
                "ORDER BY number DESC LIMIT ?",
                (before_number, limit),
            )
        return [(r[0], r[1], r[2], r[3], bytes(r[4])) for r in rows]

    def tasks_with_prefix(self, prefix: str, limit: int) -> list[TaskRow]:
        """Up to `limit` tasks whose id starts with `prefix`, newest first: a range
        of the id's index, not a pass over every task."""
        if not prefix:
            return self.list_tasks(None, limit)
        # Ids from `prefix` up to the first string past every one starting with it.
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        rows = self._reader.execute(
            "SELECT id, number, ts, state, item FROM tasks WHERE id >= ? AND id < ? "
            "ORDER BY number DESC LIMIT ?",
            (prefix, end, limit),
        )
        return [(r[0], r[1], r[2], r[3], bytes(r[4])) for r in rows]

    def get_task(self, task_id: str) -> TaskRow | None:
        r = self._reader.execute(
            "SELECT id, number, ts, state, item FROM tasks WHERE id = ?", (task_id,)
        ).fetchone()
        return None if r is None else (r[0], r[1], r[2], r[3], bytes(r[4]))

    def snapshot(self, task_id: str) -> tuple[TaskRow, list[bytes], int] | None:
        """The task row, its UI messages and the head seq, read in one transaction
        so that the messages reflect exactly the events up to that seq."""
        conn = self._reader
        conn.execute(self.dialect.begin_read)
        try:
            row = self.get_task(task_id)
            if row is None:
                return None
            messages = [
                bytes(b)
                for (b,) in conn.execute(
                    "SELECT body FROM ui_messages WHERE task_id = ? ORDER BY ts", (task_id,)
                )
            ]
            return row, self._resolved(task_id, messages, READ_BLOB_BUDGET), self.head_seq()
        finally:
            conn.execute("COMMIT")

    def message_page(
        self, task_id: str, start: int, after_ts: int | None, limit: int
    ) -> tuple[int, int, list[tuple[int, bytes]], int] | None:
        """A page of a task's UI messages in ts order, read in one transaction:
        (total, index of the page's first message, up to `limit` (ts, body) pairs,
        head seq); None if there is no such task. The page starts at index `start`,
        or after the message `after_ts` when that is given."""
        conn = self._reader
        conn.execute(self.dialect.begin_read)
        try:
            if self.get_task(task_id) is None:
                return None
            (total,) = conn.execute(
                "SELECT COUNT(*) FROM ui_messages WHERE task_id = ?", (task_id,)
            ).fetchone()
            if after_ts is not None:
                (start,) = conn.execute(
                    "SELECT COUNT(*) FROM ui_messages WHERE task_id = ? AND ts <= ?",
                    (task_id, after_ts),
                ).fetchone()
                rows = conn.execute(
                    "SELECT ts, body FROM ui_messages WHERE task_id = ? AND ts > ? "
                    "ORDER BY ts LIMIT ?",
                    (task_id, after_ts, limit),
                )
            else:
                rows = conn.execute(
                    "SELECT ts, body FROM ui_messages WHERE task_id = ? "
                    "ORDER BY ts LIMIT ? OFFSET ?",
                    (task_id, limit, start),
                )
            found = [(int(ts), bytes(body)) for ts, body in rows]
            # Images put back as GetTask has them (the same budget).
            bodies = self._resolved(task_id, [body for _, body in found], READ_BLOB_BUDGET)
            page = [(ts, body) for (ts, _), body in zip(found, bodies, strict=True)]
            return int(total), int(start), page, self.head_seq()
        finally:
            conn.execute("COMMIT")

    @overload
    def api_messages(self, task_id: str) -> list[bytes]: ...
    @overload
    def api_messages(self, task_id: str, max_bytes: int | None) -> list[bytes] | None: ...
    def api_messages(self, task_id: str, max_bytes: int | None = None) -> list[bytes] | None:
        """A task's API history, images and all; None once it passes `max_bytes`
        (if given), and when it refers to images (putting them back is no work
        for the event loop's thread, which is what a bound is for)."""
        rows = self._reader.execute(
            "SELECT body FROM api_messages WHERE task_id = ? ORDER BY idx", (task_id,)
        )
        if max_bytes is None:
            return self._resolved(task_id, [bytes(b) for (b,) in rows])
        bodies = []
        for (b,) in rows:
            max_bytes -= len(b)
            if max_bytes < 0 or BLOB_MARKER in b:
                return None
            bodies.append(bytes(b))
        return bodies

    def last_message_ts(self, task_id: str) -> int:
        row = self._reader.execute(
            "SELECT COALESCE(MAX(ts), 0) FROM ui_messages WHERE task_id = ?", (task_id,)
        ).fetchone()
        return int(row[0])

    def queued_messages(self, task_id: str) -> bytes | None:
        """The messages that wait for the task, as saved (see `save_queued`)."""
        row = self._reader.execute("SELECT queued FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return None if row is None or row[0] is None else bytes(row[0])

    def open_turns(self) -> list[tuple[TaskRow, bytes | None]]:
        """Tasks whose last turn did not finish (daemon stopped or crashed), or
        that were running when it stopped, with their saved turn state."""
        rows = self._reader.execute(
            "SELECT id, number, ts, state, item, turn FROM tasks "
            "WHERE turn IS NOT NULL OR state IN ('running', 'interactive', 'paused')"
        )
        return [
            ((r[0], r[1], r[2], r[3], bytes(r[4])), None if r[5] is None else bytes(r[5]))
            for r in rows
        ]

    def ui_message(self, task_id: str, ts: int) -> bytes | None:
        row = self._reader.execute(
            "SELECT body FROM ui_messages WHERE task_id = ? AND ts = ?", (task_id, ts)
        ).fetchone()
        return None if row is None else self._resolved(task_id, [bytes(row[0])])[0]

    def ui_messages(self, task_id: str) -> list[bytes]:
        rows = self._reader.execute(
            "SELECT body FROM ui_messages WHERE task_id = ? ORDER BY ts", (task_id,)
        )
        return self._resolved(task_id, [bytes(b) for (b,) in rows])

    def partial_ui_messages(self, task_id: str) -> list[bytes]:
        """A task's UI messages stored while still streaming (`"partial":true`:
        only a key can hold that unescaped; the caller decodes to be sure)."""
        rows = self._reader.execute(
            f"SELECT body FROM ui_messages WHERE task_id = ? AND {self.dialect.holds('body')} "
            "ORDER BY ts",
            (task_id, b'"partial":true'),
        )
        return self._resolved(task_id, [bytes(b) for (b,) in rows])

    # ---- blobs (reader thread) ----------------------------------------------

    def _resolved(
        self, task_id: str, bodies: list[bytes], budget: int | None = None
    ) -> list[bytes]:
        """`bodies` (records of task `task_id`) with their blob references
        replaced by the images' base64 (see `blobs`)."""
        records = [(task_id, body) for body in bodies]
        return resolve_references(records, self._owned_blobs, budget)

    def _owned_blobs(self, task_id: str, hashes: Iterable[str]) -> dict[str, tuple[str, bytes]]:
        """The blobs among `hashes` that task `task_id` stored itself."""
        wanted = list(hashes)
        found: dict[str, tuple[str, bytes]] = {}
        for start in range(0, len(wanted), 500):  # SQLite's limit on parameters
            chunk = wanted[start : start + 500]
            rows = self._reader.execute(
                f"SELECT b.sha256, b.media_type, b.data FROM task_blobs AS t "
                f"JOIN blobs AS b ON b.sha256 = t.sha256 "
                f"WHERE t.task_id = ? AND t.sha256 IN ({','.join('?' * len(chunk))})",
                [task_id, *chunk],
            )
            found.update((sha, (media_type, bytes(data))) for sha, media_type, data in rows)
        return found

    def blob(self, sha256: str, offset: int, length: int) -> tuple[str, int, bytes] | None:
        """`length` bytes of a blob from `offset` on, with its media type and whole
        size; None when there is no such blob."""
        row = self._reader.execute(
            "SELECT media_type, size, substr(data, ?, ?) FROM blobs WHERE sha256 = ?",
            (offset + 1, length, sha256),
        ).fetchone()
        if row is None:
            return None
        return str(row[0]), int(row[1]), bytes(row[2] or b"")

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one SELECT on the reader connection (for parts that keep
        tables of their own, such as checkpoints)."""
        return self._reader.execute(sql, params).fetchall()

    def task_count(self) -> int:
        """How many tasks there are, without reading the table where the backend
        can tell (see `Dialect.task_count`)."""
        row = self._reader.execute(self.dialect.task_count).fetchone()
        return int(row[0] or 0)

    def counts(self) -> tuple[int, int]:
        """(tasks, events), counted: reads every row (`hdspd check`, tests)."""
        tasks = self._reader.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
        events = self._reader.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        return int(tasks), int(events)


#: The records that may refer to blobs, and the column naming their task.
_BLOB_RECORDS = (("ui_messages", "task_id"), ("api_messages", "task_id"), ("events", "topic"))
