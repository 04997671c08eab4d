"""Saving a turn's state while many of its tool calls run (issue 32).

Each step of a call (running, done) saves the turn's state, and the state is the
whole turn: every call with its result. Saved once per step, a reply of `n`
calls wrote `n` states of up to `n` results each, O(n²) bytes for the journal to
encode, scrub and hold in its queue: 800 reads of small files made 1.6 k saves
of up to a megabyte each, the event loop busy scrubbing them for seconds and
hundreds of megabytes queued.

:class:`CoalescedSaves` makes the saves of concurrent steps share: while one
save is on its way to the store (queued, then committed), the steps that come
meanwhile wait for a single next save, which encodes the state as it is when it
starts (every change of theirs in it). So a burst costs one save per commit of
the journal, and holds at most two states in its queue. A step returns once a
save with its change is queued (and, while others run, committed): what a save
promised before.

While a single call runs there is nothing to share, and a save is queued at
once without waiting for its commit, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

__all__ = ["CoalescedSaves"]


class CoalescedSaves:
    """`save()` through `write` (queue the current state) and `flush` (wait for
    what was queued to commit), shared among concurrent callers."""

    def __init__(
        self, write: Callable[[], Awaitable[None]], flush: Callable[[], Awaitable[None]]
    ) -> None:
        self._write = write
        self._flush = flush
        #: Whether several calls run now (set by the scheduler).
        self.concurrent = False
        #: Set when the save on its way is committed (None: none is).
        self._busy: anyio.Event | None = None
        #: Set when the next save (waiting for the one on its way) is done.
        self._next: anyio.Event | None = None
        #: Saves written (for tests and the benchmark's account).
        self.written = 0

    async def save(self) -> None:
        if not self.concurrent and self._busy is None:
            self.written += 1
            await self._write()
            return
        if self._next is not None:
            # A save waits to start: it encodes the state then, with this change.
            await self._next.wait()
            return
        mine = self._next = anyio.Event()
        try:
            while self._busy is not None:
                await self._busy.wait()
            self._next = None
            self._busy = done = anyio.Event()
            try:
                self.written += 1
                await self._write()
                await self._flush()
            finally:
                self._busy = None
                done.set()
        finally:
            if self._next is mine:
                self._next = None
            mine.set()
