"""`daemon status` counts the clients the daemon has evidence of (their
connections, as ZeroMQ and the kernel report them), not the pid a client says
it has: with real client processes, killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from anyio.abc import Process

from hdsp.client import Client
from tests.support.daemon_process import DaemonProcess

pytestmark = [pytest.mark.timeout(60)]

#: A client of the real library, as `hdsp` runs one.
_HONEST = """
import sys, anyio
from hdsp.client import connect

async def main():
    async with connect(sys.argv[1], name="honest"):
        print("connected", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)

anyio.run(main)
"""

#: A client that says it is process `argv[2]`.
_LIAR = """
import sys, zmq
from hdsp.client import find_daemon
from hdsp.protocol import PROTOCOL_VERSION, ClientInfo, Connect, encode

sock = zmq.Context().socket(zmq.DEALER)
sock.connect(find_daemon(sys.argv[1]).control)
info = ClientInfo(name="liar", version="0", pid=int(sys.argv[2]))
sock.send(encode(Connect(protocol_version=PROTOCOL_VERSION, client=info)))
sock.recv()
print("connected", flush=True)
sys.stdin.read()
"""

#: How long a killed client may still be counted.
_BOUND = 5.0


@asynccontextmanager
async def _client_process(daemon: DaemonProcess, code: str, *args: str) -> AsyncIterator[Process]:
    """A client in a process of its own, connected once this yields."""
    async with await anyio.open_process(
        [sys.executable, "-c", code, str(daemon.runtime_dir), *args]
    ) as proc:
        assert proc.stdout is not None
        with anyio.fail_after(30):
            line = await proc.stdout.receive()
        assert line.startswith(b"connected"), line
        try:
            yield proc
        finally:
            if proc.returncode is None:
                proc.kill()


async def _kill(proc: Process) -> None:
    proc.send_signal(signal.SIGKILL)
    await proc.wait()


async def _clients_become(client: Client, count: int) -> float:
    """Seconds until GetStatus counts `count` clients (failing after `_BOUND`).
    There is nothing to wait on from out here: the daemon is asked again."""
    started = anyio.current_time()
    with anyio.fail_after(_BOUND):
        while (await client.status()).clients != count:
            await anyio.sleep(0.02)
    return anyio.current_time() - started


async def test_a_client_killed_with_sigkill_stops_being_counted(
    daemon: DaemonProcess, client: Client
) -> None:
    assert (await client.status()).clients == 1
    async with _client_process(daemon, _HONEST) as proc:
        assert (await client.status()).clients == 2
        await _kill(proc)
        took = await _clients_become(client, 1)
    print(f"a killed client was forgotten after {took * 1000:.0f} ms")


async def test_a_client_s_own_word_on_its_pid_counts_for_nothing(
    daemon: DaemonProcess, client: Client
) -> None:
    """One client names a live process (this test's) as its own, one a pid that
    no process has: each is counted while its connection is open, and not once
    it is killed."""
    async with (
        _client_process(daemon, _LIAR, str(os.getpid())) as alive_pid,
        _client_process(daemon, _LIAR, str(2**22 + 1)) as dead_pid,
    ):
        assert (await client.status()).clients == 3
        await _kill(alive_pid)
        await _clients_become(client, 2)
        await _kill(dead_pid)
        await _clients_become(client, 1)
