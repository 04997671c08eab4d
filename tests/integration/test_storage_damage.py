"""A damaged database, through the real daemon: start-up refuses it in a sentence
(exit code 2, no traceback); damage that start-up does not read makes the daemon
read-only when it is met, instead of ending it; `hdspd check` reports it."""

from __future__ import annotations

import sqlite3

import anyio
import pytest

from hdsp.client import CommandFailed, connect
from hdsp.protocol import ErrorCode, StorageChanged, StorageState, TaskCompleted
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn
from tests.support.stored_database import check_database

pytestmark = pytest.mark.slow


async def _make_history(daemon: DaemonProcess, fake_openai: FakeOpenAI) -> list[str]:
    """A few tasks, one of them long; then a clean stop (the WAL is folded in)."""
    fake_openai.default = FakeReply.text("an answer of some length " * 40)
    daemon.start()
    ids = []
    async with connect(daemon.runtime_dir) as c:
        for n in range(3):
            ref = await c.start_task(f"task {n}")
            await collect_turn(c, ref.task_id, 0, until=(TaskCompleted,))
            ids.append(ref.task_id)
        for n in range(5):
            head = (await c.status()).head_seq
            await c.send_message(ids[0], f"more {n}")
            await collect_turn(c, ids[0], head, until=(TaskCompleted,))
    assert daemon.stop() == 0
    return ids


def _page_of(daemon: DaemonProcess, table: str) -> tuple[int, int, int]:
    """(root page of `table`, page size, page count) of the stopped daemon's db."""
    with sqlite3.connect(daemon.data_dir / "hdsp.sqlite3") as conn:
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_schema WHERE name = ?", (table,)
        ).fetchone()
        (size,) = conn.execute("PRAGMA page_size").fetchone()
        (count,) = conn.execute("PRAGMA page_count").fetchone()
    conn.close()
    return int(root), int(size), int(count)


def _smash(daemon: DaemonProcess, page: int, page_size: int) -> None:
    """Overwrite page `page` (1-based) with bytes no b-tree page can hold."""
    db = daemon.data_dir / "hdsp.sqlite3"
    assert not (daemon.data_dir / "hdsp.sqlite3-wal").exists()
    with open(db, "r+b") as f:
        f.seek((page - 1) * page_size)
        f.write(b"\xa5" * page_size)


async def test_start_up_refuses_a_damaged_database_clearly(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    daemon = daemon_process
    await _make_history(daemon, fake_openai)
    sound = check_database(daemon)
    assert sound.returncode == 0 and sound.stdout.startswith("ok:"), sound
    _, page_size, pages = _page_of(daemon, "ui_messages")
    _smash(daemon, pages // 2, page_size)  # a page in the middle of the file
    with pytest.raises(AssertionError, match="exited before it was ready"):
        daemon.start()
    assert daemon.proc is not None and daemon.proc.returncode == 2
    err = daemon.stderr()
    assert "Traceback" not in err
    assert "is damaged" in err and "hdspd check" in err
    damaged = check_database(daemon)
    assert damaged.returncode == 1 and damaged.stdout.startswith("damaged:"), damaged


async def test_damage_met_at_run_time_makes_the_daemon_read_only(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    daemon = daemon_process
    ids = await _make_history(daemon, fake_openai)
    root, page_size, _ = _page_of(daemon, "ui_messages")
    _smash(daemon, root, page_size)
    # As if the database were too big to check all of at start-up: start-up
    # reads no UI message, so it serves.
    daemon.start("--startup-check-ms", "0")
    async with connect(daemon.runtime_dir) as c:
        head = (await c.status()).head_seq
        async with c.events(None, since_seq=head) as events:
            with pytest.raises(CommandFailed) as failed:
                await c.get_task(ids[0])  # reads the damaged page
            assert failed.value.code is ErrorCode.STORAGE_UNAVAILABLE
            assert "hdspd check" in failed.value.message
            with anyio.fail_after(10):
                async for event in events:
                    if isinstance(event.data, StorageChanged):
                        announced = event.data.payload[0]
                        break
        assert announced.state is StorageState.READ_ONLY and announced.advice
        assert daemon.proc is not None and daemon.proc.poll() is None
        await c.ping()
        status = await c.status()
        assert status.storage is not None and status.storage.state is StorageState.READ_ONLY
        with pytest.raises(CommandFailed) as refused:
            await c.start_task("no new work on a damaged database")
        assert refused.value.code is ErrorCode.STORAGE_UNAVAILABLE
        assert "restore" in refused.value.message
        assert len((await c.list_tasks()).tasks) == 3  # what can be read is served
    assert daemon.stop() == 0
    damaged = check_database(daemon)
    assert damaged.returncode == 1 and "damaged" in damaged.stdout, damaged
