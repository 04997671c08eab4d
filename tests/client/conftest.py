"""Fixtures of the client tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from hdsp.daemon.paths import resolve_paths
from hdsp.daemon.store import Journal, Store
from tests.daemon.store.journals import running_journal
from tests.support.daemon_process import DaemonProcess


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The workspace of the tasks under test: an empty directory (a module's own
    `workspace` fixture may fill it)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def stored_journal(
    daemon_process: DaemonProcess,
) -> Callable[[], AbstractAsyncContextManager[Journal]]:
    """Opens the journal of `daemon_process`'s store before the daemon starts:
    what a test writes there, the daemon finds once it starts."""

    @asynccontextmanager
    async def open_journal() -> AsyncIterator[Journal]:
        paths = resolve_paths(daemon_process.data_dir, daemon_process.runtime_dir)
        paths.database.parent.mkdir(parents=True, exist_ok=True)

        async def publish(topic: bytes, body: bytes) -> None:
            pass  # (no daemon runs yet: nobody to tell)

        async with Store.open(paths.database) as store, running_journal(store, publish) as journal:
            yield journal

    return open_journal
