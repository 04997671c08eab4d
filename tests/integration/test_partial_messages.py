"""No message streams for ever: one cut off by kill -9 is finished when the daemon
starts again, and a retry countdown cut off by a cancel is finished at once."""

from __future__ import annotations

import anyio

from hdsp.client import Client, connect
from hdsp.protocol import MessageEvent, Say, TaskEvent
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess


def _finished(events: list[TaskEvent], ts: int) -> bool:
    """Whether a durable event finished message `ts`."""
    return any(
        isinstance(e.data, MessageEvent)
        and e.seq is not None
        and e.data.payload[0].message.ts == ts
        and not e.data.payload[0].message.partial
        for e in events
    )


async def _events_since(client: Client, since: int, task_id: str) -> list[TaskEvent]:
    got: list[TaskEvent] = []
    while True:
        page = await client.replay(since, task_id=task_id)
        got += page.events
        if not page.more:
            return got
        since = got[-1].seq or since


async def test_a_message_streaming_at_a_kill_is_finished_on_restart(
    daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.text("cut off mid-sentence " * 200, chunk_size=5).hang_after(60))
    async with connect(daemon.runtime_dir) as c:
        head = (await c.status()).head_seq
        ref = await c.start_task("stream, then die")
        with anyio.fail_after(20):
            async with c.events(ref.task_id, since_seq=head) as events:
                async for event in events:
                    data = event.data
                    # Created partial: durable, so stored as streaming. (Under load
                    # the partial api_req_waiting notice may come first: not the
                    # reply's text, which this test is about.)
                    if (
                        isinstance(data, MessageEvent)
                        and data.payload[0].message.say == Say.TEXT
                        and data.payload[0].message.partial
                        and data.payload[0].message.say == Say.TEXT
                        and event.seq is not None
                    ):
                        break
    daemon.kill()
    daemon.start()
    async with connect(daemon.runtime_dir) as c:
        snap = await c.get_task(ref.task_id)
        assert not [m for m in snap.messages if m.partial]
        (text,) = [m for m in snap.messages if m.say == Say.TEXT and m.text != "stream, then die"]
        assert text.text and ("cut off mid-sentence " * 200).startswith(text.text)
        # Every client learns it from a durable event, not only from a snapshot.
        assert _finished(await _events_since(c, head, ref.task_id), text.ts)


async def test_a_cancelled_retry_countdown_is_finished(
    client: Client, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.status(429, retry_after=300))
    head = (await client.status()).head_seq
    ref = await client.start_task("wait a long time")
    countdown = None
    with anyio.fail_after(20):
        async with client.events(ref.task_id, since_seq=head) as events:
            async for event in events:
                data = event.data
                if isinstance(data, MessageEvent):
                    message = data.payload[0].message
                    if message.say == Say.API_REQ_RETRY_DELAYED:
                        countdown = message
                        break
    assert countdown is not None and countdown.partial
    await client.cancel_task(ref.task_id)
    snap = await client.get_task(ref.task_id)
    (stored,) = [m for m in snap.messages if m.ts == countdown.ts]
    assert not stored.partial
    assert _finished(await _events_since(client, head, ref.task_id), countdown.ts)
