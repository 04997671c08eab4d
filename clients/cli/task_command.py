"""The commands that act on one task and print the task's new state: stopping and
ending it (`hdsp cancel`, `resume`, `condense`, `close`) and changing its history
(`hdsp rewind`, `edit`, `delete`, `fork`)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from hdsp.protocol import ErrorCode, TaskRef, TaskState

from ..errors import CommandFailed
from ..exit_codes import ExitCode
from .console import Console, print_result
from .task_ids import add_task_argument, resolve_task_id

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["add_history_parsers", "add_lifecycle_parsers"]


def _ref_out(cli: Console, ref: TaskRef, done: str) -> int:
    print_result(cli, ref, [f"{ref.task_id}: {ref.state}{done}"])
    return ExitCode.OK


async def _simple(
    cli: Console, client: Client, action: Callable[[str], Awaitable[TaskRef]], done: str = ""
) -> int:
    ref = await action(await resolve_task_id(client, cli.args.task))
    return _ref_out(cli, ref, done)


# ---- cancel, resume, condense, close -------------------------------------------


async def run_cancel(cli: Console, client: Client) -> int:
    ref = await client.cancel_task(await resolve_task_id(client, cli.args.task))
    short = ref.task_id[:8]
    completed = ref.state == TaskState.COMPLETED
    done = "it had completed, nothing ran" if completed else "its work was stopped"
    return _ref_out(
        cli, ref, f"; {done}, the task stays open (`hdsp send {short} TEXT` continues it)"
    )


async def run_resume(cli: Console, client: Client) -> int:
    task_id = await resolve_task_id(client, cli.args.task)
    state = (await client.get_task(task_id)).state
    if state == TaskState.COMPLETED:
        raise CommandFailed(
            ErrorCode.INVALID_STATE,
            f"Task {task_id[:8]} completed; there is nothing to resume. "
            f"`hdsp send {task_id[:8]} TEXT` continues the conversation.",
        )
    return await _simple(cli, client, client.resume_task)


async def run_condense(cli: Console, client: Client) -> int:
    done = f"; see `hdsp show {cli.args.task[:8]}` for the summary and the tokens it saved"
    return await _simple(cli, client, client.condense_task, done)


async def run_close(cli: Console, client: Client) -> int:
    short = cli.args.task[:8]
    done = "; closed: stopped, its kernel and memory released; the history stays"
    return await _simple(cli, client, client.close_task, f"{done} (`hdsp show {short}`)")


def add_lifecycle_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    for name, text, handler in (
        (
            "cancel",
            "stop the task's current work now (interrupts its kernel); the task stays "
            "open: `send` continues it",
            run_cancel,
        ),
        (
            "resume",
            "resume a task the daemon stopped (not a completed one: `send` continues it)",
            run_resume,
        ),
        (
            "condense",
            "summarise the task's conversation now, so later requests carry the summary "
            "instead of its older messages (they stay in the history)",
            run_condense,
        ),
        (
            "close",
            "end a task: stop it and release its kernel and memory; the history stays "
            "(`show`), and `send` reopens it",
            run_close,
        ),
    ):
        c = sub.add_parser(name, parents=[common], help=text, description=text)
        add_task_argument(c)
        c.set_defaults(handler=handler)


# ---- rewind, edit, delete, fork ------------------------------------------------


async def run_rewind(cli: Console, client: Client) -> int:
    task_id = await resolve_task_id(client, cli.args.task)
    ref = await client.rewind_task(task_id, cli.args.ts, include=not cli.args.keep)
    return _ref_out(cli, ref, "; rewound (`send` continues from there)")


async def run_edit(cli: Console, client: Client) -> int:
    task_id = await resolve_task_id(client, cli.args.task)
    ref = await client.edit_message(task_id, cli.args.ts, cli.args.text)
    return _ref_out(cli, ref, "; your message was replaced and sent")


async def run_delete(cli: Console, client: Client) -> int:
    task_id = await resolve_task_id(client, cli.args.task)
    ref = await client.delete_message(task_id, cli.args.ts)
    return _ref_out(cli, ref, "; the message was deleted")


async def run_fork(cli: Console, client: Client) -> int:
    task_id = await resolve_task_id(client, cli.args.task)
    ref = await client.fork_task(task_id, cli.args.ts)
    return _ref_out(cli, ref, f"; forked from {task_id[:8]}")


def add_history_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    rewind = sub.add_parser(
        "rewind",
        parents=[common],
        help="take a task's history back to one of its messages (its ts: `hdsp show --json`)",
        description="Remove the task's messages from TS on (a running turn is cancelled "
        "first; the kernel's state is not rolled back). Messages that a removed summary "
        "or truncation hid come back.",
    )
    add_task_argument(rewind)
    rewind.add_argument("ts", type=int, help="the message's ts")
    rewind.add_argument(
        "--keep", action="store_true", help="keep that message; remove only what came after"
    )
    rewind.set_defaults(handler=run_rewind)
    edit_parser = sub.add_parser(
        "edit", parents=[common], help="replace one of your messages and go on from there"
    )
    add_task_argument(edit_parser)
    edit_parser.add_argument("ts", type=int, help="the ts of your message")
    edit_parser.add_argument("text")
    edit_parser.set_defaults(handler=run_edit)
    delete = sub.add_parser(
        "delete",
        parents=[common],
        help="delete one message from a task's history",
        description="Remove one message (its ts: `hdsp show --json`) from the task's "
        "history and from what the model is sent from now on: one of yours (the model's "
        "answers stay), the text of one of the model's replies (its tool calls stay), or "
        "one of its tool calls (any message of it) with the call's result. A summary that "
        "condensed it goes too. A running turn is cancelled first.",
    )
    add_task_argument(delete)
    delete.add_argument("ts", type=int, help="the ts of the message")
    delete.set_defaults(handler=run_delete)
    fork = sub.add_parser(
        "fork", parents=[common], help="a new task with a task's history up to a message"
    )
    add_task_argument(fork)
    fork.add_argument("ts", type=int, help="the last message the new task keeps")
    fork.set_defaults(handler=run_fork)
