"""Durable multi-client streams and crash recovery, against the real daemon:
replay, reconnect, kill -9 under load, slow subscribers, cursor expiry, and
resuming interrupted turns; each with the store on SQLite, then on PostgreSQL."""

from __future__ import annotations

import random

import anyio
import anyio.lowlevel
import pytest

from hdsp.client import Client, CursorExpired, EventStream, connect
from hdsp.protocol import (
    Ask,
    MessageEvent,
    Say,
    TaskCompleted,
    TaskEvent,
    TaskState,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn, texts

pytestmark = pytest.mark.parametrize("store_backend", ["sqlite", "postgresql"])


def _durable(events: list[TaskEvent]) -> list[int]:
    return [e.seq for e in events if e.seq is not None]


async def _log(client: Client, since: int = 0, task_id: str | None = None) -> list[int]:
    seqs: list[int] = []
    while True:
        page = await client.replay(since, task_id=task_id)
        seqs += [e.seq for e in page.events if e.seq is not None]
        if not page.more:
            return seqs
        since = seqs[-1]


async def test_a_stream_survives_a_daemon_restart(
    daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.text("before"), FakeReply.text("after"))
    async with connect(daemon.runtime_dir) as c, connect(daemon.runtime_dir) as watcher:
        got: list[TaskEvent] = []
        async with watcher.events(None, since_seq=0) as stream:
            ref = await c.start_task("one")

            async def read_until_completed(count: int) -> None:
                done = 0
                async for event in stream:
                    got.append(event)
                    if isinstance(event.data, TaskCompleted):
                        done += 1
                        if done == count:
                            return

            with anyio.fail_after(20):
                await read_until_completed(1)
            assert daemon.stop() == 0
            daemon.start()
            # The client reconnects by itself; a command waits until it has.
            with anyio.fail_after(20):
                await c.ping()
                await c.send_message(ref.task_id, "two")
                await read_until_completed(1)
        assert c.reconnects == 1 and watcher.reconnects == 1
        assert stream.resyncs >= 1
        seqs = _durable(got)
        assert seqs == await _log(watcher)
        assert texts(got) == ["one", "before", "after"]


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_kill_9_under_streaming_load_loses_and_repeats_nothing(
    daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    """Four clients follow every event while tasks stream; the daemon is killed
    with SIGKILL at random moments and restarted. Every client's durable events
    must equal the log: nothing missing, nothing twice, in order."""
    rng = random.Random(1234)
    fake_openai.default = FakeReply.text("lorem ipsum dolor sit amet " * 40, chunk_size=3)
    clients, rounds = 4, 4
    received: list[list[TaskEvent]] = [[] for _ in range(clients)]
    streams: list[EventStream] = []
    progress = anyio.Event()  # set whenever client 0 receives something
    completed: set[str] = set()  # the tasks client 0 saw complete
    target = [-1]
    caught_up = [anyio.Event() for _ in range(clients)]
    ended_first = 0  # rounds whose tasks were done before the share drawn

    async def follow(i: int, ready: anyio.Event) -> None:
        nonlocal progress
        async with connect(daemon.runtime_dir) as c, c.events(None, since_seq=0) as s:
            streams.append(s)
            ready.set()
            async for event in s:
                received[i].append(event)
                if i == 0:
                    if isinstance(event.data, TaskCompleted):
                        completed.add(event.data.payload[0])
                    progress.set()
                if target[0] >= 0 and (event.seq or 0) >= target[0]:
                    caught_up[i].set()

    async with connect(daemon.runtime_dir) as driver, anyio.create_task_group() as tg:
        for i in range(clients):
            ready = anyio.Event()
            tg.start_soon(follow, i, ready)
            await ready.wait()
        for _ in range(rounds):
            started = {(await driver.start_task(f"stream {n}")).task_id for n in range(3)}
            # Let a random share of the streaming happen, then kill; or kill once
            # the round is over, if it ends first: by the time the last StartNewTask
            # is answered, the first tasks may be done, and what is left of the
            # round can be fewer events than the share drawn.
            wanted = len(received[0]) + rng.randint(1, 15)
            try:
                with anyio.fail_after(30):
                    while len(received[0]) < wanted and not started <= completed:
                        progress = anyio.Event()
                        await progress.wait()
            except TimeoutError:
                raise AssertionError(
                    f"no progress for 30 s: client 0 saw {len(received[0])} events, "
                    f"waited for {wanted} or the end of {len(started - completed)} task(s); "
                    f"the model got {len(fake_openai.requests)} requests"
                ) from None
            ended_first += len(received[0]) < wanted
            daemon.kill()
            daemon.start()
            with anyio.fail_after(20):
                await driver.ping()
        # Every follower must reach the log's head (the last event is ours).
        ref = await driver.start_task("last one")
        await collect_turn(driver, ref.task_id, 0)
        target[0] = (await driver.status()).head_seq
        with anyio.fail_after(60):
            for i, event in enumerate(caught_up):
                # Not the last event's seq: a live-only update (no seq) may have
                # come after the head, and the head before the target was known.
                if max(_durable(received[i]), default=0) >= target[0]:
                    continue
                await event.wait()
        log = await _log(driver)
        tg.cancel_scope.cancel()
    checked = 0
    for events in received:
        seqs = [s for s in _durable(events) if s <= target[0]]
        assert seqs == [s for s in log if s <= target[0]]
        checked += len(seqs)
    gaps = sum(s.gaps for s in streams)
    resyncs = sum(s.resyncs for s in streams)
    print(
        f"kill -9 test: {checked} durable events checked over {rounds} kills, "
        f"{gaps} gaps repaired, {resyncs} catch-ups, 0 missing, 0 duplicated; "
        f"{ended_first} round(s) over before the kill"
    )


async def test_a_slow_subscriber_catches_up_from_the_log(
    client: Client, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.text("x" * 3000, chunk_size=1))
    head = (await client.status()).head_seq
    async with client.events(None, since_seq=head, buffer=3) as slow:
        ref = await client.start_task("flood")
        # Do not read while the task streams: the stream's buffer overflows.
        await collect_turn(client, ref.task_id, head)
        got: list[TaskEvent] = []
        with anyio.fail_after(20):
            async for event in slow:
                got.append(event)
                if isinstance(event.data, TaskCompleted):
                    break
    assert slow.dropped > 0 and slow.resyncs > 0
    assert _durable(got) == await _log(client, head)


async def test_clients_that_come_and_go_see_everything(
    daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    rng = random.Random(7)
    fake_openai.script(FakeReply.text("y " * 400, chunk_size=2))
    async with connect(daemon.runtime_dir) as driver:
        head = (await driver.status()).head_seq
        ref = await driver.start_task("long stream")
        seen: list[TaskEvent] = []
        cursor = head
        done = False
        while not done:
            # Attach, read a few events, leave; the next client resumes at the cursor.
            async with (
                connect(daemon.runtime_dir) as c,
                c.events(ref.task_id, since_seq=cursor) as events,
            ):
                quota = rng.randint(1, 15)
                async for event in events:
                    seen.append(event)
                    if event.seq is not None:
                        cursor = event.seq
                        quota -= 1
                    if isinstance(event.data, TaskCompleted):
                        done = True
                    if done or quota == 0:
                        break
        assert _durable(seen) == await _log(driver, head, ref.task_id)


async def test_an_expired_cursor_says_so_and_a_snapshot_continues(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    daemon_process.start()
    async with connect(daemon_process.runtime_dir) as c:
        ref = await c.start_task("make some events")
        await collect_turn(c, ref.task_id, 0)
        before = await c.get_task(ref.task_id)
    daemon_process.stop()
    daemon_process.start("--event-retention-count", "3")
    async with connect(daemon_process.runtime_dir) as c:
        with pytest.raises(CursorExpired) as expired:
            await c.replay(0)
        oldest = expired.value.oldest_seq
        assert oldest > 1
        # It says what a prune keeps, and when it runs (this start pruned).
        message = expired.value.message
        assert f"Events up to seq {oldest - 1} were pruned" in message, message
        assert "keeps the newest 3 events and none older than 30 days" in message, message
        assert "pruned at each start of hdspd" in message, message
        assert "task histories are never pruned" in message, message
        assert "Take a snapshot (GetTask or ListTasks)" in message, message
        snap = await c.get_task(ref.task_id)
        # Task histories are never pruned.
        assert snap.messages == before.messages
        fake_openai.script(FakeReply.text("continued"))
        async with c.events(ref.task_id, since_seq=snap.head_seq) as events:
            await c.send_message(ref.task_id, "go on")
            async for event in events:
                if isinstance(event.data, TaskCompleted):
                    break
        final = await c.get_task(ref.task_id)
        assert [m.text for m in final.messages if m.say == "text"][-1] == "continued"


async def test_resume_after_kill_during_a_model_stream(
    daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.text("never finished " * 50).hang_after(5))
    async with connect(daemon.runtime_dir) as c:
        head = (await c.status()).head_seq
        ref = await c.start_task("stream then die")
        async with c.events(ref.task_id, since_seq=head) as events:
            async for event in events:
                data = event.data
                message = data.payload[0].message if isinstance(data, MessageEvent) else None
                if message is not None and message.partial and message.say == Say.TEXT:
                    # The model is streaming its answer (under load, the partial
                    # api_req_waiting notice may come first: the request is not
                    # answered yet, and that is not the case tested here).
                    break
    daemon.kill()
    fake_openai.script(FakeReply.text("done after resume"))
    daemon.start()
    async with connect(daemon.runtime_dir) as c:
        snap = await c.get_task(ref.task_id)
        assert snap.state == TaskState.RESUMABLE
        assert snap.pending_ask is not None and snap.pending_ask.ask == Ask.RESUME_TASK
        head = snap.head_seq
        await c.resume_task(ref.task_id)
        events = await collect_turn(c, ref.task_id, head, until=(TaskCompleted,))
        assert texts(events)[-1] == "done after resume"
        # The request in flight was made again with the same conversation.
        assert fake_openai.requests[-1]["messages"][1:] == fake_openai.requests[-2]["messages"][1:]


async def test_a_waiting_ask_keeps_waiting_across_a_kill(
    daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.status(401))
    async with connect(daemon.runtime_dir) as c:
        head = (await c.status()).head_seq
        ref = await c.start_task("needs a key")
        await collect_turn(c, ref.task_id, head)
        ask = (await c.get_task(ref.task_id)).pending_ask
        assert ask is not None and ask.ask == Ask.API_REQ_FAILED
    daemon.kill()
    daemon.start()
    fake_openai.script(FakeReply.text("worked on retry"))
    async with connect(daemon.runtime_dir) as c:
        snap = await c.get_task(ref.task_id)
        assert snap.pending_ask is not None and snap.pending_ask.ts == ask.ts
        assert snap.state == TaskState.IDLE
        head = snap.head_seq
        await c.respond_to_ask(ref.task_id, ask.ts, "yesButtonClicked")
        events = await collect_turn(c, ref.task_id, head, until=(TaskCompleted,))
        assert texts(events)[-1] == "worked on retry"


async def test_a_completed_task_resumed_asks_resume_completed_task(
    client: Client, fake_openai: FakeOpenAI
) -> None:
    head = (await client.status()).head_seq
    ref = await client.start_task("quick")
    await collect_turn(client, ref.task_id, head)
    await client.resume_task(ref.task_id)
    snap = await client.get_task(ref.task_id)
    assert snap.pending_ask is not None and snap.pending_ask.ask == Ask.RESUME_COMPLETED_TASK
    fake_openai.script(FakeReply.text("more work"))
    head = snap.head_seq
    await client.send_message(ref.task_id, "one more thing")
    events = await collect_turn(client, ref.task_id, head, until=(TaskCompleted,))
    assert texts(events)[-1] == "more work"
