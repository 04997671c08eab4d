"""Event fan-out: durable events per second through hdspd to 4 subscribers,
against raw pyzmq asyncio PUB/SUB with payloads of the same size.

Fair variants (the same reading code on both sides, `reading.BurstReader`:
hdsp.client's burst reading, every event decoded):

- `fan-out, same reading code, subscribers in one process` / `... in separate
  processes`: hdspd's journal (a real `Daemon` in its own process, `peers
  hdspd`) emits bursts of one task's message events, each persisted with its
  history row then published; 4 raw SUB sockets on its events endpoint read
  them. Baseline: a raw XPUB process sends as many envelopes of the same size.
  Timed from asking the publisher for the burst until every subscriber has its
  last event (by seq for hdspd, by count for the raw one); first burst warms up.
- `fan-out from real task turns`: the events come from agent turns (tasks
  against the zero-latency fake model of bench_scale), not from a loop inside the
  daemon; 4 subscriber processes follow every topic. Timed from the first
  StartNewTask until every subscriber has the last durable event. Baseline: as
  many raw frames of the events' mean size, same subscribers. Counted alike:
  the subscribers read every frame a turn publishes, durable events and
  live-only partial updates, as the raw side reads every frame; so the ratio
  is frames/s against frames/s (`frames/raw`). Durable events/s against raw
  frames/s (`durable/raw`, the earlier figure) counts on one side only part of
  what was read. Either way the hdsp side is capped by how fast turns make
  events (each turn a model request, a tool call, the history), the raw side by
  nothing but the sockets: `producer_frames_per_s` reports the rate the turns
  published at, to tell a fan-out that cannot keep up (delivered < produced)
  from turns that make few events.

Old (`event fan-out`, kept for comparison with earlier figures; not like for
like): hdsp: a real daemon in its own process emits a burst of a task's message events
through its journal (each one persisted with its history row, then published);
four `hdsp.client` clients follow the task with `Client.events()`, which decodes,
orders and checks every event. The rate is events per second per client, from the
moment the burst is asked for until the last client has the last event.

Baseline: a raw XPUB in its own process sends the same number of frames of the
same size as hdsp's event envelopes to four SUB sockets, timed the same way, read
one awaited frame at a time (where the client reads bursts): that caps it.
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
from anyio.abc import TaskGroup

from hdsp.client import EventStream, connect
from hdsp.client.discovery import find_daemon
from hdsp.protocol import (
    ClineMessage,
    MessageEvent,
    MessagePayload,
    TaskEvent,
    encode,
)
from tests.support.daemon_process import DaemonProcess, model_env, short_tmp_dir

from .harness import Figure, Result
from .peers import BENCH_TASK, RAW_TOPIC
from .process import Peer
from .reading import BurstReader

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
        if not (await peer.line()).startswith("sent"):
            raise RuntimeError("the publisher did not finish its burst")
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


async def run_old(*, quick: bool) -> Result:
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
        description=f"(old) durable events/s to each of {CLIENTS} clients ({size} B) vs raw PUB/SUB",
        hdsp={"events_per_s": Figure.of(hdsp, "ev/s")},
        baseline={"raw_pubsub": Figure.of(raw, "msg/s")},
    )
    result.ratios["hdsp/raw"] = (statistics.median(hdsp) / statistics.median(raw), 0.5, ">=")
    return result


# ---- fair variants: the same reading code on both sides ------------------------------


class _Subscribers:
    """CLIENTS subscribers that read with `BurstReader`: in this process (SUB
    sockets in one task group) or each in a process of its own (`peers sub`)."""

    def __init__(self, endpoint: str, topic: str, *, processes: bool) -> None:
        self.endpoint, self.topic, self.processes = endpoint, topic, processes
        self._peers: list[Peer] = []
        self._readers: list[BurstReader] = []
        self._ctx: zmq.asyncio.Context | None = None
        self._socks: list[zmq.asyncio.Socket] = []

    async def start(self, tg: TaskGroup) -> None:
        if self.processes:
            for _ in range(CLIENTS):
                peer = Peer([sys.executable, "-m", "bench.peers", "sub", self.endpoint, self.topic])
                self._peers.append(peer)
            for peer in self._peers:
                await peer.start()
            return
        self._ctx = zmq.asyncio.Context()
        for _ in range(CLIENTS):
            sock = self._ctx.socket(zmq.SUB)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RCVHWM, 0)
            sock.connect(self.endpoint)
            sock.subscribe(self.topic.encode())
            self._socks.append(sock)
            reader = BurstReader(sock)
            self._readers.append(reader)
            tg.start_soon(reader.run)

    async def wait(self, what: str, value: int) -> list[tuple[int, int, int]]:
        """Until every subscriber has had `value` frames (`what` "frames") or the
        event of seq `value` ("seq"): each one's (frames, durable, bytes)."""
        got: list[tuple[int, int, int]] = []
        if self.processes:

            async def one(peer: Peer) -> None:
                await peer.send(f"{what} {value}")
                words = (await peer.line()).split()
                got.append((int(words[1]), int(words[2]), int(words[3])))

            async with anyio.create_task_group() as tg:
                for peer in self._peers:
                    tg.start_soon(one, peer)
            return got
        for reader in self._readers:
            with anyio.fail_after(120):
                if what == "frames":
                    await reader.wait_frames(value)
                else:
                    await reader.wait_seq(value)
            got.append((reader.frames, reader.durable, reader.bytes))
        return got

    async def aclose(self) -> None:
        for peer in self._peers:
            await peer.stop()
        for sock in self._socks:
            sock.close(0)
        if self._ctx is not None:
            self._ctx.term()


