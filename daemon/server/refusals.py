"""The server's own refusals of a frame it cannot take as a command (drawn in
:mod:`hdsp.daemon.errors`): no command ran, and the reply says why with the code
each class carries."""

from __future__ import annotations

from hdsp.daemon.errors import HdspError
from hdsp.protocol import ErrorCode

__all__ = [
    "FrameFailed",
    "FrameRefused",
    "FrameTooLarge",
    "NotConnected",
    "UnknownClient",
    "VersionUnsupported",
]


class FrameRefused(HdspError):
    """The frame is not one JSON object in one frame."""

    code = ErrorCode.INVALID_REQUEST


class FrameTooLarge(HdspError):
    """The frame is above the daemon's limit; it was not read."""

    code = ErrorCode.TOO_LARGE


class VersionUnsupported(HdspError):
    """The client speaks another protocol version."""

    code = ErrorCode.UNSUPPORTED_VERSION


class NotConnected(HdspError):
    """A command before the handshake, or a handshake with a revoked key."""

    code = ErrorCode.NOT_CONNECTED


class UnknownClient(HdspError):
    """The command's clientId is not the one this connection's Ack gave."""

    code = ErrorCode.UNKNOWN_CLIENT


class FrameFailed(HdspError):
    """The daemon failed on a frame (a bug: its log has the traceback)."""

    code = ErrorCode.INTERNAL

    def __init__(self) -> None:
        super().__init__("The daemon failed on this frame; its log has the details.")
