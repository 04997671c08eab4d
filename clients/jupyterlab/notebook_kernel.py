"""The notebook's own kernel: a prompt from the panel about an open notebook runs
its code in the kernel that notebook uses.

The browser names only the notebook (`context.notebook`, a path as JupyterLab
shows it, below the server's root). This extension, which Jupyter Server has
authenticated, finds the notebook's kernel itself (the Jupyter kernel id the
page's notebook panel is connected to, if this server runs it, else the session
manager's path → kernel id; then kernel manager: kernel id → connection file), has hdspd attach to
that kernel (`AttachKernel`, which hdsp only ever detaches from), and writes the
daemon's kernel id into the context (`context.kernelId`), which binds the task
to it. A `kernelId` the browser sent is dropped: a page never points the daemon
at a kernel, nor at a connection file, of its choosing. The notebook's path is
made absolute (inside the server's root) so that the daemon can check it against
the task's workspace, whatever directory the task was started in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

import msgspec
from jupyter_core.utils import ensure_async

from hdsp.protocol import (
    Command,
    EditMessage,
    ErrorCode,
    RespondToAsk,
    SendMessage,
    StartNewTask,
)

from .relay import CommandRefused

__all__ = [
    "AttachConnectionFile",
    "api_path",
    "notebook_connection_file",
    "with_notebook_kernel",
]

#: Has the daemon attach the kernel of a connection file; the daemon's kernel id.
AttachConnectionFile = Callable[[str], Awaitable[str]]

#: A drive prefix JupyterLab puts before a path of another contents drive ("RTC:").
_DRIVE = re.compile(r"^[A-Za-z0-9_.-]+:(?!/)")


def api_path(path: str) -> str:
    """A notebook's path as Jupyter Server's session manager keeps it: no drive
    prefix, no leading slash, POSIX separators; CommandRefused if it leads out of
    the server's root."""
    path = _DRIVE.sub("", path).replace("\\", "/").lstrip("/")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise CommandRefused(
            HTTPStatus.BAD_REQUEST,
            ErrorCode.INVALID_REQUEST,
            f"The context's notebook {path!r} is not a path below the Jupyter server's root.",
        )
    return "/".join(parts)


def _connection_file(kernel_manager: Any, kernel_id: Any) -> str | None:
    """The connection file of this server's kernel `kernel_id` (None: no such
    kernel, or one without a local connection file, as a gateway's)."""
    # (Jupyter Server's get_kernel answers an unknown id with an HTTP 404.)
    if not isinstance(kernel_id, str) or kernel_id not in kernel_manager:
        return None
    try:
        kernel = kernel_manager.get_kernel(kernel_id)
    except KeyError:
        return None
    connection_file = getattr(kernel, "connection_file", None)
    return connection_file if isinstance(connection_file, str) and connection_file else None


async def notebook_connection_file(
    path: str, session_manager: Any, kernel_manager: Any, page_kernel_id: str | None = None
) -> str | None:
    """The connection file of the kernel the notebook at `path` (an API path)
    uses: the kernel of this server the page says its notebook panel is connected
    to (`page_kernel_id`: a session's path lags behind a rename), else the
    kernel of the session of `path`. None: no such kernel running here."""
    if page_kernel_id is not None:
        found = _connection_file(kernel_manager, page_kernel_id)
        if found is not None:
            return found
    sessions = await ensure_async(session_manager.list_sessions())
    for session in sessions:
        paths = {session.get("path"), (session.get("notebook") or {}).get("path")}
        if path in paths and session.get("kernel"):
            return _connection_file(kernel_manager, session["kernel"].get("id"))
    return None


async def with_notebook_kernel(
    command: Command,
    *,
    root_dir: str,
    session_manager: Any,
    kernel_manager: Any,
    attach: AttachConnectionFile,
    page_kernel_id: str | None = None,
) -> Command:
    """`command` (a StartNewTask, SendMessage, EditMessage or RespondToAsk with a
    context) with the context's notebook made absolute (`root_dir` is absolute,
    the server's root) and its kernel attached and named; any other command as
    it is. `page_kernel_id` is the Jupyter kernel id the page sent: only a kernel
    of this server is used."""
    if not isinstance(command, StartNewTask | SendMessage | EditMessage | RespondToAsk):
        return command
    context = command.data.context
    if context is None:
        return command
    # Only this extension names a kernel.
    context = msgspec.structs.replace(context, kernel_id=None)
    if context.notebook is not None:
        path = api_path(context.notebook)
        connection_file = await notebook_connection_file(
            path, session_manager, kernel_manager, page_kernel_id
        )
        kernel_id = await attach(connection_file) if connection_file is not None else None
        context = msgspec.structs.replace(
            context,
            notebook=os.path.join(root_dir, *path.split("/")),
            kernel_id=kernel_id,
        )
    data = msgspec.structs.replace(command.data, context=context)
    replaced: Command = msgspec.structs.replace(command, data=data)
    return replaced
