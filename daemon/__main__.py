"""`hdspd`: the hdsp daemon.

Exit codes: 0 stopped cleanly; 1 `hdspd check` found damage, or a subcommand
failed; 2 refused to start (the message on stderr says why and what to do: a
damaged or too new database, a data dir another hdspd holds, bad settings) or
`hdspd check` could not check; 130 interrupted.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from hdsp.protocol import __version__

if TYPE_CHECKING:
    from .config.settings import StoreSettings
    from .store import IntegrityReport

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hdspd",
        description="The hdsp daemon: owns agent tasks, their history and Jupyter kernels.",
    )
    p.add_argument("--version", action="version", version=f"hdspd {__version__}")
    p.add_argument("--data-dir", type=Path, help="SQLite and settings (env HDSP_DATA_DIR)")
    p.add_argument(
        "--runtime-dir", type=Path, help="sockets and discovery file (env HDSP_RUNTIME_DIR)"
    )
    p.add_argument(
        "--max-message-size",
        type=int,
        default=64 * 1024 * 1024,
        metavar="BYTES",
        help="larger frames get a too_large error, and the session goes on; ZeroMQ cuts "
        "a connection whose frame exceeds twice this plus 1 MiB (default 64 MiB)",
    )
    p.add_argument(
        "--event-retention-days",
        type=float,
        default=30.0,
        metavar="DAYS",
        help="prune events older than this (task histories are kept); default 30",
    )
    p.add_argument(
        "--event-retention-count",
        type=int,
        default=1_000_000,
        metavar="N",
        help="keep at most this many newest events; default 1000000",
    )
    p.add_argument(
        "--pub-hwm", type=int, default=100_000, help=argparse.SUPPRESS
    )  # for tests: events queued per subscriber before ZeroMQ drops them
    p.add_argument(
        "--startup-check-ms",
        type=float,
        default=None,
        help=argparse.SUPPRESS,
    )  # how long the quick check at start-up may take (0: none); for tests
    p.add_argument(
        "--heartbeat-ms", type=int, default=None, help=argparse.SUPPRESS
    )  # ZeroMQ heartbeat interval (a silent peer is dropped after 3); for tests
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-format", default="auto", choices=["auto", "json", "console"])
    sub = p.add_subparsers(dest="command")
    svc = sub.add_parser("install-service", help="write a systemd user unit for hdspd")
    svc.add_argument("--force", action="store_true", help="overwrite a different existing unit")
    svc.add_argument("--print", action="store_true", dest="print_only", help="print, don't write")
    sub.add_parser(
        "check",
        help="check the database for damage (SQLite: PRAGMA integrity_check; both: every "
        "image its records refer to); exit 0 if sound, 1 if damaged, 2 if it cannot be "
        "checked",
    )
    keys = sub.add_parser(
        "keys",
        help="CURVE keys of the TCP endpoint (tcp.listen): print the daemon's public key "
        "(making the pair if there is none), or authorize, revoke and list clients' keys",
        description="The daemon's CURVE key pair and the clients it lets in over TCP, in "
        "DATA_DIR/curve. Without an action: print the daemon's public key (a remote's "
        "--server-key), making the pair first if there is none. A running hdspd sees "
        "authorize and revoke at the next handshake.",
    )
    actions = keys.add_subparsers(dest="action", metavar="ACTION")
    actions.add_parser("show", help="print the daemon's public key (the default)")
    authorize = actions.add_parser(
        "authorize", help="let a client in over TCP, under a name the history records"
    )
    authorize.add_argument("name", help="who the client is, e.g. alice or alice@laptop")
    authorize.add_argument("key", help="the client's public key (`hdsp keys` prints it)")
    revoke = actions.add_parser("revoke", help="stop letting a client in (at its next handshake)")
    revoke.add_argument("name")
    actions.add_parser("list", help="the clients let in over TCP")
    return p


def _keys(data_dir: Path | None, action: str | None, args: argparse.Namespace) -> int:
    """`hdspd keys`: files in DATA_DIR/curve, with or without a running hdspd."""
    from .config.curve_keys import (
        AUTHORIZED_KEYS,
        CurveError,
        authorize_key,
        curve_dir_ready,
        generate_server_keys,
        read_authorized_keys,
        revoke_key,
    )
    from .paths import make_private_dir, resolve_paths

    curve_dir = resolve_paths(data_dir, None).curve_dir
    authorized = curve_dir / AUTHORIZED_KEYS
    try:
        make_private_dir(curve_dir.parent)
        curve_dir_ready(curve_dir)
        if action in (None, "show"):
            made = not (curve_dir / "server.key_secret").exists()
            keys = generate_server_keys(curve_dir)
            if made:
                print(f"hdspd: made the daemon's CURVE key pair in {curve_dir}", file=sys.stderr)
            print(keys.public.decode())
            return 0
        if action == "authorize":
            previous = authorize_key(authorized, args.name, args.key)
            note = " (its previous key no longer works)" if previous else ""
            print(f"authorised {args.name}{note}: let in from its next handshake")
            return 0
        if action == "revoke":
            if not revoke_key(authorized, args.name):
                print(f"hdspd keys: no client {args.name!r} in {authorized}", file=sys.stderr)
                return 1
            print(f"revoked {args.name}: its connections are cut, its handshakes refused")
            return 0
        entries, problems = read_authorized_keys(authorized)
        for entry in entries:
            print(f"{entry.name}  {entry.key.decode()}")
        for problem in problems:
            print(f"hdspd keys: {problem} (this line lets nobody in)", file=sys.stderr)
        if not entries:
            print("no client is authorised: `hdspd keys authorize NAME KEY`", file=sys.stderr)
        return 0
    except (CurveError, ValueError, OSError) as exc:
        print(f"hdspd keys: {exc}", file=sys.stderr)
        return 1


def _store_settings(data_dir: Path | None) -> tuple[Path, StoreSettings]:
    """The database file's path, and the `store` settings of the data dir (read
    as they are: a file that does not validate is the daemon's to report)."""
    import json

    from .config.settings import StoreSettings
    from .paths import resolve_paths

    paths = resolve_paths(data_dir, None)
    try:
        document = json.loads(paths.settings_file.read_text())
        store = StoreSettings.model_validate(document.get("store") or {})
    except FileNotFoundError:
        store = StoreSettings()
    return paths.database, store


