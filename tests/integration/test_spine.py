"""The whole path, for real: hdspd as a subprocess, the client library over real
ZeroMQ sockets, SQLite on disk, the openai SDK against a fake server over HTTP."""

from __future__ import annotations

import os
import stat

import anyio
import msgspec
import pytest
import zmq
import zmq.asyncio

from hdsp.client import Client, CommandFailed, connect
from hdsp.protocol import (
    PROTOCOL_VERSION,
    ClientInfo,
    Connect,
    DaemonShuttingDown,
    ErrorCode,
    MessageEvent,
    Ping,
    Reply,
    TaskAborted,
    TaskClosed,
    TaskCommand,
    TaskCompleted,
    TaskCreated,
    TaskResumable,
    TaskStarted,
    TaskState,
    decode_server_message,
    encode,
)
from tests.fakes.openai_server import FakeOpenAI, Usage
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn, texts

pytestmark = pytest.mark.timeout(60)


async def test_a_task_streams_a_reply_in_roo_order(client: Client, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.text("The mean is 4.2.", chunk_size=3, usage=Usage(30, 7)))
    head = (await client.status()).head_seq
    ref = await client.start_task("What is the mean?")
    events = await collect_turn(client, ref.task_id, head)

    kinds = [type(e.data).__name__ for e in events]
    assert kinds[:3] == ["TaskCreated", "MessageEvent", "TaskStarted"]
    assert kinds[-1] == "TaskCompleted"
    assert texts(events) == ["What is the mean?", "The mean is 4.2."]
    seqs = [e.seq for e in events if e.seq is not None]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    done = events[-1].data
    assert isinstance(done, TaskCompleted)
    usage = done.payload[1]
    assert (usage.total_tokens_in, usage.total_tokens_out) == (30, 7)
    # The model saw the system prompt and the user's text.
    body = fake_openai.requests[0]
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][-1] == {"role": "user", "content": "What is the mean?"}

    snap = await client.get_task(ref.task_id)
    assert snap.state == TaskState.COMPLETED
    assert (snap.item.tokens_in, snap.item.tokens_out) == (30, 7)
    assert [m.text for m in snap.messages if m.say == "text"] == texts(events)


async def test_two_clients_see_the_same_events_in_the_same_order(
    daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.text("word " * 200, chunk_size=5))
    async with connect(daemon.runtime_dir) as a, connect(daemon.runtime_dir) as b:
        head = (await a.status()).head_seq
        seen: dict[str, list[tuple[int | None, str]]] = {}
        ready = anyio.Event()
        task_id: list[str] = []

        async def watch(name: str, c: Client) -> None:
            await ready.wait()
            events = await collect_turn(c, task_id[0], head)
            seen[name] = [(e.seq, type(e.data).__name__) for e in events if e.seq is not None]

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, "a", a)
            tg.start_soon(watch, "b", b)
            ref = await a.start_task("Stream a lot")
            task_id.append(ref.task_id)
            ready.set()
        assert seen["a"] == seen["b"]
        page = await b.replay(head, task_id=ref.task_id)
        assert [(e.seq, type(e.data).__name__) for e in page.events] == seen["a"]


async def _raw_dealer(daemon: DaemonProcess) -> zmq.asyncio.Socket:
    from hdsp.client import find_daemon

    info = find_daemon(daemon.runtime_dir)
    sock = zmq.asyncio.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(info.control)
    return sock


async def _ask(sock: zmq.asyncio.Socket, *frames: bytes) -> Reply:
    await sock.send_multipart(list(frames))
    with anyio.fail_after(5):
        msg = decode_server_message(await sock.recv())
    assert isinstance(msg, Reply), msg
    return msg


