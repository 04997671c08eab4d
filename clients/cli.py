"""`hdsp`: the command-line frontend of hdspd.

Exit codes: see :mod:`.exit_codes` (`hdsp --help` prints the table).
"""

from __future__ import annotations

import argparse
import functools
import getpass
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

import anyio

from hdsp.protocol import (
    ErrorCode,
    SandboxStatus,
    TaskRef,
    TaskState,
    __version__,
    encode,
)

from .acp.command import add_acp_parser, print_jupyter_ai_persona
from .agents_command import add_agent_parsers, print_children, print_tree
from .asks_command import add_asks_parser
from .chat import add_chat_parser
from .checkpoints_command import add_checkpoints_parsers
from .client import Client, connect
from .completion import add_completion_parser, autocomplete, print_completion
from .console import use_color
from .context_flags import add_context_arguments as _add_context_arguments
from .context_flags import prompt_context as _prompt_context
from .errors import ClientError, CommandFailed, DaemonNotRunning, RemoteConfigError
from .escape import escape_controls
from .exit_codes import ExitCode, exit_code_table
from .history_view import HistoryView
from .kernels_command import add_kernels_parser
from .mcp_command import add_mcp_parser
from .mcp_serve_command import add_mcp_serve_parser
from .modes_command import add_modes_parsers, complete_slash_commands
from .remote_command import LOCAL_COMMANDS, add_remote_parsers, run_local_command
from .render import Renderer
from .task_ids import add_task_argument, resolve_task_id
from .todo_view import todo_markdown

if TYPE_CHECKING:
    # Imported where a command follows a task: the live view brings in rich, a
    # large share of the start-up of commands that never draw it (`hdsp tasks`).
    from .follow import TaskFollower
from .vars_command import add_vars_parser

__all__ = ["main"]

_EXAMPLES = """\
examples:
  hdsp run "Load sales.csv and tell me which region grew fastest"
  hdsp run --detach --auto-approve read,execute "Profile data.csv"
  hdsp chat                       a conversation on a new task (hdsp chat 3f2a: an old one)
  hdsp tasks                      newest first; ids may be shortened to a unique prefix
  hdsp show 3f2a --full           a task's whole history, long outputs unfolded
  hdsp asks                       every ask that waits for an answer
  hdsp answer 3f2a --yes          approve what 3f2a waits for
  hdsp answer 3f2a --no "use the parquet file instead"
  hdsp events --follow            live events as NDJSON (--since SEQ replays first)
  hdsp kernels restart 9c1e       restart a kernel (its variables are gone)
  hdsp vars 3f2a                  the variables in 3f2a's kernel (frames: shape, columns)
  eval "$(hdsp completion bash)"  tab completion, task ids included (zsh, fish too)
  hdsp --remote work tasks        a team daemon over TCP (hdsp keys; hdsp remote add)
"""


