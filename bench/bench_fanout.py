"""Event fan-out: durable events per second through hdspd to 4 subscribed clients,
against raw pyzmq asyncio PUB/SUB with payloads of the same size.

hdsp: a real daemon in its own process emits a burst of a task's message events
through its journal (each one persisted with its history row, then published);
four `hdsp.client` clients follow the task with `Client.events()`, which decodes,
orders and checks every event. The rate is events per second per client, from the
moment the burst is asked for until the last client has the last event.

Baseline: a raw XPUB in its own process sends the same number of frames of the
same size as hdsp's event envelopes to four SUB sockets, timed the same way.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path

import anyio
import zmq
import zmq.asyncio

from hdsp.client import EventStream, connect
from hdsp.protocol import (
    ClineMessage,
    MessageEvent,
    MessagePayload,
    TaskEvent,
    encode,
)
from tests.support.daemon_process import DaemonProcess, short_tmp_dir

from .harness import Figure, Result
from .peers import BENCH_TASK, RAW_TOPIC
from .process import Peer

__all__ = ["run"]

CLIENTS = 4
TEXT_SIZE = 200


def envelope_size(text_size: int) -> int:
    """Bytes of one published message event with `text_size` characters of text."""
    msg = ClineMessage(ts=1_700_000_000_000, type="say", say="text", text="x" * text_size)
    event = MessageEvent(payload=(MessagePayload(BENCH_TASK, "created", msg),))
    return len(encode(TaskEvent(data=event, seq=123_456, prev_seq=123_455)))


async def _consume(stream: EventStream, n: int) -> None:
    seen = 0
    async for event in stream:
        if isinstance(event.data, MessageEvent):
            seen += 1
            if seen == n:
                return


async def _bursts(
    peer: Peer, consumers: list[Callable[[], Awaitable[None]]], n: int, size: int, rounds: int
) -> list[float]:
    """Deliveries per second to each consumer over `rounds` bursts of `n` events
    of `size`, each timed from asking the peer for it until every consumer has
    had all of it; a first burst warms up and is not counted."""
    rates: list[float] = []
    for _ in range(rounds + 1):
        async with anyio.create_task_group() as tg:
            for consume in consumers:
                tg.start_soon(consume)
            t0 = time.perf_counter()
            await peer.send(f"go {n} {size}")
        elapsed = time.perf_counter() - t0
        await peer.expect("sent")
        rates.append(n / elapsed)
    return rates[1:]


async def _hdsp_rates(n: int, rounds: int) -> list[float]:
    root = short_tmp_dir()
    proc = DaemonProcess(root)  # for its directories and environment
    peer = Peer(
        [sys.executable, "-m", "bench.peers", "hdspd", str(proc.data_dir), str(proc.runtime_dir)],
        env=proc.env,
    )
    rates: list[float] = []
    try:
        await peer.start()
        async with AsyncExitStack() as stack:
            streams = []
            for i in range(CLIENTS):
                client = await stack.enter_async_context(
                    connect(proc.runtime_dir, name=f"fanout-{i}")
                )
                streams.append(await stack.enter_async_context(client.events(BENCH_TASK)))
            consumers = [partial(_consume, stream, n) for stream in streams]
            rates = await _bursts(peer, consumers, n, TEXT_SIZE, rounds)
    finally:
        await peer.stop()
        proc.cleanup()
    return rates


async def _raw_rates(n: int, rounds: int, size: int) -> list[float]:
    root = short_tmp_dir()
    endpoint = f"ipc://{root / 'pub'}"
    peer = Peer([sys.executable, "-m", "bench.peers", "pub", endpoint, str(CLIENTS)])
    ctx = zmq.asyncio.Context()
    subs = [ctx.socket(zmq.SUB) for _ in range(CLIENTS)]
    rates: list[float] = []

    async def consume(sock: zmq.asyncio.Socket) -> None:
        for _ in range(n):
            await sock.recv_multipart()

    try:
        await peer.launch()
        for sock in subs:
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(endpoint)
            sock.subscribe(RAW_TOPIC)
        await peer.expect("ready")
        rates = await _bursts(peer, [partial(consume, sock) for sock in subs], n, size, rounds)
    finally:
        await peer.stop()
        for sock in subs:
            sock.close(0)
        ctx.term()
        DaemonProcess(root).cleanup()
    return rates


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> Result:
    n = 2_000 if quick else 20_000
    rounds = 2 if quick else 5
    size = envelope_size(TEXT_SIZE)
    # Alternate: a round of each, so that both see the same machine.
    hdsp: list[float] = []
    raw: list[float] = []
    for _ in range(2 if quick else 3):
        hdsp += await _hdsp_rates(n, rounds)
        raw += await _raw_rates(n, rounds, size)
    result = Result(
        name="event fan-out",
        description=f"durable events/s to each of {CLIENTS} clients ({size} B) vs raw PUB/SUB",
        hdsp={"events_per_s": Figure.of(hdsp, "ev/s")},
        baseline={"raw_pubsub": Figure.of(raw, "msg/s")},
    )
    result.ratios["hdsp/raw"] = (statistics.median(hdsp) / statistics.median(raw), 0.5, ">=")
    return result
