"""`hdsp agent list|add|remove` (the agents of seed 002, kept in the settings'
`agents`), `hdsp tasks --tree` and the children `hdsp show` lists under a parent.

Agent instructions, task titles and results came from people's settings and
from models (untrusted): lines go through `Console.out`, which escapes control
characters.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from hdsp.protocol import ErrorCode, HistoryItem, encode

from ..errors import CommandFailed
from ..exit_codes import ExitCode
from .console import Console

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["add_agent_parsers", "print_children", "print_tree"]

#: How much of a task's title or result a line shows.
_SHOWN = 60


def _short(text: str | None, width: int = _SHOWN) -> str:
    one = " ".join((text or "").split())
    return one if len(one) <= width else one[: width - 1] + "…"


async def run_agent_list(cli: Console, client: Client) -> int:
    listing = await client.list_agents()
    if cli.args.json:
        cli.out_raw(encode(listing).decode())
        return ExitCode.OK
    for agent in listing.agents:
        groups = ",".join(agent.groups) or "-"
        how = f"mode {agent.mode}" if agent.mode else groups
        profile = f"  profile {agent.profile}" if agent.profile else ""
        cli.out(f"{agent.name:<16} {agent.source:<9} {how}{profile}")
        cli.out(f"{'':<16} {_short(agent.instructions, 100)}")
    cli.out(f"limits: depth {listing.max_depth}, {listing.max_fan_out} calls at once per task")
    return ExitCode.OK


async def _settings_agents(client: Client) -> list[dict[str, Any]]:
    agents = (await client.get_settings()).settings.get("agents") or []
    return [dict(a) for a in agents if isinstance(a, dict)]


async def run_agent_add(cli: Console, client: Client) -> int:
    a = cli.args
    agent: dict[str, Any] = {"name": a.name, "instructions": a.instructions}
    if a.groups is not None:
        agent["groups"] = [g.strip() for g in a.groups.split(",") if g.strip()]
    if a.profile is not None:
        agent["profile"] = a.profile
    if a.mode is not None:
        agent["mode"] = a.mode
    agents = [x for x in await _settings_agents(client) if x.get("name") != a.name]
    await client.update_settings({"agents": [*agents, agent]})
    cli.out(f"agent {a.name} saved")
    return ExitCode.OK


async def run_agent_remove(cli: Console, client: Client) -> int:
    name = cli.args.name
    agents = await _settings_agents(client)
    kept = [x for x in agents if x.get("name") != name]
    if len(kept) == len(agents):
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST,
            f"No agent {name!r} in the settings (built-in agents cannot be removed; "
            "`hdsp agent add` with their name replaces them).",
        )
    await client.update_settings({"agents": kept})
    cli.out(f"agent {name} removed")
    return ExitCode.OK


def add_agent_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    agent = sub.add_parser("agent", parents=[common], help="the agents tasks can run and call")
    actions = agent.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", parents=[common], help="list the agents")
    listing.set_defaults(handler=run_agent_list)
    add = actions.add_parser("add", parents=[common], help="add or replace an agent")
    add.add_argument("name", help="what call_agent and `hdsp run --agent` name it by")
    add.add_argument("instructions", help="who it is and what it does (its prompt)")
    add.add_argument(
        "--groups", help="tool groups: read,edit,command,kernel,notebook,mcp,agents (default read)"
    )
    add.add_argument("--profile", help="provider profile (default: its caller's)")
    add.add_argument("--mode", help="a mode whose tools it takes instead of --groups")
    add.set_defaults(handler=run_agent_add)
    remove = actions.add_parser("remove", parents=[common], help="remove an agent you added")
    remove.add_argument("name")
    remove.set_defaults(handler=run_agent_remove)


def _line(item: HistoryItem, depth: int) -> str:
    agent = f"[{item.agent}] " if item.agent else ""
    state = str(item.state or "")
    return f"{'  ' * depth}{item.id[:8]}  #{item.number:<4} {state:<11} {agent}{_short(item.task)}"


def print_tree(cli: Console, items: list[HistoryItem]) -> None:
    """`hdsp tasks --tree`: each root with its children below it, indented."""
    by_id = {i.id: i for i in items}
    children: dict[str, list[HistoryItem]] = {}
    for item in items:
        if item.parent_task_id is not None and item.parent_task_id in by_id:
            children.setdefault(item.parent_task_id, []).append(item)

    def show(item: HistoryItem, depth: int, seen: set[str]) -> None:
        cli.out(_line(item, depth))
        seen.add(item.id)
        for child in sorted(children.get(item.id, []), key=lambda c: c.number):
            if child.id not in seen:
                show(child, depth + 1, seen)

    seen: set[str] = set()
    for item in items:
        if item.parent_task_id is None or item.parent_task_id not in by_id:
            show(item, 0, seen)


async def print_children(cli: Console, client: Client, item: HistoryItem) -> None:
    """Under `hdsp show` of a parent: its children, their state and result."""
    if not item.child_ids:
        return
    cli.out("")
    cli.out(f"children ({len(item.child_ids)}):")
    for child_id in item.child_ids:
        child = (await client.get_task(child_id)).item
        cli.out(
            f"  {child.id[:8]}  {child.state or ''!s:<11} [{child.agent or '-'}] "
            f"{_short(child.task)}"
        )
        if child.result is not None:
            cli.out(f"    returned: {_short(child.result, 200)}")
