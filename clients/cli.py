"""`hdsp`: the command-line frontend of hdspd.

Exit codes: 0 success (a task completed), 1 a task failed or was aborted, 2 bad
usage or a command the daemon refused, 3 the daemon is unreachable.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from hdsp.protocol import (
    ErrorCode,
    MessageEvent,
    TaskAborted,
    TaskCompleted,
    TaskIdle,
    TaskResumable,
    __version__,
    encode,
)

from .client import Client, connect
from .errors import ClientError, CommandFailed, DaemonNotRunning
from .render import Renderer

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3

_ENDING = (TaskCompleted, TaskAborted, TaskIdle, TaskResumable)


def _parser() -> argparse.ArgumentParser:
    # The global flags work before and after the subcommand. The subcommands'
    # copies default to SUPPRESS so they don't overwrite a value given before.
    def flags(suppress: bool) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(add_help=False)
        extra: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
        parser.add_argument("--json", action="store_true", help="print NDJSON for scripts", **extra)
        parser.add_argument(
            "--runtime-dir", help="the daemon's runtime dir (env HDSP_RUNTIME_DIR)", **extra
        )
        return parser

    common = flags(suppress=True)
    p = argparse.ArgumentParser(
        prog="hdsp", description="Talk to hdspd, the hdsp agent daemon.", parents=[flags(False)]
    )
    p.add_argument("--version", action="version", version=f"hdsp {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", parents=[common], help="start a task and follow it live")
    run.add_argument("prompt", help="what the agent should do")
    run.add_argument("--profile", help="provider profile (`demo` needs no key)")
    run.add_argument("--workspace", help="directory the agent works in (default: here)")
    run.add_argument("--detach", action="store_true", help="print the task id and return")

    tasks = sub.add_parser("tasks", parents=[common], help="list tasks, newest first")
    tasks.add_argument("--limit", type=int, default=20)

    show = sub.add_parser("show", parents=[common], help="show a task's history")
    show.add_argument("task", help="task id or a unique prefix of one")

    send = sub.add_parser("send", parents=[common], help="send a message to a task and follow")
    send.add_argument("task")
    send.add_argument("text")
    send.add_argument("--detach", action="store_true", help="return once the message is sent")

    for name, text in (("cancel", "stop a task's work"), ("resume", "resume a stopped task")):
        c = sub.add_parser(name, parents=[common], help=text)
        c.add_argument("task")

    close = sub.add_parser("close", parents=[common], help="stop a task and release it")
    close.add_argument("task")

    events = sub.add_parser("events", parents=[common], help="print events")
    events.add_argument("--task", help="only this task's events")
    events.add_argument("--follow", "-f", action="store_true", help="keep printing live events")
    events.add_argument("--since", type=int, default=0, help="start after this seq")

    daemon = sub.add_parser("daemon", parents=[common], help="the daemon itself")
    daemon.add_argument("action", choices=["status", "stop"])
    return p


class _Cli:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.render = Renderer()

    def out(self, text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    async def resolve(self, client: Client, ref: str) -> str:
        """A full task id, from an id or a unique prefix of one."""
        if len(ref) >= 36:
            return ref
        matches: list[str] = []
        cursor: str | None = None
        while True:
            page = await client.list_tasks(cursor=cursor, limit=1000)
            matches += [t.id for t in page.tasks if t.id.startswith(ref)]
            cursor = page.next_cursor
            if cursor is None or len(matches) > 1:
                break
        if not matches:
            raise CommandFailed(ErrorCode.TASK_NOT_FOUND, f"No task id starts with {ref!r}.")
        if len(matches) > 1:
            raise CommandFailed(
                ErrorCode.INVALID_REQUEST, f"{ref!r} matches several tasks; give more of the id."
            )
        return matches[0]

    async def follow(
        self, client: Client, task_id: str, since_seq: int, *, after_our_message: bool = False
    ) -> int:
        """Print a task's events from `since_seq` until its turn ends; the exit code.
        With `after_our_message`, the turn that counts is the one that takes the
        message we sent (it may wait in the queue), which starts with a
        user_feedback message: what comes before is neither shown nor counted."""
        stopping = False
        waiting_for_our_turn = after_our_message

        async def on_interrupt(scope: anyio.CancelScope) -> None:
            nonlocal stopping
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    if stopping:
                        scope.cancel()  # a second Ctrl-C: leave, the task goes on
                        return
                    stopping = True
                    self.render.note("Cancelling the task (Ctrl-C again to detach)...")
                    await client.cancel_task(task_id)

        async with anyio.create_task_group() as tg:
            tg.start_soon(on_interrupt, tg.cancel_scope)
            async with client.events(task_id, since_seq=since_seq) as events:
                async for event in events:
                    data = event.data
                    if (
                        isinstance(data, MessageEvent)
                        and data.payload[0].message.say == "user_feedback"
                    ):
                        waiting_for_our_turn = False
                    if waiting_for_our_turn:
                        continue
                    if self.args.json:
                        self.out(encode(event).decode())
                    else:
                        self.render.event(event)
                    if isinstance(data, _ENDING):
                        tg.cancel_scope.cancel()
                        return self._ending(data, task_id)
        self.render.note(f"Detached; the task goes on. `hdsp show {task_id[:8]}` shows it.")
        return EXIT_FAILED

    def _ending(self, data: Any, task_id: str) -> int:
        if isinstance(data, TaskCompleted):
            return EXIT_OK
        if not self.args.json:
            short = task_id[:8]
            if isinstance(data, TaskAborted):
                self.render.note(f"Task aborted. `hdsp send {short} TEXT` continues it.")
            elif isinstance(data, TaskResumable):
                self.render.note(f"The daemon stopped the task; `hdsp resume {short}` resumes it.")
            else:
                self.render.note(f"The task is waiting; `hdsp send {short} TEXT` answers it.")
        return EXIT_FAILED

    # ---- commands -----------------------------------------------------------

    async def cmd_run(self, client: Client) -> int:
        a = self.args
        head = (await client.status()).head_seq
        ref = await client.start_task(a.prompt, profile=a.profile, workspace=a.workspace)
        if a.detach:
            self.out(ref.task_id)
            return EXIT_OK
        if not a.json:
            self.render.note(f"task {ref.task_id}")
        return await self.follow(client, ref.task_id, head)

    async def cmd_send(self, client: Client) -> int:
        task_id = await self.resolve(client, self.args.task)
        head = (await client.status()).head_seq
        ref = await client.send_message(task_id, self.args.text)
        if ref.queued and not self.args.json:
            self.render.note("The task is busy: the message waits until its turn ends.")
        if self.args.detach:
            return EXIT_OK
        # Print from our message on: what the task said before it is not the answer.
        self.render = Renderer(first_text_is_prompt=False)
        return await self.follow(client, task_id, head, after_our_message=True)

    async def cmd_tasks(self, client: Client) -> int:
        page = await client.list_tasks(limit=self.args.limit)
        if self.args.json:
            for item in page.tasks:
                self.out(encode(item).decode())
            return EXIT_OK
        if not page.tasks:
            self.out('No tasks yet. Start one with: hdsp run "..."')
        for t in page.tasks:
            title = t.task.replace("\n", " ")
            title = title if len(title) <= 60 else title[:59] + "…"
            self.out(f"{t.id[:8]}  #{t.number:<4} {t.state or '':<11} {title}")
        return EXIT_OK

    async def cmd_show(self, client: Client) -> int:
        snap = await client.get_task(await self.resolve(client, self.args.task))
        if self.args.json:
            self.out(encode(snap).decode())
            return EXIT_OK
        i = snap.item
        self.render.note(f"task {i.id}  #{i.number}  {snap.state}  workspace {i.workspace}")
        self.render.snapshot(i, snap.messages)
        usage = f"tokens: {i.tokens_in:,} in, {i.tokens_out:,} out; cost ${i.total_cost:.4f}"
        self.render.note(usage)
        return EXIT_OK

    async def _simple(self, client: Client, action: Callable[[str], Awaitable[Any]]) -> int:
        ref = await action(await self.resolve(client, self.args.task))
        if self.args.json:
            self.out(encode(ref).decode())
        else:
            self.out(f"{ref.task_id}: {ref.state}")
        return EXIT_OK

    async def cmd_cancel(self, client: Client) -> int:
        return await self._simple(client, client.cancel_task)

    async def cmd_resume(self, client: Client) -> int:
        return await self._simple(client, client.resume_task)

    async def cmd_close(self, client: Client) -> int:
        return await self._simple(client, client.close_task)

    async def cmd_events(self, client: Client) -> int:
        a = self.args
        task_id = await self.resolve(client, a.task) if a.task else None
        if not a.follow:
            cursor = a.since
            while True:
                page = await client.replay(cursor, task_id=task_id)
                for event in page.events:
                    self.out(encode(event).decode())
                    cursor = event.seq or cursor
                if not page.more:
                    return EXIT_OK
        async with client.events(task_id, since_seq=a.since) as events:
            async for event in events:
                self.out(encode(event).decode())
        return EXIT_OK

    async def cmd_daemon(self, client: Client) -> int:
        if self.args.action == "stop":
            await client.shutdown()
            self.out("hdspd is stopping.")
            return EXIT_OK
        s = await client.status()
        if self.args.json:
            self.out(encode(s).decode())
            return EXIT_OK
        self.out(
            f"hdspd {s.server_version} (protocol {s.protocol_version}) running, pid {s.pid}, "
            f"up {s.uptime_seconds:.0f} s\n"
            f"  tasks: {s.tasks_total} ({s.tasks_running} running); clients: {s.clients}; "
            f"events: {s.head_seq}\n"
            f"  data: {s.data_dir}\n  runtime: {s.runtime_dir}"
        )
        return EXIT_OK

    async def main(self) -> int:
        handler = getattr(self, f"cmd_{self.args.command}")
        try:
            async with connect(self.args.runtime_dir, name="hdsp", kind="cli") as client:
                code: int = await handler(client)
                return code
        except DaemonNotRunning as exc:
            print(f"hdsp: {exc}", file=sys.stderr)
            return EXIT_UNREACHABLE
        except CommandFailed as exc:
            print(f"hdsp: {exc.message}", file=sys.stderr)
            return EXIT_USAGE
        except ClientError as exc:
            print(f"hdsp: {exc}", file=sys.stderr)
            return EXIT_UNREACHABLE


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "tasks" and not 1 <= args.limit <= 1000:
        print("hdsp: --limit must be between 1 and 1000", file=sys.stderr)
        return EXIT_USAGE
    try:
        return anyio.run(_Cli(args).main, backend="asyncio")
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`hdsp events | head`): not an error of ours. Point
        # stdout at /dev/null so that the interpreter's final flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
