"""The far ends of the benchmarks, each in a process of its own as `hdspd` is, so
that a baseline crosses the same process boundary as hdsp does.

    python -m bench.peers echo ENDPOINT
        a raw pyzmq asyncio ROUTER that sends every frame back
    python -m bench.peers pub ENDPOINT SUBSCRIBERS
        a raw pyzmq asyncio XPUB; once SUBSCRIBERS have subscribed, each line
        `go N SIZE` on stdin publishes N messages of SIZE bytes (each a message
        event's envelope of that size, so that a subscriber decodes it as it
        decodes hdspd's)
    python -m bench.peers sub ENDPOINT TOPIC
        a subscriber that reads with `reading.BurstReader` (hdsp.client's reading
        code); prints `ready` once it has subscribed, then answers each line
        `frames N` (or `seq S`) once it has had N frames in all (or the event of
        seq S) with `got FRAMES DURABLE BYTES`
    python -m bench.peers model
        the fake OpenAI server of tests/fakes, answering each request at once with
        a line of text and an attempt_completion call; prints its URL after
        `ready`, and for each line `last` on stdin the body of the newest request
        (JSON, one line)
    python -m bench.peers hdspd DATA_DIR RUNTIME_DIR
        the real daemon (`Daemon`, as `hdspd` runs it); each line `go N SIZE` on
        stdin emits N durable message events of one task through its journal:
        persisted, then published, as a task's messages are

    python -m bench.peers replay RUNTIME_DIR
        a client (hdsp.client) that follows every task from seq 0 until the head
        seq of when it started; prints `first_ms total_s events grew_mb`: ms to
        the first event, seconds to the last, events, and how much its peak
        resident memory grew over what it was before the stream opened

Each prints `ready` once it can be used and `sent` after each `go` it finished,
and ends when its stdin is closed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import zmq
import zmq.asyncio

#: The topic of the raw publisher's messages (the length of a task id).
RAW_TOPIC = b"00000000-0000-0000-0000-000000000000"
#: The id of the task whose events the hdspd peer emits.
BENCH_TASK = "bench-fanout"


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _commands() -> list[str]:
    """The next `go N SIZE` line from stdin, split; [] at its end."""
    line = await anyio.to_thread.run_sync(sys.stdin.readline)
    return line.split()


async def echo(endpoint: str) -> None:
    ctx = zmq.asyncio.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(endpoint)

    async def serve() -> None:
        while True:
            frames = await router.recv_multipart()
            await router.send_multipart(frames)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            _say("ready")
            while await _commands():
                pass
            tg.cancel_scope.cancel()  # stdin closed: the benchmark is over
    finally:
        router.close(0)
        ctx.term()


async def pub(endpoint: str, subscribers: int) -> None:
    ctx = zmq.asyncio.Context()
    sock = ctx.socket(zmq.XPUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 100_000)  # as hdspd's events socket
    sock.setsockopt(zmq.XPUB_VERBOSE, 1)
    sock.bind(endpoint)
    seen = 0
    while seen < subscribers:
        if (await sock.recv())[:1] == b"\x01":
            seen += 1
    _say("ready")
    try:
        while words := await _commands():
            _, n, size = words
            payload = envelope_of_size(int(size))
            for _ in range(int(n)):
                await sock.send_multipart((RAW_TOPIC, payload))
            _say("sent")
    finally:
        sock.close(0)
        ctx.term()


def envelope_of_size(size: int) -> bytes:
    """The envelope of a message event, padded to about `size` bytes."""
    from hdsp.protocol import ClineMessage, MessageEvent, MessagePayload, TaskEvent, encode

    def of(text: int) -> bytes:
        msg = ClineMessage(ts=1_700_000_000_000, type="say", say="text", text="x" * text)
        event = MessageEvent(payload=(MessagePayload(BENCH_TASK, "created", msg),))
        return encode(TaskEvent(data=event, seq=123_456, prev_seq=123_455))

    return of(max(0, size - (len(of(0)))))


async def sub(endpoint: str, topic: str) -> None:
    from .reading import BurstReader

    ctx = zmq.asyncio.Context()
    sock = ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVHWM, 0)  # as many as come: a slow reader loses none
    sock.connect(endpoint)
    sock.subscribe(topic.encode())
    reader = BurstReader(sock)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader.run)
            _say("ready")
            while words := await _commands():
                what, value = words
                if what == "frames":
                    await reader.wait_frames(int(value))
                else:
                    await reader.wait_seq(int(value))
                _say(f"got {reader.frames} {reader.durable} {reader.bytes}")
            tg.cancel_scope.cancel()
    finally:
        sock.close(0)
        ctx.term()


def model() -> None:
    import itertools
    import json

    from hdsp.daemon.llm.demo import ChatExchange
    from tests.fakes.openai_server import FakeOpenAI, ToolCall
    from tests.fakes.openai_server import Reply as FakeReply

    class Instant(FakeOpenAI):
        def __init__(self) -> None:
            super().__init__()
            self._count = itertools.count()

        def _take_reply(self, exchange: ChatExchange) -> FakeReply:
            super()._take_reply(exchange)
            # Each a little different, or the loop guard would rightly refuse
            # the same call again.
            text = f"The mean of x is 4.2 (answer {next(self._count)})."
            call = ToolCall("attempt_completion", json.dumps({"result": text}))
            return FakeReply.text(text, chunk_size=64) + FakeReply.tool_calls([call], fragment=64)

    with Instant() as fake:
        _say("ready")
        _say(fake.base_url)
        for line in sys.stdin:
            if line.strip() == "last":
                _say(json.dumps(fake.received[-1].body))


async def hdspd(data_dir: Path, runtime_dir: Path) -> None:
    from hdsp.daemon.app import Daemon
    from hdsp.daemon.logs import configure_logging
    from hdsp.daemon.paths import resolve_paths
    from hdsp.protocol import ClineMessage

    from .journal_tasks import create_task, message_created, task_item

    configure_logging("info", "json")  # to stderr, as hdspd's main() does
    daemon = Daemon(resolve_paths(data_dir, runtime_dir))
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run)
        journal = daemon.journal
        await create_task(journal, task_item(BENCH_TASK, task="fan-out"))
        await journal.flush()
        # The daemon warms up on a thread once it is up (the LLM SDKs, jsonschema
        # and the tools' schemas, ...), then freezes its start-up objects: let that
        # end before measuring, or it competes for the GIL, and every collection
        # meanwhile walks the whole heap.
        await daemon.warmed.wait()
        _say("ready")
        ts = 1
        while words := await _commands():
            _, n, size = words
            text = "x" * int(size)
            for _ in range(int(n)):
                ts += 1
                msg = ClineMessage(ts=ts, type="say", say="text", text=text)
                await journal.emit(message_created(BENCH_TASK, msg))
            await journal.flush()
            _say(f"sent {journal.head_seq}")
        daemon.request_shutdown("benchmark over")


async def replay(runtime_dir: Path) -> None:
    import time

    from hdsp.client import connect

    def status_mb(field: str) -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
        return 0.0

    def rss_mb() -> float:
        return status_mb("VmRSS:")

    async with connect(runtime_dir, name="bench-replay") as client:
        client.timeout = 600
        head = (await client.status()).head_seq
        before = rss_mb()
        t0 = time.perf_counter()
        first = 0.0
        count = 0
        async with client.events(since_seq=0) as stream:
            async for event in stream:
                if not count:
                    first = time.perf_counter() - t0
                count += 1
                if event.seq is not None and event.seq >= head:
                    break
        total = time.perf_counter() - t0
    # VmHWM: this process's own peak (ru_maxrss keeps the parent's across exec).
    peak = status_mb("VmHWM:")
    _say(f"{first * 1000:.3f} {total:.6f} {count} {max(0.0, peak - before):.1f}")


def main(argv: list[str]) -> None:
    match argv:
        case ["echo", endpoint]:
            anyio.run(echo, endpoint)
        case ["pub", endpoint, subscribers]:
            anyio.run(pub, endpoint, int(subscribers))
        case ["sub", endpoint, topic]:
            anyio.run(sub, endpoint, topic)
        case ["replay", runtime_dir]:
            anyio.run(replay, Path(runtime_dir))
        case ["model"]:
            model()
        case ["hdspd", data_dir, runtime_dir]:
            anyio.run(hdspd, Path(data_dir), Path(runtime_dir))
        case _:
            sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
