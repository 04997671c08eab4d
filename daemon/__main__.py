"""`hdspd`: the hdsp daemon."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio

from hdsp.protocol import __version__

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
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-format", default="auto", choices=["auto", "json", "console"])
    sub = p.add_subparsers(dest="command")
    svc = sub.add_parser("install-service", help="write a systemd user unit for hdspd")
    svc.add_argument("--force", action="store_true", help="overwrite a different existing unit")
    svc.add_argument("--print", action="store_true", dest="print_only", help="print, don't write")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "install-service":
        from .service import ServiceInstallError, install_service, installed_message

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

    from .app import Daemon, DaemonError, Retention
    from .logs import configure_logging
    from .paths import resolve_paths
    from .store import StoreError

    configure_logging(args.log_level, args.log_format)
    daemon = Daemon(
        resolve_paths(args.data_dir, args.runtime_dir),
        max_message_size=args.max_message_size,
        pub_hwm=args.pub_hwm,
        retention=Retention(
            max_age_seconds=args.event_retention_days * 86400,
            max_events=args.event_retention_count,
        ),
    )
    try:
        anyio.run(daemon.run, backend="asyncio")
    except (DaemonError, StoreError) as exc:
        print(f"hdspd: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