def _check(data_dir: Path | None) -> int:
    from pydantic import ValidationError

    try:
        path, settings = _store_settings(data_dir)
    except (OSError, ValueError, ValidationError) as exc:
        print(f"hdspd check: cannot read the store settings: {exc}", file=sys.stderr)
        return 2
    if settings.url is not None:
        return _check_postgres(settings.url, settings.secret)
    from .store import integrity_check

    if not path.is_file():
        print(f"hdspd check: no database at {path}", file=sys.stderr)
        return 2
    try:
        report = integrity_check(path)
    except sqlite3.Error as exc:
        print(f"hdspd check: cannot open {path}: {exc}", file=sys.stderr)
        return 2
    return _verdict(
        report,
        f"ok: {path} passed PRAGMA integrity_check and has every image its records "
        f"refer to ({report.pages} pages in {report.seconds:.2f} s)",
        f"damaged: {path} failed its check (PRAGMA integrity_check, then blobs):",
        "Stop hdspd, then restore the database from a backup, or recover what can be "
        f"read into a new one (sqlite3 {path} .recover | sqlite3 {path}.recovered) and "
        f"move it in place; or move it aside (mv {path} {path}.broken) to start afresh.",
    )


def _check_postgres(url: str, secret: str | None) -> int:
    """`hdspd check` of a PostgreSQL store: what hdsp can check (its schema, its
    blobs); pages and indexes are the server's (data checksums, pg_amcheck)."""
    import psycopg

    from .config.secrets import SecretError, SecretStore
    from .store.postgres import check_postgres

    password = None
    if secret is not None:
        try:
            password = SecretStore().get_blocking(secret)
        except SecretError as exc:
            print(f"hdspd check: the secret {secret!r} cannot be read: {exc}", file=sys.stderr)
            return 2
    try:
        report = check_postgres(url, password)
    except psycopg.Error as exc:
        print(f"hdspd check: cannot check {url}: {exc}", file=sys.stderr)
        return 2
    return _verdict(
        report,
        f"ok: {url} (PostgreSQL) has hdsp's schema and every image its records refer "
        f"to ({report.pages * 8192 // 1024} KiB in {report.seconds:.2f} s). Pages and "
        "indexes are the server's to check: data checksums, pg_amcheck.",
        f"damaged: {url} (PostgreSQL) failed its check (schema, then blobs):",
        "Stop hdspd, then restore the database from a backup (pg_dump, or the server's "
        "own backups), or name another database in store.url to start afresh.",
    )


