"""The workspace a new task gets: the one a client names, or the daemon's working
directory when it names none (an old client); never one that is not a
directory, nor one too broad or too private to give the agent
(:mod:`hdsp.daemon.workspace_rules`) unless the client says so."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import anyio

from hdsp.daemon.errors import BadRequest
from hdsp.daemon.workspace_rules import broad_directory

__all__ = ["TaskWorkspaces"]


class TaskWorkspaces:
    """The checks on a new task's workspace. `default`: for a task that names
    none; `private_dirs`: the daemon's own directories (data, runtime), never a
    workspace, nor anything inside them, unless a person says so."""

    def __init__(self, default: str | None = None, private_dirs: Sequence[Path] = ()) -> None:
        self.default = default or os.getcwd()
        self.private_dirs = [Path(os.path.realpath(d)) for d in private_dirs]

    async def directory(self, given: str | None) -> str:
        """The absolute workspace `given` names (the default if None); refused
        if it is not a directory."""
        workspace = str(await anyio.Path(given or self.default).absolute())
        if not await anyio.Path(workspace).is_dir():
            raise BadRequest(f"The workspace {workspace} is not a directory.")
        return workspace

    async def breadth(self, workspace: str) -> str | None:
        """What `workspace` is if it is too broad (or too private) to be one
        (:mod:`hdsp.daemon.workspace_rules`); else None."""
        return await anyio.to_thread.run_sync(broad_directory, workspace, self.private_dirs)

    async def checked(self, given: str | None, allow_broad: bool) -> str:
        """The absolute workspace a new task gets (the default when none is
        given); one that is not a directory, or too broad, is refused."""
        workspace = await self.directory(given)
        if not allow_broad:
            problem = await self.breadth(workspace)
            if problem is not None:
                raise BadRequest(
                    f"Refusing {workspace} as the workspace: it is {problem}, and the agent "
                    "reads everything in its workspace without asking.",
                )
        return workspace
