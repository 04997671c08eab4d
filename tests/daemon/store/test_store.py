"""The store and the journal on real SQLite files and a real PostgreSQL server
(`store_location` runs a test on each)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import anyio.from_thread
import anyio.lowlevel
import msgspec
import psycopg
import pytest

from hdsp.daemon.store import (
    Database,
    SqliteDatabase,
    Store,
    StoreCorrupt,
    StoreError,
    StoreTooNew,
    append_api_message,
    insert_task,
    open_database,
    save_turn,
    save_ui_message,
    update_task,
)
from hdsp.daemon.store.dialect import POSTGRESQL, SQLITE
from hdsp.daemon.store.journal import CHECKPOINT_EVERY
from hdsp.daemon.store.migrations import MIGRATIONS, SCHEMA_VERSION
from hdsp.daemon.store.sqlite import statements
from hdsp.daemon.store.writes import latest_writes
from hdsp.protocol import (
    ClineMessage,
    HistoryItem,
    MessageEvent,
    MessagePayload,
    TaskCreated,
    TaskEvent,
    TaskState,
    decode_event,
)
from tests.daemon.store.journals import create_task, running_journal


def _item(task_id: str, number: int) -> HistoryItem:
    return HistoryItem(id=task_id, number=number, ts=number, task="t", state=TaskState.IDLE)


def _message(task_id: str, ts: int, text: str, *, partial: bool, action: str) -> MessageEvent:
    msg = ClineMessage(ts=ts, type="say", say="text", text=text, partial=partial or None)
    return MessageEvent(payload=(MessagePayload(task_id, action, msg),))  # type: ignore[arg-type]


class Recorder:
    def __init__(self) -> None:
        self.frames: list[tuple[bytes, TaskEvent]] = []
        self.db: Database | None = None
        self.committed_at_publish: list[int] = []

    async def publish(self, topic: bytes, body: bytes) -> None:
        event = decode_event(body)
        if event.seq is not None and self.db is not None:
            # Written before published: the row must already be readable.
            rows = self.db.replay(event.seq - 1, None, 1)
            assert rows and decode_event(rows[0]).seq == event.seq
        self.frames.append((topic, event))


async def test_journal_orders_persists_and_publishes(store_location: Path | str) -> None:
    rec = Recorder()
    async with Store.open(store_location) as store:
        rec.db = store.db
        async with running_journal(store, rec.publish) as journal:
            for n, tid in enumerate(["a", "b"], start=1):
                await create_task(journal, _item(tid, n))
            await journal.emit(_message("a", 10, "He", partial=True, action="created"))
            await journal.emit(_message("a", 10, "Hel", partial=True, action="updated"))
            await journal.emit(_message("b", 11, "x", partial=False, action="created"))
            await journal.emit(_message("a", 10, "Hello", partial=False, action="updated"))
            await journal.flush()
        events = [e for _, e in rec.frames]
        assert [e.seq for e in events] == [1, 2, 3, None, 4, 5]
        # The live-only update says the durable event it follows (its topic's 3).
        assert [e.prev_seq for e in events] == [0, 0, 1, 3, 2, 3]
        assert [t for t, _ in rec.frames] == [b"a", b"b", b"a", b"a", b"b", b"a"]
        assert journal.head_seq == 5
        snap = store.db.snapshot("a")
        assert snap is not None
        _, bodies, head = snap
        assert head == 5
        messages = [msgspec.json.decode(b, type=ClineMessage) for b in bodies]
        assert [(m.ts, m.text, m.partial) for m in messages] == [(10, "Hello", None)]
        assert [decode_event(b).seq for b in store.db.replay(2, "a", 10)] == [3, 5]


async def test_journal_resumes_seq_after_restart(store_location: Path | str) -> None:
    for round_ in range(2):
        rec = Recorder()
        async with Store.open(store_location) as store:
            async with running_journal(store, rec.publish) as journal:
                await journal.emit(TaskCreated(payload=(f"t{round_}",)))
                await journal.emit(TaskCreated(payload=("same",)))
        seqs = [(e.seq, e.prev_seq) for _, e in rec.frames]
        assert seqs == ([(1, 0), (2, 0)] if round_ == 0 else [(3, 0), (4, 2)])


async def test_journal_batches_under_load(store_location: Path | str) -> None:
    rec = Recorder()
    async with Store.open(store_location) as store:
        async with running_journal(store, rec.publish) as journal:

            async def producer(k: int) -> None:
                for i in range(500):
                    await journal.emit(TaskCreated(payload=(f"p{k}-{i}",)))

            async with anyio.create_task_group() as producers:
                for k in range(4):
                    producers.start_soon(producer, k)
        assert [e.seq for _, e in rec.frames] == list(range(1, 2001))
        assert store.db.counts() == (0, 2000)


def test_corrupt_database_is_reported_not_emptied(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    garbage = b"this is not a database" * 100
    path.write_bytes(garbage)
    with pytest.raises(StoreCorrupt, match="never empties it"):
        SqliteDatabase(path)
    assert path.read_bytes() == garbage


def test_a_postgres_database_of_other_tables_is_refused_untouched(pg_empty_url: str) -> None:
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE tasks (x integer)")
    with pytest.raises(StoreError, match=r"not hdsp's .*createdb hdsp"):
        open_database(pg_empty_url)
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        assert tables.fetchall() == [("tasks",)]


def _set_stored_version(location: Path | str, version: int) -> None:
    if isinstance(location, Path):
        conn = sqlite3.connect(location)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.close()
        return
    with psycopg.connect(location, autocommit=True) as pg:
        pg.execute("UPDATE hdsp_schema SET version = %s", (version,))


def test_newer_schema_is_refused(store_location: Path | str) -> None:
    open_database(store_location).close()
    _set_stored_version(store_location, SCHEMA_VERSION + 1)
    with pytest.raises(StoreTooNew, match="Upgrade hdsp"):
        open_database(store_location)


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_location(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A store that does not exist yet: a new file, or an empty database."""
    if request.param == "sqlite":
        return tmp_path / "db.sqlite3"
    return str(request.getfixturevalue("pg_empty_url"))


