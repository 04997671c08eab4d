"""Fuzzing a real hdspd's control socket: every class of bad frame (fuzz_frames.py)
from several raw DEALER sockets, pipelined, while a well-behaved client pings and
a task streams long replies. The daemon never exits, answers every frame (with a
typed error wherever the frame is not a valid command, never `internal`), the
client's events have no gap, its Ping p99 stays within 5x of the quiet one and
the daemon's memory comes back to where it was."""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from hdsp.client import Client, connect
from hdsp.protocol import ErrorCode
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn, texts
from tests.support.fuzz_client import FuzzFigures
from tests.support.fuzz_frames import CLASSES
from tests.support.ping_latency import percentile, ping_times
from tests.support.raw_peer import daemon_rss_kib

ROOT = Path(__file__).resolve().parents[2]

LIMIT = 65_536
SOCKETS = 4
#: Frames each socket may have sent and not yet had answered.
WINDOW = 32
REPLY = "A long reply that streams while the fuzz goes on. " * 30


async def _run_fuzzer(daemon: DaemonProcess, frames: int, seed: int) -> FuzzFigures:
    """The fuzzing peer, in a process of its own; its figures."""
    argv = [str(daemon.runtime_dir), str(LIMIT), str(seed), str(frames), str(SOCKETS), str(WINDOW)]
    result = await anyio.run_process(
        [sys.executable, "-m", "tests.support.fuzz_client", *argv], cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]
    return msgspec.json.decode(result.stdout, type=FuzzFigures)


@dataclass
class _Client:
    """What the well-behaved client saw during the fuzz."""

    turns: int = 0
    pings: list[float] = field(default_factory=list)


async def _fuzz(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, frames: int
) -> FuzzFigures:
    # Warm up: the first turn loads the model SDK, a first burst of frames fills
    # the daemon's allocator pools and ZeroMQ's buffers.
    fake_openai.script(FakeReply.text(REPLY, chunk_size=4))
    head = (await client.status()).head_seq
    task_id = (await client.start_task("warm up")).task_id
    await collect_turn(client, task_id, head)
    await _run_fuzzer(daemon, 2000, seed=1)

    async def phase(fuzz: Callable[[], Awaitable[Any]]) -> tuple[_Client, Any]:
        """Stream turns and ping while `fuzz` runs: what the client saw."""
        seen = _Client()
        done = anyio.Event()

        async def stream() -> None:
            while not done.is_set():
                fake_openai.script(FakeReply.text(REPLY, chunk_size=4))
                head = (await client.status()).head_seq
                await client.send_message(task_id, "again")
                events = await collect_turn(client, task_id, head)
                durable = [e.seq for e in events if e.seq is not None]
                assert durable == list(range(head + 1, head + 1 + len(durable))), durable
                assert texts(events)[-1] == REPLY
                seen.turns += 1

        async def ping() -> None:
            while not done.is_set():
                seen.pings.extend(await ping_times(client, 10))

        async with anyio.create_task_group() as tg:
            tg.start_soon(stream)
            tg.start_soon(ping)
            result = await fuzz()
            done.set()
        return seen, result

    # Undisturbed: the same streaming and pinging, no fuzz, for as many pings.
    quiet, _ = await phase(lambda: ping_times(client, 600))
    rss_before = daemon_rss_kib(daemon)
    started = time.perf_counter()
    seen, figures = await phase(lambda: _run_fuzzer(daemon, frames, seed=1000))
    elapsed = time.perf_counter() - started
    rss_after = daemon_rss_kib(daemon)
    quiet_pings = quiet.pings

    sent = sum(figures.sent.values())
    alive = daemon.proc is not None and daemon.proc.poll() is None

    def ms(times: list[float], q: int) -> str:
        return f"{percentile(times, q) * 1e3:.2f}"

    print(
        f"\nfuzz: {sent} frames in {elapsed:.1f} s ({sent / elapsed:.0f}/s) from {SOCKETS} "
        f"sockets, {figures.replies} replies, daemon {'alive' if alive else 'DEAD'}, "
        f"turns streamed {seen.turns}\n"
        f"  by class: {figures.sent}\n"
        f"  answers: {figures.codes}\n"
        f"  Ping p50/p99 quiet {ms(quiet_pings, 50)}/{ms(quiet_pings, 99)} ms, during "
        f"{ms(seen.pings, 50)}/{ms(seen.pings, 99)} ms "
        f"({len(seen.pings)} pings)\n"
        f"  RSS before {rss_before / 1024:.1f} MiB, after {rss_after / 1024:.1f} MiB"
    )
    assert alive, daemon.stderr()
    assert figures.replies == sent == frames // SOCKETS * SOCKETS
    assert figures.codes.get(ErrorCode.INTERNAL, 0) == 0, daemon.stderr()[-5000:]
    assert not figures.mismatches, figures.mismatches[:10]
    assert set(figures.sent) == set(CLASSES)
    assert seen.turns >= 1
    assert percentile(seen.pings, 99) <= max(5 * percentile(quiet_pings, 99), 0.02)
    assert rss_after <= rss_before * 1.2, (rss_before, rss_after)
    assert (await client.ping()).server_time > 0
    return figures


@pytest.fixture
async def fuzz_target(daemon_process: DaemonProcess) -> DaemonProcess:
    daemon_process.start("--max-message-size", str(LIMIT))
    return daemon_process


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("frozen_heap")
async def test_fuzz_frames_short(fuzz_target: DaemonProcess, fake_openai: FakeOpenAI) -> None:
    async with connect(fuzz_target.runtime_dir, name="well-behaved") as client:
        await _fuzz(fuzz_target, client, fake_openai, 4000)
    assert fuzz_target.stop() == 0


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.usefixtures("frozen_heap")
async def test_fuzz_frames_100k(fuzz_target: DaemonProcess, fake_openai: FakeOpenAI) -> None:
    async with connect(fuzz_target.runtime_dir, name="well-behaved") as client:
        await _fuzz(fuzz_target, client, fake_openai, 100_000)
    assert fuzz_target.stop() == 0
