"""How long a daemon takes to answer a Ping: a run of round trips timed one
after the other, and their percentiles, for the tests that check it stays
quick while something else loads the daemon."""

from __future__ import annotations

import statistics
import time

from hdsp.client import Client

__all__ = ["percentile", "ping_times"]


async def ping_times(client: Client, n: int) -> list[float]:
    """`n` Pings one after the other; each one's round trip, in seconds."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        await client.ping()
        times.append(time.perf_counter() - t)
    return times


def percentile(times: list[float], q: int) -> float:
    """The `q`th percentile (1 to 99) of `times`."""
    return statistics.quantiles(times, n=100)[q - 1]
