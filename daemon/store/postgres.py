"""The PostgreSQL backend (``store.url``): the same store on a server, through
psycopg 3, synchronous, on the store's worker threads.

Why synchronous: `Store` runs `Database` methods on worker threads, and those
methods compose several statements and Python between them (a snapshot in one
transaction, blob references put back through a lookup); psycopg's blocking
connection runs them as they are, beside SQLite's, without a second copy of
each read in async form. The event loop never waits on the server: nothing
runs inline (`inline` is False), unlike SQLite's short reads and commits.

**The journal's guarantees.** The journal is the one writer, and the `seq` of
each event is assigned by it, in memory, from the newest one committed
(`head_seq` at start), and written in the batch's transaction: a batch either
commits whole or not at all, and one that fails is committed again with the
same seqs, so seqs have no gaps. (A PostgreSQL sequence would leave a gap for
every rolled-back transaction.) That the journal is the one writer is made sure
by a session advisory lock that the writer connection takes (`_LOCK`): a second
hdspd on the same database is refused at start, and one that took the database
over while this one was disconnected makes this one read-only (`TakenOver`).

**A lost connection** is a fault that passes (see :mod:`.health`): the journal
keeps the batch and commits it again, reads answer `storage_unavailable`, and
the next use of a connection opens a new one. A connection lost *during* COMMIT
leaves the outcome unknown: the writer remembers the transaction's id, and
before committing the batch again asks the server what became of it
(``pg_xact_status``), so that a batch that did commit is not applied twice.

The store's SQL uses ``?`` placeholders (see :mod:`.dialect`); `PgConnection`
turns them into psycopg's. Rows come back in binary (bytea as bytes).
"""

from __future__ import annotations

import functools
import os
import re
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar

import psycopg
import psycopg.conninfo
import structlog
from psycopg.pq import TransactionStatus

from hdsp.protocol import StorageState

from .database import Batch, Database, EventRow, Write
from .dialect import POSTGRESQL, Dialect
from .errors import StoreCorrupt, StoreError
from .health import Fault
from .integrity import IntegrityReport, blob_problems

__all__ = ["PgConnection", "PostgresDatabase", "TakenOver", "check_postgres", "classify"]

log = structlog.get_logger("hdsp.store")

#: The writer's session advisory lock: ("hdsp", 1).
_LOCK = (0x68647370, 1)
#: Seconds to wait for the server when connecting, unless store.url says.
CONNECT_TIMEOUT = 10


class TakenOver(Exception):
    """Another hdspd writes to this database: this one must write nothing more."""


# ---- faults ---------------------------------------------------------------------

#: SQLSTATE classes of faults that pass: connection exception, insufficient
#: resources (disk full, out of memory, too many connections), operator
#: intervention (server shutting down, query cancelled), system error (I/O), and
#: transaction rollback (serialization failure, deadlock); and invalid
#: authorization (a password changed: an administrator can put it right).
_TRANSIENT_CLASSES = frozenset({"08", "53", "57", "58", "40", "28"})
_TRANSIENT_STATES = frozenset(
    {
        "25006",  # read_only_sql_transaction: a standby, or default_transaction_read_only
        "42501",  # insufficient_privilege: as SQLite's PERM
        "55P03",  # lock_not_available
        "55006",  # object_in_use
        "3D000",  # invalid_catalog_name: the database is not there (yet)
    }
)
#: data_corrupted, index_corrupted.
_DAMAGE_STATES = frozenset({"XX001", "XX002"})


def classify(exc: BaseException) -> Fault | None:
    """What kind of storage fault `exc` is; None: none (a bug, such as a
    constraint a statement broke)."""
    if isinstance(exc, TakenOver):
        return Fault.DAMAGE
    if not isinstance(exc, psycopg.Error):
        return None
    state = exc.sqlstate
    if state is None:
        # No server error: libpq's own (the connection failed, or was lost).
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            return Fault.TRANSIENT
        return None
    if state in _DAMAGE_STATES:
        return Fault.DAMAGE
    if state[:2] in _TRANSIENT_CLASSES or state in _TRANSIENT_STATES:
        return Fault.TRANSIENT
    return None


# ---- the connection ------------------------------------------------------------------

_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[?%]")


def _swap(match: re.Match[str]) -> str:
    token = match.group()
    if token == "?":
        return "%s"
    return token.replace("%", "%%")  # psycopg reads % in quoted text too


@functools.lru_cache(maxsize=2048)
def to_psycopg(sql: str) -> str:
    """The store's SQL (``?`` placeholders) in psycopg's form (``%s``, and ``%``
    doubled); ``?`` in quoted text stays."""
    return _TOKENS.sub(_swap, sql)


class _NoRows:
    rowcount = 0

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[Any]:
        return []

    def __iter__(self) -> Iterator[Any]:
        return iter(())