def _verdict(report: IntegrityReport, ok: str, damaged: str, advice: str) -> int:
    """Print what `hdspd check` found, `ok` or `damaged` with the problems and
    `advice`; its exit status: 0 when the store is sound, 1 when it is damaged."""
    if report.ok:
        print(ok)
        return 0
    print(damaged)
    for problem in report.problems:
        print(f"  {problem!r}")
    print(advice)
    return 1


def _refusal(exc: BaseException) -> BaseException | None:
    """The reason the daemon refused to start, if `exc` is (or a task group
    raised) one: it is reported in a sentence, never as a traceback."""
    from .app import DaemonError
    from .store import StoreError

    if isinstance(exc, DaemonError | StoreError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _refusal(inner)
            if found is not None:
                return found
    return None


#: jsonschema's optional format checkers (see `_keep_out_unused_modules`); idna,
#: which httpx needs, is not one of them here.
_FORMAT_CHECKERS = (
    "rfc3987_syntax",
    "rfc3987",
    "rfc3986_validator",
    "rfc3339_validator",
    "isoduration",
    "fqdn",
    "webcolors",
    "uri_template",
    "jsonpointer",
)


def _keep_out_unused_modules(log_format: str) -> None:
    """Stop libraries the daemon uses from importing optional modules it never
    uses, whose imports are most of the CPU between exec and the first answered
    command (measured with `python -X importtime`):

    - jsonschema imports the checkers of string formats that are installed
      (jupyter-events brings them in): rfc3987_syntax, for "iri", builds a lark
      parser at import, about 1.4 s of CPU; the others (arrow through
      isoduration among them) about 35 ms. The tool registry checks no
      formats (its validators have no format checker).
    - structlog imports rich for its console renderer's tracebacks: unused when
      the logs are JSON lines, which format exceptions as plain text.

    A module set to None in sys.modules raises ImportError when imported, which
    is how both libraries learn that an optional module is absent."""
    unused = [*_FORMAT_CHECKERS]
    console = log_format == "console" or (log_format == "auto" and _is_terminal(sys.stderr))
    if not console:
        unused.append("rich")
    for name in unused:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


def _is_terminal(stream: object) -> bool:
    """As `logs` decides whether the format "auto" means console lines."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except (OSError, ValueError):  # closed or detached stream
        return False


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "check":
        from .logs import configure_logging

        configure_logging("warning", args.log_format)  # stdout is the report's
        return _check(args.data_dir)
    if args.command == "keys":
        return _keys(args.data_dir, args.action, args)
    if args.command == "install-service":
        from .systemd_unit import ServiceInstallError, install_service, installed_message

        try:
            result = install_service(force=args.force, print_only=args.print_only)
        except ServiceInstallError as exc:
            print(f"hdspd: {exc}", file=sys.stderr)
            return 1
        if args.print_only:
            sys.stdout.write(str(result))
        else:
            assert isinstance(result, Path)
            print(installed_message(result))
        return 0

    _keep_out_unused_modules(args.log_format)
    from .app import Daemon, Retention
    from .logs import configure_logging
    from .paths import resolve_paths
    from .store import STARTUP_CHECK_SECONDS

    configure_logging(args.log_level, args.log_format)
    daemon = Daemon(
        resolve_paths(args.data_dir, args.runtime_dir),
        max_message_size=args.max_message_size,
        pub_hwm=args.pub_hwm,
        retention=Retention(
            max_age_seconds=args.event_retention_days * 86400,
            max_events=args.event_retention_count,
        ),
        startup_check_seconds=(
            STARTUP_CHECK_SECONDS if args.startup_check_ms is None else args.startup_check_ms / 1000
        ),
        heartbeat_ms=args.heartbeat_ms,
    )
    try:
        anyio.run(daemon.run, backend="asyncio")
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:
        refusal = _refusal(exc)
        if refusal is None:
            raise
        print(f"hdspd: {refusal}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
