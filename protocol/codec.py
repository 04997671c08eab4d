"""Encoding and decoding of frames. One prebuilt encoder and one decoder per
direction, reused; a frame that does not decode becomes a `FrameError` that names
the error code, a message and the path of the offending field."""

from __future__ import annotations

import re
from typing import Any, cast

import msgspec

from .envelope import ClientMessage, ServerMessage, TaskEvent
from .errors import ErrorCode

__all__ = [
    "FrameError",
    "decode_client_message",
    "decode_event",
    "decode_server_message",
    "encode",
]

_encoder = msgspec.json.Encoder()
_client_decoder = msgspec.json.Decoder(ClientMessage)
_server_decoder = msgspec.json.Decoder(ServerMessage)
_event_decoder = msgspec.json.Decoder(TaskEvent)
_PATH = re.compile(r" - at `(?P<path>\$[^`]*)`$")


class FrameError(Exception):
    """A frame that is not a valid message."""

    def __init__(
        self, code: ErrorCode, message: str, path: str | None, request_id: str | None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.path = path
        self.request_id = request_id


def encode(message: Any) -> bytes:
    return _encoder.encode(message)


def _request_id_of(frame: bytes) -> str | None:
    try:
        obj = msgspec.json.decode(frame)
    except msgspec.DecodeError:
        return None
    rid = obj.get("requestId") if isinstance(obj, dict) else None
    return rid if isinstance(rid, str) else None


def _frame_error(frame: bytes, exc: msgspec.DecodeError) -> FrameError:
    text = str(exc)
    m = _PATH.search(text)
    path = m.group("path") if m else None
    request_id = _request_id_of(frame)
    if not isinstance(exc, msgspec.ValidationError):
        return FrameError(
            ErrorCode.INVALID_REQUEST,
            f"The frame is not valid JSON ({text}). Send one JSON object per frame.",
            path or "$",
            request_id,
        )
    if path is not None and path.endswith(".commandName") and text.startswith("Invalid value"):
        return FrameError(
            ErrorCode.UNKNOWN_COMMAND,
            f"Unknown command ({text}). GetStatus lists the daemon's version; "
            "upgrade the client or the daemon so that both speak the same commands.",
            path,
            request_id,
        )
    return FrameError(ErrorCode.INVALID_REQUEST, f"Invalid message: {text}.", path, request_id)


def decode_client_message(frame: bytes) -> ClientMessage:
    try:
        return cast(ClientMessage, _client_decoder.decode(frame))
    except msgspec.DecodeError as exc:
        raise _frame_error(frame, exc) from exc


def decode_server_message(frame: bytes) -> ServerMessage:
    try:
        return cast(ServerMessage, _server_decoder.decode(frame))
    except msgspec.DecodeError as exc:
        raise _frame_error(frame, exc) from exc


def decode_event(frame: bytes) -> TaskEvent:
    try:
        return _event_decoder.decode(frame)
    except msgspec.DecodeError as exc:
        raise _frame_error(frame, exc) from exc
