"""Command round trip: `Ping` through the client library and the daemon, against a
raw pyzmq asyncio ROUTER/DEALER round trip of a frame of the same size.

The raw ROUTER echoes from a process of its own (`peers echo`), as hdspd answers
from its own: both round trips cross the same process boundary and wake-ups."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import zmq
import zmq.asyncio

from hdsp.client import connect

from .harness import Result, latency_result
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


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> Result:
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
        "Ping via hdsp.client vs raw ROUTER/DEALER echo (ipc, asyncio, 2 processes)",
        ("ping", hdsp),
        ("raw", raw),
        target=1.5,
    )
