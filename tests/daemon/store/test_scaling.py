"""What the store reads for a status, a start-up, retention and a prefix does not
grow with the event log or the number of tasks. Measured as work, not time: the
number of SQLite virtual-machine steps a read takes (a progress handler called on
every step), on a small store and on one many times bigger."""

from __future__ import annotations

import base64
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hdsp.daemon.store import SqliteDatabase, Store, insert_task, save_ui_message
from hdsp.daemon.store.integrity import quick_check
from hdsp.protocol import (
    ClineMessage,
    HistoryItem,
    TaskCreated,
    TaskEvent,
    TaskState,
    decode_event,
    encode,
)
from tests.daemon.store.journals import running_journal


def _steps(conn: sqlite3.Connection, fn: Callable[..., Any], *args: Any) -> int:
    count = 0

    def tick() -> int:
        nonlocal count
        count += 1
        return 0

    conn.set_progress_handler(tick, 1)
    try:
        fn(*args)
    finally:
        conn.set_progress_handler(None, 1)
    return count


def _task_id(n: int) -> str:
    return f"{n:08x}-0000-4000-8000-000000000000"


def _filled(path: Path, *, tasks: int, events: int, ts: int = 10**12) -> SqliteDatabase:
    """A store of `tasks` tasks and `events` events (round the tasks), written directly."""
    db = SqliteDatabase(path, check_seconds=0)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for n in range(1, tasks + 1):
        item = HistoryItem(id=_task_id(n), number=n, ts=n, task="t", state=TaskState.IDLE)
        conn.execute(*insert_task(item))
    conn.executemany(
        "INSERT INTO events (seq, topic, ts, body) VALUES (?, ?, ?, ?)",
        [(seq, _task_id(seq % tasks + 1), ts + seq, b"{}") for seq in range(1, events + 1)],
    )
    conn.execute("COMMIT")
    conn.close()
    return db


@pytest.fixture
def small(tmp_path: Path) -> SqliteDatabase:
    return _filled(tmp_path / "small.sqlite3", tasks=10, events=100)


@pytest.fixture
def big(tmp_path: Path) -> SqliteDatabase:
    return _filled(tmp_path / "big.sqlite3", tasks=2_000, events=20_000)


def _same_work(small: int, big: int) -> bool:
    """Within what an index's extra level or two costs (a scan would be 20-200x)."""
    return big <= 2 * small + 50


def test_the_task_count_of_a_status_does_not_count_rows(
    small: SqliteDatabase, big: SqliteDatabase
) -> None:
    assert small.task_count() == 10 and big.task_count() == 2_000
    assert _same_work(_steps(small._reader, small.task_count), _steps(big._reader, big.task_count))


def test_a_retention_pass_with_nothing_to_prune_does_not_scan_the_log(
    small: SqliteDatabase, big: SqliteDatabase
) -> None:
    # Nothing older than ts 1 and a generous cap: the common case, at every start.
    a = _steps(small._writer, small.prune_events, 1, 1_000_000)
    b = _steps(big._writer, big.prune_events, 1, 1_000_000)
    assert small.counts()[1] == 100 and big.counts()[1] == 20_000  # nothing went
    assert _same_work(a, b), (a, b)


def _with_an_image(db: SqliteDatabase, events: int) -> None:
    """Task 1 stores an image (a UI message that shows it) at the log's end."""
    url = "data:image/png;base64," + base64.b64encode(os.urandom(30_000)).decode()
    message = encode(ClineMessage(ts=1, type="say", say="text", images=[url]))
    db.commit([save_ui_message(_task_id(1), 1, message)], [(events + 1, "x", 10**12, b"{}")])


def test_a_retention_pass_that_prunes_reads_only_the_records_of_tasks_with_images(
    small: SqliteDatabase, big: SqliteDatabase
) -> None:
    # Over the cap by two: two events go, and the blobs no record refers to any
    # more with them (which the records of task 1, the one with an image, say).
    _with_an_image(small, 100)
    _with_an_image(big, 20_000)
    a = _steps(small._writer, small.prune_events, 1, 99)
    b = _steps(big._writer, big.prune_events, 1, 19_999)
    assert small.counts()[1] == 99 and big.counts()[1] == 19_999
    conn = sqlite3.connect(big.path)
    try:
        assert conn.execute("SELECT COUNT(*) FROM blobs").fetchone() == (1,)  # still shown
    finally:
        conn.close()
    assert _same_work(a, b), (a, b)  # task 1 has as many records in both


