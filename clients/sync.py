"""A blocking facade over the async client, for scripts and notebooks that are not
async:

    from hdsp.client import sync

    with sync.connect() as client:
        ref = client.start_task("Summarise sales.csv")
        for event in client.events(ref.task_id, since_seq=0):
            ...

Each call runs on an event loop in a background thread (anyio's blocking portal).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from hdsp.protocol import TaskEvent

from .client import Client
from .client import connect as connect_async

__all__ = ["SyncClient", "connect"]

P = ParamSpec("P")
T = TypeVar("T")


class SyncClient:
    """The methods of `Client`, blocking."""

    def __init__(self, portal: BlockingPortal, client: Client) -> None:
        self._portal = portal
        self._client = client

    @property
    def client_id(self) -> str:
        return self._client.client_id

    def __getattr__(self, name: str) -> Callable[..., Any]:
        attr = getattr(self._client, name)
        if name.startswith("_") or not callable(attr) or name in ("events", "aclose"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._portal.call(lambda: attr(*args, **kwargs))

        return call

    def events(
        self, task_id: str | None = None, *, since_seq: int | None = None
    ) -> Iterator[TaskEvent]:
        """Events of a task (or all) as a blocking iterator; see `Client.events`."""
        stream = self._client.events(task_id, since_seq=since_seq)
        with self._portal.wrap_async_context_manager(stream):
            while True:
                try:
                    yield self._portal.call(stream.__anext__)
                except StopAsyncIteration:
                    return


@contextmanager
def connect(
    runtime_dir: Path | str | None = None,
    *,
    remote: str | None = None,
    name: str = "hdsp.client.sync",
    timeout: float = 5.0,
) -> Iterator[SyncClient]:
    """As `hdsp.client.connect`: the local daemon, or the remote named `remote`."""
    with start_blocking_portal(backend="asyncio") as portal:
        cm = connect_async(runtime_dir, remote=remote, name=name, kind="script", timeout=timeout)
        with portal.wrap_async_context_manager(cm) as client:
            yield SyncClient(portal, client)
