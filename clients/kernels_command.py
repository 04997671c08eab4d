"""`hdsp kernels`: list, start, attach, interrupt, restart and shut down the
Jupyter kernels hdspd holds."""

from __future__ import annotations

import argparse
from typing import Any

from hdsp.protocol import ErrorCode, KernelInfo, encode

from .client import Client
from .console import Console
from .errors import CommandFailed
from .exit_codes import ExitCode

__all__ = ["add_kernels_parser"]


async def _resolve(client: Client, ref: str) -> str:
    """A kernel id from an id or a unique prefix of one."""
    ids = [k.kernel_id for k in (await client.list_kernels()).kernels]
    if ref in ids:
        return ref
    matches = [i for i in ids if i.startswith(ref)]
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
    return f"{k.kernel_id}  {k.kernel_name:<10} {k.status:<10} {owner}{where}{tasks}"


async def run_kernels(cli: Console, client: Client) -> int:
    a = cli.args
    action = a.action or "list"
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
        info = await client.start_kernel(a.kernel_name, a.cwd)
        if a.json:
            cli.out_raw(encode(info).decode())
        else:
            cli.out(f"started {_line(info)}")
        return ExitCode.OK
    if action == "attach":
        info = await client.attach_kernel(a.connection_file)
        if a.json:
            cli.out_raw(encode(info).decode())
        else:
            cli.out(f"attached {_line(info)}")
        return ExitCode.OK
    kernel_id = await _resolve(client, a.kernel)
    calls = {
        "interrupt": (client.interrupt_kernel, "interrupted"),
        "restart": (client.restart_kernel, "restarted (its variables are gone)"),
        "shutdown": (client.shutdown_kernel, "shut down (an attached kernel: detached)"),
    }
    call, done = calls[action]
    ref = await call(kernel_id)
    if a.json:
        cli.out_raw(encode(ref).decode())
    else:
        cli.out(f"{ref.kernel_id}: {done}; now {ref.status}")
    return ExitCode.OK


def add_kernels_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    kernels = sub.add_parser(
        "kernels",
        parents=[common],
        help="list and control the daemon's Jupyter kernels",
        description="List, start, attach, interrupt, restart and shut down kernels.",
    )
    kernels.set_defaults(handler=run_kernels, action=None)
    actions = kernels.add_subparsers(dest="action", metavar="ACTION")
    actions.add_parser("list", parents=[common], help="list kernels (the default)")
    start = actions.add_parser("start", parents=[common], help="start a kernel")
    start.add_argument("--kernel-name", help="kernelspec name (default python3)")
    start.add_argument("--cwd", help="its working directory")
    attach = actions.add_parser(
        "attach", parents=[common], help="use a running kernel (a notebook's)"
    )
    attach.add_argument("connection_file", help="the kernel's connection file (kernel-*.json)")
    for name, text in (
        ("interrupt", "interrupt what a kernel runs"),
        ("restart", "restart a kernel (its state is lost)"),
        ("shutdown", "shut down a kernel (detach from an attached one)"),
    ):
        p = actions.add_parser(name, parents=[common], help=text)
        p.add_argument("kernel", help="kernel id or a unique prefix of one")
