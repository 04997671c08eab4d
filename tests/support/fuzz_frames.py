"""Frames for fuzzing hdspd's control socket, by class, from a seeded random.

Each generated frame says what may answer it: a set of error codes (None: any
answer, a bit flip may make a valid command). Every frame except those over
ZeroMQ's hard cap gets exactly one answer; the fuzz test counts them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec
import msgspec.inspect as mi

from hdsp.protocol import (
    COMMANDS,
    ErrorCode,
    FrameError,
    GetStatus,
    GetTask,
    GetTaskData,
    ListTasks,
    Ping,
    Replay,
    ReplayData,
    TaskCommand,
    decode_client_message,
    encode,
)

__all__ = ["CLASSES", "Frame", "FrameFactory", "wrong_type_frames"]

ERRORS = frozenset(ErrorCode) - {ErrorCode.INTERNAL}
DECODE_ERRORS = frozenset({ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_COMMAND})
#: Deep nesting makes long frames: some are over the limit.
NESTING_ERRORS = DECODE_ERRORS | {ErrorCode.TOO_LARGE}


@dataclass(frozen=True)
class Frame:
    kind: str
    parts: list[bytes]
    request_id: str | None
    #: The codes an answer may carry; None: any answer (ok included).
    expect: frozenset[ErrorCode] | None
    #: The path the error must name, when known.
    path: str | None = None


_WRONG_VALUES: list[Any] = [12345, "a string", [1, 2], {"k": 1}, True, 1.5, None, 2**64]


def _wrong_type_templates() -> list[tuple[str, Any, str]]:
    """(command name, data with one wrong field, path) for every field of every
    command, nested structs included; each checked locally to be refused there."""
    out: list[tuple[str, Any, str]] = []

    def walk(t: mi.StructType, build: Callable[[dict[str, Any]], Any], path: str) -> None:
        for field in t.fields:
            for wrong in _WRONG_VALUES:
                out.append((path, build({field.encode_name: wrong}), f"{path}.{field.encode_name}"))
            inner = field.type
            candidates = inner.types if isinstance(inner, mi.UnionType) else (inner,)
            for c in candidates:
                if isinstance(c, mi.StructType):
                    name = field.encode_name
                    walk(c, lambda d, b=build, n=name: b({n: d}), f"{path}.{name}")

    for name, spec in COMMANDS.items():
        info = mi.type_info(spec.request)
        assert isinstance(info, mi.StructType)
        walk(info, lambda d, n=name: {"commandName": n, **d}, "$.data")
    return out


def wrong_type_frames(client_id: str) -> list[Frame]:
    """Frames the daemon must refuse at the wrong field's path (kept only where
    the protocol's own decoder refuses them there)."""
    frames = []
    for _, data, path in _wrong_type_templates():
        rid = f"w{len(frames)}"
        frame = msgspec.json.encode(
            {"type": "TaskCommand", "clientId": client_id, "requestId": rid, "data": data}
        )
        try:
            decode_client_message(frame)
        except FrameError as exc:
            if exc.path == path:
                frames.append(Frame("wrong_type", [frame], rid, frozenset({exc.code}), path))
    return frames


