"""The fuzzing peer as a process of its own (so that the test's well-behaved
client measures the daemon, not the fuzzer's CPU): `python -m
tests.support.fuzz_client RUNTIME_DIR LIMIT SEED FRAMES SOCKETS WINDOW`. It
sends FRAMES frames (fuzz_frames.py) from SOCKETS raw DEALER sockets, each with at
most WINDOW unanswered, checks every answer it can, and prints its figures as one
JSON line."""

from __future__ import annotations

import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import msgspec
import zmq
import zmq.asyncio

from hdsp.client import find_daemon
from hdsp.protocol import (
    PROTOCOL_VERSION,
    Ack,
    ClientInfo,
    Connect,
    Reply,
    decode_server_message,
    encode,
)
from tests.support.fuzz_frames import Frame, FrameFactory

__all__ = ["FuzzFigures", "main"]


class FuzzFigures(msgspec.Struct):
    sent: dict[str, int]
    replies: int
    codes: dict[str, int]
    mismatches: list[str]


@dataclass
class _Tally:
    sent: Counter[str] = field(default_factory=Counter)
    replies: int = 0
    codes: Counter[str] = field(default_factory=Counter)
    mismatches: list[str] = field(default_factory=list)


async def _socket(
    control: str, limit: int, seed: int, count: int, window: int, tally: _Tally
) -> None:
    sock = zmq.asyncio.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(control)
    try:
        await sock.send(
            encode(
                Connect(
                    protocol_version=PROTOCOL_VERSION, client=ClientInfo(name="fuzz", version="0")
                )
            )
        )
        with anyio.fail_after(10):
            ack = decode_server_message(await sock.recv())
        assert isinstance(ack, Ack)
        factory = FrameFactory(random.Random(seed), ack.data.client_id, limit)
        free = anyio.Semaphore(window)
        expected: dict[str, Frame] = {}

        async def receive() -> None:
            for _ in range(count):
                with anyio.fail_after(30):
                    parts = await sock.recv_multipart()
                free.release()
                tally.replies += 1
                msg = decode_server_message(parts[-1])
                if isinstance(msg, Ack):
                    tally.codes["ack"] += 1
                    continue
                assert isinstance(msg, Reply)
                code = "ok" if msg.error is None else str(msg.error.code)
                tally.codes[code] += 1
                frame = expected.get(msg.request_id or "")
                if frame is None or frame.expect is None:
                    continue
                if msg.error is None or msg.error.code not in frame.expect:
                    tally.mismatches.append(f"{frame.kind} {msg.request_id}: {msg}"[:500])
                elif frame.path is not None and msg.error.path != frame.path:
                    tally.mismatches.append(f"{frame.kind} at {msg.error.path}, not {frame.path}")

        async with anyio.create_task_group() as tg:
            tg.start_soon(receive)
            for frame in factory.frames(count):
                await free.acquire()
                if frame.request_id is not None:
                    expected[frame.request_id] = frame
                await sock.send_multipart(frame.parts)
                tally.sent[frame.kind] += 1
    finally:
        sock.close(linger=0)


async def _run(
    runtime_dir: Path, limit: int, seed: int, frames: int, sockets: int, window: int
) -> None:
    control = find_daemon(runtime_dir).control
    tally = _Tally()
    async with anyio.create_task_group() as tg:
        for i in range(sockets):
            tg.start_soon(_socket, control, limit, seed + i, frames // sockets, window, tally)
    figures = FuzzFigures(dict(tally.sent), tally.replies, dict(tally.codes), tally.mismatches[:20])
    sys.stdout.buffer.write(msgspec.json.encode(figures) + b"\n")


def main(argv: list[str]) -> None:
    runtime_dir, limit, seed, frames, sockets, window = argv
    anyio.run(
        _run, Path(runtime_dir), int(limit), int(seed), int(frames), int(sockets), int(window)
    )


if __name__ == "__main__":
    main(sys.argv[1:])