async def _subscribed(peer: Peer, subs: _Subscribers) -> None:
    """Until every subscriber has an event of the hdspd peer's (a SUB's
    subscription takes effect some time after it is made): a one-event burst
    every 20 ms meanwhile."""
    head = 0
    while True:
        await peer.send("go 1 10")
        head = int((await peer.line()).split()[1])
        with anyio.move_on_after(0.02):
            await subs.wait("seq", head)
            return


async def _fair_hdsp(n: int, rounds: int, *, processes: bool) -> list[float]:
    """hdspd's journal emitting a burst of one task's message events, read by
    CLIENTS raw SUB sockets on its events endpoint with the shared reading code;
    timed from asking for the burst until every subscriber has its last event."""
    root = short_tmp_dir()
    proc = DaemonProcess(root)
    peer = Peer(
        [sys.executable, "-m", "bench.peers", "hdspd", str(proc.data_dir), str(proc.runtime_dir)],
        env=proc.env,
    )
    rates: list[float] = []
    subs: _Subscribers | None = None
    try:
        await peer.start()
        endpoint = find_daemon(proc.runtime_dir).events
        async with anyio.create_task_group() as tg:
            subs = _Subscribers(endpoint, BENCH_TASK, processes=processes)
            await subs.start(tg)
            await _subscribed(peer, subs)
            for _ in range(rounds + 1):  # the first warms up
                t0 = time.perf_counter()
                await peer.send(f"go {n} {TEXT_SIZE}")
                head = int((await peer.line()).split()[1])
                await subs.wait("seq", head)
                rates.append(n / (time.perf_counter() - t0))
            tg.cancel_scope.cancel()
    finally:
        if subs is not None:
            await subs.aclose()
        await peer.stop()
        proc.cleanup()
    return rates[1:]


async def _fair_raw(n: int, rounds: int, size: int, *, processes: bool) -> list[float]:
    """A raw asyncio XPUB (own process) sending bursts of `n` event envelopes of
    `size` bytes to CLIENTS subscribers reading with the shared code."""
    root = short_tmp_dir()
    endpoint = f"ipc://{root / 'pub'}"
    peer = Peer([sys.executable, "-m", "bench.peers", "pub", endpoint, str(CLIENTS)])
    rates: list[float] = []
    subs = _Subscribers(endpoint, RAW_TOPIC.decode(), processes=processes)
    try:
        await peer.launch()
        async with anyio.create_task_group() as tg:
            await subs.start(tg)
            await peer.expect("ready")
            total = 0
            for _ in range(rounds + 1):
                total += n
                t0 = time.perf_counter()
                await peer.send(f"go {n} {size}")
                await subs.wait("frames", total)
                rates.append(n / (time.perf_counter() - t0))
                await peer.expect("sent")
            tg.cancel_scope.cancel()
    finally:
        await subs.aclose()
        await peer.stop()
        DaemonProcess(root).cleanup()
    return rates[1:]


async def run_fair(*, quick: bool, processes: bool) -> Result:
    n = 2_000 if quick else 20_000
    rounds = 2 if quick else 5
    size = envelope_size(TEXT_SIZE)
    hdsp: list[float] = []
    raw: list[float] = []
    for _ in range(1 if quick else 3):  # alternate, so that both see the same machine
        hdsp += await _fair_hdsp(n, rounds, processes=processes)
        raw += await _fair_raw(n, rounds, size, processes=processes)
    where = "in separate processes" if processes else "in one process"
    result = Result(
        name=f"fan-out, same reading code, subscribers {where}",
        description=(
            f"durable events/s of one task's burst through hdspd's journal to {CLIENTS} SUB "
            f"sockets {where}, vs a raw XPUB process sending as many {size} B envelopes; "
            "both read with hdsp.client's burst reading and decode every event"
        ),
        hdsp={"events_per_s": Figure.of(hdsp, "ev/s")},
        baseline={"raw_pubsub": Figure.of(raw, "msg/s")},
    )
    result.ratios["hdsp/raw"] = (statistics.median(hdsp) / statistics.median(raw), 0.4, ">=")
    return result


