"""The journal on a full database (SQLite's own limit, `PRAGMA max_page_count`,
which fails a commit with SQLITE_FULL exactly as a full disk does): it holds the
batch, publishes none of it, reports the storage failing, and commits it all,
in order, once there is room again. A damaged file is refused when opened."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from hdsp.daemon.store import (
    Store,
    StoreCorrupt,
    integrity_check,
)
from hdsp.daemon.store.sqlite import SqliteDatabase
from hdsp.protocol import HistoryItem, StorageState, TaskState
from tests.daemon.store.journals import (
    Published,
    create_task,
    create_while_refused,
    running_journal,
)


def _task(n: int, text: str) -> HistoryItem:
    return HistoryItem(id=f"t{n}", number=n, ts=n, task=text, state=TaskState.IDLE)


async def test_a_full_database_holds_the_batch_and_commits_it_when_room_returns(
    tmp_path: Path,
) -> None:
    out = Published()
    async with Store.open(tmp_path / "db.sqlite3") as store:
        monitor = store.monitor
        async with running_journal(store, out.publish) as journal:
            await create_task(journal, _task(1, "small"))
            await journal.flush()
            assert [e.seq for e in out.events] == [1]
            writer = store.db._writer
            (pages,) = writer.execute("PRAGMA page_count").fetchone()
            writer.execute(f"PRAGMA max_page_count = {pages}")
            large = [_task(n, "x" * 20_000) for n in range(2, 5)]
            with anyio.fail_after(10):
                health = await create_while_refused(store, journal, large)
            assert health.state is StorageState.FAILING
            assert health.reason is not None and "full" in health.reason
            await journal.flush_for_read()  # a read does not wait for the disk
            assert [e.seq for e in out.events] == [1]  # nothing uncommitted went out
            assert journal.head_seq == 1
            writer.execute("PRAGMA max_page_count = 1073741823")
            with anyio.fail_after(10):
                await journal.flush()
            assert monitor.state is StorageState.OK
            assert [e.seq for e in out.events] == [1, 2, 3, 4]
            assert [e.data.payload[0] for e in out.events] == ["t1", "t2", "t3", "t4"]
            assert [r[0] for r in store.db.list_tasks(None, 10)] == ["t4", "t3", "t2", "t1"]


def test_open_refuses_a_damaged_file_and_check_reports_it(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    db = SqliteDatabase(path)
    for n in range(1, 200):
        db._writer.execute(
            "INSERT INTO tasks (id, number, ts, state, item) VALUES (?, ?, 0, 'idle', ?)",
            (f"t{n}", n, b"x" * 500),
        )
    db.close()
    assert integrity_check(path).ok
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(size // 2 // 4096 * 4096)
        f.write(b"\xa5" * 4096)
    with pytest.raises(StoreCorrupt, match="hdspd check"):
        SqliteDatabase(path)
    report = integrity_check(path)
    assert not report.ok and report.problems
