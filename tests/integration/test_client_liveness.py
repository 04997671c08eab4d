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
    """SIGKILL, and wait until it is reaped."""
    proc.send_signal(signal.SIGKILL)
    await proc.wait()


async def test_a_client_killed_with_sigkill_stops_being_counted(
    daemon: DaemonProcess, client: Client
) -> None:
    assert (await client.status()).clients == 1
    async with _client_process(daemon, _HONEST) as proc:
        assert (await client.status()).clients == 2
        await _kill(proc)
        # At once: the kernel closed its end of the connection before it could
        # be reaped, and the daemon asks the kernel (not only ZeroMQ's events).
        assert (await client.status()).clients == 1


@pytest.mark.parametrize(
    "said_pid",
    [
        pytest.param(os.getpid(), id="a live process's (this test's)"),
        pytest.param(2**22 + 1, id="one no process has"),
    ],
)
async def test_a_client_is_counted_by_its_connection_whatever_pid_it_names(
    daemon: DaemonProcess, client: Client, said_pid: int
) -> None:
    async with _client_process(daemon, _LIAR, str(said_pid)) as liar:
        assert (await client.status()).clients == 2
        await _kill(liar)
        assert (await client.status()).clients == 1
