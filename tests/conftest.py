"""Shared test set-up: anyio on asyncio (pyzmq's asyncio sockets need it), and the
real daemon as a subprocess against a fake OpenAI-compatible API."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator

import pytest

from hdsp.client import Client, connect
from tests.fakes.openai_server import FakeOpenAI
from tests.support.daemon_process import DaemonProcess, call_failed, short_tmp_dir


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    # Fixtures read `request.node.rep_call` to print a daemon's log on failure.
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """For tests that time the daemon from this process: what the suite left in
    this process is moved out of the garbage collector's way (a full pass over it
    takes half a second by the end of the suite, and is not the daemon's latency)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def daemon_process(
    fake_openai: FakeOpenAI, request: pytest.FixtureRequest
) -> Iterator[DaemonProcess]:
    """A daemon process, not started yet, configured to use `fake_openai`."""
    proc = DaemonProcess(
        short_tmp_dir(),
        env={
            "HDSP_BASE_URL": fake_openai.base_url,
            "HDSP_MODEL": "gpt-test",
            "HDSP_API_KEY": "sk-test-not-a-real-key",
        },
    )
    try:
        yield proc
    finally:
        proc.finish(show_log=call_failed(request))


@pytest.fixture
def daemon(daemon_process: DaemonProcess) -> DaemonProcess:
    daemon_process.start()
    return daemon_process


@pytest.fixture
async def client(daemon: DaemonProcess) -> AsyncIterator[Client]:
    async with connect(daemon.runtime_dir, name="test") as c:
        yield c
