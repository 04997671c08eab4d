"""The hdsp client library: talk to hdspd from Python.

    async with hdsp.client.connect() as client:
        ref = await client.start_task("Load data.csv and describe it")
        async with client.events(ref.task_id, since_seq=0) as events:
            async for event in events:
                ...

`hdsp.client.sync` offers the same for scripts that are not async.
"""

from __future__ import annotations

from .client import Client, EventStream, connect
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
