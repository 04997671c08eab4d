"""One bad frame never stops the daemon: each kind that once did, against a real
hdspd, with a well-behaved client that must not notice."""

from __future__ import annotations

import pytest

from hdsp.client import Client, CommandFailed, connect
from hdsp.protocol import ErrorCode, GetStatus, Ping, Replay, ReplayData
from tests.daemon_process import DaemonProcess

from .raw_peer import RawPeer

pytestmark = pytest.mark.timeout(60)

DEPTH = 100_000


async def _still_serves(daemon: DaemonProcess, client: Client) -> None:
    assert daemon.proc is not None and daemon.proc.poll() is None, daemon.stderr()
    assert (await client.ping()).server_time > 0
    assert (await client.status()).pid == daemon.proc.pid


async def test_a_deeply_nested_frame_gets_invalid_request(
    daemon: DaemonProcess, client: Client
) -> None:
    with RawPeer(daemon) as raw:
        for frame in (b"[" * DEPTH, b"[" * 990 + b"]" * 990, b'{"a":' * DEPTH):
            reply = await raw.ask(frame)
            assert reply.error is not None and reply.error.code == ErrorCode.INVALID_REQUEST
            assert reply.request_id is None
        await _still_serves(daemon, client)


async def test_deep_nesting_inside_a_command_is_answered_by_request_id(
    daemon: DaemonProcess, client: Client
) -> None:
    with RawPeer(daemon) as raw:
        await raw.handshake()
        for data in (
            "[" * DEPTH,
            '{"commandName":"UpdateSettings","data":{"patch":{"a":' + "[" * DEPTH,
        ):
            frame = raw.raw_command(None, "deep").replace(
                b'"data":null', b'"data":' + data.encode()
            )
            reply = await raw.ask(frame)
            assert reply.request_id == "deep"
            assert reply.error is not None and reply.error.code == ErrorCode.INVALID_REQUEST
            assert reply.error.path is not None and reply.error.path.startswith("$")
        ok = await raw.ask(raw.command_frame(Ping()))
        assert ok.ok
        await _still_serves(daemon, client)


async def test_invalid_utf8_in_a_string_gets_invalid_request(
    daemon: DaemonProcess, client: Client
) -> None:
    with RawPeer(daemon) as raw:
        reply = await raw.ask(b'"\xff"')
        assert reply.error is not None and reply.error.code == ErrorCode.INVALID_REQUEST
        await raw.handshake()
        frame = raw.raw_command({"commandName": "GetTask", "data": {"taskId": "x"}}, "utf")
        frame = frame.replace(b'"x"', b'"\xc3\x28"')
        reply = await raw.ask(frame)
        assert reply.error is not None and reply.error.code == ErrorCode.INVALID_REQUEST
        assert "UTF-8" in reply.error.message
        assert reply.request_id == "utf"
        await _still_serves(daemon, client)


async def test_an_oversized_frame_gets_too_large_and_keeps_the_session(
    daemon_process: DaemonProcess,
) -> None:
    limit = 100_000
    daemon_process.start("--max-message-size", str(limit))
    async with connect(daemon_process.runtime_dir) as good:
        with RawPeer(daemon_process) as raw:
            await raw.handshake()
            huge = raw.raw_command({"commandName": "Ping", "pad": "x" * (2 * limit)}, "big")
            reply = await raw.ask(huge)
            assert reply.error is not None and reply.error.code == ErrorCode.TOO_LARGE
            assert str(limit) in reply.error.message
            assert reply.error.details == {"maxMessageSize": limit, "size": len(huge)}
            # The same session goes on: its client id is still known.
            after = await raw.ask(raw.command_frame(GetStatus(), "after"))
            assert after.ok, after.error
            # The client library refuses before sending, with the same code.
            with pytest.raises(CommandFailed, match="above the daemon's limit") as info:
                await good.send_message("t", "x" * (2 * limit))
            assert info.value.code == ErrorCode.TOO_LARGE
            assert (await good.ping()).server_time > 0


@pytest.mark.parametrize(
    ("field", "value"),
    [("sinceSeq", 2**63), ("sinceSeq", 2**64 - 1), ("limit", 2**63), ("sinceSeq", -(2**63) - 1)],
)
async def test_integers_out_of_range_get_invalid_request_naming_the_field(
    daemon: DaemonProcess, client: Client, field: str, value: int
) -> None:
    with RawPeer(daemon) as raw:
        await raw.handshake()
        data = {"sinceSeq": 0, field: value}
        reply = await raw.ask(raw.raw_command({"commandName": "Replay", "data": data}, "r"))
        assert reply.error is not None and reply.error.code == ErrorCode.INVALID_REQUEST, reply
        assert reply.error.path == f"$.data.data.{field}"
        await _still_serves(daemon, client)


async def test_a_cursor_out_of_range_gets_invalid_request(client: Client) -> None:
    for cursor in (str(2**63), "9" * 40, "-1"):
        with pytest.raises(CommandFailed) as info:
            await client.list_tasks(cursor=cursor)
        assert info.value.code == ErrorCode.INVALID_REQUEST, info.value
    with pytest.raises(CommandFailed) as info:
        await client.request(Replay(data=ReplayData(since_seq=-1)))
    assert info.value.code == ErrorCode.INVALID_REQUEST


async def test_a_wrong_client_id_gets_unknown_client_not_send_connect_first(
    daemon: DaemonProcess, client: Client
) -> None:
    with RawPeer(daemon) as raw:
        # Before Connect: the handshake is what is missing.
        reply = await raw.ask(raw.command_frame(Ping(), "early"))
        assert reply.error is not None and reply.error.code == ErrorCode.NOT_CONNECTED
        assert "Connect" in reply.error.message
        # After it, a clientId other than the Ack's: the id is what is wrong.
        own = await raw.handshake()
        for wrong in ("c-0000000000000000", client.client_id, "", "\x1b]0;pwn\x07"):
            raw.client_id = wrong
            reply = await raw.ask(raw.command_frame(GetStatus(), "wrong"))
            assert reply.request_id == "wrong"
            assert reply.error is not None and reply.error.code == ErrorCode.UNKNOWN_CLIENT
            assert "clientId" in reply.error.message and "Send Connect first" not in (
                reply.error.message
            )
            assert "\x1b" not in reply.error.message and "\x07" not in reply.error.message
        # The session itself is intact: the right id still works.
        raw.client_id = own
        assert (await raw.ask(raw.command_frame(GetStatus()))).ok
    await _still_serves(daemon, client)
