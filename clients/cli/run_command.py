"""`hdsp run`, `hdsp send`, `hdsp attach` and `hdsp answer`: the commands that
start or continue a task and follow it live (clients/cli/follow.py), and the one
that answers what a followed task asks.

The live view brings in rich, a large share of the start-up of commands that never
draw it (`hdsp tasks`): it is imported where a command follows a task.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Literal

from hdsp.protocol import ErrorCode, TaskState

from ..errors import CommandFailed
from ..exit_codes import ExitCode
from ..history_view import HistoryView
from ..todo_view import todo_markdown
from .console import Console, use_color
from .context_flags import add_context_arguments, prompt_context
from .modes_command import complete_slash_commands
from .prompt_source import add_prompt_file_argument, read_prompt
from .render import Renderer
from .task_ids import add_task_argument, resolve_task_id

if TYPE_CHECKING:
    from ..client import Client
    from .follow import TaskFollower

__all__ = ["add_answer_parser", "add_attach_parser", "add_run_parser", "add_send_parser"]

#: --auto-approve names and the approval settings they switch on.
_AUTO_APPROVE = {
    "read": "always_allow_read_only",
    "write": "always_allow_write",
    "execute": "always_allow_execute",
    "command": "always_allow_command",
    "mcp": "always_allow_mcp",
    "subtasks": "always_allow_subtasks",
    "followup": "always_allow_followup",
}


def _approvals(auto_approve: str | None, yes: bool) -> dict[str, Any] | None:
    """Per-task approval overrides from `--auto-approve` and `--yes`."""
    if yes:
        return {**dict.fromkeys(_AUTO_APPROVE.values(), True), "allowed_commands": ["*"]}
    if not auto_approve:
        return None
    kinds = [k.strip() for k in auto_approve.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in _AUTO_APPROVE]
    if unknown:
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST,
            f"--auto-approve: unknown kind {', '.join(unknown)}; "
            f"choose from {', '.join(_AUTO_APPROVE)}.",
        )
    overrides: dict[str, Any] = {_AUTO_APPROVE[k]: True for k in kinds}
    if "command" in kinds:
        overrides["allowed_commands"] = ["*"]
    return overrides


def _follower(
    cli: Console,
    client: Client,
    task_id: str,
    *,
    on_interrupt: Literal["cancel", "detach"] = "cancel",
    our_message: str | None = None,
) -> TaskFollower:
    """What follows a task live for this command (see clients/cli/follow.py)."""
    from .follow import TaskFollower

    return TaskFollower(
        client,
        task_id,
        json=cli.args.json,
        interactive=_interactive(cli),
        on_interrupt=on_interrupt,
        out_raw=cli.out_raw,
        our_message=our_message,
        first_text_is_prompt=our_message is None,
    )


def _interactive(cli: Console) -> bool:
    """Whether asks can be answered here: a person at a terminal, not --json."""
    return not cli.args.json and sys.stdin.isatty() and sys.stdout.isatty()


async def run_run(cli: Console, client: Client) -> int:
    a = cli.args
    if a.allow_broad_workspace and a.workspace is None:
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST,
            "--allow-broad-workspace needs --workspace DIR naming the directory meant.",
        )
    prompt = read_prompt(a.prompt, a.prompt_file)
    head = (await client.status()).head_seq
    try:
        # No --workspace: the client library sends the directory we run in.
        ref = await client.start_task(
            prompt,
            profile=a.profile,
            workspace=a.workspace,
            mode=a.mode,
            approvals=_approvals(a.auto_approve, a.yes),
            allow_broad_workspace=a.allow_broad_workspace,
            context=prompt_context(a),
            agent=a.agent,
            kernel_provider=a.kernels,
        )
    except FileNotFoundError:
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST,
            "The current directory no longer exists; cd somewhere or pass --workspace.",
        ) from None
    if a.detach:
        cli.out(ref.task_id)
        return ExitCode.OK
    if not a.json:
        Renderer().note(f"task {ref.task_id}")
    return await _follower(cli, client, ref.task_id).run(head)


def add_run_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    run = sub.add_parser("run", parents=[common], help="start a task and follow it live")
    run.add_argument(
        "prompt",
        nargs="?",
        help="what the agent should do (`/name args` runs a slash command; -: read it from stdin)",
    ).completer = complete_slash_commands
    add_prompt_file_argument(run)
    run.add_argument("--mode", help="the task's mode: ask, plan, analyst, code, ... (`hdsp modes`)")
    run.add_argument("--agent", help="the agent the task runs (`hdsp agent list`)")
    run.add_argument("--profile", help="provider profile (`demo` needs no key)")
    run.add_argument(
        "--kernels",
        choices=("local", "gateway"),
        help="where the task's kernels run: here, in the sandbox (local), or on the Jupyter "
        "server of the settings' kernels.gateway (default: as kernels.provider says)",
    )
    run.add_argument("--workspace", help="directory the agent works in (default: here)")
    run.add_argument(
        "--allow-broad-workspace",
        action="store_true",
        help="let --workspace be /, your home directory or hdsp's own directories "
        "(refused otherwise: the agent reads its workspace without asking)",
    )
    run.add_argument("--detach", action="store_true", help="print the task id and return")
    add_context_arguments(run)
    run.add_argument(
        "--auto-approve",
        metavar="KINDS",
        help="approve these without asking: read,write,execute,command,mcp,subtasks,followup",
    )
    run.add_argument(
        "--yes", action="store_true", help="approve everything (unattended runs; use with care)"
    )
    run.set_defaults(handler=run_run)


async def run_attach(cli: Console, client: Client) -> int:
    task_id = await resolve_task_id(client, cli.args.task)
    snap = await client.get_task(task_id)
    if not cli.args.json:
        render = Renderer()
        render.note(f"task {task_id}  {snap.state}  {snap.item.mode or 'code'} mode")
        if snap.item.todos:
            render.note("todo list:")
            for line in todo_markdown(snap.item.todos).splitlines():
                render.note(line)
    follower = _follower(cli, client, task_id, on_interrupt="detach")
    if snap.pending_ask is None and (
        snap.state not in (TaskState.RUNNING, TaskState.INTERACTIVE) and not snap.queue
    ):
        if not cli.args.json:
            # Nothing to follow: `hdsp show`'s body.
            color = use_color(sys.stdout)
            HistoryView(sys.stdout, color=color).body(snap)
        return ExitCode.OK if snap.state == TaskState.COMPLETED else ExitCode.FAILED
    # Ctrl-C detaches: attaching is watching, not taking over the task.
    return await follower.run(snap.head_seq, seed=snap.messages, pending_ask=snap.pending_ask)


def add_attach_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    attach = sub.add_parser(
        "attach", parents=[common], help="show a task and follow it live, answering its asks"
    )
    add_task_argument(attach)
    attach.set_defaults(handler=run_attach)


async def run_answer(cli: Console, client: Client) -> int:
    a = cli.args
    task_id = await resolve_task_id(client, a.task)
    ask = (await client.get_task(task_id)).pending_ask
    if ask is None:
        raise CommandFailed(ErrorCode.INVALID_STATE, f"Task {task_id[:8]} waits on no ask.")
    if not (a.yes or a.no or a.text):
        # Approving takes a word: nothing given must not run anything.
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST,
            f"Say --yes to approve or --no to deny the {ask.ask} ask of {task_id[:8]}, "
            "or give a message.",
        )
    response = "yesButtonClicked" if a.yes else "noButtonClicked" if a.no else "messageResponse"
    await client.respond_to_ask(task_id, ask.ts, response, a.text)
    if not a.json:
        cli.out(f"Answered the {ask.ask} ask of {task_id[:8]}.")
    return ExitCode.OK


def add_answer_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    answer = sub.add_parser(
        "answer",
        parents=[common],
        help="answer the ask a task waits on",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='examples:\n  hdsp answer 3f2a --yes\n  hdsp answer 3f2a --no "not that file"\n'
        '  hdsp answer 3f2a "use the 2024 data"   (a reply to a question, or feedback)',
    )
    add_task_argument(answer)
    answer.add_argument("text", nargs="?", help="a reply or feedback for the agent")
    verdict = answer.add_mutually_exclusive_group()
    verdict.add_argument("--yes", action="store_true", help="approve")
    verdict.add_argument("--no", action="store_true", help="deny (the text says why)")
    answer.set_defaults(handler=run_answer)


async def run_send(cli: Console, client: Client) -> int:
    task_id = await resolve_task_id(client, cli.args.task)
    text = read_prompt(cli.args.text, cli.args.prompt_file, "message")
    head = (await client.status()).head_seq
    steer = bool(getattr(cli.args, "steer", False))
    ref = await client.send_message(task_id, text, steer=steer, context=prompt_context(cli.args))
    busy = (
        "The task is busy: the message joins its turn before the next model request."
        if steer
        else "The task is busy: the message waits until its turn ends."
    )
    if cli.args.detach:
        if ref.queued and not cli.args.json:
            Renderer().note(busy)
        return ExitCode.OK
    # Print from our message on: what the task said before it is not the answer.
    follower = _follower(cli, client, task_id, our_message=text)
    # (Said once Ctrl-C takes the message back, which it says it can.)
    return await follower.run(head, first_note=busy if ref.queued else None)


def add_send_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    send = sub.add_parser("send", parents=[common], help="send a message to a task and follow")
    add_task_argument(send)
    send.add_argument(
        "text", nargs="?", help="the message (`/name args` runs a slash command; -: from stdin)"
    ).completer = complete_slash_commands
    add_prompt_file_argument(send)
    send.add_argument("--detach", action="store_true", help="return once the message is sent")
    add_context_arguments(send)
    send.add_argument(
        "--steer",
        action="store_true",
        help="if the task is working, add the message to its current turn before its next "
        "model request (default: it waits until the turn ends)",
    )
    send.set_defaults(handler=run_send)
