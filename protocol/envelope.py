"""The messages on the wire: one JSON object per frame, tagged by `type`.

Client to daemon, on `control`: `Connect` (first), `TaskCommand`, `Disconnect`.
Daemon to client, on `control`: `Ack`, `Reply`. On `events`: `TaskEvent`.
"""

from __future__ import annotations

from typing import Any, Literal

from ._base import CLIENT_ORIGIN as _CLIENT
from ._base import SERVER_ORIGIN as _SERVER
from ._base import WireStruct
from .commands import Command
from .errors import ErrorCode
from .events import TaskEvent

__all__ = [
    "Ack",
    "AckData",
    "ClientInfo",
    "ClientMessage",
    "Connect",
    "Disconnect",
    "ErrorInfo",
    "Reply",
    "ServerMessage",
    "TaskCommand",
    "TaskEvent",
]


class _Envelope(WireStruct, tag_field="type", frozen=True):
    pass


class ClientInfo(WireStruct, frozen=True):
    name: str
    version: str
    #: What sort of frontend: "cli", "library", "jupyterlab", "script", ...
    kind: str = "library"


class Connect(_Envelope, tag="Connect", frozen=True):
    protocol_version: int
    client: ClientInfo
    origin: Literal["client"] = _CLIENT


class Disconnect(_Envelope, tag="Disconnect", frozen=True):
    """Sent by a client that is going away, so the daemon forgets it at once."""

    client_id: str
    origin: Literal["client"] = _CLIENT


class TaskCommand(_Envelope, tag="TaskCommand", frozen=True):
    client_id: str
    #: Chosen by the client; the `Reply` carries it back.
    request_id: str
    data: Command
    origin: Literal["client"] = _CLIENT


class AckData(WireStruct, frozen=True):
    client_id: str
    pid: int
    ppid: int
    protocol_version: int
    server_version: str
    #: The newest `seq` in the event log when the client connected.
    head_seq: int
    capabilities: list[str] = []
    #: Frames larger than this are refused by the transport.
    max_message_size: int = 0


class Ack(_Envelope, tag="Ack", frozen=True):
    data: AckData
    origin: Literal["server"] = _SERVER


class ErrorInfo(WireStruct, frozen=True):
    code: ErrorCode
    message: str
    #: Where in the frame a decoding error was found, as `$.data.commandName`.
    path: str | None = None
    #: Facts that go with the code (for `cursor_expired`: `oldestSeq`).
    details: dict[str, Any] | None = None


class Reply(_Envelope, tag="Reply", frozen=True):
    #: The command's `requestId`; None when the frame was too broken to have one.
    request_id: str | None
    ok: bool
    result: Any = None
    error: ErrorInfo | None = None
    origin: Literal["server"] = _SERVER


ClientMessage = Connect | TaskCommand | Disconnect
ServerMessage = Ack | Reply | TaskEvent
