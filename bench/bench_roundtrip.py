"""Command round trip, two ways.

Fair (`round trip, minimal client`): one minimal synchronous client, a plain
pyzmq DEALER that sends a prebuilt frame and blocks on the answer, is timed from
just before `send` to just after `recv` returns, against

- hdspd (the shared daemon of the run): the `TaskCommand` frame of a `Ping` and
  of a `GetStatus` (a real command: dispatched, run, its result encoded), after
  a `Connect` handshake made with the same socket;
- a raw zmq.asyncio ROUTER that echoes every frame (`peers echo`), in a process
  of its own as hdspd is, sent the very same bytes as the Ping frame (and the
  GetStatus frame).

Same client code, payload bytes, process boundary, transport (ipc) and warm-up
on both sides, alternating in rounds: the ratio is the daemon's own cost per
command over the cheapest server asyncio pyzmq allows. The client library's own
cost per call is reported apart: `Client.ping()` minus the minimal client's Ping.

Old (`command round trip`): `Ping` through the async client library against a
raw asyncio DEALER round trip of a frame of about the same size. The library's
own ~100 µs per call is on the hdsp side only, and Ping is answered before the
normal command path: kept for comparison with earlier figures.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import anyio
import msgspec
import zmq
import zmq.asyncio

from hdsp.client import connect
from hdsp.client.discovery import find_daemon
from hdsp.protocol import (
    PROTOCOL_VERSION,
    Ack,
    ClientInfo,
    Connect,
    GetStatus,
    Ping,
    TaskCommand,
    decode_server_message,
    encode,
)

from .harness import Figure, Result, latency_result
from .process import Peer

__all__ = ["run"]

#: Bytes of a Ping command frame as the client sends it (about).
PING_SIZE = 160


async def _raw_round_trips(dealer: zmq.asyncio.Socket, n: int, size: int) -> list[float]:
    payload = b"x" * size
    samples: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        await dealer.send(payload)
        await dealer.recv()
        samples.append(time.perf_counter() - t0)
    return samples


async def _hdsp_round_trips(runtime_dir: Path, n: int) -> list[float]:
    samples: list[float] = []
    async with connect(runtime_dir, name="bench") as client:
        for _ in range(n):
            t0 = time.perf_counter()
            await client.ping()
            samples.append(time.perf_counter() - t0)
    return samples


# ---- the minimal synchronous client ------------------------------------------------


def _round_trips(sock: zmq.Socket[bytes], frame: bytes, n: int) -> list[float]:
    """The minimal client: send the prebuilt frame, block on the answer."""
    samples: list[float] = []
    send, recv, clock = sock.send, sock.recv, time.perf_counter
    for _ in range(n):
        t0 = clock()
        send(frame)
        recv()
        samples.append(clock() - t0)
    return samples


def _dealer(ctx: zmq.Context[zmq.Socket[bytes]], endpoint: str) -> zmq.Socket[bytes]:
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 30_000)  # a lost answer fails the run, not hangs it
    sock.connect(endpoint)
    return sock


def _frames(sock: zmq.Socket[bytes]) -> tuple[bytes, bytes]:
    """Say Connect on `sock`; the Ping and GetStatus frames of its session."""
    info = ClientInfo(name="bench-minimal", version="0", kind="script")
    sock.send(encode(Connect(protocol_version=PROTOCOL_VERSION, client=info)))
    ack = decode_server_message(sock.recv())
    assert isinstance(ack, Ack), ack
    client_id = ack.data.client_id
    ping = encode(TaskCommand(client_id=client_id, request_id="r-1", data=Ping()))
    status = encode(TaskCommand(client_id=client_id, request_id="r-2", data=GetStatus()))
    # Each is answered, not refused: an error reply would be cheaper than the work.
    for frame in (ping, status):
        sock.send(frame)
        reply = msgspec.json.decode(sock.recv())
        assert reply.get("ok") is True, reply
    return ping, status


def _minimal(
    control: str, echo: str, n: int, warm_s: float
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    to_hdspd, to_echo = _dealer(ctx, control), _dealer(ctx, echo)
    hdsp: dict[str, list[float]] = {"ping": [], "get_status": []}
    raw: dict[str, list[float]] = {"ping": [], "get_status": []}
    try:
        ping, status = _frames(to_hdspd)
        frames = {"ping": ping, "get_status": status}
        deadline = time.perf_counter() + warm_s
        while time.perf_counter() < deadline:
            for frame in frames.values():
                _round_trips(to_hdspd, frame, 50)
                _round_trips(to_echo, frame, 50)
        for _ in range(10):  # alternate in rounds: both see the same machine
            for name, frame in frames.items():
                hdsp[name] += _round_trips(to_hdspd, frame, n // 10)
                raw[name] += _round_trips(to_echo, frame, n // 10)
    finally:
        to_hdspd.close(0)
        to_echo.close(0)
        ctx.term()
    return hdsp, raw


async def run_minimal(runtime_dir: Path, scratch: Path, *, quick: bool) -> Result:
    n = 500 if quick else 5000
    endpoint = f"ipc://{scratch / 'echo-minimal'}"
    echo = Peer([sys.executable, "-m", "bench.peers", "echo", endpoint])
    try:
        await echo.start()
        control = find_daemon(runtime_dir).control
        hdsp, raw = await anyio.to_thread.run_sync(
            _minimal, control, endpoint, n, 0.5 if quick else 2.0
        )
        library = await _hdsp_round_trips(runtime_dir, n)
    finally:
        await echo.stop()
    us = {k: [s * 1e6 for s in v] for k, v in hdsp.items()}
    base = {k: [s * 1e6 for s in v] for k, v in raw.items()}
    lib_us = [s * 1e6 for s in library]
    result = Result(
        name="round trip, minimal client",
        description=(
            "one synchronous DEALER sending prebuilt frames: hdspd Ping and GetStatus vs a "
            "raw zmq.asyncio ROUTER echo process sent the same bytes; client library "
            "overhead = Client.ping() - minimal Ping"
        ),
        hdsp={
            "ping": Figure.of(us["ping"], "µs", p99=True),
            "get_status": Figure.of(us["get_status"], "µs", p99=True),
            "client_ping": Figure.of(lib_us, "µs", p99=True),
        },
        baseline={
            "echo_ping_frame": Figure.of(base["ping"], "µs", p99=True),
            "echo_status_frame": Figure.of(base["get_status"], "µs", p99=True),
        },
    )
    med = statistics.median
    result.ratios["ping/echo"] = (med(us["ping"]) / med(base["ping"]), 1.5, "<=")
    result.ratios["get_status/echo"] = (
        med(us["get_status"]) / med(base["get_status"]),
        2.0,
        "<=",
    )
    # Reported, not a target: what the library adds to each call.
    overhead = med(lib_us) - med(us["ping"])
    result.ratios["client_library_us_per_call"] = (overhead, float("inf"), "<=")
    return result


async def run_old(runtime_dir: Path, scratch: Path, *, quick: bool) -> Result:
    n = 300 if quick else 5000
    endpoint = f"ipc://{scratch / 'echo'}"
    echo = Peer([sys.executable, "-m", "bench.peers", "echo", endpoint])
    ctx = zmq.asyncio.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    hdsp: list[float] = []
    raw: list[float] = []
    try:
        await echo.start()
        dealer.connect(endpoint)
        # Warm up for a while: a freshly started daemon imports its LLM SDKs on a
        # thread for about a second, which competes for the GIL.
        deadline = time.perf_counter() + (0.5 if quick else 2.0)
        while time.perf_counter() < deadline:
            await _hdsp_round_trips(runtime_dir, 50)
            await _raw_round_trips(dealer, 50, PING_SIZE)
        # Alternate in rounds so that both see the same machine conditions.
        for _ in range(10):
            hdsp += await _hdsp_round_trips(runtime_dir, n // 10)
            raw += await _raw_round_trips(dealer, n // 10, PING_SIZE)
    finally:
        dealer.close(0)
        ctx.term()
        await echo.stop()
    return latency_result(
        "command round trip",
        "(old) Ping via hdsp.client vs raw ROUTER/DEALER echo (ipc, asyncio, 2 processes)",
        ("ping", hdsp),
        ("raw", raw),
        target=1.5,
    )


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> list[Result]:
    return [
        await run_minimal(runtime_dir, scratch, quick=quick),
        await run_old(runtime_dir, scratch, quick=quick),
    ]