def test_migrations_apply_once(empty_location: Path | str) -> None:
    db = open_database(empty_location)
    assert db.schema_version() == SCHEMA_VERSION
    db.close()
    db = open_database(empty_location)  # a second open finds the schema current
    assert db.schema_version() == SCHEMA_VERSION
    assert db.counts() == (0, 0)
    db.close()


def test_an_older_database_is_migrated_with_its_data(empty_location: Path | str) -> None:
    """Made as hdsp's first version made it (migration 1 and nothing else, the
    same number on both backends), with a task and an event in it."""
    item = msgspec.json.encode(_item("old", 1))
    if isinstance(empty_location, Path):
        conn = sqlite3.connect(empty_location, isolation_level=None)
        for statement in statements(MIGRATIONS[0].script(SQLITE)):
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
        conn.execute("INSERT INTO tasks VALUES ('old', 1, 1, 'running', ?)", (item,))
        conn.execute("INSERT INTO events VALUES (1, 'old', 0, x'7b7d')")
        conn.close()
    else:
        with psycopg.connect(empty_location, autocommit=True) as pg:
            pg.execute("CREATE TABLE hdsp_schema (version integer NOT NULL)")
            pg.execute("INSERT INTO hdsp_schema VALUES (1)")
            pg.execute(MIGRATIONS[0].script(POSTGRESQL))
            pg.execute("INSERT INTO tasks VALUES ('old', 1, 1, 'running', %s)", (item,))
            pg.execute("INSERT INTO events VALUES (1, 'old', 0, '\\x7b7d')")

    db = open_database(empty_location)
    assert db.schema_version() == SCHEMA_VERSION
    assert db.get_task("old") is not None and db.head_seq() == 1
    # The new column is there, and the task shows as open (it was running).
    assert [row[0][0] for row in db.open_turns()] == ["old"]
    db.close()


async def test_wal_is_checkpointed_beside_the_writer(tmp_path: Path) -> None:
    """Commits never checkpoint (that would stall them); the journal has the WAL
    checkpointed on the side, so it stays short however long the daemon runs."""
    path = tmp_path / "db.sqlite3"
    wal = path.with_name(path.name + "-wal")
    async with Store.open(path) as store:
        async with running_journal(store, Recorder().publish) as journal:
            await create_task(journal, _item("a", 1))
            sizes = []
            for ts in range(1, 8 * CHECKPOINT_EVERY):
                await journal.emit(_message("a", ts, "x" * 200, partial=False, action="created"))
                await journal.flush()  # one commit each: the most WAL growth per event
                if ts % CHECKPOINT_EVERY == 0:
                    sizes.append(wal.stat().st_size)
        # Without checkpoints the WAL would grow with every commit; with them, the
        # writer goes back to its start and the file stops growing.
        assert sizes[-1] == max(sizes[2:])
        assert sizes[-1] < 4 * sizes[0]
        assert len(store.db.ui_messages("a")) == 8 * CHECKPOINT_EVERY - 1


