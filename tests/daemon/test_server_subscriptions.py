"""The events socket takes only bounded subscriptions: a flood of long ones, of
many, or of churn leaves the daemon's memory and Ping latency where they were,
and a client that goes away costs no stall. The attacker is a process of its own
(the limits are per peer process); the well-behaved client is hdsp.client."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hdsp.client import Client, connect, find_daemon
from tests.daemon_process import DaemonProcess
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.integration.events_util import collect_turn, texts

from .raw_peer import daemon_rss_kib

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow, pytest.mark.usefixtures("frozen_heap")]

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def flood(daemon: DaemonProcess, size: int, count: int, *mode: str) -> Iterator[None]:
    """A subscriber process that sends its subscriptions, then stays connected."""
    endpoint = find_daemon(daemon.runtime_dir).events
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.daemon.subscription_flood",
            endpoint,
            str(size),
            str(count),
            *mode,
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"sent\n"
        yield
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        proc.stdout.close()
        proc.wait(10)


async def ping_times(client: Client, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        await client.ping()
        times.append(time.perf_counter() - t)
    return times


def p99(times: list[float]) -> float:
    return statistics.quantiles(times, n=100)[98]


#: The longest a single Ping may take while a flood goes on. Before the bounds, a
#: flood stalled Pings for 4 s and more (for minutes under churn); what is left is
#: the scheduler of a loaded 2-core machine, which the floods' own process loads.
MAX_STALL = 2.5


#: The first burst of a flood (4,096 subscriptions before the rate budget bites)
#: can hold one Ping up to about half a second on this 2-core machine; the p99
#: comparison is of the steady state after it, the stall bound (MAX_STALL) of all.
BURST_SECONDS = 1.0


async def steady_ping_times(client: Client, n: int) -> tuple[list[float], list[float]]:
    """`n` Ping times, all of them and those that began after BURST_SECONDS."""
    start = time.perf_counter()
    every, steady = [], []
    while len(steady) < n:
        t = time.perf_counter()
        await client.ping()
        every.append(time.perf_counter() - t)
        if t - start >= BURST_SECONDS:
            steady.append(every[-1])
    return every, steady


def within_5x(during: list[float], quiet: list[float]) -> bool:
    """Ping p99 during a flood within 5x of the quiet p99 (floor 20 ms: below
    that, one preemption of a busy machine decides)."""
    return p99(during) <= max(5 * p99(quiet), 0.02)


@pytest.mark.parametrize(("size", "count"), [(4096, 8000), (200, 20_000), (40, 100_000)])
async def test_a_subscription_flood_leaves_memory_and_ping_bounded(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, size: int, count: int
) -> None:
    # Warm up: a first turn loads the model SDK, whose memory is no flood's.
    reply = "streamed through the flood " * 40
    for _ in range(3):
        fake_openai.script(FakeReply.text(reply, chunk_size=3))
        head = (await client.status()).head_seq
        ref = await client.start_task("warm up")
        await collect_turn(client, ref.task_id, head)
    await ping_times(client, 200)
    quiet = await ping_times(client, 500)
    rss_before = daemon_rss_kib(daemon)
    fake_openai.script(FakeReply.text(reply, chunk_size=3))
    head = (await client.status()).head_seq
    await client.send_message(ref.task_id, "stream while someone floods the events socket")
    with flood(daemon, size, count):
        every, during = await steady_ping_times(client, 500)
        events = await collect_turn(client, ref.task_id, head)
        rss_during = daemon_rss_kib(daemon)
    after = await ping_times(client, 200)
    rss_after = daemon_rss_kib(daemon)
    print(
        f"\nsubscriptions {count} x {size} B: ping p99 quiet {p99(quiet) * 1e3:.2f} ms, "
        f"during {p99(during) * 1e3:.2f} ms, max {max(every) * 1e3:.1f} ms; "
        f"RSS {rss_before // 1024} -> {rss_during // 1024} -> {rss_after // 1024} MiB"
    )
    assert texts(events)[-1] == reply
    assert rss_during - rss_before < 40 * 1024, (rss_before, rss_during)
    assert max(every) < MAX_STALL
    assert within_5x(during, quiet) and within_5x(after, quiet)
    assert daemon.proc is not None and daemon.proc.poll() is None


async def test_churn_and_disconnects_cost_no_stall_and_sigterm_still_stops(
    daemon: DaemonProcess, client: Client
) -> None:
    quiet = await ping_times(client, 300)
    with flood(daemon, 200, 100_000, "churn"):
        every, during = await steady_ping_times(client, 300)
    with flood(daemon, 250, 1000):  # just under the limit: kept, then dropped at exit
        pass
    # Ordinary clients that come and go do not stall the daemon.
    stalls = []
    for _ in range(10):
        t = time.perf_counter()
        async with connect(daemon.runtime_dir) as other:
            async with other.events(None):
                pass
        stalls.append(time.perf_counter() - t)
        stalls.extend(await ping_times(client, 5))
    print(
        f"\nchurn: ping p99 quiet {p99(quiet) * 1e3:.2f} ms, during {p99(during) * 1e3:.2f} ms; "
        f"connect+subscribe+disconnect max {max(stalls) * 1e3:.1f} ms"
    )
    assert max(every) < MAX_STALL and within_5x(during, quiet)
    assert max(stalls) < 0.5
    # SIGTERM in the middle of a flood stops the daemon promptly.
    with flood(daemon, 200, 100_000, "churn"):
        t = time.perf_counter()
        assert daemon.stop(timeout=20) == 0
        assert time.perf_counter() - t < 10
