"""`hdsp daemon status|stop`: the daemon itself (its version, uptime, tasks,
directories, TCP listener, sandbox and keyring)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from hdsp.protocol import SandboxStatus, encode

from ..exit_codes import ExitCode
from .console import Console
from .settings_command import warn_plaintext

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["add_daemon_parser"]


async def run_daemon(cli: Console, client: Client) -> int:
    if cli.args.action == "stop":
        await client.shutdown()
        cli.out("hdspd is stopping.")
        return ExitCode.OK
    s = await client.status()
    if cli.args.json:
        cli.out_raw(encode(s).decode())
        return ExitCode.OK
    cli.out(
        f"hdspd {s.server_version} (protocol {s.protocol_version}) running, pid {s.pid}, "
        f"up {s.uptime_seconds:.0f} s\n"
        f"  tasks: {s.tasks_total} ({s.tasks_running} running); clients: {s.clients}; "
        f"events: {s.head_seq}\n"
        f"  data: {s.data_dir}\n  runtime: {s.runtime_dir}"
    )
    if s.tcp is not None:
        cli.out(
            f"  tcp: {s.tcp.control} (events {s.tcp.events}), CURVE, "
            f"{s.tcp.authorized_clients} authorised client key(s); server key "
            f"{s.tcp.server_public_key}"
        )
    if client.remote is not None:
        who = client.ack.user if client.ack is not None else None
        cli.out(f"  you: {who or '?'} (remote {client.remote.name}, {client.remote.address})")
    if s.sandbox is not None:
        cli.out(_sandbox_line(s.sandbox))
    warn_plaintext(cli, s.plaintext_keyring)
    return ExitCode.OK


def _sandbox_line(sb: SandboxStatus) -> str:
    if sb.mode == "off":
        return "  sandbox: OFF (sandbox.mode off): commands and kernels run with all of your access"
    network = "network on" if sb.network else "network off"
    if sb.problem is not None:
        return (
            f"  sandbox: {sb.mode}, {network}, UNAVAILABLE (commands and kernels are "
            f"refused): {sb.problem}"
        )
    return f"  sandbox: {sb.mode}, {network}, {sb.mechanism}"


def add_daemon_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    daemon = sub.add_parser("daemon", parents=[common], help="the daemon itself")
    daemon.add_argument("action", choices=["status", "stop"])
    daemon.set_defaults(handler=run_daemon)
