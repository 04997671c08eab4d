"""The reading code both sides of a fan-out benchmark share: hdsp.client's own
(`Client._read_events`): wait for one frame, then take up to 256 more without
waiting, decoding each as a `TaskEvent`, then let other tasks run."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import zmq
import zmq.asyncio

from hdsp.protocol import decode_event

__all__ = ["BATCH", "BurstReader"]

#: As hdsp.client's `_EVENT_BATCH`.
BATCH = 256


class BurstReader:
    """Counts what arrives on a SUB socket (frames, bytes, the newest seq)."""

    def __init__(self, sock: zmq.asyncio.Socket) -> None:
        self._sock = sock
        self.frames = 0
        self.durable = 0
        self.bytes = 0
        self.last_seq = 0
        self._changed = anyio.Event()

    def _take(self, topic: bytes, body: bytes) -> None:
        if topic.startswith(b"\x00"):
            return  # another client's sync probe (hdsp.client skips them too)
        event = decode_event(body)
        self.frames += 1
        self.bytes += len(body)
        if event.seq is not None:
            self.durable += 1
            self.last_seq = event.seq

    async def run(self) -> None:
        sock = self._sock
        drain: zmq.Socket[bytes] = zmq.Socket.shadow(sock.underlying)
        while True:
            self._take(*await sock.recv_multipart())
            for _ in range(BATCH):
                try:
                    topic, body = drain.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self._take(topic, body)
            self._changed.set()
            self._changed = anyio.Event()
            await anyio.lowlevel.checkpoint()

    async def wait_frames(self, count: int) -> None:
        while self.frames < count:
            await self._changed.wait()

    async def wait_seq(self, seq: int) -> None:
        while self.last_seq < seq:
            await self._changed.wait()
