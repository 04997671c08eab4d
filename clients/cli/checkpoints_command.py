"""`hdsp checkpoints TASK`, `hdsp diff TASK CP [CP2]`, `hdsp restore TASK CP`:
a task's checkpoints of its workspace (issue 20), what changed between them,
and restoring one (files, history or both; with the kernel, by replay)."""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING, Any, Literal

from hdsp.protocol import (
    AskResponse,
    CheckpointInfo,
    CheckpointRestoreResult,
    MessageEvent,
    encode,
)

from ..exit_codes import ExitCode
from ..history_view import replay_lines
from .ask_prompt import read_line
from .console import Console, print_result
from .task_ids import add_task_argument, resolve_task_id

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["add_checkpoints_parsers"]


def _nested_line(nested: list[str], what: str) -> str:
    """The line that says which nested git repositories checkpoints leave out."""
    return f"Not in checkpoints, {what} (git repositories of their own): " + ", ".join(nested)


def _line(cp: CheckpointInfo) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(cp.ts / 1000))
    changed = ", ".join(cp.changed[:5]) + (
        f" (+{len(cp.changed) - 5})" if len(cp.changed) > 5 else ""
    )
    text = f"{cp.number:>4}  {when}  {cp.commit[:10]}  {cp.reason}"
    if changed:
        text += f"  changed: {changed}"
    return text


async def run_checkpoints(cli: Console, client: Client) -> int:
    task_id = await resolve_task_id(client, cli.args.task)
    listing = await client.list_checkpoints(task_id)
    if cli.args.json:
        cli.out_raw(encode(listing).decode())
        return ExitCode.OK
    if listing.note:
        cli.out(listing.note)
    if not listing.checkpoints:
        cli.out("No checkpoints yet: one is taken before each change the agent makes.")
    for cp in listing.checkpoints:
        cli.out(_line(cp))
        for note in cp.notes:
            cli.out(f"        note: {note}")
    if listing.nested:
        cli.out(_nested_line(listing.nested, "nor restored"))
    return ExitCode.OK


async def run_diff(cli: Console, client: Client) -> int:
    a = cli.args
    task_id = await resolve_task_id(client, a.task)
    diff = await client.diff_checkpoints(task_id, a.checkpoint, a.to)
    if a.json:
        cli.out_raw(encode(diff).decode())
        return ExitCode.OK
    target = f"checkpoint {a.to}" if a.to is not None else "now"
    if not diff.files:
        cli.out(f"No changes from checkpoint {a.checkpoint} to {target}.")
    for change in diff.files:
        cli.out(f"{change.status}: {change.path}")
        if change.binary:
            cli.out("  (binary file)")
        elif change.diff:
            for line in change.diff.rstrip("\n").split("\n"):
                cli.out("  " + line)
    if diff.nested:
        cli.out(_nested_line(diff.nested, "not in this diff"))
    return ExitCode.OK


def _show_replay_ask(cli: Console, text: str) -> None:
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = {}
    for line in replay_lines(data if isinstance(data, dict) else {}):
        cli.out(line)


async def _answer_replay_ask(cli: Console, client: Client, task_id: str) -> None:
    """Wait for the task's replay ask, show its cells and answer it (--yes, or
    the person at the terminal)."""
    async with client.events(task_id) as events:
        async for event in events:
            data = event.data
            if not isinstance(data, MessageEvent):
                continue
            m = data.payload[0].message
            if m.type != "ask" or m.partial or m.is_answered:
                continue
            if '"replay_kernel"' not in (m.text or ""):
                continue
            _show_replay_ask(cli, m.text or "")
            if cli.args.yes:
                yes = True
            else:
                reply = await read_line("Restart the kernel and replay? [y/N] ")
                yes = reply.strip().lower() in ("y", "yes")
            response = AskResponse.YES if yes else AskResponse.NO
            await client.respond_to_ask(task_id, m.ts, response.value)
            return


