"""One bad frame never stops the daemon: each kind that once did, against a real
hdspd, with a well-behaved client that must not notice."""

from __future__ import annotations

import anyio
import pytest
import zmq
import zmq.asyncio
from hypothesis import assume, example, given, settings

from hdsp.client import Client, CommandFailed, connect, find_daemon
from hdsp.protocol import (
    PROTOCOL_VERSION,
    SYNC_PREFIX,
    Ack,
    ClientInfo,
    Connect,
    ErrorCode,
    EventsSynced,
    FrameError,
    GetStatus,
    Ping,
    Replay,
    ReplayData,
    Reply,
    TaskCommand,
    decode_client_message,
    decode_event,
    decode_server_message,
    encode,
)
from tests.protocol.test_codec import FRAMES
from tests.support.daemon_process import DaemonProcess
from tests.support.raw_peer import RawPeer

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


async def test_a_negative_cursor_is_refused_by_its_type_naming_the_field(
    daemon: DaemonProcess, client: Client
) -> None:
    """The schema says sinceSeq >= 0 and a ListTasks cursor is decimal digits; the
    daemon's decoder refuses the same frames, with the path of the field."""
    with RawPeer(daemon) as raw:
        await raw.handshake()
        for command, path in (
            ({"commandName": "Replay", "data": {"sinceSeq": -1}}, "$.data.data.sinceSeq"),
            ({"commandName": "ListTasks", "data": {"cursor": "-1"}}, "$.data.data.cursor"),
        ):
            reply = await raw.ask(raw.raw_command(command, "neg"))
            assert reply.request_id == "neg"
            assert reply.error is not None and reply.error.code == ErrorCode.INVALID_REQUEST
            assert reply.error.path == path, reply.error
        await _still_serves(daemon, client)


async def test_a_catch_all_subscriber_reads_other_clients_sync_probes_as_events(
    daemon: DaemonProcess, client: Client
) -> None:
    """A raw SUB subscribed to everything receives every client's sync probes:
    each is a valid TaskEvent (eventsSynced, naming its topic) in two frames,
    never a body that the protocol's types cannot read."""
    sub = zmq.asyncio.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    try:
        sub.connect(find_daemon(daemon.runtime_dir).events)
        sub.subscribe(b"")
        own = SYNC_PREFIX + b"raw-subscriber"
        sub.subscribe(own)  # in effect once its answer comes, and "" with it
        with anyio.fail_after(10):
            while (await sub.recv_multipart())[0] != own:
                pass
        sub.unsubscribe(own)
        # Another client's probe: `events()` syncs its subscription on entry.
        async with client.events("some-task"):
            pass
        with anyio.fail_after(10):
            while True:
                frames = await sub.recv_multipart()
                assert len(frames) == 2, frames
                if frames[0].startswith(SYNC_PREFIX) and frames[0] != own:
                    break
        topic, body = frames
        event = decode_event(body)
        assert event.data == EventsSynced(payload=(topic.decode(),))
        assert event.seq is None and event.prev_seq is None
        await _still_serves(daemon, client)
    finally:
        sub.close(linger=0)


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


def test_any_bad_frame_gets_the_codecs_error_naming_its_path_and_the_session_goes_on(
    daemon: DaemonProcess,
) -> None:
    """Property, against a real hdspd: every frame the codec refuses (any bytes,
    any JSON, envelopes holding anything) is answered with the codec's error, its
    code, path and request id, and the same connection and session go on (a
    Ping after them all is answered). One DEALER for every example."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(find_daemon(daemon.runtime_dir).control)
    answered = 0
    try:
        info = ClientInfo(name="frames", version="0")
        sock.send(encode(Connect(protocol_version=PROTOCOL_VERSION, client=info)))
        assert sock.poll(10_000), "no Ack"
        ack = decode_server_message(sock.recv())
        assert isinstance(ack, Ack), ack
        client_id = ack.data.client_id

        def reply_to(frame: bytes) -> Reply:
            sock.send(frame)
            assert sock.poll(10_000), f"no answer to {frame[:200]!r}"
            reply = decode_server_message(sock.recv())
            assert isinstance(reply, Reply), reply
            return reply

        @settings(max_examples=150, deadline=None, derandomize=True)
        @given(FRAMES)
        @example(b"[" * 5000)
        @example(
            b'{"type":"TaskCommand","clientId":"c","requestId":"r","data":{"commandName":"X"}}'
        )
        def check(frame: bytes) -> None:
            nonlocal answered
            try:
                decode_client_message(frame)
            except FrameError as expected:
                reply = reply_to(frame)
                answered += 1
                assert reply.error is not None, reply
                assert reply.error.code == expected.code, (frame[:200], reply.error)
                assert reply.error.path == expected.path, (frame[:200], reply.error)
                assert reply.request_id == expected.request_id
                return
            assume(False)  # a valid message (a Ping, a Connect...): not what this tests

        check()
        ping = TaskCommand(client_id=client_id, request_id="after", data=Ping())
        after = reply_to(encode(ping))
        assert after.ok and after.request_id == "after", after
    finally:
        sock.close(linger=0)
        ctx.term()
    assert answered > 100
    assert daemon.proc is not None and daemon.proc.poll() is None
