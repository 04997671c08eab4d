"""`hdsp tasks` (the task list, newest first), `hdsp show` (one task's whole
history) and `hdsp events` (the daemon's events as NDJSON).

`hdsp tasks` asks a local daemon on a synchronous socket (:func:`tasks_once`):
one question needs no event loop and no async client.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from hdsp.protocol import ErrorCode, ListTasks, ListTasksData, TaskList, encode

from ..errors import CommandFailed
from ..exit_codes import ExitCode
from ..history_view import HistoryView
from .agents_command import print_children, print_tree
from .console import Console, use_color
from .task_ids import add_task_argument, resolve_task_id

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["add_events_parser", "add_show_parser", "add_tasks_parser", "tasks_once"]


async def run_tasks(cli: Console, client: Client) -> int:
    return _print_tasks(cli, await client.list_tasks(limit=cli.args.limit))


def tasks_once(cli: Console) -> int:
    """`hdsp tasks` from the local daemon, on a synchronous socket (.oneshot); a
    failure to ask is raised (a ClientError), as the async client raises it."""
    from ..oneshot import request_once

    data = ListTasksData(limit=cli.args.limit)
    page = request_once(ListTasks(data=data), cli.args.runtime_dir, name="hdsp")
    return _print_tasks(cli, page)


def _print_tasks(cli: Console, page: TaskList) -> int:
    if cli.args.json:
        for item in page.tasks:
            cli.out_raw(encode(item).decode())
        return ExitCode.OK
    if not page.tasks:
        cli.out('No tasks yet. Start one with: hdsp run "..."')
    if cli.args.tree:
        print_tree(cli, page.tasks)
        return ExitCode.OK
    for t in page.tasks:
        title = t.task.replace("\n", " ")
        title = title if len(title) <= 60 else title[:59] + "…"
        cli.out(f"{t.id[:8]}  #{t.number:<4} {t.state or '':<11} {title}")
    return ExitCode.OK


def add_tasks_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    tasks = sub.add_parser("tasks", parents=[common], help="list tasks, newest first")
    tasks.add_argument(
        "--limit", type=int, default=20, help="list this many, 1 to 1000 (default: 20)"
    )
    tasks.add_argument(
        "--tree", action="store_true", help="show agent calls: each task's children below it"
    )
    tasks.set_defaults(handler=run_tasks)


async def run_show(cli: Console, client: Client) -> int:
    snap = await client.get_task(await resolve_task_id(client, cli.args.task))
    if cli.args.json:
        cli.out_raw(encode(snap).decode())
        return ExitCode.OK
    color = use_color(sys.stdout)
    HistoryView(sys.stdout, color=color, full=cli.args.full).render(snap)
    await print_children(cli, client, snap.item)
    return ExitCode.OK


def add_show_parser(sub: Any, common: argparse.ArgumentParser) -> None:
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
    show.set_defaults(handler=run_show)


async def run_events(cli: Console, client: Client) -> int:
    a = cli.args
    task_id = await resolve_task_id(client, a.task) if a.task else None
    if a.since is not None and a.since < 0:
        raise CommandFailed(ErrorCode.INVALID_REQUEST, "--since takes a seq, 0 or more.")
    if not a.follow:
        cursor = a.since or 0
        while True:
            page = await client.replay(cursor, task_id=task_id)
            for event in page.events:
                cli.out_raw(encode(event).decode())
                cursor = event.seq or cursor
            if not page.more:
                return ExitCode.OK
    # Following starts now, unless --since asks for a replay first.
    since = a.since if a.since is not None else (await client.status()).head_seq
    async with client.events(task_id, since_seq=since) as events:
        async for event in events:
            cli.out_raw(encode(event).decode())
    return ExitCode.OK


def add_events_parser(sub: Any, common: argparse.ArgumentParser) -> None:
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
    events.set_defaults(handler=run_events)
