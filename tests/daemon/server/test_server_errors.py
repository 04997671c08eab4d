"""The server's error boundary around command handlers: a handler that fails in a
way nobody foresaw (a bug) costs its command an `internal` reply and a log line,
never the connection nor the daemon. (A real hdspd has no such bug to trigger:
the frame fuzzer asserts that no frame gets `internal`; so this runs the real
server, real ZeroMQ sockets, with a handler that fails.)"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import structlog
import zmq
import zmq.asyncio

from hdsp.daemon.server import Server
from hdsp.daemon.server.sessions import Session
from hdsp.protocol import (
    PROTOCOL_VERSION,
    ClientInfo,
    Connect,
    ErrorCode,
    GetStatus,
    ListKernels,
    Ping,
    Reply,
    TaskCommand,
    decode_server_message,
    encode,
)
from tests.support.daemon_process import short_tmp_dir


async def _failing_handler(cmd: TaskCommand, session: Session) -> Any:
    if isinstance(cmd.data, GetStatus):
        raise RuntimeError("a bug in a handler")
    return None


async def test_a_handler_that_fails_gets_internal_and_the_session_goes_on() -> None:
    where = short_tmp_dir()
    server = Server(
        control_endpoint=f"ipc://{where}/control",
        events_endpoint=f"ipc://{where}/events",
        handle=_failing_handler,
        head_seq=lambda: 0,
    )
    peer = zmq.asyncio.Context.instance().socket(zmq.DEALER)
    peer.setsockopt(zmq.LINGER, 0)

    async def ask(request_id: str, command: Any) -> Reply:
        await peer.send(
            encode(TaskCommand(client_id=client_id, request_id=request_id, data=command))
        )
        with anyio.fail_after(10):
            reply = decode_server_message(await peer.recv())
        assert isinstance(reply, Reply) and reply.request_id == request_id, reply
        return reply

    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            await tg.start(server.run)
            peer.connect(server.control_endpoint)
            hello = Connect(
                protocol_version=PROTOCOL_VERSION, client=ClientInfo(name="t", version="0")
            )
            await peer.send(encode(hello))
            with anyio.fail_after(10):
                client_id = msgspec.json.decode(await peer.recv())["data"]["clientId"]
            failed = await ask("1", GetStatus())
            after = await ask("2", ListKernels())
            pong = await ask("3", Ping())
            tg.cancel_scope.cancel()
    peer.close(linger=0)
    assert not failed.ok and failed.error is not None
    assert failed.error.code is ErrorCode.INTERNAL
    assert "a bug in a handler" not in failed.error.message  # details stay in the log
    assert after.ok and pong.ok
    (logged,) = [e for e in logs if e["event"] == "command failed"]
    assert logged["command"] == "GetStatus" and logged["log_level"] == "error"
