"""Task ids as people type them: a unique prefix resolves to the whole id, and
shell completion offers the ids (and titles) the daemon knows."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from hdsp.protocol import ErrorCode

from ..errors import ClientError, CommandFailed
from ..escape import escape_controls

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["add_task_argument", "complete_task_ids", "resolve_task_id"]

#: How long completion may wait for the daemon before it offers nothing.
COMPLETION_TIMEOUT = 0.5


async def resolve_task_id(client: Client, ref: str) -> str:
    """A full task id, from an id or a unique prefix of one."""
    if len(ref) >= 36:
        return ref
    if not ref:
        raise CommandFailed(ErrorCode.INVALID_REQUEST, "Give a task id (or its first characters).")
    # The daemon looks the prefix up in its index: two are enough to tell.
    page = await client.list_tasks(id_prefix=ref[:64], limit=2)
    matches = [t.id for t in page.tasks if t.id.startswith(ref)]
    if not matches:
        raise CommandFailed(ErrorCode.TASK_NOT_FOUND, f"No task id starts with {ref!r}.")
    if len(matches) > 1:
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST, f"{ref!r} matches several tasks; give more of the id."
        )
    return matches[0]


async def _task_ids(runtime_dir: str | None, remote: str | None, prefix: str) -> dict[str, str]:
    from ..client import connect

    async with connect(
        runtime_dir, remote=remote, name="hdsp-completion", kind="cli", timeout=COMPLETION_TIMEOUT
    ) as client:
        page = await client.list_tasks(limit=200)
    # A title is shown by the shell: escaped like everything else on a terminal.
    return {
        t.id[:8]: escape_controls(" ".join(t.task.split())[:60])
        for t in page.tasks
        if t.id.startswith(prefix)
    }


def complete_task_ids(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> dict[str, str]:
    """argcomplete's completer for a TASK argument: the first 8 characters of
    each task id starting with `prefix`, with its title. Asks the daemon with a
    short deadline; a daemon that is down or slow yields nothing, silently."""
    runtime_dir = getattr(parsed_args, "runtime_dir", None)
    remote = getattr(parsed_args, "remote", None)
    import anyio

    async def ask() -> dict[str, str]:
        with anyio.fail_after(COMPLETION_TIMEOUT):
            return await _task_ids(runtime_dir, remote, prefix)

    try:
        return anyio.run(ask, backend="asyncio")
    except (ClientError, TimeoutError, OSError):
        return {}


def add_task_argument(
    parser: argparse.ArgumentParser, name: str = "task", **kwargs: Any
) -> argparse.Action:
    """A TASK argument (an id or a unique prefix of one) that the shell completes."""
    kwargs.setdefault("help", "task id or a unique prefix of one")
    action = parser.add_argument(name, **kwargs)
    # argcomplete reads the completer from the action.
    setattr(action, "completer", complete_task_ids)  # noqa: B010
    return action