# ---- fair: events from real task turns ----------------------------------------------


async def _turn_events(tasks: int, turns_each: int) -> tuple[float, float, int, int, int]:
    """Tasks driven by a zero-latency fake model (`bench_scale._FakeModel`): start
    `tasks` at once, then send each `turns_each - 1` more messages, one turn of
    each task at a time, all tasks concurrently; CLIENTS subscribers (own processes)
    follow every topic. Timed from the first StartNewTask until every subscriber
    has the last durable event. Returns (seconds, seconds until the last turn
    ended as the driving client saw it, durable events, frames, bytes) as the
    first subscriber saw them."""
    from .bench_scale import _APPROVALS, _MODEL, _FakeModel, _Turns

    async with _FakeModel() as fake:
        daemon = DaemonProcess(short_tmp_dir(), env=model_env(fake.base_url, _MODEL))
        subs: _Subscribers | None = None
        try:
            await anyio.to_thread.run_sync(daemon.start)
            async with connect(daemon.runtime_dir, name="bench-fanout-turns") as client:
                client.timeout = 300
                endpoint = find_daemon(daemon.runtime_dir).events
                async with anyio.create_task_group() as tg:
                    subs = _Subscribers(endpoint, "", processes=True)
                    await subs.start(tg)
                    turns = _Turns()
                    tg.start_soon(turns.follow, client, (await client.status()).head_seq)
                    # Warm up: one task's turn (imports, the HTTP client), until every
                    # subscriber has its events.
                    ref = await client.start_task("warm up", approvals=_APPROVALS)
                    await turns.wait_until(lambda: ref.task_id in turns.ended)
                    head = (await client.status()).head_seq
                    before = await subs.wait("seq", head)

                    async def task(i: int) -> None:
                        r = await client.start_task(f"Task {i}: mean of x?", approvals=_APPROVALS)
                        await turns.wait_until(lambda: r.task_id in turns.ended)
                        for _ in range(turns_each - 1):
                            turns.ended.pop(r.task_id, None)
                            await client.send_message(r.task_id, "And the median?")
                            await turns.wait_until(lambda: r.task_id in turns.ended)

                    t0 = time.perf_counter()
                    async with anyio.create_task_group() as work:
                        for i in range(tasks):
                            work.start_soon(task, i)
                    produced = time.perf_counter() - t0
                    head = (await client.status()).head_seq
                    after = await subs.wait("seq", head)
                    elapsed = time.perf_counter() - t0
                    tg.cancel_scope.cancel()
        finally:
            if subs is not None:
                await subs.aclose()
            if daemon.proc is not None and daemon.proc.poll() is None:
                await anyio.to_thread.run_sync(daemon.stop)
            daemon.cleanup()
    first, base = after[0], min(before)
    return elapsed, produced, first[1] - base[1], first[0] - base[0], first[2] - base[2]


async def run_turns(*, quick: bool) -> Result:
    tasks, turns_each = (4, 3) if quick else (8, 10)
    elapsed, produced, durable, frames, size = await _turn_events(tasks, turns_each)
    mean_size = max(1, size // max(1, frames))
    # The baseline: as many frames of the mean size, raw, to subscribers in
    # processes with the same reading code.
    raw = await _fair_raw(max(frames, 100), 2 if quick else 5, mean_size, processes=True)
    rate = durable / elapsed
    result = Result(
        name="fan-out from real task turns",
        description=(
            f"{tasks} tasks x {turns_each} turns against a zero-latency fake model, {CLIENTS} "
            "subscribers in processes of their own (same reading code): durable events/s "
            f"delivered to each, vs raw PUB/SUB of as many frames of the mean size ({mean_size} B)"
        ),
        hdsp={
            "durable_events_per_s": Figure.of([rate], "ev/s"),
            "frames_per_s": Figure.of([frames / elapsed], "frames/s"),
            "producer_frames_per_s": Figure.of([frames / produced], "frames/s"),
        },
        baseline={"raw_pubsub": Figure.of(raw, "msg/s")},
    )
    # Like for like: every frame read, on both sides (see the module doc).
    result.ratios["frames/raw"] = (frames / elapsed / statistics.median(raw), 0.4, ">=")
    result.ratios["durable/raw"] = (rate / statistics.median(raw), 0.4, ">=")
    # Whether the fan-out keeps up with what the turns make: frames delivered to
    # every subscriber per second over frames published per second (1: no lag).
    result.ratios["delivered/produced"] = (produced / elapsed, 0.9, ">=")
    return result


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> list[Result]:
    return [
        await run_fair(quick=quick, processes=False),
        await run_fair(quick=quick, processes=True),
        await run_turns(quick=quick),
        await run_old(quick=quick),
    ]
