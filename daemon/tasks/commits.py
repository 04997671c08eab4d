"""Waiting until what a reply promises is on disk: a command whose reply hands
out an id or says that something waits (a new task, a queued message, an edited
history) first waits for the journal to commit it, so that a crash right after
the reply breaks no promise."""

from __future__ import annotations

import anyio

from hdsp.daemon.store import Journal, Store

__all__ = ["committed_unless_failing"]


async def committed_unless_failing(store: Store, journal: Journal) -> None:
    """Wait until what is queued is committed, or until the storage fails:
    then the journal holds it until the disk takes it (every client was told),
    and waiting here would only leave the client without an answer."""
    monitor = store.monitor
    if not monitor.writable:
        return
    async with anyio.create_task_group() as tg:

        async def until_failing() -> None:
            seen = monitor.version
            while monitor.writable:
                seen = await monitor.wait_changed(seen)
            tg.cancel_scope.cancel()

        tg.start_soon(until_failing)
        await journal.flush()
        tg.cancel_scope.cancel()
