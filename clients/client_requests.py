"""What the `Client`'s typed requests stand on: :class:`Requests`.

`Client` is one object: its connection (clients/client.py) and, grouped by what
they ask the daemon about, the methods that turn arguments into a command and
return its typed result (client_tasks.py, client_kernels.py, client_daemon.py).
Those groups hold no state of their own: they need only `request()`, the remote
the client talks to, and the workspace paths that this module makes.
"""

from __future__ import annotations

import os
from typing import TypeVar

from hdsp.protocol import CommandBase, ErrorCode, encodable_text, shown_name

from .errors import CommandFailed
from .remotes import Remote

__all__ = ["Requests", "absolute_workspace"]

#: The result type of a command.
R = TypeVar("R")


class Requests:
    """The base of the `Client`'s groups of typed requests."""

    #: The remote daemon this client talks to over TCP (None: the local one).
    remote: Remote | None

    async def request(self, command: CommandBase[R], *, timeout: float | None = None) -> R:
        """Send a command and return its result (`Client.request`)."""
        raise NotImplementedError

    def _workspace(self, workspace: str | os.PathLike[str] | None) -> str:
        """The workspace to send: for the local daemon, absolute from this
        process's working directory (its default); a remote daemon works in
        directories on its own host, which must be named, and absolute."""
        if self.remote is None:
            return _utf8_workspace(absolute_workspace(workspace))
        path = None if workspace is None else _utf8_workspace(os.fspath(workspace))
        if path is None or not os.path.isabs(path):
            raise CommandFailed(
                ErrorCode.INVALID_REQUEST,
                f"A remote daemon (remote {self.remote.name!r}) works in directories on its "
                "own host: name one there, as an absolute path (--workspace /srv/project).",
            )
        return path


def _utf8_workspace(path: str) -> str:
    """`path`, if it is valid UTF-8 (the files in it may have any names; the
    workspace's own path is what tasks and settings are kept by)."""
    if encodable_text(path) != path:  # (lone surrogates: bytes that are not UTF-8)
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST,
            f"The workspace {shown_name(path)} has a name that is not valid UTF-8; hdsp "
            "needs its path to be (the files in it may have any names): rename the "
            "folder, or start the task in another.",
        )
    return path


def absolute_workspace(workspace: str | os.PathLike[str] | None) -> str:
    """The workspace to send: absolute, from the caller's working directory
    (FileNotFoundError if that no longer exists)."""
    return os.path.abspath(os.getcwd() if workspace is None else workspace)
