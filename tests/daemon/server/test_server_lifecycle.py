"""How the daemon ends and how a client learns it: a second SIGTERM hurries the
shutdown but the daemon still exits through its own code, with status 0; a
client's ConnectionLost says what happened and how long it waited."""

from __future__ import annotations

import signal
import time

import anyio
import pytest

from hdsp.client import ConnectionLost, connect
from hdsp.protocol import DaemonShuttingDown, GetStatus, TaskResumable
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess

pytestmark = pytest.mark.timeout(90)


async def test_a_second_sigterm_hurries_the_shutdown_and_exits_cleanly(
    daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.hang())
    assert daemon.proc is not None
    async with connect(daemon.runtime_dir) as c:
        head = (await c.status()).head_seq
        await c.start_task("hang until stopped")
        with anyio.fail_after(10):
            await fake_openai.wait_for_requests_async(1)
        async with c.events(None, since_seq=head) as events:
            daemon.proc.send_signal(signal.SIGTERM)
            async for event in events:
                if isinstance(event.data, TaskResumable):
                    # The graceful stop is under way: hurry it.
                    daemon.proc.send_signal(signal.SIGTERM)
                    break
    assert daemon.wait(30) == 0, daemon.stderr()
    assert "Traceback" not in daemon.stderr()


async def test_a_signal_late_in_the_shutdown_does_not_kill_the_daemon(
    daemon: DaemonProcess,
) -> None:
    """Signals that come after the daemon said it is going (while it closes its
    store and sockets) end it with its usual status too, never by the signal."""
    for _ in range(3):
        async with connect(daemon.runtime_dir) as c:
            head = (await c.status()).head_seq
            async with c.events(None, since_seq=head) as events:
                assert daemon.proc is not None
                daemon.proc.send_signal(signal.SIGTERM)
                async for event in events:
                    if isinstance(event.data, DaemonShuttingDown):
                        break
        for _ in range(20):
            if daemon.proc.poll() is not None:
                break
            daemon.proc.send_signal(signal.SIGTERM)
            await anyio.sleep(0.005)  # (spreads the signals over the shutdown; no sync)
        assert daemon.wait(30) == 0, daemon.stderr()
        daemon.start()


async def test_connection_lost_says_what_happened(daemon: DaemonProcess) -> None:
    assert daemon.proc is not None
    async with connect(daemon.runtime_dir) as c:
        c.timeout = 60
        daemon.proc.send_signal(signal.SIGSTOP)  # the command is sent, never answered
        t = time.monotonic()
        caught: list[ConnectionLost] = []

        async def start() -> None:
            with pytest.raises(ConnectionLost) as lost:
                await c.start_task("never answered")
            caught.append(lost.value)

        async with anyio.create_task_group() as tg:
            tg.start_soon(start)
            await anyio.sleep(0.2)  # (lets it be sent; the daemon is stopped)
            daemon.kill()
        waited = time.monotonic() - t
        message = str(caught[0])
        assert waited < 10 and "60 s" not in message, message
        assert "went away while StartNewTask waited for its reply" in message
        assert "may or may not have been carried out" in message
        # Gone for good: an idempotent command retries until its deadline and says so.
        with pytest.raises(ConnectionLost, match=r"not back after 1(\.\d+)? s") as gone:
            await c.request(GetStatus(), timeout=1.0)
        print(f"\n{message}\n{gone.value}")
