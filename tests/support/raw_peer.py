"""A raw ZeroMQ peer of a real hdspd: a DEALER that sends whatever bytes a test
wants, as a misbehaving client would, and reads the replies."""

from __future__ import annotations

import os
from typing import Any

import anyio
import msgspec
import zmq
import zmq.asyncio

from hdsp.client import find_daemon
from hdsp.protocol import (
    PROTOCOL_VERSION,
    ClientInfo,
    Command,
    Connect,
    Reply,
    TaskCommand,
    decode_server_message,
    encode,
)
from tests.support.daemon_process import DaemonProcess

__all__ = ["RawPeer", "daemon_rss_kib"]


def daemon_rss_kib(daemon: DaemonProcess) -> int:
    """The daemon's resident set size, from /proc."""
    assert daemon.proc is not None
    with open(f"/proc/{daemon.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/PID/status")


class RawPeer:
    """A DEALER on the daemon's control socket, with helpers for the handshake."""

    def __init__(self, daemon: DaemonProcess) -> None:
        info = find_daemon(daemon.runtime_dir)
        self.sock = zmq.asyncio.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(info.control)
        self.client_id = ""
        self._ids = 0

    def close(self) -> None:
        self.sock.close(linger=0)

    def __enter__(self) -> RawPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def ask(self, *frames: bytes) -> Reply:
        await self.sock.send_multipart(list(frames))
        with anyio.fail_after(10):
            parts = await self.sock.recv_multipart()
        msg = decode_server_message(parts[-1])
        assert isinstance(msg, Reply), msg
        return msg

    async def handshake(self) -> str:
        frame = encode(
            Connect(protocol_version=PROTOCOL_VERSION, client=ClientInfo(name="raw", version="0"))
        )
        await self.sock.send(frame)
        with anyio.fail_after(10):
            ack = msgspec.json.decode(await self.sock.recv())
        self.client_id = ack["data"]["clientId"]
        return self.client_id

    def request_id(self) -> str:
        self._ids += 1
        return f"raw-{os.getpid()}-{self._ids}"

    def command_frame(self, command: Command, request_id: str | None = None) -> bytes:
        rid = request_id or self.request_id()
        return encode(TaskCommand(client_id=self.client_id, request_id=rid, data=command))

    def raw_command(self, data: Any, request_id: str | None = None) -> bytes:
        """A TaskCommand whose `data` is any JSON value (not checked here)."""
        return msgspec.json.encode(
            {
                "type": "TaskCommand",
                "clientId": self.client_id,
                "requestId": request_id or self.request_id(),
                "data": data,
            }
        )
