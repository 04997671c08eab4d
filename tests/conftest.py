"""Shared test set-up: anyio on asyncio (pyzmq's asyncio sockets need it), the
real daemon as a subprocess against a fake OpenAI-compatible API, and the store's
two backends: SQLite files, and a private PostgreSQL server (one per session)."""

from __future__ import annotations

import faulthandler
import gc
import os
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager

from hdsp.client import Client, connect
from tests.fakes.openai_server import FakeOpenAI
from tests.support.daemon_process import DaemonProcess, call_failed, model_env, short_tmp_dir
from tests.support.postgres import MISSING, PostgresCluster, find_bin_dir


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


#: The test folders whose tests each start processes (hdspd, Jupyter, kernels):
#: they run first, the browser's first of all. With pytest-xdist the workers
#: take tests in this order, so the long ones spread over the workers and the
#: quick ones fill the gaps at the end, rather than one worker finishing a
#: queue of long tests alone.
_HEAVY_FIRST = ("tests/jupyterlab/", "tests/integration/", "tests/security/", "tests/client/")


def _weight(item: pytest.Item) -> int:
    if item.get_closest_marker("browser") is not None:
        return 0
    path = item.nodeid
    for rank, folder in enumerate(_HEAVY_FIRST, start=1):
        if path.startswith(folder):
            return rank
    return len(_HEAVY_FIRST) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_weight)  # (stable: each folder keeps its own order)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    # Fixtures read `request.node.rep_call` to print a daemon's log on failure.
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


#: How long a test's teardown may take once its timeout (pytest-timeout's, for
#: set-up, call and teardown together) has fired in its call: that timer is
#: spent, and a teardown stuck on a loop the timeout interrupted would hold the
#: whole run until CI's own limit. Past this, every thread's stack is printed
#: and the run ends.
TEARDOWN_LIMIT = 150.0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item):  # type: ignore[no-untyped-def]
    def stuck() -> None:
        capture = item.config.pluginmanager.getplugin("capturemanager")
        if capture is not None:
            capture.suspend_global_capture(in_=False)
        print(f"\n{item.nodeid}: teardown stuck for {TEARDOWN_LIMIT:g} s", file=sys.stderr)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(3)

    timer = threading.Timer(TEARDOWN_LIMIT, stuck)
    timer.daemon = True
    timer.start()
    try:
        return (yield)
    finally:
        timer.cancel()


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


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A private PostgreSQL server for the session (see tests/support/postgres.py).
    Without PostgreSQL installed, the tests that need it fail saying how to get it."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.fail(MISSING, pytrace=False)
    cluster = PostgresCluster(bin_dir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_url(postgres: PostgresCluster) -> Iterator[str]:
    """The URL of a new database with hdsp's schema, dropped after the test."""
    name = postgres.create_database()
    try:
        yield postgres.url(name)
    finally:
        postgres.drop_database(name)


@pytest.fixture
def pg_empty_url(postgres: PostgresCluster) -> Iterator[str]:
    """The URL of a new, empty database (no schema), dropped after the test."""
    name = postgres.create_database(empty=True)
    try:
        yield postgres.url(name)
    finally:
        postgres.drop_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a test's store is: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "db.sqlite3"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store_backend() -> str:
    """The daemon's store: "sqlite" unless a module parametrizes it (with
    "postgresql": a database of the session's server, in the daemon's settings)."""
    return "sqlite"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A task's workspace, `ws` in the test's tmp_path, with a small data.csv (a
    module whose tasks need other files defines its own)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.csv").write_text("x,y\n1,2\n")
    return ws


@pytest.fixture
def users_kernel(tmp_path: Path) -> Iterator[KernelManager]:
    """A kernel hdsp did not start: the stand-in for a notebook's kernel in Lab."""
    km = KernelManager(connection_file=str(tmp_path / "kernel-users.json"))
    km.start_kernel(cwd=str(tmp_path))
    try:
        yield km
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
        km.cleanup_resources()


@pytest.fixture
def daemon_process(
    fake_openai: FakeOpenAI, request: pytest.FixtureRequest, store_backend: str
) -> Iterator[DaemonProcess]:
    """A daemon process, not started yet, configured to use `fake_openai`."""
    proc = DaemonProcess(short_tmp_dir(), env=model_env(fake_openai.base_url))
    if store_backend == "postgresql":
        # (Set up after the daemon's fixture: dropped only once the daemon is gone.)
        proc.use_store(str(request.getfixturevalue("pg_url")))
    try:
        yield proc
        if store_backend == "postgresql":  # and nothing of it went to a SQLite file
            assert not (proc.data_dir / "hdsp.sqlite3").exists()
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