def _result_lines(result: CheckpointRestoreResult) -> list[str]:
    lines = [f"restored checkpoint {result.checkpoint} ({result.restore})"]
    if result.restore != "history":
        lines.append(f"files changed: {', '.join(result.files) or 'none'}")
    if result.open_notebooks:
        lines.append(
            "restored and saved where JupyterLab has them open: " + ", ".join(result.open_notebooks)
        )
    lines += [f"note: {note}" for note in result.notes]
    if result.undo_checkpoint is not None:
        lines.append(f"to undo: hdsp restore {result.task_id[:8]} {result.undo_checkpoint}")
    if result.rewound:
        lines.append("history rewound to the checkpoint's message")
    if result.nested:
        lines.append(_nested_line(result.nested, "left as they are"))
    replay = result.kernel
    if replay is not None:
        for ex in replay.executions:
            note = f" ({ex.note})" if ex.note else ""
            lines.append(f"  execution {ex.seq}: {ex.status}{note}")
        if not replay.approved:
            lines.append("kernel: not replayed (not approved)")
        elif replay.failed_at is not None:
            lines.append(f"kernel: replay stopped at execution {replay.failed_at}: {replay.error}")
        elif replay.error:
            lines.append(f"kernel: {replay.error}")
        lines.append("variables:" + ("" if replay.variables else " none"))
        for v in replay.variables:
            lines.append(f"  {v.name}: {v.type} = {v.summary}")
    return lines


async def run_restore(cli: Console, client: Client) -> int:
    a = cli.args
    task_id = await resolve_task_id(client, a.task)
    mode: Literal["files", "history", "both"] = (
        "both" if a.both else "history" if a.history else "files"
    )
    result: CheckpointRestoreResult | None = None

    async def restore() -> None:
        nonlocal result
        result = await client.restore_checkpoint(
            task_id, a.checkpoint, restore=mode, with_kernel=a.with_kernel, skip=a.skip or ()
        )
        tg.cancel_scope.cancel()

    import anyio

    async with anyio.create_task_group() as tg:
        if a.with_kernel:
            tg.start_soon(_answer_replay_ask, cli, client, task_id)
        tg.start_soon(restore)
    assert result is not None
    print_result(cli, result, _result_lines(result))
    replay = result.kernel
    failed = replay is not None and (replay.failed_at is not None or not replay.approved)
    return ExitCode.FAILED if failed else ExitCode.OK


def add_checkpoints_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    cps = sub.add_parser(
        "checkpoints",
        parents=[common],
        help="list a task's checkpoints of its workspace",
        description="A checkpoint is taken before each change the agent makes (files, "
        "notebooks, shell commands, code runs).",
    )
    add_task_argument(cps)
    cps.set_defaults(handler=run_checkpoints)
    diff = sub.add_parser(
        "diff",
        parents=[common],
        help="what changed from a checkpoint to another (or to now)",
        description="Files as unified diffs; notebooks cell by cell (sources and outputs).",
    )
    add_task_argument(diff)
    diff.add_argument("checkpoint", type=int, help="a checkpoint's number")
    diff.add_argument("to", type=int, nargs="?", help="another checkpoint (default: now)")
    diff.set_defaults(handler=run_diff)
    restore = sub.add_parser(
        "restore",
        parents=[common],
        help="restore a checkpoint: files (default), history, or both",
        description="A checkpoint of the present files is taken first, so that the "
        "restore can be undone (its number is printed).",
    )
    add_task_argument(restore)
    restore.add_argument("checkpoint", type=int, help="a checkpoint's number")
    which = restore.add_mutually_exclusive_group()
    which.add_argument("--files", action="store_true", help="the workspace's files (default)")
    which.add_argument(
        "--history", action="store_true", help="rewind the task to the checkpoint's message"
    )
    which.add_argument("--both", action="store_true", help="files and history")
    restore.add_argument(
        "--with-kernel",
        action="store_true",
        help="also restart the task's kernel and replay its code up to the checkpoint "
        "(you approve the cells first)",
    )
    restore.add_argument(
        "--skip",
        type=int,
        action="append",
        metavar="SEQ",
        help="an execution not to replay (repeatable)",
    )
    restore.add_argument("--yes", action="store_true", help="approve the replay without asking")
    restore.set_defaults(handler=run_restore)
