"""One command to the local daemon, answered, on a plain synchronous socket.

A short CLI command (`hdsp tasks`) asks one question and prints the answer. The
async client (:mod:`.client`) is made for long conversations: an event socket,
a connection monitor, reconnection, re-handshakes, a task group on an asyncio
loop; importing asyncio, zmq.asyncio and anyio and starting that loop was most
of such a command's time. Here: a DEALER, `Connect`, the command, its `Reply`,
`Disconnect`, with the async client's messages for the same failures. A remote
daemon (CURVE) still goes through the async client.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, TypeVar

import zmq

from hdsp.protocol import (
    PROTOCOL_VERSION,
    Ack,
    ClientInfo,
    CommandBase,
    Connect,
    Disconnect,
    FrameError,
    Reply,
    TaskCommand,
    __version__,
    command_name,
    decode_control_frame,
    encode,
)

from .discovery import find_daemon
from .errors import CommandFailed, ConnectionLost, DaemonNotRunning, ProtocolError
from .replies import result_of

__all__ = ["local_daemon", "request_once"]

R = TypeVar("R")


def local_daemon(runtime_dir: Path | str | None, remote: str | None) -> bool:
    """Whether the command goes to the local daemon (not to a remote one)."""
    return remote is None and (runtime_dir is not None or not os.environ.get("HDSP_REMOTE"))


def request_once(
    command: CommandBase[R],
    runtime_dir: Path | str | None = None,
    *,
    name: str = "hdsp",
    kind: str = "cli",
    timeout: float = 5.0,
    reply_timeout: float = 120.0,
) -> R:
    """Send `command` to the local daemon and return its result, decoded to its
    type. DaemonNotRunning when there is none or it does not answer the
    handshake within `timeout` s; CommandFailed when it refuses the command."""
    info = find_daemon(runtime_dir)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 500)  # long enough for Disconnect to leave
    try:
        sock.connect(info.control)
        client = ClientInfo(name=name, version=__version__, kind=kind, pid=os.getpid())
        sock.send(encode(Connect(protocol_version=PROTOCOL_VERSION, client=client)))
        ack = _next(sock, timeout, None)
        if ack is None:
            raise DaemonNotRunning(
                f"hdspd did not answer the handshake within {timeout:g} s. Is it "
                "running? `hdsp daemon status` tells; start it with `hdspd`."
            )
        if isinstance(ack, Reply) and ack.error is not None:
            raise CommandFailed.from_info(ack.error)
        if not isinstance(ack, Ack):
            raise ProtocolError(f"The daemon answered Connect with {type(ack).__name__}.")
        client_id = ack.data.client_id
        what = command_name(command)
        frame = TaskCommand(client_id=client_id, request_id="r-1", data=command)  # type: ignore[arg-type]
        sock.send(encode(frame))
        try:
            reply = _next(sock, reply_timeout, "r-1")
        finally:
            sock.send(encode(Disconnect(client_id=client_id)))
        if reply is None:
            raise ConnectionLost(f"hdspd did not answer {what} within {reply_timeout:g} s.")
        assert isinstance(reply, Reply)
        return result_of(reply, command)
    finally:
        sock.close()
        ctx.term()


def _next(sock: zmq.Socket[bytes], timeout: float, request_id: str | None) -> Any:
    """The next Ack (`request_id` None) or the Reply to `request_id` within
    `timeout` seconds; None when none came. Other frames (a late reply, an
    unreadable frame) are passed over."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if not sock.poll(int(left * 1000) + 1):
            return None
        try:
            msg = decode_control_frame(sock.recv())
        except FrameError:  # (an unreadable frame answers nothing of ours)
            continue
        if request_id is None and isinstance(msg, Ack | Reply):
            return msg
        if isinstance(msg, Reply) and msg.request_id == request_id:
            return msg
    return None
