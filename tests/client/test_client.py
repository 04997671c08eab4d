"""The client library against a real daemon: discovery errors, the sync facade,
and gap repair on the live stream."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from hdsp.client import Client, ConnectionLost, DaemonNotRunning, connect, sync
from hdsp.protocol import TaskCompleted, TaskEvent
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn


async def test_no_discovery_file_says_how_to_start(tmp_path: Path) -> None:
    with pytest.raises(DaemonNotRunning, match="Start it with `hdspd`"):
        async with connect(tmp_path):
            pass


def _dead_pid() -> int:
    """A pid that cannot be running: a child that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


async def test_stale_discovery_file_is_recognised(tmp_path: Path) -> None:
    pid = _dead_pid()
    (tmp_path / "hdspd.json").write_text(
        f'{{"protocolVersion":1,"serverVersion":"0","pid":{pid},"control":"ipc:///nope",'
        '"events":"ipc:///nope2","startedAt":0}'
    )
    with pytest.raises(DaemonNotRunning, match="no longer running"):
        async with connect(tmp_path):
            pass


async def test_unanswered_handshake_times_out(daemon: DaemonProcess) -> None:
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGSTOP)  # alive, listening, not answering
    try:
        with pytest.raises(DaemonNotRunning, match="did not answer the handshake"):
            async with connect(daemon.runtime_dir, timeout=0.5):
                pass
    finally:
        daemon.proc.send_signal(signal.SIGCONT)


def test_sync_facade_runs_a_task(daemon: DaemonProcess, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.text("sync works"))
    with sync.connect(daemon.runtime_dir) as c:
        head = c.status().head_seq
        ref = c.start_task("hello from a script")
        texts = []
        for event in c.events(ref.task_id, since_seq=head):
            if isinstance(event.data, TaskCompleted):
                break
            msg = getattr(event.data, "payload", [None])[0]
            if hasattr(msg, "message") and not msg.message.partial and msg.message.say == "text":
                texts.append(msg.message.text)
        assert texts[-1] == "sync works"
        assert c.get_task(ref.task_id).item.id == ref.task_id


async def test_a_stream_from_a_cursor_gets_every_later_event_once(
    client: Client, fake_openai: FakeOpenAI
) -> None:
    """Events published before the stream subscribed come from the log, then the
    stream goes on live: in order, each once."""
    fake_openai.script(FakeReply.text("one"), FakeReply.text("two"))
    head = (await client.status()).head_seq
    ref = await client.start_task("first")
    first = await collect_turn(client, ref.task_id, head)
    middle = first[len(first) // 2].seq
    assert middle is not None
    # Follow live only from `middle` on: everything after it must come, once.
    stream = client.events(ref.task_id, since_seq=middle)
    got: list[TaskEvent] = []
    async with stream:
        mark = (await client.status()).head_seq
        await client.send_message(ref.task_id, "second")
        with anyio.fail_after(20):
            async for event in stream:
                got.append(event)
                if isinstance(event.data, TaskCompleted) and event.seq and event.seq > mark:
                    break
    seqs = [e.seq for e in got if e.seq is not None]
    page = await client.replay(middle, task_id=ref.task_id)
    assert seqs == [e.seq for e in page.events]


async def test_an_unreadable_event_is_counted_and_logged_not_dropped_silently(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A peer that speaks the protocol (real sockets, as the daemon binds them)
    publishes one event this client cannot decode, then a good one."""
    import os

    import zmq
    import zmq.asyncio

    from hdsp.protocol import (
        PROTOCOL_VERSION,
        Ack,
        AckData,
        Discovery,
        TaskCreated,
        TaskEvent,
        decode_client_message,
        encode,
    )

    ctx = zmq.asyncio.Context()
    router, pub = ctx.socket(zmq.ROUTER), ctx.socket(zmq.XPUB)
    control, events = f"ipc://{tmp_path}/c", f"ipc://{tmp_path}/e"
    router.bind(control)
    pub.bind(events)
    (tmp_path / "hdspd.json").write_bytes(
        encode(
            Discovery(
                protocol_version=PROTOCOL_VERSION,
                server_version="test",
                pid=os.getpid(),
                control=control,
                events=events,
                started_at=0,
            )
        )
    )

    async def serve() -> None:
        ident, frame = await router.recv_multipart()
        assert decode_client_message(frame)
        ack = AckData(
            client_id="c1",
            pid=1,
            ppid=1,
            protocol_version=PROTOCOL_VERSION,
            server_version="test",
            head_seq=0,
        )
        await router.send_multipart([ident, encode(Ack(data=ack))])
        while True:
            sub = await pub.recv()
            if sub[:1] == b"\x01" and sub[1:].startswith(b"\x00sync."):
                await pub.send_multipart([sub[1:], b"{}"])

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            async with connect(tmp_path) as c, c.events("t1") as stream:
                await pub.send_multipart([b"t1", b'{"type":"TaskEvent","data":{"eventName":"x"}}'])
                good = TaskEvent(data=TaskCreated(payload=("t1",)))
                await pub.send_multipart([b"t1", encode(good)])
                with anyio.fail_after(5):
                    event = await stream.__anext__()
                assert event == good
                assert c.unreadable == 1
            tg.cancel_scope.cancel()
    finally:
        router.close(0)
        pub.close(0)
        ctx.term()
    assert "cannot read" in caplog.text


@pytest.mark.slow
async def test_a_late_answer_to_a_re_handshake_is_taken(daemon: DaemonProcess) -> None:
    """A restarted daemon that answers the client's Connect after the client's
    handshake timeout (here: stopped with SIGSTOP) is not given up on: a command
    meanwhile says what is happening, and once the daemon answers, commands work."""
    async with connect(daemon.runtime_dir) as c:
        c.handshake_timeout = 0.2
        assert daemon.stop() == 0
        await c.wait_connection_lost()
        # No await between the start and the stop: the client's Connect (sent by
        # its event loop) reaches a daemon that does not answer.
        daemon.start()
        assert daemon.proc is not None
        daemon.proc.send_signal(signal.SIGSTOP)
        try:
            # ZeroMQ reconnects with backoff: wait (each ping waits for a reply,
            # up to its deadline) until the client has said Connect to the
            # stopped daemon, then make sure its handshake timeout passes.
            c.timeout = 1.0
            with anyio.fail_after(20):
                while True:
                    with pytest.raises(ConnectionLost) as refused:
                        await c.ping()
                    if "not answered the handshake" in str(refused.value):
                        break
            with pytest.raises(ConnectionLost, match="not answered the handshake"):
                await c.ping()
        finally:
            daemon.proc.send_signal(signal.SIGCONT)
        c.timeout = 30.0
        with anyio.fail_after(20):
            await c.ping()
        assert c.connected and c.reconnects == 1
        await c.list_tasks()
