"""The events socket's publisher: a journal batch goes out whole and in order, and
its direct sends never leave the subscription reader asleep (ZeroMQ's file
descriptor is edge-triggered: whatever processes the socket's pending commands
uses up the wake-up of whoever awaits a receive on it)."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import zmq
import zmq.asyncio

from hdsp.daemon.server.publishing import EventPublisher


async def test_a_batch_arrives_whole_and_in_order(tmp_path: Path) -> None:
    endpoint = f"ipc://{tmp_path / 'events'}"
    ctx = zmq.asyncio.Context()
    pub = ctx.socket(zmq.XPUB)
    sub = ctx.socket(zmq.SUB)
    try:
        pub.bind(endpoint)
        sub.connect(endpoint)
        sub.subscribe(b"")
        with anyio.fail_after(10):
            assert await pub.recv() == b"\x01"  # the subscription is in effect
            frames = [(b"task-%d" % (i % 3), b"body %d" % i) for i in range(500)]
            await EventPublisher(pub).publish_batch(frames)
            await EventPublisher(pub).publish_batch([])  # nothing to send: no error
            got = [tuple(await sub.recv_multipart()) for _ in frames]
        assert got == frames
    finally:
        sub.close(0)
        pub.close(0)
        ctx.term()


async def test_a_batch_wakes_the_subscription_reader(tmp_path: Path) -> None:
    """A subscription that arrives while no edge is left to wake the reader (here:
    a blocking poll of the socket took it in, as a direct send can) is read once
    a batch has been published: the batch ends with a send that looks at the
    socket's events. (Without the batch, this test sees the reader sleep on. A
    batch of direct sends alone left it asleep in hdspd under load, in a race
    this test does not reproduce at will.)"""
    endpoint = f"ipc://{tmp_path / 'events'}"
    ctx = zmq.asyncio.Context()
    pub = ctx.socket(zmq.XPUB)
    pub.setsockopt(zmq.XPUB_VERBOSER, 1)
    sub = ctx.socket(zmq.SUB)
    shadow: zmq.Socket[bytes] = zmq.Socket.shadow(pub.underlying)
    publisher = EventPublisher(pub)
    received: list[bytes] = []
    try:
        pub.bind(endpoint)
        sub.connect(endpoint)
        async with anyio.create_task_group() as tg:
            reader_waiting, read = anyio.Event(), anyio.Event()

            async def read_subscriptions() -> None:
                reader_waiting.set()
                received.append(await pub.recv())
                read.set()

            tg.start_soon(read_subscriptions)
            await reader_waiting.wait()
            # The reader's receive is now pending; zmq.asyncio's first look at the
            # socket runs from the loop's next rounds (it reschedules itself only
            # while there is something to read: then it stops).
            for _ in range(10):
                await anyio.lowlevel.checkpoint()
            sub.subscribe(b"task-1")
            # Without yielding to the loop: wait for the subscription on the socket
            # itself, which processes ZeroMQ's commands and so uses up the edge.
            assert shadow.poll(10_000, zmq.POLLIN) == zmq.POLLIN
            await publisher.publish_batch([(b"task-1", b"a"), (b"task-1", b"b")])
            # Woken by the batch itself: within a few rounds of the loop (zmq.asyncio
            # handles the socket's events, then the reader's task runs), not when
            # ZeroMQ happens to signal something else later.
            for _ in range(10):
                if read.is_set():
                    break
                await anyio.lowlevel.checkpoint()
            assert read.is_set(), "the subscription reader was left asleep"
        assert received == [b"\x01task-1"]
    finally:
        sub.close(0)
        pub.close(0)
        ctx.term()