async def test_bad_frames_get_errors_and_disturb_nobody(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.text("still fine", chunk_size=2))
    head = (await client.status()).head_seq
    ref = await client.start_task("Keep going while someone misbehaves")
    bad = await _raw_dealer(daemon)
    try:
        ping = TaskCommand(client_id="nobody", request_id="r0", data=Ping())
        r = await _ask(bad, encode(ping))
        assert (r.request_id, r.error and r.error.code) == ("r0", ErrorCode.NOT_CONNECTED)
        r = await _ask(bad, b"\xff not json")
        assert r.error and r.error.code == ErrorCode.INVALID_REQUEST and r.request_id is None
        r = await _ask(bad, b'"a string"')
        assert r.error and r.error.code == ErrorCode.INVALID_REQUEST
        r = await _ask(bad, b"{}", b"{}")
        assert r.error and "one frame" in r.error.message
        r = await _ask(
            bad, encode(Connect(protocol_version=99, client=ClientInfo(name="x", version="0")))
        )
        assert r.error and r.error.code == ErrorCode.UNSUPPORTED_VERSION

        await bad.send(
            encode(
                Connect(
                    protocol_version=PROTOCOL_VERSION, client=ClientInfo(name="raw", version="0")
                )
            )
        )
        ack = msgspec.json.decode(await bad.recv())
        cid = ack["data"]["clientId"]
        unknown = {
            "type": "TaskCommand",
            "clientId": cid,
            "requestId": "r1",
            "data": {"commandName": "LaunchRocket"},
        }
        r = await _ask(bad, msgspec.json.encode(unknown))
        assert r.error and r.error.code == ErrorCode.UNKNOWN_COMMAND
        assert (r.request_id, r.error.path) == ("r1", "$.data.commandName")
        wrong = {
            "type": "TaskCommand",
            "clientId": cid,
            "requestId": "r2",
            "data": {"commandName": "ListTasks", "data": {"limit": "many"}},
        }
        r = await _ask(bad, msgspec.json.encode(wrong))
        assert r.error and r.error.code == ErrorCode.INVALID_REQUEST
        assert r.error.path == "$.data.data.limit"
        missing = TaskCommand(
            client_id=cid,
            request_id="r3",
            data=msgspec.convert(
                {"commandName": "GetTask", "data": {"taskId": "nope"}},
                type=__import__("hdsp.protocol", fromlist=["GetTask"]).GetTask,
            ),
        )
        r = await _ask(bad, encode(missing))
        assert r.error and r.error.code == ErrorCode.TASK_NOT_FOUND
        # A well-formed command from the raw peer works too.
        r = await _ask(bad, encode(TaskCommand(client_id=cid, request_id="r4", data=Ping())))
        assert r.ok and r.request_id == "r4"
    finally:
        bad.close(linger=0)

    events = await collect_turn(client, ref.task_id, head)
    assert isinstance(events[-1].data, TaskCompleted)
    assert texts(events)[-1] == "still fine"
    assert (await client.ping()).server_time > 0


async def test_oversized_frames_are_refused_with_too_large(
    daemon_process: DaemonProcess,
) -> None:
    daemon_process.start("--max-message-size", "100000")
    async with connect(daemon_process.runtime_dir) as good:
        bad = await _raw_dealer(daemon_process)
        try:
            await bad.send(b"{" + b" " * 200_000 + b"}")
            with pytest.raises(CommandFailed, match="above the daemon's limit"):
                await good.send_message("t", "x" * 200_000)
            assert (await good.ping()).server_time > 0
        finally:
            bad.close(linger=0)
        assert (await good.status()).pid == daemon_process.proc.pid  # type: ignore[union-attr]


async def test_cancel_send_close_and_concurrent_tasks(
    client: Client, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.hang(), FakeReply.hang(), FakeReply.hang())
    head = (await client.status()).head_seq
    refs = [await client.start_task(f"task {i}") for i in range(3)]
    # All three model requests are in flight at once: tasks run concurrently.
    with anyio.fail_after(10):
        await fake_openai.wait_for_requests_async(3)
    # A message to a busy task waits in its queue, visible to every client.
    queued = await client.send_message(refs[0].task_id, "not now")
    assert queued.queued
    snap = await client.get_task(refs[0].task_id)
    assert [m.text for m in snap.queue] == ["not now"]
    await client.delete_queued_message(refs[0].task_id, snap.queue[0].id)
    assert (await client.get_task(refs[0].task_id)).queue == []

    stopped = await client.cancel_task(refs[0].task_id)
    assert stopped.state == TaskState.ABORTED
    events = await collect_turn(client, refs[0].task_id, head)
    assert isinstance(events[-1].data, TaskAborted)

    fake_openai.script(FakeReply.text("second answer"))
    mark = (await client.status()).head_seq
    await client.send_message(refs[0].task_id, "try again")
    events = await collect_turn(client, refs[0].task_id, mark)
    assert isinstance(events[-1].data, TaskCompleted)
    assert texts(events) == ["second answer"]
    assert texts(events, "user_feedback") == ["try again"]

    mark = (await client.status()).head_seq
    closed = await client.close_task(refs[1].task_id)
    assert closed.state == TaskState.ABORTED
    events = await collect_turn(client, refs[1].task_id, mark, until=(TaskClosed,))
    assert [type(e.data) for e in events if e.seq] == [
        MessageEvent,
        TaskAborted,
        TaskClosed,
    ] or isinstance(events[-1].data, TaskClosed)
    await client.cancel_task(refs[2].task_id)
    with anyio.fail_after(10):
        await fake_openai.wait_for_disconnects_async(3)