class _SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser that takes options between its positionals, so that
    `hdsp answer 3f2a --no "why"` reads as `hdsp answer --no 3f2a "why"` does
    (argparse alone binds every positional before the first option)."""

    _intermixing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        nested = any(isinstance(a, argparse._SubParsersAction) for a in self._actions)
        if nested or self._intermixing:
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


class _Unbuilt:
    """Stands in for the parser of a subcommand that is not run (see `_Subcommands`):
    takes whatever the code that builds a parser calls on it, and builds nothing."""

    def __getattr__(self, name: str) -> Any:
        return self._anything

    def _anything(self, *args: Any, **kwargs: Any) -> _Unbuilt:
        return _Unbuilt()


class _Subcommands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """hdsp's subcommands. With `only` set, the parser of that subcommand alone is
    made: the others' names stay valid choices (an error lists them all) but
    their parsers are stand-ins. Making every parser, 70 of them, was a tenth of
    the CPU of a short command such as `hdsp tasks`."""

    only: str | None = None

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        if self.only is None or name == self.only:
            return super().add_parser(name, **kwargs)
        self._name_parser_map[name] = _Unbuilt()
        return _Unbuilt()


def _command_of(argv: list[str]) -> str | None:
    """The subcommand `argv` runs, read past the global flags; None when that is
    not plain (help, --version, an abbreviated flag) or a shell completes: then
    every parser is made."""
    if "_ARGCOMPLETE" in os.environ:
        return None
    args = iter(argv)
    for arg in args:
        if arg == "--json" or arg.startswith(("--runtime-dir=", "--remote=")):
            continue
        if arg in ("--runtime-dir", "--remote"):
            next(args, None)
            continue
        return None if arg.startswith("-") else arg
    return None


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


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """hdsp's parser; with `only`, made for that subcommand alone (`_Subcommands`)."""

    # The global flags work before and after the subcommand. The subcommands'
    # copies default to SUPPRESS so they don't overwrite a value given before.
    def flags(suppress: bool) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(add_help=False)
        extra: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
        parser.add_argument("--json", action="store_true", help="print NDJSON for scripts", **extra)
        parser.add_argument(
            "--runtime-dir", help="the daemon's runtime dir (env HDSP_RUNTIME_DIR)", **extra
        )
        parser.add_argument(
            "--remote",
            metavar="NAME",
            help="a remote daemon over TCP (`hdsp remote add`; env HDSP_REMOTE)",
            **extra,
        )
        return parser

    common = flags(suppress=True)
    p = argparse.ArgumentParser(
        prog="hdsp",
        description="Talk to hdspd, the hdsp agent daemon.",
        parents=[flags(False)],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_EXAMPLES + "\n" + exit_code_table(),
    )
    p.add_argument("--version", action="version", version=f"hdsp {__version__}")
    # (Any: the subcommands' parents are plain ArgumentParsers.)
    sub: Any = p.add_subparsers(
        action=_Subcommands,
        dest="command",
        required=True,
        metavar="COMMAND",
        parser_class=_SubcommandParser,
    )
    sub.only = only

    run = sub.add_parser("run", parents=[common], help="start a task and follow it live")
    run.add_argument(
        "prompt", help="what the agent should do (`/name args` runs a slash command)"
    ).completer = complete_slash_commands
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
    _add_context_arguments(run)
    run.add_argument(
        "--auto-approve",
        metavar="KINDS",
        help="approve these without asking: read,write,execute,command,mcp,subtasks,followup",
    )
    run.add_argument(
        "--yes", action="store_true", help="approve everything (unattended runs; use with care)"
    )

    attach = sub.add_parser(
        "attach", parents=[common], help="show a task and follow it live, answering its asks"
    )
    add_task_argument(attach)

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

    tasks = sub.add_parser("tasks", parents=[common], help="list tasks, newest first")
    tasks.add_argument("--limit", type=int, default=20)
    tasks.add_argument(
        "--tree", action="store_true", help="show agent calls: each task's children below it"
    )

    show = sub.add_parser(
        "show",
        parents=[common],
        help="show a task's whole history (asks, answers, tool calls, outputs)",
        description="Show a task's history: messages, asks and who answered them, tool "
        "calls (auto-approved ones marked), outputs, retries and truncations. --json "
        "prints the raw records.",
    )
    add_task_argument(show)
    show.add_argument("--full", action="store_true", help="show long outputs whole, not folded")

    send = sub.add_parser("send", parents=[common], help="send a message to a task and follow")
    add_task_argument(send)
    send.add_argument(
        "text", help="the message (`/name args` runs a slash command)"
    ).completer = complete_slash_commands
    send.add_argument("--detach", action="store_true", help="return once the message is sent")
    _add_context_arguments(send)
    send.add_argument(
        "--steer",
        action="store_true",
        help="if the task is working, add the message to its current turn before its next "
        "model request (default: it waits until the turn ends)",
    )

    for name, text in (
        (
            "cancel",
            "stop the task's current work now (interrupts its kernel); the task stays "
            "open: `send` continues it",
        ),
        ("resume", "resume a task the daemon stopped (not a completed one: `send` continues it)"),
        (
            "condense",
            "summarise the task's conversation now, so later requests carry the summary "
            "instead of its older messages (they stay in the history)",
        ),
        (
            "close",
            "end a task: stop it and release its kernel and memory; the history stays "
            "(`show`), and `send` reopens it",
        ),
    ):
        c = sub.add_parser(name, parents=[common], help=text, description=text)
        add_task_argument(c)

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
    edit_parser = sub.add_parser(
        "edit", parents=[common], help="replace one of your messages and go on from there"
    )
    add_task_argument(edit_parser)
    edit_parser.add_argument("ts", type=int, help="the ts of your message")
    edit_parser.add_argument("text")
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
    fork = sub.add_parser(
        "fork", parents=[common], help="a new task with a task's history up to a message"
    )
    add_task_argument(fork)
    fork.add_argument("ts", type=int, help="the last message the new task keeps")

    events = sub.add_parser("events", parents=[common], help="print events as NDJSON")
    add_task_argument(events, "--task", help="only this task's events")
    events.add_argument(
        "--follow", "-f", action="store_true", help="print live events from now on (until Ctrl-C)"
    )
    events.add_argument(
        "--since",
        type=int,
        metavar="SEQ",
        help="start after this seq (default: from the first, or from now with --follow)",
    )

    daemon = sub.add_parser("daemon", parents=[common], help="the daemon itself")
    daemon.add_argument("action", choices=["status", "stop"])
    _settings_parsers(sub, common)
    add_asks_parser(sub, common)
    add_kernels_parser(sub, common)
    add_checkpoints_parsers(sub, common)
    add_modes_parsers(sub, common)
    add_agent_parsers(sub, common)
    add_vars_parser(sub, common)
    # `hdsp mcp list|tools|restart|trust` (clients/mcp_command.py) and `hdsp mcp
    # serve` (clients/mcp_serve_command.py), one group.
    add_mcp_serve_parser(add_mcp_parser(sub, common), common)
    add_chat_parser(sub, common)
    add_remote_parsers(sub, common)
    add_completion_parser(sub, common)
    add_acp_parser(sub, common)
    return p