_NO_ROWS = _NoRows()
_ENDS = frozenset({"COMMIT", "ROLLBACK"})


class PgConnection:
    """A psycopg connection (autocommit: transactions are begun explicitly) that
    speaks the store's SQL, as `sqlite3.Connection` does for SQLite (see
    :class:`~.dialect.Connection`), and opens a new connection when the last one
    was lost, between transactions only: a transaction begun on a connection that
    is gone is gone with it, and its COMMIT fails."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]]) -> None:
        self._connect = connect
        self._conn: psycopg.Connection[Any] | None = None
        #: BEGIN was sent, and neither COMMIT nor ROLLBACK since.
        self._begun = False

    def live(self) -> psycopg.Connection[Any]:
        """The connection, opened again if it was lost (raises psycopg.Error when
        the server cannot be reached)."""
        conn = self._conn
        if conn is None or conn.closed:
            if self._begun:
                raise psycopg.OperationalError(
                    "the connection to PostgreSQL was lost in a transaction, which the "
                    "server rolled back"
                )
            self._conn = None
            conn = self._conn = self._connect()
        return conn

    @property
    def in_transaction(self) -> bool:
        conn = self._conn
        if conn is None or conn.closed:
            return self._begun
        return conn.info.transaction_status is not TransactionStatus.IDLE

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        if sql in _ENDS:
            return self._end(sql)
        conn = self.live()
        if sql.startswith("BEGIN"):
            self._begun = True
        if not parameters:  # no placeholders: sent as it is (several statements may be)
            return conn.execute(sql)
        return conn.execute(to_psycopg(sql), parameters, binary=True)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> None:
        self.live().cursor(binary=True).executemany(to_psycopg(sql), parameters)

    def _end(self, sql: str) -> Any:
        conn = self._conn
        self._begun = False
        if conn is None or conn.closed:
            if sql == "ROLLBACK":
                return _NO_ROWS  # the server rolled it back when the connection went
            raise psycopg.OperationalError(
                "the connection to PostgreSQL was lost before COMMIT: the transaction "
                "was rolled back"
            )
        return conn.execute(sql)

    def release(self, lock: tuple[int, int]) -> None:
        """Let go of session advisory lock `lock` now: a closed connection's
        locks go only when the server has noticed, and an hdspd started right
        after this one stopped was refused meanwhile."""
        conn = self._conn
        if conn is None or conn.closed or self._begun:
            return
        try:
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", lock)
        except psycopg.Error:
            pass  # the server is gone, and the lock with the session

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._begun = False


# ---- the database ---------------------------------------------------------------------


def _application_name() -> str:
    """What pg_stat_activity shows of this daemon (`_dead_here` reads it back)."""
    return f"hdspd {socket.gethostname()} {os.getpid()}"[:63]


def _dead_here(application_name: str | None) -> bool:
    """Whether `application_name` names an hdspd of this machine that is gone."""
    parts = (application_name or "").split(" ")
    if len(parts) != 3 or parts[0] != "hdspd" or parts[1] != socket.gethostname():
        return False
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except (ValueError, OSError):
        return False
    return False


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class PostgresDatabase(Database):
    dialect: ClassVar[Dialect] = POSTGRESQL
    errors: ClassVar[tuple[type[Exception], ...]] = (psycopg.Error, TakenOver)
    inline: ClassVar[bool] = False

    _writer: PgConnection
    _reader: PgConnection

    def __init__(self, url: str, *, password: str | None = None) -> None:
        """Connect, take the writer's lock, and create or migrate the schema.
        `url` is a libpq URI without a password (the settings refuse one);
        `password` comes from the keyring (``store.secret``), or else libpq finds
        one itself (~/.pgpass, PGPASSFILE, a service file) or needs none."""
        self.url = url
        self.where = url
        self._password = password
        self._timeout: int | None = CONNECT_TIMEOUT
        #: The writer's server process, to tell our own lost session from another
        #: daemon's when the lock is held (see `_take_lock`).
        self._writer_pid: int | None = None
        #: (transaction id, server pid) of a COMMIT whose outcome is not known.
        self._in_doubt: tuple[str, int] | None = None
        #: The newest seq this writer knows to be committed.
        self._last_seq = 0
        #: The writer connected again: check that nobody wrote meanwhile.
        self._check_head = False
        self._writer = PgConnection(self._connect_writer)
        self._reader = PgConnection(self._connect)
        try:
            if "connect_timeout" in psycopg.conninfo.conninfo_to_dict(url):
                self._timeout = None  # the URL's own
            self._writer.live()
            self._make_schema_table()
            self._migrate()
            self._last_seq = self._head(self._writer)
        except (psycopg.Error, TakenOver) as exc:
            self.close()
            raise self.open_error(exc) from exc
        except BaseException:
            self.close()
            raise

    # ---- connections ---------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        options: dict[str, Any] = {
            "autocommit": True,
            # pg_stat_activity shows which daemon this is (and `TakenOver` says).
            "application_name": _application_name(),
        }
        if self._timeout is not None:
            options["connect_timeout"] = self._timeout
        if self._password is not None:
            options["password"] = self._password
        return psycopg.connect(self.url, **options)

    def _connect_writer(self) -> psycopg.Connection[Any]:
        conn = self._connect()
        try:
            self._take_lock(conn)
        except BaseException:
            conn.close()
            raise
        if self._writer_pid is not None:
            log.info("reconnected to PostgreSQL", database=self.where)
            self._check_head = True
        self._writer_pid = conn.info.backend_pid
        return conn

    def _take_lock(self, conn: psycopg.Connection[Any]) -> None:
        """Take the writer's lock, or raise TakenOver naming who has it. Our own
        earlier session may hold it still (the connection was lost and the server
        has not noticed yet): that one is ended, and the lock waited for."""
        taken = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", _LOCK).fetchone()
        if taken is not None and taken[0]:
            return
        holder = conn.execute(
            "SELECT l.pid, a.application_name, a.client_addr::text FROM pg_locks AS l "
            "LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.classid = %s AND l.objid = %s "
            "AND l.objsubid = 2 AND l.granted",
            _LOCK,
        ).fetchone()
        if holder is not None and (holder[0] == self._writer_pid or _dead_here(holder[1])):
            # Ours, or a daemon of this machine that is gone (killed: the server
            # has not noticed yet). Nobody writes through that session any more.
            log.info("ending a lost session of hdspd on PostgreSQL", pid=holder[0])
            conn.execute("SELECT pg_terminate_backend(%s)", (holder[0],))
            conn.execute("SET lock_timeout = '10s'")
            conn.execute("SELECT pg_advisory_lock(%s, %s)", _LOCK)
            conn.execute("RESET lock_timeout")
            return
        who = "another hdspd"
        if holder is not None:
            who = f"{holder[1] or 'another client'} (server process {holder[0]}"
            who += f", from {holder[2]})" if holder[2] else ")"
        raise TakenOver(
            f"Another hdspd uses the PostgreSQL database {self.where}: {who} holds its "
            "writer's lock. Stop that daemon, or give each hdspd a database of its own "
            "(store.url)."
        )

    @staticmethod
    def _head(conn: PgConnection) -> int:
        return int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])

    def close(self) -> None:
        self._reader.close()
        self._writer.release(_LOCK)
        self._writer.close()  # and with it the lock, if releasing it failed

    # ---- what the backend says ------------------------------------------------------

    def open_error(self, exc: BaseException) -> StoreError:
        """What to tell a person when the database fails at start-up."""
        if isinstance(exc, TakenOver):
            return StoreError(str(exc))
        if classify(exc) is Fault.DAMAGE:
            return StoreCorrupt(
                f"The PostgreSQL database {self.where} is damaged ({_first_line(exc)}). "
                "Restore it from a backup, then start hdspd again."
            )
        return StoreError(
            f"hdspd cannot use the PostgreSQL database {self.where}: {_first_line(exc)}. "
            "Check that the server runs, that store.url names the right host and "
            "database (create it with `createdb`), and the credentials (store.secret, "
            "~/.pgpass or PGPASSFILE, a service file); then start hdspd again."
        )

    def classify(self, exc: BaseException) -> Fault | None:
        return classify(exc)

    def advice(self, state: StorageState) -> str:
        if state is StorageState.FAILING:
            return (
                f"Check that the PostgreSQL server of {self.where} runs and can be "
                "reached, has disk space, and takes hdspd's credentials. hdspd keeps what "
                "it could not write, reconnects and retries, and takes new work again by "
                "itself; running tasks wait meanwhile."
            )
        return (
            f"hdspd writes nothing more to {self.where}. Stop it and read the reason: "
            "another hdspd took the database over (give each its own database), or the "
            "database is damaged (run `hdspd check`, and restore it from a backup)."
        )

    def read_failed_message(self, exc: BaseException) -> str:
        return (
            f"hdspd could not read its PostgreSQL database {self.where} "
            f"({_first_line(exc)}); it reconnects by itself: try again, and check the "
            "server if it goes on."
        )

    # ---- schema ------------------------------------------------------------------------

    def _make_schema_table(self) -> None:
        """Create the table that holds the schema's version in a new database;
        refuse one that holds other tables (not hdsp's to change)."""
        conn = self._writer
        if conn.execute(POSTGRESQL.table_exists, ("hdsp_schema",)).fetchone() is not None:
            return
        others = conn.execute(
            "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = current_schema() "
            "ORDER BY tablename LIMIT 3"
        ).fetchall()
        if others:
            names = ", ".join(str(r[0]) for r in others)
            raise StoreError(
                f"The PostgreSQL database {self.where} holds tables that are not hdsp's "
                f"({names}...). Give hdsp a database of its own (`createdb hdsp`) and "
                "name it in store.url."
            )
        conn.execute("BEGIN")
        try:
            conn.execute(
                "CREATE TABLE hdsp_schema (version integer NOT NULL);"
                "INSERT INTO hdsp_schema (version) VALUES (0)"
            )
            conn.execute("COMMIT")
        except BaseException:
            self._rollback(conn)
            raise

    def _stored_version(self) -> int:
        return int(self._writer.execute("SELECT version FROM hdsp_schema").fetchone()[0])

    def _run_script(self, script: str) -> None:
        self._writer.execute(script)  # no parameters: several statements at once

    def _set_version(self, version: int) -> None:
        self._writer.execute("UPDATE hdsp_schema SET version = ?", (version,))

    def _too_new_advice(self) -> str:
        return "name another database in store.url"

    # ---- writing (writer thread) -----------------------------------------------------

    def commit(self, writes: Sequence[Write], events: Sequence[EventRow]) -> None:
        batch = Batch(writes, events)
        writer = self._writer
        if self._in_doubt is not None and self._settle():
            self._committed(batch)  # it went through before the connection went
            return
        conn = writer.live()
        if self._check_head:
            self._verify_head()
        if writer.in_transaction:  # a failed commit whose rollback failed too
            writer.execute("ROLLBACK")
        try:
            # One round trip for the whole batch, then COMMIT: once COMMIT is
            # sent, the transaction's id says what became of it (see `_settle`).
            with conn.pipeline():
                writer.execute(POSTGRESQL.begin_write)
                batch.apply(writer)
                xid = writer.execute("SELECT pg_current_xact_id()::text").fetchone()[0]
        except BaseException:
            self._rollback(writer)
            raise
        self._in_doubt = (str(xid), conn.info.backend_pid)
        try:
            writer.execute("COMMIT")
        except psycopg.Error:
            if not conn.closed:
                self._in_doubt = None  # the server answered: it did not commit
            raise
        self._in_doubt = None
        self._committed(batch)

    def _committed(self, batch: Batch) -> None:
        if batch.rows:
            self._last_seq = batch.rows[-1][0]

    def _settle(self) -> bool:
        """What became of the transaction whose COMMIT lost its connection: True
        if it committed (the batch is in), False if not (commit it again). Raises
        a transient fault while the server has not decided yet."""
        assert self._in_doubt is not None
        xid, pid = self._in_doubt
        # Connecting again ends our old session if it still holds the lock.
        status = self._writer.execute("SELECT pg_xact_status(?::xid8)", (xid,)).fetchone()[0]
        if status == "in progress":
            raise psycopg.OperationalError(
                f"the outcome of a commit is not known yet (transaction {xid} of server "
                f"process {pid} is still in progress)"
            )
        self._in_doubt = None
        log.warning(
            "the connection was lost during a commit; the server says what became of it",
            transaction=xid,
            status=status,
        )
        return bool(status == "committed")

    def _verify_head(self) -> None:
        head = self._head(self._writer)
        if head != self._last_seq:
            raise TakenOver(
                f"Another hdspd wrote to the PostgreSQL database {self.where} while this "
                f"one was disconnected (its event log is at seq {head}, this daemon's at "
                f"{self._last_seq}). Stop both, and give each hdspd a database of its own."
            )
        self._check_head = False


def check_postgres(url: str, password: str | None = None) -> IntegrityReport:
    """`hdspd check` on PostgreSQL: the schema's version, and whether every blob
    reference in a record has its blob and every blob the bytes its sha256 names.
    Pages and indexes are the server's to check (data checksums, pg_amcheck).
    Never writes, and takes no lock: a running daemon goes on."""
    started = time.monotonic()
    options: dict[str, Any] = {"autocommit": True, "application_name": "hdspd check"}
    if "connect_timeout" not in psycopg.conninfo.conninfo_to_dict(url):
        options["connect_timeout"] = CONNECT_TIMEOUT
    if password is not None:
        options["password"] = password
    with psycopg.connect(url, **options) as raw:
        conn = PgConnection(lambda: raw)
        conn.execute(POSTGRESQL.begin_read)
        try:
            if conn.execute(POSTGRESQL.table_exists, ("hdsp_schema",)).fetchone() is None:
                problems = ["no hdsp_schema table: hdspd has not made this database its own"]
            else:
                problems = blob_problems(conn, POSTGRESQL)
            size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        finally:
            conn.execute("COMMIT")
    return IntegrityReport(
        url, problems, pages=int(size) // 8192, seconds=time.monotonic() - started
    )
