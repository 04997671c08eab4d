"""Encoding and decoding of frames. One prebuilt encoder and one decoder per
direction, reused; a frame that does not decode becomes a `FrameError` that names
the error code, a message and the path of the offending field.

Decoding a client's frame fails only with `FrameError`, whatever the bytes: JSON
nested deeper than the decoder's stack allows, strings that are not UTF-8, and
integers outside the signed 64-bit range (what SQLite and every peer can hold) are
refused like any other invalid frame, never raised as something else.

Encoding never fails on text: a string that holds lone surrogates (a file name
that is not UTF-8, output decoded with `surrogateescape`), which JSON cannot
carry, is encoded with them spelled as :mod:`.file_names` says (`\\xff`).
"""

from __future__ import annotations

import re
from typing import Any, cast

import msgspec

from .envelope import Ack, ClientMessage, Reply, ServerMessage, TaskEvent
from .errors import ErrorCode
from .file_names import encodable

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "FrameError",
    "RawReply",
    "decode_client_message",
    "decode_control_frame",
    "decode_event",
    "decode_server_message",
    "encode",
    "request_id_of",
]

_encoder = msgspec.json.Encoder()
_PATH = re.compile(r" - at `(?P<path>\$[^`]*)`$")
#: A frame too broken to decode may still name its request id near its start.
_REQUEST_ID = re.compile(rb'"requestId"\s*:\s*"(?P<id>[^"\\]{1,256})"')
#: A control character (a newline, an escape), as a message must not carry it.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: Only a run of 19 digits can spell an integer outside the int64 range.
_LONG_DIGITS = re.compile(rb"[0-9]{19}")
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class _RequestIdOnly(msgspec.Struct):
    """Reads `requestId` and skips everything else (skipping builds no objects)."""

    requestId: Any = None


_request_id_decoder = msgspec.json.Decoder(_RequestIdOnly)


class _Decoders:
    """Each decoder made the first time it is needed: making one walks the types
    of its messages (10 ms of CPU for the commands, as much again for the
    replies), and a process needs one side: the daemon decodes commands, a client
    replies and events."""

    def __getattr__(self, name: str) -> msgspec.json.Decoder[Any]:
        if name not in _DECODED:
            raise AttributeError(name)
        decoder = msgspec.json.Decoder(_DECODED[name])
        setattr(self, name, decoder)  # found as an attribute from now on
        return decoder


_decoders = _Decoders()


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


def _raw_builtins(value: Any) -> Any:
    if isinstance(value, msgspec.Raw):
        return msgspec.json.decode(value)
    raise NotImplementedError(f"Encoding objects of type {type(value).__name__} is unsupported")


def encode(message: Any) -> bytes:
    """`message` as JSON. Lone surrogates in its strings are spelled `\\xNN` /
    `\\uNNNN` (only then is the message walked: the common case costs nothing)."""
    try:
        return _encoder.encode(message)
    except UnicodeEncodeError:
        return _encoder.encode(encodable(msgspec.to_builtins(message, enc_hook=_raw_builtins)))


def request_id_of(frame: bytes) -> str | None:
    """The frame's `requestId`, if it has a readable one; never raises."""
    try:
        rid = _request_id_decoder.decode(frame).requestId
    except Exception:  # any failure at all: too deep, not UTF-8, not an object
        m = _REQUEST_ID.search(frame)
        if m is None:
            return None
        try:
            return m.group("id").decode()
        except UnicodeDecodeError:
            return None
    return rid if isinstance(rid, str) else None


def _int_out_of_range(value: Any, path: str) -> str | None:
    """The path of the first integer in `value` outside int64, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return path if not INT64_MIN <= value <= INT64_MAX else None
    if isinstance(value, msgspec.Struct):
        names = zip(value.__struct_fields__, value.__struct_encode_fields__, strict=True)
        for attr, wire in names:
            if (found := _int_out_of_range(getattr(value, attr), f"{path}.{wire}")) is not None:
                return found
    elif isinstance(value, dict):
        for key, item in value.items():
            if (found := _int_out_of_range(item, f"{path}.{key}")) is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if (found := _int_out_of_range(item, f"{path}[{i}]")) is not None:
                return found
    return None


def _check_integers(frame: bytes, message: Any) -> None:
    if _LONG_DIGITS.search(frame) is None:
        return  # no integer in the frame can be out of range (the common case)
    try:
        path = _int_out_of_range(message, "$")
    except RecursionError:
        path = "$"
    if path is not None:
        raise FrameError(
            ErrorCode.INVALID_REQUEST,
            f"Invalid message: integer out of range at `{path}`; integers must lie "
            f"between {INT64_MIN} and {INT64_MAX}.",
            path,
            getattr(message, "request_id", None),
        )


def _undecodable(frame: bytes, exc: Exception) -> FrameError:
    """A failure of the decoder other than DecodeError, as a FrameError."""
    if isinstance(exc, RecursionError):
        what = "nests arrays or objects too deeply"
    elif isinstance(exc, UnicodeDecodeError):
        what = f"is not valid UTF-8 ({exc.reason} at byte {exc.start})"
    else:
        what = f"cannot be decoded ({type(exc).__name__})"
    return FrameError(
        ErrorCode.INVALID_REQUEST,
        f"The frame {what}. Send one JSON object per frame, encoded as UTF-8.",
        "$",
        request_id_of(frame),
    )


def _frame_error(frame: bytes, exc: msgspec.DecodeError) -> FrameError:
    text = str(exc)
    m = _PATH.search(text)
    path = m.group("path") if m else None
    # The error quotes what the frame held (an unknown command's name): untrusted
    # text, its control characters escaped before a message carries it.
    text = _CONTROL.sub(lambda c: f"\\x{ord(c.group()):02x}", text)
    request_id = request_id_of(frame)
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


def _decode(direction: str, frame: bytes) -> Any:
    """Decode `frame` with the decoder of `direction` (a key of `_DECODED`);
    raises FrameError and nothing else."""
    try:
        return getattr(_decoders, direction).decode(frame)
    except msgspec.DecodeError as exc:
        raise _frame_error(frame, exc) from exc
    except Exception as exc:  # RecursionError, UnicodeDecodeError, MemoryError, ...
        raise _undecodable(frame, exc) from exc


def decode_client_message(frame: bytes) -> ClientMessage:
    """Decode a client's frame; raises FrameError and nothing else."""
    message = cast(ClientMessage, _decode("client", frame))
    _check_integers(frame, message)
    return message


class RawReply(Reply, tag="Reply", frozen=True):
    """A `Reply` whose `result` is kept as its JSON text: a client decodes it once,
    straight into its command's result type (a snapshot of a long task is megabytes:
    building dicts of it first, then the types, doubles the work). The same wire
    form as `Reply`; not a wire type of its own."""

    result: msgspec.Raw = msgspec.Raw(b"null")


#: What each decoder of `_decoders` decodes.
_DECODED: dict[str, Any] = {
    "client": ClientMessage,
    "server": ServerMessage,
    "event": TaskEvent,
    "control": Ack | RawReply | TaskEvent,
}


def decode_control_frame(frame: bytes) -> Ack | RawReply | TaskEvent:
    """Decode a frame the daemon sent on `control`, the result of a reply left as
    JSON; raises FrameError and nothing else."""
    return cast(Ack | RawReply | TaskEvent, _decode("control", frame))


def decode_server_message(frame: bytes) -> ServerMessage:
    return cast(ServerMessage, _decode("server", frame))


def decode_event(frame: bytes) -> TaskEvent:
    return cast(TaskEvent, _decode("event", frame))
