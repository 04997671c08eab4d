"""The real daemon with its store on PostgreSQL (``store.url``), where it differs
from SQLite: a server that goes away (new work refused, every client told,
nothing published that was not committed, service back by itself once the
server answers), a start without the server or beside another hdspd (refused,
saying why), and the password, by the name of a keyring secret.

The durability suites (test_durability.py, test_kill9.py) run on both backends."""

from __future__ import annotations

import subprocess
import sys

import anyio
import psycopg
import pytest
from psycopg import sql

from hdsp.client import CommandFailed, connect
from hdsp.protocol import ErrorCode, StorageState, TaskCompleted
from tests.fakes.openai_server import FakeOpenAI
from tests.support.daemon_process import DaemonProcess, short_tmp_dir
from tests.support.events import collect_turn
from tests.support.postgres import PASSWORD_USER, PostgresCluster
from tests.support.storage_reports import assert_service_resumes, follow, refused
from tests.support.stored_database import check_database, rows

pytestmark = pytest.mark.parametrize("store_backend", ["postgresql"])


@pytest.mark.slow
async def test_a_lost_server_refuses_new_work_and_service_resumes_by_itself(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, postgres: PostgresCluster
) -> None:
    assert daemon.store_url is not None
    async with connect(daemon.runtime_dir) as c, follow(daemon.runtime_dir) as f:
        first = await c.start_task("before the server goes")
        await collect_turn(c, first.task_id, 0, until=(TaskCompleted,))
        postgres.cut_off(daemon.store_url, allow=False)
        # Accepted (its commit is queued), then the commit finds no server.
        waiting = await c.start_task("while the server is away")
        with anyio.fail_after(20):
            failing = await f.reports.receive()
        assert failing.state is StorageState.FAILING and failing.reason
        assert failing.advice is not None and "PostgreSQL server" in failing.advice
        assert daemon.proc is not None and daemon.proc.poll() is None
        await c.ping()
        refusal = await refused(lambda: c.start_task("refused while the server is away"))
        assert "reconnects and retries" in refusal.message
        status = await c.status()
        assert status.storage is not None and status.storage.state is StorageState.FAILING
        # A read that needs the server says so, and what to do.
        with pytest.raises(CommandFailed) as unread:
            await c.list_tasks()
        assert unread.value.code is ErrorCode.STORAGE_UNAVAILABLE
        assert "could not read its PostgreSQL database" in unread.value.message

        postgres.cut_off(daemon.store_url, allow=True)
        head, checked = await assert_service_resumes(
            c, f, waiting.task_id, "after the server came back"
        )
    assert [r[0] for r in rows(daemon.store_url, "SELECT seq FROM events ORDER BY seq")] == list(
        range(1, head + 1)
    )
    print(f"server lost and back: {checked} events seen and found in the log, no gap")


async def test_without_its_server_hdspd_refuses_to_start_and_says_why(
    daemon_process: DaemonProcess, postgres: PostgresCluster
) -> None:
    nowhere = short_tmp_dir()
    daemon_process.use_store(f"postgresql://hdsp@/hdsp?host={nowhere}&connect_timeout=2")
    with pytest.raises(AssertionError, match="exited before it was ready"):
        daemon_process.start()
    assert daemon_process.wait() == 2
    log = daemon_process.stderr()
    assert "hdspd cannot use the PostgreSQL database" in log
    assert "Check that the server runs" in log
    assert "Traceback" not in log
    nowhere.rmdir()


async def test_a_second_hdspd_on_the_same_database_is_refused(
    daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    assert daemon.store_url is not None
    second = DaemonProcess(short_tmp_dir(), env=daemon.extra_env)
    second.use_store(daemon.store_url)
    try:
        with pytest.raises(AssertionError, match="exited before it was ready"):
            second.start()
        assert second.wait() == 2
        assert "Another hdspd uses the PostgreSQL database" in second.stderr()
        assert "holds its writer's lock" in second.stderr()
    finally:
        second.finish(show_log=False)
    async with connect(daemon.runtime_dir) as c:  # the first one is unharmed
        await c.ping()


def _set_keyring(daemon: DaemonProcess, name: str, value: str) -> None:
    """Store a secret in the daemon's keyring (a file under its root), as
    `keyring set hdsp NAME` does."""
    store = f"import keyring, sys; keyring.set_password('hdsp', {name!r}, sys.stdin.read())"
    subprocess.run(
        [sys.executable, "-c", store],
        input=value,
        env=daemon.env,
        check=True,
        text=True,
        timeout=30,
    )


PASSWORD = "correct horse battery staple"


@pytest.fixture
def password_url(postgres: PostgresCluster, pg_empty_url: str) -> str:
    """A new database of a role that logs in with `PASSWORD` only, and its URL
    (without the password)."""
    name = postgres.dbname(pg_empty_url)
    role = sql.Identifier(PASSWORD_USER)
    with postgres.admin() as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (PASSWORD_USER,))
        if exists.fetchone() is None:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(role))
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(role, sql.Literal(PASSWORD)))
        conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(name), role))
    url = postgres.url(name, user=PASSWORD_USER)
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(url).close()  # the role needs its password
    return url


async def test_the_password_comes_from_the_keyring_by_name(
    password_url: str, daemon_process: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    # (The database first: it is dropped after the daemon is gone.)
    password, url = PASSWORD, password_url
    daemon = daemon_process
    daemon.use_store(url, secret="pg")
    settings = daemon.data_dir / "settings.json"
    with pytest.raises(AssertionError, match="exited before it was ready"):
        daemon.start()
    assert daemon.wait() == 2
    assert "keyring set hdsp pg" in daemon.stderr()

    _set_keyring(daemon, "pg", password)
    daemon.start()
    async with connect(daemon.runtime_dir) as c:
        ref = await c.start_task("on a server that wants a password")
        await collect_turn(c, ref.task_id, 0, until=(TaskCompleted,))
        exported = await c.export_settings()
    assert password not in settings.read_text()
    assert password not in str(exported)
    assert password not in daemon.stderr()
    daemon.stop()
    checked = check_database(daemon)  # reads the password from the keyring too
    assert checked.returncode == 0, checked
    assert checked.stdout.startswith(f"ok: {url} (PostgreSQL)")


async def test_or_from_libpq_s_own_password_file(
    password_url: str,
    daemon_process: DaemonProcess,
    fake_openai: FakeOpenAI,
    postgres: PostgresCluster,
) -> None:
    daemon = daemon_process
    passfile = daemon.root / "pgpass"
    dbname = postgres.dbname(password_url)
    passfile.write_text(f"{postgres.socket_dir}:5432:{dbname}:{PASSWORD_USER}:{PASSWORD}\n")
    passfile.chmod(0o600)
    daemon.extra_env["PGPASSFILE"] = str(passfile)
    daemon.use_store(password_url)  # no store.secret
    daemon.start()
    async with connect(daemon.runtime_dir) as c:
        ref = await c.start_task("with libpq's password file")
        await collect_turn(c, ref.task_id, 0, until=(TaskCompleted,))
    assert PASSWORD not in (daemon.data_dir / "settings.json").read_text()