def _settings_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """`hdsp config`, `hdsp profile` and `hdsp secret`."""
    config = sub.add_parser("config", parents=[common], help="the daemon's settings")
    actions = config.add_subparsers(dest="action", required=True, metavar="ACTION")
    get = actions.add_parser("get", parents=[common], help="print the settings, or one key")
    get.add_argument("key", nargs="?", help="dotted key, e.g. retry.max_attempts")
    put = actions.add_parser("set", parents=[common], help="change one setting")
    put.add_argument("key", help="dotted key, e.g. kernels.default_timeout_seconds")
    put.add_argument("value", help="a JSON value (null restores the default); else a string")
    export = actions.add_parser("export", parents=[common], help="write the settings (no secrets)")
    export.add_argument("file", nargs="?", help="where to write them (default: stdout)")
    load = actions.add_parser(
        "import", parents=[common], help="apply exported settings (exit 1 if parts were left out)"
    )
    load.add_argument("file", help="a file written by `hdsp config export` ('-' for stdin)")
    load.add_argument("--replace", action="store_true", help="replace the settings, not merge")

    profile = sub.add_parser("profile", parents=[common], help="provider profiles")
    actions = profile.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", parents=[common], help="list profiles (* marks the current one)")
    add = actions.add_parser("add", parents=[common], help="add or replace a profile")
    add.add_argument("name")
    add.add_argument(
        "--provider", required=True, help="anthropic, openai, openai-compatible or demo"
    )
    add.add_argument("--model", required=True, help="model id, e.g. claude-sonnet-4-6")
    add.add_argument("--base-url", help="API base URL, e.g. http://localhost:11434/v1")
    add.add_argument("--secret", help="NAME of the secret holding the key (`hdsp secret set`)")
    add.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="provider option, e.g. thinking_budget=4096 (repeatable)",
    )
    add.add_argument("--use", action="store_true", help="also make it the current profile")
    use = actions.add_parser("use", parents=[common], help="make a profile the current one")
    use.add_argument("name")
    rm = actions.add_parser("rm", parents=[common], help="remove a saved profile")
    rm.add_argument("name")

    secret = sub.add_parser("secret", parents=[common], help="API keys in the daemon's keyring")
    actions = secret.add_subparsers(dest="action", required=True, metavar="ACTION")
    put = actions.add_parser(
        "set", parents=[common], help="store a secret (asks for it, or reads one line of stdin)"
    )
    put.add_argument("name", help="e.g. anthropic, openai, or a name a profile uses")
    rm = actions.add_parser("rm", parents=[common], help="remove a secret from the keyring")
    rm.add_argument("name")
    actions.add_parser("list", parents=[common], help="secret names and whether they are set")