async def test_a_live_event_goes_out_at_once_but_never_before_what_was_queued(
    store_location: Path | str,
) -> None:
    rec = Recorder()
    async with Store.open(store_location) as store:
        async with running_journal(store, rec.publish) as journal:
            await create_task(journal, _item("a", 1))
            await journal.flush()
            # Nothing queued: a live-only update is published before emit returns.
            await journal.emit(_message("a", 5, "He", partial=True, action="updated"))
            assert rec.frames[-1][1].seq is None
            # Queued (handed to the writer, not yet run): the update waits its turn.
            await journal.emit(_message("a", 6, "x", partial=False, action="created"))
            await journal.emit(_message("a", 6, "xy", partial=True, action="updated"))
            await journal.flush()
        assert [e.seq for _, e in rec.frames] == [1, None, 2, None]


async def _loop_turns_during_commit(store: Store, body: bytes, seq: int) -> int:
    """How many times other tasks ran on the event loop while `store` committed
    an event of `body` (0: the commit held the loop the whole time)."""
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.lowlevel.checkpoint()  # the ticker is running
        before = ticks
        await store.commit([], [(seq, "a", 0, body)])
        done = True
    return ticks - before


async def test_small_batches_commit_on_the_loop_and_big_ones_beside_it(tmp_path: Path) -> None:
    """A small batch is cheaper to commit than to hand to a thread; a big one
    (a long tool output) must not hold up the event loop while it is written."""
    async with Store.open(tmp_path / "db.sqlite3") as store:
        await store.commit([insert_task(_item("a", 1))], [])
        assert await _loop_turns_during_commit(store, b"x" * 100, 1) == 0
        assert await _loop_turns_during_commit(store, b"x" * (8 << 20), 2) > 0
        assert [len(b) for b in store.db.replay(0, "a", 10)] == [100, 8 << 20]


async def test_a_short_history_is_read_on_the_loop_unless_a_thread_has_the_reader(
    tmp_path: Path,
) -> None:
    async with Store.open(tmp_path / "db.sqlite3") as store:
        await store.commit(
            [insert_task(_item("a", 1))]
            + [append_api_message("a", i, b"m" * 1000) for i in range(5)],
            [],
        )
        db = store.db
        assert store.read_now(db.api_messages, "a", 5000) == [b"m" * 1000] * 5
        # Past the bound it stops reading and says so.
        assert store.read_now(db.api_messages, "a", 4999) is None
        assert len(await store.read(db.api_messages, "a")) == 5

        # While a worker thread reads, the loop does not wait for it.
        entered, release = anyio.Event(), threading.Event()

        def slow_read() -> int:
            anyio.from_thread.run_sync(entered.set)  # (store.read runs it on anyio's worker)
            release.wait()
            return db.max_task_number()

        async with anyio.create_task_group() as tg:
            tg.start_soon(store.read, slow_read)
            await entered.wait()
            with pytest.raises(anyio.WouldBlock):
                store.read_now(db.api_messages, "a", 5000)
            release.set()
        assert store.read_now(db.api_messages, "a", 5000) is not None


async def test_on_postgres_no_commit_or_read_holds_up_the_loop(pg_url: str) -> None:
    """A server is a round trip away: even the smallest commit and read go to a
    worker thread, and read_now says so at once (its callers read on a thread)."""
    async with Store.open(pg_url) as store:
        await store.commit([insert_task(_item("a", 1))], [])
        assert await _loop_turns_during_commit(store, b"x" * 100, 1) > 0
        with pytest.raises(anyio.WouldBlock):
            store.read_now(store.db.api_messages, "a", 5000)
        assert await store.read(store.db.api_messages, "a") == []
        assert [len(b) for b in await store.read(store.db.replay, 0, "a", 10)] == [100]


def test_a_batch_keeps_only_the_last_of_writes_to_the_same_row() -> None:
    item = _item("a", 1)
    busy = msgspec.structs.replace(item, state=TaskState.RUNNING)
    writes = [
        update_task(busy),
        save_turn("a", b"1"),
        save_ui_message("a", 5, b"partial"),
        save_turn("a", b"2"),
        save_ui_message("a", 5, b"final"),
        save_ui_message("a", 6, b"other"),
        save_turn("b", b"x"),
        update_task(item),
        save_turn("a", None),
    ]
    assert latest_writes(writes) == [
        save_ui_message("a", 5, b"final"),
        save_ui_message("a", 6, b"other"),
        save_turn("b", b"x"),
        update_task(item),
        save_turn("a", None),
    ]
    # Any other statement in between keeps what comes before it.
    barrier = ("DELETE FROM ui_messages WHERE task_id = ?", ("a",))
    assert latest_writes([save_turn("a", b"1"), barrier, save_turn("a", b"2")]) == [
        save_turn("a", b"1"),
        barrier,
        save_turn("a", b"2"),
    ]
