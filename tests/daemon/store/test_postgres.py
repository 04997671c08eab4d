"""What is the PostgreSQL store's own, on a real server: one writer per database
(a second daemon is refused), a lost connection (the journal holds its batch
and commits it once the server answers again; reads fail clearly meanwhile), a
COMMIT whose answer was lost (never applied twice, nor lost), and a daemon that
finds another one wrote meanwhile (read-only)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import anyio
import psycopg
import pytest

from hdsp.daemon.store import (
    StorageUnavailable,
    Store,
    StoreError,
    insert_task,
    open_database,
)
from hdsp.daemon.store.postgres import PostgresDatabase, to_psycopg
from hdsp.protocol import HistoryItem, StorageState, TaskState
from tests.daemon.store.journals import (
    Published,
    create_task,
    create_while_refused,
    running_journal,
)
from tests.support.pg_proxy import PgProxy
from tests.support.postgres import PostgresCluster
from tests.support.stored_database import rows


def _task(n: int) -> HistoryItem:
    return HistoryItem(id=f"t{n}", number=n, ts=n, task="x", state=TaskState.IDLE)


def test_placeholders_become_psycopg_s_and_quoted_text_stays() -> None:
    assert to_psycopg("SELECT a FROM t WHERE b = ? AND c > ?") == (
        "SELECT a FROM t WHERE b = %s AND c > %s"
    )
    assert to_psycopg("SELECT '?', \"x?\", 'it''s ?' , ? || '%'") == (
        "SELECT '?', \"x?\", 'it''s ?' , %s || '%%'"
    )
    assert to_psycopg("SELECT 5 % ?") == "SELECT 5 %% %s"


def test_a_second_daemon_on_the_same_database_is_refused(pg_url: str) -> None:
    first = open_database(pg_url)
    try:
        with pytest.raises(StoreError, match=r"Another hdspd uses .* holds its writer's lock"):
            open_database(pg_url)
    finally:
        first.close()
    open_database(pg_url).close()  # the lock went with the first one's connection


async def test_a_lost_server_holds_the_batch_and_commits_it_once_it_answers_again(
    pg_url: str, postgres: PostgresCluster
) -> None:
    out = Published()
    async with Store.open(pg_url) as store:
        monitor = store.monitor
        async with running_journal(store, out.publish) as journal:
            await create_task(journal, _task(1))
            await journal.flush()
            await store.read(store.db.list_tasks, None, 10)  # the reader is connected too

            postgres.cut_off(pg_url, allow=False)
            with anyio.fail_after(20):
                health = await create_while_refused(store, journal, map(_task, range(2, 5)))
            assert health.state is StorageState.FAILING
            assert health.advice is not None and "reconnects and retries" in health.advice
            await journal.flush_for_read()  # a read does not wait for the server
            assert [e.seq for e in out.events] == [1]  # nothing uncommitted went out
            with pytest.raises(StorageUnavailable, match="could not read its PostgreSQL"):
                await store.read(store.db.list_tasks, None, 10)

            postgres.cut_off(pg_url, allow=True)
            with anyio.fail_after(20):
                await journal.flush()
            assert monitor.state is StorageState.OK
            assert [e.seq for e in out.events] == [1, 2, 3, 4]
            assert [e.data.payload[0] for e in out.events] == ["t1", "t2", "t3", "t4"]
            tasks = await store.read(store.db.list_tasks, None, 10)
            assert [r[0] for r in tasks] == ["t4", "t3", "t2", "t1"]


@pytest.fixture
def proxy(postgres: PostgresCluster) -> Iterator[PgProxy]:
    relay = PgProxy(postgres.socket_dir)
    try:
        yield relay
    finally:
        relay.close()


@pytest.mark.parametrize("cut", ["after", "before"])
def test_a_commit_whose_connection_was_cut_is_applied_exactly_once(
    pg_url: str, postgres: PostgresCluster, proxy: PgProxy, cut: str
) -> None:
    """The connection goes while COMMIT is under way: `after` the server
    committed (its answer lost), or `before` it got COMMIT. Either way the
    journal commits the same batch again, and it must be in the database once:
    not twice (a unique seq broken: read-only for good), nor missing."""
    db = open_database(postgres.url(postgres.dbname(pg_url), socket_dir=proxy.socket_dir))
    try:
        assert isinstance(db, PostgresDatabase)
        db.commit([insert_task(_task(1))], [(1, "t1", 0, b"{}")])
        proxy.cut_at_commit("after" if cut == "after" else "before")
        batch = ([insert_task(_task(2))], [(2, "t2", 0, b"{}")])
        with pytest.raises(psycopg.OperationalError):
            db.commit(*batch)
        assert proxy.cut_done.is_set()
        expected = [(1,), (2,)] if cut == "after" else [(1,)]
        assert rows(pg_url, "SELECT seq FROM events ORDER BY seq") == expected
        # The journal's retry: the old session (still open on the server) is
        # ended, and what became of its transaction decides.
        db.commit(*batch)
        db.commit([insert_task(_task(3))], [(3, "t3", 0, b"{}")])
        assert rows(pg_url, "SELECT seq FROM events ORDER BY seq") == [(1,), (2,), (3,)]
        assert [r[0] for r in db.list_tasks(None, 10)] == ["t3", "t2", "t1"]
    finally:
        db.close()


async def test_a_daemon_that_finds_another_wrote_meanwhile_writes_nothing_more(
    pg_url: str, postgres: PostgresCluster
) -> None:
    out = Published()
    async with Store.open(pg_url) as store:
        async with running_journal(store, out.publish) as journal:
            await create_task(journal, _task(1))
            await journal.flush()
            postgres.cut_off(pg_url, allow=False)
            postgres.cut_off(pg_url, allow=True)
            # Another daemon takes the database while this one is disconnected.
            other = open_database(pg_url)
            other.commit([insert_task(_task(2))], [(2, "t2", 0, b"{}")])
            other.close()
            seen = store.monitor.version
            await create_task(journal, _task(3))
            with pytest.raises(StorageUnavailable, match="read-only"):
                await journal.flush()
            await store.monitor.wait_changed(seen)
            health = store.monitor.health()
            assert health.state is StorageState.READ_ONLY
            assert health.reason is not None and "Another hdspd wrote" in health.reason
            assert [e.seq for e in out.events] == [1]
    assert rows(pg_url, "SELECT seq, topic FROM events ORDER BY seq") == [(1, "t1"), (2, "t2")]


def test_a_killed_daemon_whose_session_lingers_on_the_server_does_not_block_the_next(
    pg_url: str, postgres: PostgresCluster, proxy: PgProxy
) -> None:
    """hdspd killed with SIGKILL where the server does not see its connection go
    (the network's fault: here, a relay that keeps the server's side open): its
    session still holds the writer's lock. The next hdspd on this machine sees
    that the holder is a daemon of this machine that is gone, and takes over."""
    url = postgres.url(postgres.dbname(pg_url), socket_dir=proxy.socket_dir)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from hdsp.daemon.store import open_database\n"
            f"db = open_database({url!r}); print('open', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        holder.kill()
        holder.wait(10)
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.communicate()
    (held,) = rows(pg_url, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")[
        0
    ]
    assert held == 1  # the server still believes in the dead daemon's session
    db = open_database(pg_url)
    db.commit([insert_task(_task(1))], [(1, "t1", 0, b"{}")])
    db.close()
