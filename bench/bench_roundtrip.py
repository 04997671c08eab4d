"""Command round trip: `Ping` through the client library and the daemon, against a
raw pyzmq asyncio ROUTER/DEALER round trip of a frame of the same size."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import zmq
import zmq.asyncio

from hdsp.client import connect

from .harness import Figure, Result, percentile

__all__ = ["run"]


async def _raw_round_trips(root: Path, n: int, size: int) -> list[float]:
    ctx = zmq.asyncio.Context()
    router = ctx.socket(zmq.ROUTER)
    dealer = ctx.socket(zmq.DEALER)
    endpoint = f"ipc://{root / 'raw'}"
    router.bind(endpoint)
    dealer.connect(endpoint)
    payload = b"x" * size
    samples: list[float] = []

    async def echo() -> None:
        while True:
            ident, body = await router.recv_multipart()
            await router.send_multipart([ident, body])

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(echo)
            for _ in range(n):
                t0 = time.perf_counter()
                await dealer.send(payload)
                await dealer.recv()
                samples.append(time.perf_counter() - t0)
            tg.cancel_scope.cancel()
    finally:
        router.close(0)
        dealer.close(0)
        ctx.term()
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
    warm = 50 if quick else 500
    await _hdsp_round_trips(runtime_dir, warm)
    await _raw_round_trips(scratch, warm, 160)
    hdsp: list[float] = []
    raw: list[float] = []
    # Alternate in rounds so that both see the same machine conditions.
    for _ in range(5):
        hdsp += await _hdsp_round_trips(runtime_dir, n // 5)
        raw += await _raw_round_trips(scratch, n // 5, 160)
    us = [s * 1e6 for s in hdsp]
    raw_us = [s * 1e6 for s in raw]
    result = Result(
        name="command round trip",
        description="Ping via hdsp.client vs raw ROUTER/DEALER echo (ipc, asyncio)",
        hdsp={"ping": Figure.of(us, "µs", p99=True)},
        baseline={"raw": Figure.of(raw_us, "µs", p99=True)},
    )
    result.ratios["p50"] = (percentile(us, 50) / percentile(raw_us, 50), 1.5, "<=")
    result.ratios["p99"] = (percentile(us, 99) / percentile(raw_us, 99), 1.5, "<=")
    return result
