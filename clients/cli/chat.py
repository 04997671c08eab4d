"""`hdsp chat`: a conversation with one task at a terminal, as in Claude Code or aider.

A prompt_toolkit line editor (history with the arrow keys, Esc Enter or Alt-Enter
for a new line, Enter sends) takes messages; each reply streams as it comes, and
an ask that comes in between is shown and answered at the same prompt. Lines
that start with `/` are commands (`/help` lists them). Ctrl-C while the agent
works, or at an ask's prompt (nothing is approved), cancels its turn; Ctrl-D or
`/quit` leaves (the task stays, `hdsp chat TASK` comes back to it).

Everything the task produced is printed through the Renderer (as it streams) or
the HistoryView (the history before), which escape it.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import TYPE_CHECKING, Any

from hdsp.protocol import (
    ClineMessage,
    ErrorCode,
    MessageEvent,
    TaskAborted,
    TaskCompleted,
    TaskIdle,
    TaskInteractive,
    TaskResumable,
    TaskState,
)

from ..errors import CommandFailed
from ..escape import escape_controls
from ..exit_codes import ExitCode
from ..history_view import HistoryView
from .ask_prompt import typed_answer
from .console import Console, use_color
from .context_flags import add_context_arguments, prompt_context
from .render import Renderer
from .task_ids import add_task_argument, resolve_task_id

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.key_binding import KeyBindings

    from ..client import Client

__all__ = ["COMMANDS", "add_chat_parser"]

#: The `/` commands and what they do; those not built yet say so when used.
COMMANDS = {
    "/help": "this list",
    "/cancel": "stop the agent's current work (the task stays open)",
    "/quit": "leave the chat; the task stays (`hdsp chat TASK` comes back)",
    "/mode": "switch the agent's mode (not available yet)",
    "/profile": "switch the task's provider profile (not available yet)",
    "/condense": "condense the conversation's context now (a summary replaces older messages)",
}
_NOT_YET = ("/mode", "/profile")

_ENDING = (TaskCompleted, TaskAborted, TaskIdle, TaskResumable)


class _Quit(Exception):
    """The person left (Ctrl-D or /quit)."""


def _key_bindings() -> KeyBindings:
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return bindings


class Chat:
    def __init__(self, cli: Console, client: Client) -> None:
        self.cli = cli
        self.client = client
        self.args = cli.args
        self.task_id: str | None = None
        # Imported here: only `hdsp chat` pays prompt_toolkit's import time
        # (a fifth of a second), not every `hdsp` command.
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import InMemoryHistory

        self.session: PromptSession[str] = PromptSession(
            history=InMemoryHistory(), key_bindings=_key_bindings(), multiline=False
        )
        self.answers: PromptSession[str] = PromptSession()
        #: What every message of this chat is about (--notebook, --cell).
        self.context = prompt_context(self.args)

    def note(self, text: str) -> None:
        sys.stderr.write(escape_controls(text) + "\n")
        sys.stderr.flush()

    async def run(self) -> int:
        self.note("Enter sends, Esc Enter adds a line; /help lists commands, Ctrl-D leaves.")
        try:
            if self.args.task is not None:
                await self.rejoin(self.args.task)
            while True:
                try:
                    text = await self.session.prompt_async("you> ")
                except KeyboardInterrupt:
                    continue  # Ctrl-C at the prompt clears the line
                except EOFError:
                    raise _Quit from None
                if text.strip().startswith("/"):
                    await self.command(text.strip())
                elif text.strip():
                    await self.send(text)
        except _Quit:
            if self.task_id is not None:
                self.note(f"Left the chat; `hdsp chat {self.task_id[:8]}` comes back to it.")
            return ExitCode.OK

    async def rejoin(self, ref: str) -> None:
        """Show an existing task, answer the ask it waits on, follow a running turn."""
        self.task_id = await resolve_task_id(self.client, ref)
        snap = await self.client.get_task(self.task_id)
        # The history as `hdsp show` has it; the ask it waits on is asked below.
        color = use_color(sys.stdout)
        history = HistoryView(sys.stdout, color=color, task_id=self.task_id)
        pending = snap.pending_ask.ts if snap.pending_ask is not None else None
        for m in snap.messages:
            if m.ts != pending:
                history.message(m)
        sys.stdout.flush()
        self.note(f"task {self.task_id}  {snap.state}")
        renderer = Renderer(first_text_is_prompt=False)
        if snap.pending_ask is not None:
            if not await self.answer(renderer, snap.pending_ask):
                raise _Quit
        elif snap.state not in (TaskState.RUNNING, TaskState.INTERACTIVE):
            return
        await self.follow(snap.head_seq, renderer)

    async def command(self, line: str) -> None:
        name = line.split()[0].lower()
        if name in ("/quit", "/exit"):
            raise _Quit
        if name == "/help":
            for command, text in COMMANDS.items():
                self.note(f"  {command:<10} {text}")
            self.note("  Esc Enter (or Alt-Enter) starts a new line; Enter sends.")
        elif name == "/cancel":
            if self.task_id is None:
                self.note("No task yet: type a message to start one.")
                return
            ref = await self.client.cancel_task(self.task_id)
            self.note(f"Cancelled; the task is {ref.state}. A message continues it.")
        elif name == "/condense":
            if self.task_id is None:
                self.note("No task yet: type a message to start one.")
                return
            try:
                await self.client.condense_task(self.task_id)
            except CommandFailed as exc:
                self.note(f"Not condensed: {exc}")
                return
            self.note("Condensed: `hdsp show` has the summary and the tokens before and after.")
        elif name in _NOT_YET:
            self.note(f"{name} is not available yet.")
        else:
            self.note(f"Unknown command {name}; /help lists them.")

    async def send(self, text: str) -> None:
        head = (await self.client.status()).head_seq
        if self.task_id is None:
            ref = await self.client.start_task(
                text,
                profile=self.args.profile,
                workspace=self.args.workspace,
                context=self.context,
            )
            self.task_id = ref.task_id
            self.note(f"task {ref.task_id}")
            await self.follow(head, Renderer(first_text_is_prompt=True), echo=False)
            return
        ref = await self.client.send_message(self.task_id, text, context=self.context)
        if ref.queued:
            self.note("The task is busy: the message waits until its turn ends.")
        await self.follow(head, Renderer(first_text_is_prompt=False), ours=True)

    async def follow(
        self, since: int, renderer: Renderer, *, ours: bool = False, echo: bool = True
    ) -> None:
        """Print the task's events until its turn ends, answering asks on the way.
        With `ours`, what comes before our message's turn (a busy task's end of
        turn) is skipped. Ctrl-C cancels the turn."""
        assert self.task_id is not None
        task_id = self.task_id
        waiting_for_ours = ours
        left = False

        import anyio

        async def on_interrupt() -> None:
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    renderer.note("Cancelling the agent's turn...")
                    await self.client.cancel_task(task_id)

        async with anyio.create_task_group() as tg:
            tg.start_soon(on_interrupt)
            async with self.client.events(task_id, since_seq=since) as events:
                async for event in events:
                    data = event.data
                    if isinstance(data, MessageEvent):
                        message = data.payload[0].message
                        if message.say == "user_feedback":
                            waiting_for_ours = False
                            if not echo:
                                continue
                    if waiting_for_ours:
                        continue
                    renderer.event(event)
                    if isinstance(data, TaskInteractive | TaskIdle):
                        ask = (await self.client.get_task(task_id)).pending_ask
                        if ask is not None:
                            if not await self.answer(renderer, ask):
                                left = True
                                break
                            continue
                    if isinstance(data, _ENDING):
                        break
            tg.cancel_scope.cancel()
        if left:
            raise _Quit

    async def answer(self, renderer: Renderer, ask: ClineMessage) -> bool:
        """Ask the person at the prompt (an explicit `y` for anything that acts) and
        send the answer; Ctrl-C cancels the turn instead. False when they left
        (Ctrl-D)."""
        assert self.task_id is not None
        renderer.ask(ask)
        while True:
            try:
                line = (await self.answers.prompt_async(renderer.ask_prompt(ask))).strip()
            except KeyboardInterrupt:
                # As while the agent works: Ctrl-C cancels its turn; the chat stays.
                self.note("Cancelling the agent's turn: nothing was approved.")
                await self.client.cancel_task(self.task_id)
                return True
            except EOFError:
                self.note(
                    f"Left unanswered; `hdsp answer {self.task_id[:8]} --yes|--no` answers it."
                )
                return False
            if line or not renderer.needs_explicit_yes(ask):
                break
            self.note("Type y to approve or n to deny (Enter alone does neither).")
        response, text = typed_answer(line, followup=ask.ask == "followup")
        try:
            # (An answer in words is a message: it carries the chat's context.)
            context = self.context if response == "messageResponse" else None
            await self.client.respond_to_ask(self.task_id, ask.ts, response, text, context=context)
        except CommandFailed as exc:
            if exc.code not in (ErrorCode.ALREADY_ANSWERED, ErrorCode.INVALID_STATE):
                raise
            self.note("The ask was answered elsewhere (or the task moved on).")
        return True


async def run_chat(cli: Console, client: Client) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST,
            "hdsp chat needs a terminal; scripts use `hdsp run` and `hdsp send`.",
        )
    return await Chat(cli, client).run()


def add_chat_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    chat = sub.add_parser(
        "chat",
        parents=[common],
        help="an interactive conversation with a task (new, or TASK)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Talk with the agent at a prompt: replies stream, asks are answered in "
        "between.\n\ncommands:\n"
        + "\n".join(f"  {name:<10} {text}" for name, text in COMMANDS.items()),
    )
    add_task_argument(chat, nargs="?", help="continue this task (id or prefix); default: a new one")
    chat.add_argument("--profile", help="provider profile of a new task")
    chat.add_argument("--workspace", help="directory a new task works in (default: here)")
    add_context_arguments(chat)
    chat.set_defaults(handler=run_chat)
