"""Errors of the client library.

ClientError
├── DaemonNotRunning      no discovery file, or nobody answers at its endpoints
│   └── NotAuthenticated  a remote daemon (TCP, CURVE) did not accept this client's key
├── RemoteConfigError     a remote, or the client's key pair, cannot be used (which, why)
├── ConnectionLost        the daemon went away while a request waited
├── ProtocolError         the daemon said something this client cannot read
└── CommandFailed         the daemon answered a command with an error (`.code`)
    └── CursorExpired     a replay cursor is older than the log (`.oldest_seq`)
"""

from __future__ import annotations

from typing import Any

from hdsp.protocol import ErrorCode, ErrorInfo

__all__ = [
    "ClientError",
    "CommandFailed",
    "ConnectionLost",
    "CursorExpired",
    "DaemonNotRunning",
    "NotAuthenticated",
    "ProtocolError",
    "RemoteConfigError",
]


class ClientError(Exception):
    pass


class DaemonNotRunning(ClientError):
    pass


class NotAuthenticated(DaemonNotRunning):
    """The CURVE handshake with a remote daemon failed: its ZAP handler refused
    this client's key, or the server key given for it is not the daemon's."""


class RemoteConfigError(ClientError):
    """A named remote, or the client's key pair, cannot be used; the message
    says which file and what to do."""


class ConnectionLost(ClientError):
    pass


class ProtocolError(ClientError):
    pass


class CommandFailed(ClientError):
    def __init__(self, code: ErrorCode, message: str, details: dict[str, Any] | None = None):
        super().__init__(f"{message} [{code}]")
        self.code = code
        self.message = message
        self.details = details or {}

    @classmethod
    def from_info(cls, info: ErrorInfo) -> CommandFailed:
        if info.code == ErrorCode.CURSOR_EXPIRED:
            return CursorExpired(info.code, info.message, info.details)
        message = f"{info.message} (at {info.path})" if info.path else info.message
        return cls(info.code, message, info.details)


class CursorExpired(CommandFailed):
    @property
    def oldest_seq(self) -> int:
        return int(self.details.get("oldestSeq", 0))