class FrameFactory:
    """Makes frames of every class for one connected raw peer."""

    def __init__(self, rng: random.Random, client_id: str, max_message_size: int) -> None:
        self.rng = rng
        self.client_id = client_id
        self.limit = max_message_size
        self._n = 0
        self._wrong = wrong_type_frames(client_id)

    def rid(self) -> str:
        self._n += 1
        return f"f{self._n}"

    def command(self, data: Any, rid: str) -> bytes:
        return msgspec.json.encode(
            {"type": "TaskCommand", "clientId": self.client_id, "requestId": rid, "data": data}
        )

    def valid_seeds(self) -> list[bytes]:
        # A request id of another length than every expected one: no flip turns
        # it into one of theirs.
        cid, rid = self.client_id, f"seed-{self.rid()}"
        commands = [
            Ping(),
            GetStatus(),
            ListTasks(),
            GetTask(data=GetTaskData(task_id="no-such-task")),
            Replay(data=ReplayData(since_seq=0, limit=5)),
        ]
        # (No Connect: one that survives its flips would start a new session.)
        return [encode(TaskCommand(client_id=cid, request_id=rid, data=c)) for c in commands]

    # ---- the classes --------------------------------------------------------

    def random_bytes(self) -> Frame:
        n = self.rng.choice((0, 1, 2, 8, 64, 512))
        return Frame("random_bytes", [self.rng.randbytes(n)], None, ERRORS)

    def bit_flip(self) -> Frame:
        seed = bytearray(self.rng.choice(self.valid_seeds()))
        for _ in range(self.rng.randint(1, 4)):
            i = self.rng.randrange(len(seed))
            seed[i] ^= 1 << self.rng.randrange(8)
        return Frame("bit_flip", [bytes(seed)], None, None)

    def deep_nesting(self) -> Frame:
        depth = self.rng.choice((990, 1500, 5000, 20_000))
        opener = self.rng.choice((b"[", b'{"a":'))
        if self.rng.random() < 0.5:
            return Frame("deep_nesting", [opener * depth], None, NESTING_ERRORS)
        rid = self.rid()
        frame = self.command(None, rid).replace(b'"data":null', b'"data":' + opener * depth)
        return Frame("deep_nesting", [frame], rid, NESTING_ERRORS)

    def huge_string(self) -> Frame:
        rid = self.rid()
        base = self.command({"commandName": "GetTask", "data": {"taskId": ""}}, rid)
        over = self.rng.random() < 0.5
        size = self.limit + self.rng.randint(1, 4096) if over else self.limit
        pad = size - len(base)
        frame = base.replace(b'"taskId":""', b'"taskId":"' + b"x" * pad + b'"')
        assert len(frame) == size
        if over:
            return Frame("huge_string", [frame], rid, frozenset({ErrorCode.TOO_LARGE}))
        return Frame("huge_string", [frame], rid, frozenset({ErrorCode.TASK_NOT_FOUND}))

    def invalid_utf8(self) -> Frame:
        rid = self.rid()
        bad = self.rng.choice((b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"))
        frame = self.command({"commandName": "GetTask", "data": {"taskId": "@"}}, rid)
        frame = frame.replace(b'"@"', b'"a' + bad + b'b"')
        return Frame("invalid_utf8", [frame], rid, frozenset({ErrorCode.INVALID_REQUEST}))

    def wrong_type(self) -> Frame:
        return self.rng.choice(self._wrong)

    def multipart(self) -> Frame:
        n = self.rng.choice((2, 3, 5))
        parts = [self.rng.choice((b"{}", b"", b"x")) for _ in range(n)]
        if parts[0] == b"" and n > 2:
            parts[0] = b"{}"  # (an empty first part is a REQ delimiter)
        return Frame("multipart", parts, None, frozenset({ErrorCode.INVALID_REQUEST}))

    def unknown_command(self) -> Frame:
        rid = self.rid()
        name = "".join(self.rng.choice("ABCXYZabcxyz") for _ in range(8))
        frame = self.command({"commandName": name}, rid)
        return Frame("unknown_command", [frame], rid, frozenset({ErrorCode.UNKNOWN_COMMAND}))

    def garbage_body(self) -> Frame:
        rid = self.rid()
        data = self.rng.choice(
            (None, 1, "x", [], [1, "a"], {"commandName": 7}, {"x": {"y": [None]}}, -(2**70))
        )
        return Frame("garbage_body", [self.command(data, rid)], rid, DECODE_ERRORS)

    def big_integer(self) -> Frame:
        rid = self.rid()
        value = self.rng.choice((2**63, 2**64 - 1, -(2**63) - 1, 10**30))
        field = self.rng.choice(("sinceSeq", "limit"))
        data = {"commandName": "Replay", "data": {"sinceSeq": 0, field: value}}
        return Frame(
            "big_integer",
            [self.command(data, rid)],
            rid,
            frozenset({ErrorCode.INVALID_REQUEST}),
            f"$.data.data.{field}",
        )

    def frames(self, count: int) -> Iterator[Frame]:
        makers = [getattr(self, name) for name in CLASSES]
        weights = [CLASSES[name] for name in CLASSES]
        for _ in range(count):
            yield self.rng.choices(makers, weights)[0]()


#: Each class and its weight.
CLASSES: dict[str, int] = {
    "random_bytes": 10,
    "bit_flip": 20,
    "deep_nesting": 4,
    "huge_string": 1,
    "invalid_utf8": 8,
    "wrong_type": 25,
    "multipart": 6,
    "unknown_command": 6,
    "garbage_body": 12,
    "big_integer": 8,
}
