"""The hdsp client library: talk to hdspd from Python.

    async with hdsp.client.connect() as client:
        ref = await client.start_task("Load data.csv and describe it")
        async with client.events(ref.task_id, since_seq=0) as events:
            async for event in events:
                ...

`hdsp.client.sync` offers the same for scripts that are not async.

The modules at this level are the library: `client` (the connection, with the
typed requests of `client_tasks`, `client_kernels` and `client_daemon`),
`event_stream`, `sync`, `oneshot` (one request without an event loop),
`discovery`, `remotes`, `private_files`, `errors`, and what the clients below
share: a task's history as lines (`history_view`, with `context_line` and
`todo_view`), `escape` and `exit_codes`. The folders are clients built on it:
`cli` (the `hdsp` command line), `acp` (`hdsp acp`), `mcp_server` (`hdsp mcp
serve`) and `jupyterlab` (the JupyterLab panel's server extension).

The async client is imported when first used (PEP 562): the `hdsp` CLI imports
this package for every command, and most commands need neither asyncio nor the
async client (`hdsp --help` needs none of it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .discovery import find_daemon, runtime_dir
from .errors import (
    ClientError,
    CommandFailed,
    ConnectionLost,
    CursorExpired,
    DaemonNotRunning,
    NotAuthenticated,
    ProtocolError,
    RemoteConfigError,
)

if TYPE_CHECKING:
    from .client import Client, EventStream, connect

__all__ = [
    "Client",
    "ClientError",
    "CommandFailed",
    "ConnectionLost",
    "CursorExpired",
    "DaemonNotRunning",
    "EventStream",
    "NotAuthenticated",
    "ProtocolError",
    "RemoteConfigError",
    "connect",
    "find_daemon",
    "runtime_dir",
]

#: The async client's names (asyncio, pyzmq's asyncio sockets): imported when first used.
_LAZY = frozenset({"Client", "EventStream", "connect"})


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(".client", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
