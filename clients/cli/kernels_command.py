"""`hdsp kernels`: list, start, attach, interrupt, restart and shut down the
Jupyter kernels hdspd holds; `--gateway` lists what the Jupyter server of the
settings (kernels.gateway) runs, and `attach --gateway ID` uses one of those
(`--remote` is the global flag that names a team daemon)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Literal

from hdsp.protocol import ErrorCode, KernelInfo, RemoteKernelList, encode

from ..errors import CommandFailed
from ..exit_codes import ExitCode
from .console import Console, print_result

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["add_kernels_parser"]


async def _find(client: Client, ref: str) -> KernelInfo:
    """The kernel whose id is `ref` or starts with it."""
    kernels = {k.kernel_id: k for k in (await client.list_kernels()).kernels}
    if ref in kernels:
        return kernels[ref]
    matches = [k for i, k in kernels.items() if i.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CommandFailed(
            ErrorCode.KERNEL_NOT_FOUND, f"No kernel id starts with {ref!r}; see `hdsp kernels`."
        )
    raise CommandFailed(
        ErrorCode.INVALID_REQUEST, f"{ref!r} matches several kernels; give more of the id."
    )


def _line(k: KernelInfo) -> str:
    owner = "started by hdsp" if k.owned else "attached"
    tasks = f"  tasks: {', '.join(t[:8] for t in k.task_ids)}" if k.task_ids else ""
    where = f"  cwd: {k.cwd}" if k.cwd else ""
    if k.provider == "gateway":
        where = f"  on {k.server_url} as {k.remote_id}"
    return f"{k.kernel_id}  {k.kernel_name:<10} {k.status:<10} {owner}{where}{tasks}"


def _remote_lines(listing: RemoteKernelList) -> list[str]:
    lines = [f"Jupyter server {listing.server_url}"]
    if not listing.kernels:
        lines.append("  no kernels")
    for k in listing.kernels:
        used = f"  used by hdsp as {k.kernel_id}" if k.kernel_id else ""
        connections = f"  {k.connections} connections" if k.connections is not None else ""
        lines.append(
            f"  kernel {k.remote_id}  {k.name or '?':<10} {k.execution_state or '?':<10}"
            f"{connections}{used}"
        )
    if listing.sessions_error:
        lines.append(f"  sessions not listed: {listing.sessions_error}")
    for session in listing.sessions:
        what = session.path or session.name or "?"
        lines.append(
            f"  session {session.session_id}  {session.type or '?':<8} {what}  "
            f"kernel {session.remote_kernel_id or '?'}"
        )
    return lines


async def run_kernels(cli: Console, client: Client) -> int:
    a = cli.args
    action = a.action or "list"
    if action == "list" and getattr(a, "on_server", False):
        remote = await client.list_remote_kernels(a.profile_name)
        print_result(cli, remote, _remote_lines(remote))
        return ExitCode.OK
    if action == "list":
        listing = await client.list_kernels()
        if a.json:
            for k in listing.kernels:
                cli.out_raw(encode(k).decode())
        elif not listing.kernels:
            cli.out("No kernels. A task starts one when it first runs code; `hdsp kernels start`.")
        else:
            for k in listing.kernels:
                cli.out(_line(k))
        return ExitCode.OK
    if action == "start":
        provider: Literal["local", "gateway"] | None = (
            "gateway" if a.gateway else ("local" if a.local else None)
        )
        try:
            # No --cwd: the client library sends the directory we run in.
            info = await client.start_kernel(
                a.kernel_name, a.cwd, provider=provider, profile=a.profile_name
            )
        except FileNotFoundError:
            raise CommandFailed(
                ErrorCode.INVALID_REQUEST,
                "The current directory no longer exists; cd somewhere or pass --cwd DIR.",
            ) from None
        print_result(cli, info, [f"started {_line(info)}"])
        return ExitCode.OK
    if action == "attach":
        if (a.connection_file is None) == (a.server_kernel is None):
            raise CommandFailed(
                ErrorCode.INVALID_REQUEST,
                "Give a connection file, or --gateway ID (a kernel of the Jupyter server: "
                "`hdsp kernels --gateway` lists them).",
            )
        info = await client.attach_kernel(
            a.connection_file, remote_kernel_id=a.server_kernel, profile=a.profile_name
        )
        print_result(cli, info, [f"attached {_line(info)}"])
        return ExitCode.OK
    kernel = await _find(client, a.kernel)
    calls = {
        "interrupt": (client.interrupt_kernel, "interrupted"),
        "restart": (client.restart_kernel, "restarted (its variables are gone)"),
        "shutdown": (
            client.shutdown_kernel,
            "shut down" if kernel.owned else "detached (an attached kernel runs on)",
        ),
    }
    call, done = calls[action]
    ref = await call(kernel.kernel_id)
    print_result(cli, ref, [f"{ref.kernel_id}: {done}; now {ref.status}"])
    return ExitCode.OK


def add_kernels_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    kernels = sub.add_parser(
        "kernels",
        parents=[common],
        help="list and control the daemon's Jupyter kernels",
        description="List, start, attach, interrupt, restart and shut down kernels.",
    )
    kernels.set_defaults(handler=run_kernels, action=None, profile_name=None)
    remote_help = (
        "list the kernels and sessions of the Jupyter server of the settings (kernels.gateway)"
    )
    kernels.add_argument("--gateway", action="store_true", dest="on_server", help=remote_help)
    profile_help = "the profile whose kernels settings apply (default: the current one)"
    kernels.add_argument("--profile", dest="profile_name", help=profile_help)
    actions = kernels.add_subparsers(dest="action", metavar="ACTION")
    listing = actions.add_parser("list", parents=[common], help="list kernels (the default)")
    listing.add_argument("--gateway", action="store_true", dest="on_server", help=remote_help)
    listing.add_argument("--profile", dest="profile_name", help=profile_help)
    start = actions.add_parser("start", parents=[common], help="start a kernel")
    start.add_argument("--kernel-name", help="kernelspec name (default python3)")
    start.add_argument(
        "--cwd",
        help="a local kernel's working directory (default: this one; not /, ~ itself "
        "or hdsp's own directories)",
    )
    where = start.add_mutually_exclusive_group()
    where.add_argument(
        "--gateway", action="store_true", help="on the Jupyter server (kernels.gateway)"
    )
    where.add_argument("--local", action="store_true", help="on this machine, in the sandbox")
    start.add_argument("--profile", dest="profile_name", help=profile_help)
    attach = actions.add_parser(
        "attach",
        parents=[common],
        help="use a running kernel (a notebook's, or one on the Jupyter server)",
    )
    attach.add_argument(
        "connection_file", nargs="?", help="the kernel's connection file (kernel-*.json)"
    )
    attach.add_argument(
        "--gateway",
        metavar="ID",
        dest="server_kernel",
        help="a kernel of the Jupyter server, by its id there",
    )
    attach.add_argument("--profile", dest="profile_name", help=profile_help)
    for name, text in (
        ("interrupt", "interrupt what a kernel runs"),
        ("restart", "restart a kernel (its state is lost)"),
        ("shutdown", "shut down a kernel (detach from an attached one)"),
    ):
        p = actions.add_parser(name, parents=[common], help=text)
        p.add_argument("kernel", help="kernel id or a unique prefix of one")
