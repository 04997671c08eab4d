"""`hdsp modes`, `hdsp mode`, `hdsp prompt`, `hdsp todo` and `hdsp commands`:
a task's mode, the exact system prompt it gets, its todo list, and the slash
commands a prompt may start with (which `hdsp run`'s completion offers).

Everything shown came from settings and workspace files (untrusted): lines go
through `Console.out`, which escapes control characters.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING, Any

from hdsp.protocol import encode

from ..errors import ClientError
from ..escape import escape_controls
from ..exit_codes import ExitCode
from ..todo_view import todo_markdown
from .console import Console, print_result
from .task_ids import add_task_argument, resolve_task_id

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["add_modes_parsers", "complete_slash_commands"]


async def run_modes(cli: Console, client: Client) -> int:
    a = cli.args
    listing = await client.get_modes(a.workspace or os.getcwd())
    if a.json:
        for mode in listing.modes:
            cli.out_raw(encode(mode).decode())
        return ExitCode.OK
    for mode in listing.modes:
        groups = ",".join(mode.groups) or "-"
        regex = f"  edits only /{mode.file_regex}/" if mode.file_regex else ""
        cli.out(f"{mode.slug:<14} {mode.name:<16} {groups:<34} {mode.source}{regex}")
        if mode.when_to_use:
            cli.out(f"{'':<14} {mode.when_to_use}")
    for problem in listing.problems:
        cli.out(f"left out: {problem}")
    return ExitCode.OK if not listing.problems else ExitCode.FAILED


async def run_mode(cli: Console, client: Client) -> int:
    task_id = await resolve_task_id(client, cli.args.task)
    ref = await client.switch_mode(task_id, cli.args.mode)
    print_result(cli, ref, [f"{ref.task_id}: now in {cli.args.mode} mode"])
    return ExitCode.OK


async def run_prompt(cli: Console, client: Client) -> int:
    a = cli.args
    if a.task:
        shown = await client.get_system_prompt(await resolve_task_id(client, a.task))
    else:
        shown = await client.get_system_prompt(workspace=a.workspace, mode=a.mode)
    print_result(cli, shown, [shown.text])
    return ExitCode.OK


def _edit_in_editor(text: str) -> str:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.NamedTemporaryFile("w+", suffix=".md", delete=False) as f:
        f.write(text + "\n")
        path = f.name
    try:
        subprocess.run([*editor.split(), path], check=True)
        with open(path, encoding="utf-8") as f:
            return f.read()
    finally:
        os.unlink(path)


async def run_todo(cli: Console, client: Client) -> int:
    import anyio.to_thread

    a = cli.args
    task_id = await resolve_task_id(client, a.task)
    new: str | None = None
    if a.set is not None:
        new = a.set
    elif a.file is not None:
        new = sys.stdin.read() if a.file == "-" else await anyio.Path(a.file).read_text()
    elif a.edit:
        current = (await client.get_task(task_id)).item.todos or []
        new = await anyio.to_thread.run_sync(_edit_in_editor, todo_markdown(current))
    if new is not None:
        await client.update_todo_list(task_id, new)
    items = (await client.get_task(task_id)).item.todos or []
    if a.json:
        cli.out_raw(encode(items).decode())
    elif items:
        cli.out(todo_markdown(items))
    else:
        cli.out(f"Task {task_id[:8]} has no todo list.")
    return ExitCode.OK


async def run_commands(cli: Console, client: Client) -> int:
    listing = await client.get_commands(cli.args.workspace or os.getcwd())
    if cli.args.json:
        for command in listing.commands:
            cli.out_raw(encode(command).decode())
        return ExitCode.OK
    if not listing.commands:
        cli.out("No slash commands: add markdown files to .hdsp/commands/.")
    for c in listing.commands:
        hint = f" {c.argument_hint}" if c.argument_hint else ""
        mode = f"  [{c.mode}]" if c.mode else ""
        cli.out(f"/{c.name}{hint}  {c.description or ''}  ({c.source}){mode}")
    for problem in listing.problems:
        cli.out(f"left out: {problem}")
    return ExitCode.OK


def complete_slash_commands(
    prefix: str, parsed_args: argparse.Namespace, **_: Any
) -> dict[str, str]:
    """argcomplete's completer for a prompt: `/name` of each slash command of
    the workspace (and the global ones) when the prompt starts with `/`. Asks the
    daemon with a short deadline; nothing when it is down or slow."""
    if not prefix.startswith("/"):
        return {}
    runtime_dir = getattr(parsed_args, "runtime_dir", None)
    remote = getattr(parsed_args, "remote", None)
    workspace = getattr(parsed_args, "workspace", None) or os.getcwd()
    import anyio

    from ..client import connect

    async def ask() -> dict[str, str]:
        async with connect(
            runtime_dir, remote=remote, name="hdsp-completion", kind="cli", timeout=0.5
        ) as c:
            listing = await c.get_commands(workspace)
        return {
            f"/{cmd.name}": escape_controls(cmd.description or cmd.argument_hint or "")
            for cmd in listing.commands
            if f"/{cmd.name}".startswith(prefix)
        }

    try:
        return anyio.run(ask, backend="asyncio")
    except (ClientError, TimeoutError, OSError):
        return {}


def add_modes_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    modes = sub.add_parser(
        "modes", parents=[common], help="list the modes a task can be in (and their tools)"
    )
    modes.add_argument("--workspace", help="include this workspace's .hdsp/modes.yaml")
    modes.set_defaults(handler=run_modes)

    mode = sub.add_parser("mode", parents=[common], help="put a task in another mode")
    add_task_argument(mode)
    mode.add_argument("mode", help="the mode's slug (see `hdsp modes`)")
    mode.set_defaults(handler=run_mode)

    prompt = sub.add_parser(
        "prompt",
        parents=[common],
        help="print the exact system prompt a task (or a new task) gets",
        description="Print the system prompt of a task's next request, or, without a "
        "task, the one a new task in --workspace and --mode would get.",
    )
    prompt.add_argument("task", nargs="?", help="task id or a unique prefix of one")
    prompt.add_argument("--mode", help="without a task: this mode (default code)")
    prompt.add_argument("--workspace", help="without a task: this workspace (default here)")
    prompt.set_defaults(handler=run_prompt)

    todo = sub.add_parser(
        "todo",
        parents=[common],
        help="show or edit a task's todo list (the agent is told of an edit)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  hdsp todo 3f2a\n  hdsp todo 3f2a --edit\n"
        '  hdsp todo 3f2a --set "- [x] load\\n- [ ] plot"',
    )
    add_task_argument(todo)
    how = todo.add_mutually_exclusive_group()
    how.add_argument("--edit", action="store_true", help="edit it in $VISUAL/$EDITOR")
    how.add_argument(
        "--set", metavar="MARKDOWN", help="replace it: `- [ ]`, `- [-]`, `- [x]` lines"
    )
    how.add_argument(
        "--file", metavar="PATH", help="replace it with a file's checklist (- : stdin)"
    )
    todo.set_defaults(handler=run_todo)

    commands = sub.add_parser(
        "commands", parents=[common], help="list slash commands (/name at a prompt's start)"
    )
    commands.add_argument("--workspace", help="this workspace's .hdsp/commands/ (default here)")
    commands.set_defaults(handler=run_commands)