def test_retention_by_age_still_deletes_what_is_old(tmp_path: Path) -> None:
    db = _filled(tmp_path / "db.sqlite3", tasks=3, events=100, ts=1000)
    # Events 1..49 have ts 1001..1049: older than 1050.
    assert db.prune_events(1050, 1_000_000) == 49
    assert db.oldest_seq() == 50 and db.head_seq() == 100


def test_a_prefix_finds_its_tasks_without_reading_every_task(
    small: SqliteDatabase, big: SqliteDatabase
) -> None:
    prefix = _task_id(7)[:8]
    assert [r[0] for r in big.tasks_with_prefix(prefix, 2)] == [_task_id(7)]
    assert [r[0] for r in big.tasks_with_prefix("0000000", 20)] == [
        _task_id(n) for n in range(15, 0, -1)
    ]
    assert big.tasks_with_prefix("zz", 2) == []
    a = _steps(small._reader, small.tasks_with_prefix, prefix, 2)
    b = _steps(big._reader, big.tasks_with_prefix, prefix, 2)
    assert _same_work(a, b), (a, b)


async def _start_journal(path: Path) -> tuple[int, list[TaskEvent]]:
    """VM steps of the reads a journal makes to start on the store at `path`; and
    the events of a new TaskCreated of task 7, published after it started."""
    published: list[TaskEvent] = []

    async def publish(topic: bytes, body: bytes) -> None:
        published.append(decode_event(body))

    count = 0

    def tick() -> int:
        nonlocal count
        count += 1
        return 0

    async with Store.open(path, check_seconds=0) as store:
        store.db._reader.set_progress_handler(tick, 1)
        async with running_journal(store, publish) as journal:
            steps = count
            store.db._reader.set_progress_handler(None, 1)
            await journal.emit(TaskCreated(payload=(_task_id(7),)))
    return steps, published


async def test_a_journal_starts_without_reading_the_whole_log(tmp_path: Path) -> None:
    _filled(tmp_path / "small.sqlite3", tasks=10, events=100).close()
    _filled(tmp_path / "big.sqlite3", tasks=2_000, events=20_000).close()
    a, small_events = await _start_journal(tmp_path / "small.sqlite3")
    b, big_events = await _start_journal(tmp_path / "big.sqlite3")
    assert _same_work(a, b), (a, b)
    # And the first new event of a task still names the task's last one before it.
    assert [(e.seq, e.prev_seq) for e in small_events] == [(101, 96)]
    assert [(e.seq, e.prev_seq) for e in big_events] == [(20_001, 18_006)]


def test_the_quick_check_at_start_up_keeps_its_budget_and_never_cuts_what_follows(
    tmp_path: Path,
) -> None:
    """The budget holds inside SQLite's check of the b-trees, which is one step of
    its virtual machine (a log of a million events took 0.2-0.4 s past a budget of
    30 ms with a progress handler): it is an interrupt from a timer, which must
    never reach a statement run after the check."""
    path = tmp_path / "one-big-table.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
    rows = 0
    # Stopped: the budget ran out first. A check of 200,000 rows takes some tens
    # of milliseconds, and on a loaded machine the timer's thread may first run
    # after that: the table grows until the check outlasts the timer's wake-up.
    for _ in range(4):
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO t (body) VALUES (?)", ((os.urandom(200),) for _ in range(200_000))
        )
        conn.execute("COMMIT")
        rows += 200_000
        if quick_check(conn, 0.001) is None:
            break
    else:
        raise AssertionError(f"a check of {rows} rows ended within 1 ms")
    assert conn.execute("SELECT COUNT(*) FROM t").fetchone() == (rows,)
    conn.execute("DELETE FROM t WHERE id > 10")
    assert quick_check(conn, 0.2) == []  # done within its budget
    # A statement that outlasts the budget after the check is not interrupted.
    slow = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
    assert conn.execute(slow + "SELECT COUNT(*) FROM n", (3_000_000,)).fetchone() == (3_000_000,)