class _Cli:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.render = Renderer()

    def out(self, text: str) -> None:
        """A line for a person: control characters in it are shown escaped."""
        self.out_raw(escape_controls(text))

    def out_raw(self, text: str) -> None:
        """A line as it is (JSON, whose encoder escapes what it must)."""
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    async def resolve(self, client: Client, ref: str) -> str:
        """A full task id, from an id or a unique prefix of one."""
        return await resolve_task_id(client, ref)

    def follower(
        self,
        client: Client,
        task_id: str,
        *,
        on_interrupt: Literal["cancel", "detach"] = "cancel",
        our_message: str | None = None,
    ) -> TaskFollower:
        """What follows a task live for this command (see clients/follow.py)."""
        from .follow import TaskFollower

        return TaskFollower(
            client,
            task_id,
            json=self.args.json,
            interactive=self.interactive,
            on_interrupt=on_interrupt,
            out_raw=self.out_raw,
            our_message=our_message,
            first_text_is_prompt=our_message is None,
        )

    @property
    def interactive(self) -> bool:
        """Whether asks can be answered here: a person at a terminal, not --json."""
        return not self.args.json and sys.stdin.isatty() and sys.stdout.isatty()

    # ---- commands -----------------------------------------------------------

    async def cmd_run(self, client: Client) -> int:
        a = self.args
        if a.allow_broad_workspace and a.workspace is None:
            raise CommandFailed(
                ErrorCode.INVALID_REQUEST,
                "--allow-broad-workspace needs --workspace DIR naming the directory meant.",
            )
        head = (await client.status()).head_seq
        try:
            # No --workspace: the client library sends the directory we run in.
            ref = await client.start_task(
                a.prompt,
                profile=a.profile,
                workspace=a.workspace,
                mode=a.mode,
                approvals=_approvals(a.auto_approve, a.yes),
                allow_broad_workspace=a.allow_broad_workspace,
                context=_prompt_context(a),
                agent=a.agent,
                kernel_provider=a.kernels,
            )
        except FileNotFoundError:
            raise CommandFailed(
                ErrorCode.INVALID_REQUEST,
                "The current directory no longer exists; cd somewhere or pass --workspace.",
            ) from None
        if a.detach:
            self.out(ref.task_id)
            return ExitCode.OK
        if not a.json:
            self.render.note(f"task {ref.task_id}")
        return await self.follower(client, ref.task_id).run(head)

    async def cmd_send(self, client: Client) -> int:
        task_id = await self.resolve(client, self.args.task)
        head = (await client.status()).head_seq
        steer = bool(getattr(self.args, "steer", False))
        ref = await client.send_message(
            task_id, self.args.text, steer=steer, context=_prompt_context(self.args)
        )
        busy = (
            "The task is busy: the message joins its turn before the next model request."
            if steer
            else "The task is busy: the message waits until its turn ends."
        )
        if self.args.detach:
            if ref.queued and not self.args.json:
                self.render.note(busy)
            return ExitCode.OK
        # Print from our message on: what the task said before it is not the answer.
        follower = self.follower(client, task_id, our_message=self.args.text)
        # (Said once Ctrl-C takes the message back, which it says it can.)
        return await follower.run(head, first_note=busy if ref.queued else None)

    async def cmd_attach(self, client: Client) -> int:
        task_id = await self.resolve(client, self.args.task)
        snap = await client.get_task(task_id)
        if not self.args.json:
            self.render.note(f"task {task_id}  {snap.state}  {snap.item.mode or 'code'} mode")
            if snap.item.todos:
                self.render.note("todo list:")
                for line in todo_markdown(snap.item.todos).splitlines():
                    self.render.note(line)
        follower = self.follower(client, task_id, on_interrupt="detach")
        if snap.pending_ask is None and (
            snap.state not in (TaskState.RUNNING, TaskState.INTERACTIVE) and not snap.queue
        ):
            if not self.args.json:
                # Nothing to follow: `hdsp show`'s body.
                color = use_color(sys.stdout)
                HistoryView(sys.stdout, color=color).body(snap)
            return ExitCode.OK if snap.state == TaskState.COMPLETED else ExitCode.FAILED
        # Ctrl-C detaches: attaching is watching, not taking over the task.
        return await follower.run(snap.head_seq, seed=snap.messages, pending_ask=snap.pending_ask)

    async def cmd_answer(self, client: Client) -> int:
        a = self.args
        task_id = await self.resolve(client, a.task)
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
            self.out(f"Answered the {ask.ask} ask of {task_id[:8]}.")
        return ExitCode.OK

    async def cmd_tasks(self, client: Client) -> int:
        page = await client.list_tasks(limit=self.args.limit)
        if self.args.json:
            for item in page.tasks:
                self.out_raw(encode(item).decode())
            return ExitCode.OK
        if not page.tasks:
            self.out('No tasks yet. Start one with: hdsp run "..."')
        if self.args.tree:
            print_tree(self, page.tasks)
            return ExitCode.OK
        for t in page.tasks:
            title = t.task.replace("\n", " ")
            title = title if len(title) <= 60 else title[:59] + "…"
            self.out(f"{t.id[:8]}  #{t.number:<4} {t.state or '':<11} {title}")
        return ExitCode.OK

    async def cmd_show(self, client: Client) -> int:
        snap = await client.get_task(await self.resolve(client, self.args.task))
        if self.args.json:
            self.out_raw(encode(snap).decode())
            return ExitCode.OK
        color = use_color(sys.stdout)
        HistoryView(sys.stdout, color=color, full=self.args.full).render(snap)
        await print_children(self, client, snap.item)
        return ExitCode.OK

    async def _simple(
        self, client: Client, action: Callable[[str], Awaitable[Any]], done: str = ""
    ) -> int:
        ref = await action(await self.resolve(client, self.args.task))
        if self.args.json:
            self.out_raw(encode(ref).decode())
        else:
            self.out(f"{ref.task_id}: {ref.state}{done}")
        return ExitCode.OK

    async def cmd_cancel(self, client: Client) -> int:
        short = self.args.task[:8]
        return await self._simple(
            client,
            client.cancel_task,
            f"; its work was stopped, the task stays open (`hdsp send {short} TEXT` continues it)",
        )

    async def cmd_resume(self, client: Client) -> int:
        task_id = await self.resolve(client, self.args.task)
        state = (await client.get_task(task_id)).state
        if state == TaskState.COMPLETED:
            raise CommandFailed(
                ErrorCode.INVALID_STATE,
                f"Task {task_id[:8]} completed; there is nothing to resume. "
                f"`hdsp send {task_id[:8]} TEXT` continues the conversation.",
            )
        return await self._simple(client, client.resume_task)

    async def cmd_condense(self, client: Client) -> int:
        short = self.args.task[:8]
        return await self._simple(
            client,
            client.condense_task,
            f"; see `hdsp show {short}` for the summary and the tokens it saved",
        )

    async def cmd_rewind(self, client: Client) -> int:
        task_id = await self.resolve(client, self.args.task)
        ref = await client.rewind_task(task_id, self.args.ts, include=not self.args.keep)
        return self._ref_out(ref, "; rewound (`send` continues from there)")

    async def cmd_edit(self, client: Client) -> int:
        task_id = await self.resolve(client, self.args.task)
        ref = await client.edit_message(task_id, self.args.ts, self.args.text)
        return self._ref_out(ref, "; your message was replaced and sent")

    async def cmd_delete(self, client: Client) -> int:
        task_id = await self.resolve(client, self.args.task)
        ref = await client.delete_message(task_id, self.args.ts)
        return self._ref_out(ref, "; the message was deleted")

    async def cmd_fork(self, client: Client) -> int:
        task_id = await self.resolve(client, self.args.task)
        ref = await client.fork_task(task_id, self.args.ts)
        return self._ref_out(ref, f"; forked from {task_id[:8]}")

    def _ref_out(self, ref: TaskRef, done: str) -> int:
        if self.args.json:
            self.out_raw(encode(ref).decode())
        else:
            self.out(f"{ref.task_id}: {ref.state}{done}")
        return ExitCode.OK

    async def cmd_close(self, client: Client) -> int:
        short = self.args.task[:8]
        return await self._simple(
            client,
            client.close_task,
            f"; closed: stopped, its kernel and memory released; the history stays "
            f"(`hdsp show {short}`)",
        )

    async def cmd_events(self, client: Client) -> int:
        a = self.args
        task_id = await self.resolve(client, a.task) if a.task else None
        if a.since is not None and a.since < 0:
            raise CommandFailed(ErrorCode.INVALID_REQUEST, "--since takes a seq, 0 or more.")
        if not a.follow:
            cursor = a.since or 0
            while True:
                page = await client.replay(cursor, task_id=task_id)
                for event in page.events:
                    self.out_raw(encode(event).decode())
                    cursor = event.seq or cursor
                if not page.more:
                    return ExitCode.OK
        # Following starts now, unless --since asks for a replay first.
        since = a.since if a.since is not None else (await client.status()).head_seq
        async with client.events(task_id, since_seq=since) as events:
            async for event in events:
                self.out_raw(encode(event).decode())
        return ExitCode.OK

    async def cmd_daemon(self, client: Client) -> int:
        if self.args.action == "stop":
            await client.shutdown()
            self.out("hdspd is stopping.")
            return ExitCode.OK
        s = await client.status()
        if self.args.json:
            self.out_raw(encode(s).decode())
            return ExitCode.OK
        self.out(
            f"hdspd {s.server_version} (protocol {s.protocol_version}) running, pid {s.pid}, "
            f"up {s.uptime_seconds:.0f} s\n"
            f"  tasks: {s.tasks_total} ({s.tasks_running} running); clients: {s.clients}; "
            f"events: {s.head_seq}\n"
            f"  data: {s.data_dir}\n  runtime: {s.runtime_dir}"
        )
        if s.tcp is not None:
            self.out(
                f"  tcp: {s.tcp.control} (events {s.tcp.events}), CURVE, "
                f"{s.tcp.authorized_clients} authorised client key(s); server key "
                f"{s.tcp.server_public_key}"
            )
        if client.remote is not None:
            who = client.ack.user if client.ack is not None else None
            self.out(f"  you: {who or '?'} (remote {client.remote.name}, {client.remote.address})")
        if s.sandbox is not None:
            self.out(self._sandbox_line(s.sandbox))
        self._warn_plaintext(s.plaintext_keyring)
        return ExitCode.OK

    def _warn_plaintext(self, path: str | None, what: str = "API keys are") -> None:
        """Say so when the daemon's keyring keeps keys unencrypted."""
        if path is not None:
            self.out(
                f"  keyring: {what} stored in plain text at {path} (keyrings.alt's "
                "PlaintextKeyring); use a desktop keyring to have them encrypted"
            )

    @staticmethod
    def _sandbox_line(sb: SandboxStatus) -> str:
        if sb.mode == "off":
            return (
                "  sandbox: OFF (sandbox.mode off): commands and kernels run with all of "
                "your access"
            )
        network = "network on" if sb.network else "network off"
        if sb.problem is not None:
            return (
                f"  sandbox: {sb.mode}, {network}, UNAVAILABLE (commands and kernels are "
                f"refused): {sb.problem}"
            )
        return f"  sandbox: {sb.mode}, {network}, {sb.mechanism}"

    # ---- settings, profiles, secrets ----------------------------------------

    def out_json(self, value: Any) -> None:
        if self.args.json:
            self.out_raw(json.dumps(value, ensure_ascii=False))
        else:
            self.out(json.dumps(value, indent=2, ensure_ascii=False))

    async def cmd_config(self, client: Client) -> int:
        a = self.args
        if a.action == "get":
            view = await client.get_settings()
            if a.key is None:
                self.out_json(view.settings)
                return ExitCode.OK
            found, value = _lookup(view.settings, a.key)
            if not found:
                raise CommandFailed(
                    ErrorCode.INVALID_REQUEST,
                    f"No setting {a.key!r}; `hdsp config get` prints them all.",
                )
            self.out_json(value)
            return ExitCode.OK
        if a.action == "set":
            _check_known_key((await client.get_settings()).settings, a.key)
            view = await client.update_settings(_patch(a.key, _parse_value(a.value)))
            found, value = _lookup(view.settings, a.key)
            self.out_json(value if found else None)
            return ExitCode.OK
        if a.action == "export":
            exported = await client.export_settings()
            text = json.dumps(exported.settings, indent=2, ensure_ascii=False) + "\n"
            if a.file is None or a.file == "-":
                sys.stdout.write(text)
            else:
                fd = os.open(a.file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
            if exported.secret_names and not a.json:
                names = ", ".join(exported.secret_names)
                print(
                    f"hdsp: secrets are not exported; set them where you import: {names} "
                    "(`hdsp secret set NAME`).",
                    file=sys.stderr,
                )
            return ExitCode.OK
        # import
        try:
            if a.file == "-":
                document = json.load(sys.stdin)
            else:
                document = json.loads(await anyio.Path(a.file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CommandFailed(
                ErrorCode.INVALID_REQUEST, f"Cannot read settings from {a.file}: {exc}"
            ) from None
        if not isinstance(document, dict):
            raise CommandFailed(
                ErrorCode.INVALID_REQUEST, f"{a.file} holds no settings (not a JSON object)."
            )
        result = await client.import_settings(document, merge=not a.replace)
        if a.json:
            self.out_raw(encode(result).decode())
        else:
            for path in result.applied:
                self.out(f"imported  {path}")
            for rejection in result.rejected:
                self.out(f"left out  {rejection.path}: {rejection.reason}")
        return ExitCode.FAILED if result.rejected else ExitCode.OK

    async def cmd_profile(self, client: Client) -> int:
        a = self.args
        if a.action == "add":
            options = dict(_option(text) for text in a.option)
            info = await client.save_profile(
                a.name,
                provider=a.provider,
                model=a.model,
                base_url=a.base_url,
                options=options,
                secret=a.secret,
                select=a.use,
            )
            if a.json:
                self.out_raw(encode(info).decode())
                return ExitCode.OK
            self.out(f"saved profile {info.name}" + (" (current)" if info.current else ""))
            if info.secret is not None and not info.secret_set:
                self.out(f"its key is not set yet: hdsp secret set {info.secret}")
            if not info.current:
                self.out(f"use it with `hdsp profile use {info.name}` or `--profile {info.name}`")
            return ExitCode.OK
        if a.action == "use":
            listing = await client.select_profile(a.name)
        elif a.action == "rm":
            listing = await client.delete_profile(a.name)
        else:
            listing = await client.list_profiles()
        if a.json:
            for info in listing.profiles:
                self.out_raw(encode(info).decode())
            return ExitCode.OK
        for info in listing.profiles:
            mark = "*" if info.current else " "
            key = ""
            if info.secret is not None:
                key = f"key: {info.secret} ({'set' if info.secret_set else 'NOT SET'})"
            where = f" {info.base_url}" if info.base_url else ""
            self.out(
                f"{mark} {info.name:<14} {info.provider:<18} {info.model}{where}  "
                f"[{info.source}] {key}".rstrip()
            )
        if listing.current is None:
            self.out("No current profile: `hdsp profile use NAME` picks one.")
        self._warn_plaintext(listing.plaintext_keyring)
        return ExitCode.OK

    async def cmd_secret(self, client: Client) -> int:
        a = self.args
        if a.action == "list":
            view = await client.get_settings()
            for secret in view.secrets:
                if a.json:
                    self.out_raw(encode(secret).decode())
                    continue
                state = f"set ({secret.source})" if secret.is_set else "not set"
                env = f"  env: {', '.join(secret.env_vars)}" if secret.env_vars else ""
                error = f"  ({secret.error})" if secret.error else ""
                self.out(f"{secret.name:<16} {state}{env}{error}")
            return ExitCode.OK
        if a.action == "set":
            info = await client.set_secret(a.name, a.value)
        else:
            info = await client.delete_secret(a.name)
        if a.json:
            self.out_raw(encode(info).decode())
        elif a.action == "set":
            backend = info.keyring_backend or "hdspd's keyring"
            if info.plaintext_keyring is not None:
                self.out(
                    f"secret {info.name} stored in plain text at {info.plaintext_keyring} "
                    f"(keyring backend: {backend})"
                )
                print(
                    "hdsp: warning: this keyring does not encrypt: anyone who can read that "
                    "file reads the key. A desktop keyring (Secret Service, KWallet) encrypts.",
                    file=sys.stderr,
                )
            else:
                self.out(f"secret {info.name} stored (keyring backend: {backend})")
        elif info.is_set:
            self.out(f"secret {info.name} removed from the keyring; {info.source} still sets it")
        else:
            self.out(f"secret {info.name} removed")
        return ExitCode.OK

    async def main(self) -> int:
        try:
            return await self._connected()
        except BaseExceptionGroup as group:
            # A task group's wrapping of one error of ours: that error, not a traceback.
            errors = group.subgroup(ClientError)
            if errors is None or errors.exceptions != group.exceptions:
                raise
            return self._failed(_first_leaf(errors))
        except ClientError as exc:
            return self._failed(exc)

    async def _connected(self) -> int:
        handler = getattr(self.args, "handler", None)
        if handler is None:
            handler = getattr(self, f"cmd_{self.args.command}")
        else:
            handler = functools.partial(handler, self)
        name = getattr(self.args, "client_name", "hdsp")
        kind = getattr(self.args, "client_kind", "cli")
        async with connect(
            self.args.runtime_dir, remote=self.args.remote, name=name, kind=kind
        ) as client:
            code: int = await handler(client)
            return code

    @staticmethod
    def _failed(error: BaseException) -> int:
        try:
            raise error
        except DaemonNotRunning as exc:
            print(f"hdsp: {escape_controls(str(exc))}", file=sys.stderr)
            return ExitCode.UNREACHABLE
        except RemoteConfigError as exc:
            print(f"hdsp: {escape_controls(str(exc))}", file=sys.stderr)
            return ExitCode.USAGE
        except CommandFailed as exc:
            print(f"hdsp: {escape_controls(exc.message)}", file=sys.stderr)
            return ExitCode.USAGE
        except ClientError as exc:
            print(f"hdsp: {escape_controls(str(exc))}", file=sys.stderr)
            return ExitCode.UNREACHABLE


def _first_leaf(group: BaseExceptionGroup[ClientError]) -> ClientError:
    error: ClientError | BaseExceptionGroup[ClientError] = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def main(argv: list[str] | None = None) -> int:
    parser = _parser(_command_of(sys.argv[1:] if argv is None else argv))
    autocomplete(parser)  # answers the shell and exits, when a shell asks
    args = parser.parse_args(argv)
    if args.command == "completion":
        return print_completion(args.shell)
    if args.command in LOCAL_COMMANDS:
        return run_local_command(args)
    if args.command == "secret" and args.action == "set":
        # Read before connecting, and never from argv (where `ps` and shell
        # history would show it).
        try:
            args.value = _read_secret(args.name)
        except (EOFError, KeyboardInterrupt):
            print("hdsp: no value given; nothing was stored.", file=sys.stderr)
            return ExitCode.USAGE
        if not args.value:
            print("hdsp: the value is empty; nothing was stored.", file=sys.stderr)
            return ExitCode.USAGE
    if args.command == "acp" and args.jupyter_ai_persona:
        return print_jupyter_ai_persona(args.runtime_dir)  # (a file to write: no daemon needed)
    if args.command == "mcp" and args.action == "serve":
        from .mcp_server import run_mcp_serve  # the mcp SDK loads only for this command

        return run_mcp_serve(args)
    if args.command == "tasks" and not 1 <= args.limit <= 1000:
        print("hdsp: --limit must be between 1 and 1000", file=sys.stderr)
        return ExitCode.USAGE
    try:
        return anyio.run(_Cli(args).main, backend="asyncio")
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`hdsp events | head`): not an error of ours. Point
        # stdout at /dev/null so that the interpreter's final flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.OK


# ---- settings helpers ---------------------------------------------------------


def _read_secret(name: str) -> str:
    """The value of a secret: asked for without echo on a terminal, else the first
    line of stdin (`pass show key | hdsp secret set name`)."""
    if sys.stdin.isatty():
        return getpass.getpass(f"Value of secret {name!r} (not shown): ").strip()
    return sys.stdin.readline().strip()


def _parse_value(text: str) -> Any:
    """A JSON value, or the text itself when it is not JSON (`hdsp config set
    current_profile work`)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise CommandFailed(ErrorCode.INVALID_REQUEST, f"--option takes KEY=VALUE, not {text!r}.")
    return key.strip(), _parse_value(value)


def _patch(key: str, value: Any) -> dict[str, Any]:
    """{"a": {"b": value}} from "a.b"."""
    patch: Any = value
    for part in reversed(key.split(".")):
        patch = {part: patch}
    return dict(patch)


#: Settings that are maps of names the user chooses (any name is a new entry).
_OPEN_MAPS = ("profiles", "models")


def _check_known_key(settings: dict[str, Any], key: str) -> None:
    """Refuse a dotted key the settings do not have, naming the ones they do."""
    if key.split(".", 1)[0] in _OPEN_MAPS and "." in key:
        return
    found, _ = _lookup(settings, key)
    if found:
        return
    parts = key.split(".")
    node: Any = settings
    known_at = ""
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            break
        node = node[part]
        known_at = f"{known_at}.{part}" if known_at else part
    if not isinstance(node, dict):
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST, f"No setting {key!r}: {known_at} is a value, not a section."
        )
    where = f" under {known_at}" if known_at else ""
    prefix = f"{known_at}." if known_at else ""
    names = ", ".join(prefix + name for name in sorted(node))
    raise CommandFailed(
        ErrorCode.INVALID_REQUEST, f"No setting {key!r}. Known settings{where}: {names}."
    )


def _lookup(document: Any, key: str) -> tuple[bool, Any]:
    node = document
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node
