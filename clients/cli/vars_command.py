"""`hdsp vars TASK`: the variables of the kernel a task's code runs in.

Everything shown was made by the user's objects (a `__repr__`, a column name), so
it is printed through `Console.out`, which escapes control characters; `--json`
prints the reply as NDJSON, whose encoder escapes them.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from hdsp.protocol import VariableList, VariableSummary, format_bytes

from ..exit_codes import ExitCode
from .console import Console, print_result
from .task_ids import add_task_argument, resolve_task_id

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["add_vars_parser", "format_variables"]


def _variable(v: VariableSummary) -> list[str]:
    facts = [v.type]
    if v.shape is not None:
        facts.append("shape (" + ", ".join(str(n) for n in v.shape) + ")")
    elif v.length is not None:
        facts.append(f"len {v.length}")
    if v.dtype:
        facts.append(v.dtype)
    if v.memory is not None:
        facts.append(format_bytes(v.memory))
    lines = [f"{v.name}  " + "  ".join(facts)]
    if v.columns:
        cols = ", ".join(f"{c.name}: {c.dtype}" for c in v.columns)
        more = f" (+{v.columns_omitted} more)" if v.columns_omitted else ""
        lines.append(f"    columns: {cols}{more}")
    for block in (v.head, v.preview):
        if block:
            lines.extend("    " + line for line in block.splitlines()[:8])
    if v.error:
        lines.append(f"    (not shown: {v.error})")
    return lines


def format_variables(listing: VariableList) -> list[str]:
    """The lines `hdsp vars` prints (not escaped yet: `Console.out` does it)."""
    if listing.status != "ok":
        return [listing.message or f"No variables: {listing.status}."]
    if not listing.variables:
        return ["No variables (modules, functions and classes are not listed)."]
    lines = [line for v in listing.variables for line in _variable(v)]
    if listing.omitted:
        lines.append(f"({listing.omitted} more not listed: limit on {listing.truncated})")
    return lines


async def run_vars(cli: Console, client: Client) -> int:
    a = cli.args
    task_id = await resolve_task_id(client, a.task)
    listing = await client.list_variables(task_id, include_private=a.all)
    print_result(cli, listing, format_variables(listing))
    return ExitCode.OK if listing.status in ("ok", "no_kernel") else ExitCode.FAILED


def add_vars_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    text = (
        "list the variables of the kernel a task's code runs in (a silent inspection: "
        "nothing runs in the user's history; a busy kernel is not waited for)"
    )
    p = sub.add_parser("vars", parents=[common], help=text, description=text)
    add_task_argument(p)
    p.add_argument("--all", action="store_true", help="also names that start with _")
    p.set_defaults(handler=run_vars)