async def test_commands_on_one_task_run_in_order(client: Client, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.hang())
    ref = await client.start_task("ordered")
    with anyio.fail_after(10):
        await fake_openai.wait_for_requests_async(1)
    results: list[str] = []

    async def cancel() -> None:
        results.append(f"cancel:{(await client.cancel_task(ref.task_id)).state}")

    async def snapshot() -> None:
        results.append(f"get:{(await client.get_task(ref.task_id)).state}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(snapshot)
    # GetTask was sent after CancelTask and is ordered after it on the same task,
    # so it sees the task aborted although cancelling takes a while.
    assert results == ["cancel:aborted", "get:aborted"]


async def test_restart_keeps_every_task_and_its_history(
    daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(*(FakeReply.text(f"answer {i}") for i in range(3)))
    before = {}
    async with connect(daemon.runtime_dir) as c:
        for i in range(3):
            head = (await c.status()).head_seq
            ref = await c.start_task(f"question {i}")
            await collect_turn(c, ref.task_id, head)
            before[ref.task_id] = await c.get_task(ref.task_id)
    assert daemon.stop() == 0
    daemon.start()
    async with connect(daemon.runtime_dir) as c:
        listed = await c.list_tasks()
        assert {t.id for t in listed.tasks} == set(before)
        for task_id, snap in before.items():
            again = await c.get_task(task_id)
            assert again.messages == snap.messages
            assert again.item == snap.item
        # Paging: one per page, newest first, each task once.
        seen = []
        cursor = None
        while True:
            page = await c.list_tasks(cursor=cursor, limit=1)
            seen += [t.number for t in page.tasks]
            if (cursor := page.next_cursor) is None:
                break
        assert seen == [3, 2, 1]


async def test_sigterm_saves_running_tasks_as_resumable(
    daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.hang())
    async with connect(daemon.runtime_dir) as c:
        head = (await c.status()).head_seq
        ref = await c.start_task("long job")
        with anyio.fail_after(10):
            await fake_openai.wait_for_requests_async(1)
        finals = []
        async with c.events(None, since_seq=head) as events:
            daemon.proc.terminate()  # type: ignore[union-attr]
            async for event in events:
                finals.append(event.data)
                if isinstance(event.data, DaemonShuttingDown):
                    break
    assert any(isinstance(d, TaskResumable) for d in finals)
    assert daemon.wait() == 0
    assert not (daemon.runtime_dir / "hdspd.json").exists()
    assert not (daemon.runtime_dir / "control").exists()

    fake_openai.script(FakeReply.text("picked up again"))
    daemon.start()
    async with connect(daemon.runtime_dir) as c:
        snap = await c.get_task(ref.task_id)
        assert snap.state == TaskState.RESUMABLE
        head = (await c.status()).head_seq
        resumed = await c.resume_task(ref.task_id)
        assert resumed.state == TaskState.RUNNING
        events = await collect_turn(c, ref.task_id, head)
        assert isinstance(events[-1].data, TaskCompleted)
        assert texts(events) == ["picked up again"]


async def test_kill_9_loses_nothing_that_was_published(
    daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.text("a b c d e f", chunk_size=2), FakeReply.hang())
    async with connect(daemon.runtime_dir) as c:
        head = (await c.status()).head_seq
        first = await c.start_task("one")
        seen = await collect_turn(c, first.task_id, head)
        second = await c.start_task("two")
        async with c.events(second.task_id, since_seq=head) as events:
            async for event in events:
                if isinstance(event.data, TaskStarted):
                    break
    daemon.kill()
    daemon.start()
    async with connect(daemon.runtime_dir) as c:
        page = await c.replay(head, task_id=first.task_id)
        assert [e.seq for e in page.events] == [e.seq for e in seen if e.seq is not None]
        snap = await c.get_task(second.task_id)
        assert snap.state == TaskState.RESUMABLE
        created = [e for e in (await c.replay(head)).events if isinstance(e.data, TaskCreated)]
        assert len(created) == 2


async def test_a_second_daemon_on_the_same_dirs_refuses(daemon: DaemonProcess) -> None:
    other = DaemonProcess(daemon.root, env=daemon.extra_env)
    other.stderr_path = daemon.root / "second.stderr"
    with pytest.raises(AssertionError, match="already running"):
        other.start(timeout=15)
    assert other.proc is not None and other.proc.wait(10) == 2
    # The first one is untouched.
    async with connect(daemon.runtime_dir) as c:
        assert (await c.status()).pid == daemon.proc.pid  # type: ignore[union-attr]


def test_runtime_files_are_private(daemon: DaemonProcess) -> None:
    assert stat.S_IMODE(os.stat(daemon.runtime_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(daemon.runtime_dir / "hdspd.json").st_mode) == 0o600
    for name in ("control", "events"):
        assert stat.S_IMODE(os.stat(daemon.runtime_dir / name).st_mode) == 0o600


async def test_a_snapshot_taken_mid_stream_has_the_partial_text(
    client: Client, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.text("abcdefghijklmnop", chunk_size=2).hang_after(4))
    head = (await client.status()).head_seq
    ref = await client.start_task("stream and stall")
    async with client.events(ref.task_id, since_seq=head) as events:
        async for event in events:
            data = event.data
            if isinstance(data, MessageEvent) and data.payload[0].message.say == "text":
                if data.payload[0].message.partial:
                    break
    snap = await client.get_task(ref.task_id)
    assert snap.state == TaskState.RUNNING
    streaming = [m for m in snap.messages if m.say == "text" and m.partial]
    assert (
        len(streaming) == 1
        and streaming[0].text
        and "abcdefghijklmnop".startswith(streaming[0].text)
    )
    await client.cancel_task(ref.task_id)
    after = await client.get_task(ref.task_id)
    assert not any(m.partial for m in after.messages)
