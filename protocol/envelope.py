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

from typing import Annotated, Any, Literal

from msgspec import Meta

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
    kind: Annotated[
        str,
        Meta(description='What sort of frontend: "cli", "library", "jupyterlab", "script", ...'),
    ] = "library"
    pid: Annotated[
        int | None,
        Meta(
            description="The client's process id (the daemon is on the same machine): a "
            "session whose process has ended is forgotten, even without a Disconnect."
        ),
    ] = None


class Connect(_Envelope, tag="Connect", frozen=True):
    """The handshake: the first frame a client sends on `control`."""

    protocol_version: Annotated[
        int,
        Meta(
            description=(
                "The protocol version the client speaks (1); another gets unsupported_version."
            )
        ),
    ]
    client: ClientInfo
    origin: Literal["client"] = _CLIENT


class Disconnect(_Envelope, tag="Disconnect", frozen=True):
    """Sent by a client that is going away, so the daemon forgets it at once."""

    client_id: Annotated[str, Meta(description="The `clientId` of this connection's Ack.")]
    origin: Literal["client"] = _CLIENT


class TaskCommand(_Envelope, tag="TaskCommand", frozen=True):
    """A command; the daemon answers it with a `Reply` carrying the same requestId."""

    client_id: Annotated[
        str,
        Meta(
            description=(
                "The `clientId` of the Ack this connection received; another value, or none "
                "yet, gets not_connected."
            )
        ),
    ]
    request_id: Annotated[
        str,
        Meta(
            description=(
                "Chosen by the client, unique among its commands in flight; the `Reply` "
                "carries it back."
            )
        ),
    ]
    data: Command
    origin: Literal["client"] = _CLIENT


class AckData(WireStruct, frozen=True):
    client_id: Annotated[
        str,
        Meta(
            description=(
                "This session's id: put it in every TaskCommand sent on this connection. A "
                "new Connect (after the daemon restarted, say) gives a new one."
            )
        ),
    ]
    pid: Annotated[int, Meta(description="The daemon's process id.")]
    ppid: Annotated[int, Meta(description="The daemon's parent's process id.")]
    protocol_version: Annotated[int, Meta(description="The protocol version the daemon speaks.")]
    server_version: Annotated[str, Meta(description="The daemon's package version.")]
    head_seq: Annotated[
        int,
        Meta(
            description=(
                "The newest `seq` in the event log when the client connected: Replay from "
                "here to get every durable event after the handshake."
            )
        ),
    ]
    capabilities: Annotated[
        list[str],
        Meta(
            description=(
                'Optional features: "replay" (the Replay command), "events.prevSeq" '
                '(durable events carry prevSeq), "events.sync" (sync probes on the events '
                "socket are answered with eventsSynced)."
            )
        ),
    ] = []
    max_message_size: Annotated[
        int,
        Meta(
            description=(
                "The largest frame, in bytes, the daemon reads on control; a larger one gets "
                "too_large. 0: not stated (a daemon older than the limit)."
            )
        ),
    ] = 0
    user: Annotated[
        str | None,
        Meta(
            description=(
                "Over TCP: the name under which the daemon authorised this connection's CURVE "
                "key. The daemon records it as who did what (an answered ask's answeredBy), "
                "whatever `client.name` says. Absent on the local ipc:// socket."
            )
        ),
    ] = None


class Ack(_Envelope, tag="Ack", frozen=True):
    data: AckData
    origin: Literal["server"] = _SERVER


class ErrorInfo(WireStruct, frozen=True):
    code: Annotated[ErrorCode, Meta(description="What went wrong, for programs.")]
    message: Annotated[str, Meta(description="What went wrong and what to do, for people.")]
    path: Annotated[
        str | None,
        Meta(description="Where in the frame a decoding error was found, as `$.data.commandName`."),
    ] = None
    details: Annotated[
        dict[str, Any] | None,
        Meta(description="Facts that go with the code (for `cursor_expired`: `oldestSeq`)."),
    ] = None


class Reply(_Envelope, tag="Reply", frozen=True):
    request_id: Annotated[
        str | None,
        Meta(
            description=(
                "The command's `requestId`; None when the frame was too broken to have one."
            )
        ),
    ]
    ok: Annotated[bool, Meta(description="True: `result` is set; false: `error` is.")]
    result: Annotated[
        Any,
        Meta(
            description=(
                "The command's result, of the type its row names (`$defs.CommandResults`); "
                "null for Shutdown."
            )
        ),
    ] = None
    error: Annotated[ErrorInfo | None, Meta(description="Why the command failed.")] = None
    origin: Literal["server"] = _SERVER


ClientMessage = Connect | TaskCommand | Disconnect
ServerMessage = Ack | Reply | TaskEvent
