"""The messages on the wire: one JSON object per frame, tagged by `type`.

Client to daemon, on `control`: `Connect` (first), `TaskCommand`, `Disconnect`.
Daemon to client, on `control`: `Ack`, `Reply`. On `events`: `TaskEvent`.

Every frame a client sends on `control` gets exactly one answer (an `Ack` for a
`Connect`, a `Reply` for anything else) except `Disconnect`, whatever its bytes.
A frame that is not a valid message gets a `Reply` with `invalid_request` (or
`unknown_command`) naming the path of the offending field; its `requestId` is
echoed when one can be read.

Size limit: the Ack's `maxMessageSize` (64 MiB by default, `hdspd
--max-message-size`). A larger frame gets `too_large` (its details carry
`maxMessageSize` and `size`) and the session goes on. ZeroMQ itself cuts a
connection whose frame exceeds twice the limit plus 1 MiB (a frame is received
whole before it can be checked, so that cap bounds what one frame may cost); the
session of such a client is lost and it must `Connect` again.

On `events`, a subscription (a topic: a task id, empty for all, or a sync probe)
may be at most 256 bytes long, and one peer process may hold at most 1024 at a
time. A longer subscription, or one too many, gets the peer's events connection
cut (ZeroMQ holds subscriptions in memory; the daemon cannot refuse just one).
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
    #: The client's process id (the daemon is on the same machine): a session
    #: whose process has ended is forgotten, even without a Disconnect.
    pid: int | None = None


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
    #: Frames larger than this are refused with `too_large` (see the module doc).
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
