"""The discovery file: how a client finds a running daemon.

The daemon writes it (mode 0600) in its runtime dir once its sockets are bound and
removes it on exit, as Jupyter does with kernel connection files.
"""

from __future__ import annotations

from pathlib import Path

from ._base import WireStruct

__all__ = ["DISCOVERY_FILENAME", "Discovery", "discovery_path"]

DISCOVERY_FILENAME = "hdspd.json"


class Discovery(WireStruct, frozen=True):
    protocol_version: int
    server_version: str
    pid: int
    #: ZeroMQ endpoint of the ROUTER socket (commands and replies).
    control: str
    #: ZeroMQ endpoint of the PUB socket (events).
    events: str
    #: Milliseconds since the epoch.
    started_at: int
    #: Public CURVE key (z85) when the endpoints are TCP; None on ipc.
    server_public_key: str | None = None


def discovery_path(runtime_dir: Path) -> Path:
    return runtime_dir / DISCOVERY_FILENAME
