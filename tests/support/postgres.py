"""A private PostgreSQL server for the tests of the PostgreSQL store.

One cluster per test session, made with Debian's `postgresql` package's initdb
and pg_ctl in a temporary directory, listening on a Unix socket in that
directory only (no TCP port). PostgreSQL refuses to run as root: as root, the
cluster belongs to `nobody` and its commands run through `runuser`. Each test
gets a database of its own, copied from a template that already has hdsp's
schema (CREATE DATABASE ... TEMPLATE: a file copy, milliseconds), dropped after.

The cluster runs without fsync: a test kills hdspd, never the server, and what
a commit handed the server survives that either way.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg

__all__ = ["MISSING", "PASSWORD_USER", "PostgresCluster", "find_bin_dir"]

#: What a test says when the server is not installed (it fails, never skips).
MISSING = (
    "PostgreSQL is missing: the tests of the PostgreSQL store run a private server "
    "made with its initdb and pg_ctl (/usr/lib/postgresql/*/bin). Install Debian's "
    "package: apt-get install -y postgresql (the tests never use the system's own "
    "cluster; `.ci/run` installs it)."
)

#: The cluster's superuser, and the template every test's database is copied from.
USER = "hdsp"
TEMPLATE = "hdsp_template"
#: A role that logs in with a password only.
PASSWORD_USER = "hdsp_pw"
HBA = f"local all {PASSWORD_USER} scram-sha-256\nlocal all all trust\n"


def find_bin_dir() -> Path | None:
    """The newest PostgreSQL's bin directory that has initdb and pg_ctl."""
    found = []
    for candidate in glob.glob("/usr/lib/postgresql/*/bin"):
        path = Path(candidate)
        if (path / "initdb").is_file() and (path / "pg_ctl").is_file():
            try:
                found.append((int(path.parent.name), path))
            except ValueError:
                continue
    return max(found)[1] if found else None


class PostgresCluster:
    def __init__(self, bin_dir: Path, *, durable: bool = False) -> None:
        """`durable`: fsync and synchronous commits, as a server runs by default
        (the benchmarks'); the tests' cluster runs without (see above)."""
        self.bin_dir = bin_dir
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="hdsp-pg-", dir="/tmp"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        #: The directory of the server's socket: the host part of a libpq URL.
        self.socket_dir = self.root
        self._names = itertools.count(1)
        self._as: list[str] = []
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
            self._as = ["runuser", "-u", "nobody", "--"]

    def _run(self, *argv: str) -> None:
        done = subprocess.run(
            [*self._as, *argv], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
                f"\n{self.server_log()}"
            )

    def server_log(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def start(self) -> None:
        self._run(
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
        )
        # Everyone is trusted on the socket but one role that must give its
        # password (tests of `store.secret`).
        # (Written over initdb's file: its owner and mode stay.)
        (self.data / "pg_hba.conf").write_text(HBA)
        settings = [f"-k {self.socket_dir}", "-c listen_addresses=''", "-c max_connections=200"]
        if not self.durable:
            settings += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        self._run(
            str(self.bin_dir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            "60",
            "-o",
            " ".join(settings),
            "start",
        )
        from hdsp.daemon.store.postgres import PostgresDatabase

        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {TEMPLATE}")
        PostgresDatabase(self.url(TEMPLATE)).close()  # the schema, as hdspd makes it

    def stop(self) -> None:
        try:
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    @staticmethod
    def dbname(url: str) -> str:
        """The database a URL of `url` names."""
        return urlsplit(url).path.lstrip("/")

    def url(self, dbname: str, *, user: str = USER, socket_dir: Path | None = None) -> str:
        return f"postgresql://{user}@/{dbname}?host={socket_dir or self.socket_dir}"

    @contextmanager
    def admin(self, dbname: str = "postgres") -> Iterator[psycopg.Connection[Any]]:
        with psycopg.connect(self.url(dbname), autocommit=True) as conn:
            yield conn

    def create_database(self, *, empty: bool = False) -> str:
        """A new database: hdsp's schema in it (or nothing, `empty`)."""
        name = f"test_{os.getpid()}_{next(self._names)}"
        template = "template0" if empty else TEMPLATE
        with self.admin() as conn:
            # A file copy: faster than the WAL-logged copy for a small template.
            strategy = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {template}{strategy}")
        return name

    def cut_off(self, url: str, *, allow: bool) -> None:
        """Refuse (or allow again) connections to the database of `url`, and end
        every one it has (waiting until each has ended: its locks go with it):
        for a client, the server is gone."""
        name = self.dbname(url)
        with self.admin() as conn:
            conn.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS {str(allow).lower()}")
            if not allow:
                conn.execute(
                    "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                    "WHERE datname = %s",
                    (name,),
                )

    def drop_database(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
