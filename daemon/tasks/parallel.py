"""The tool calls of one model reply, run concurrently (seed 002, §6).

Every call runs in a task of its own in one anyio task group; a call that fails
becomes an ``"Error: …"`` result and never disturbs the others. Calls that
conflict keep their order: each call names the resources it changes
(:func:`conflicts` on :class:`Resources`), and a call starts only after every
earlier call it conflicts with is done. Results go back in the calls' order
(the caller reads them from the call states, which keep it).

Pure scheduling: what a call touches is the caller's to say (:mod:`.calls`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio
import structlog

from .turn import CallState

__all__ = ["EVERYTHING", "Resources", "conflicts", "run_concurrently"]

log = structlog.get_logger("hdsp.tasks")

#: A call that must keep its place among all others (switching mode, finishing).
EVERYTHING = "*"


@dataclass(frozen=True)
class Resources:
    """What a call changes, by name (`"path:a.csv"`, `"kernel"`): two calls that
    name one resource conflict. `exclusive` names none and conflicts with every
    call that changes something (a shell command may change anything)."""

    names: frozenset[str] = frozenset()
    exclusive: bool = False

    @property
    def changes(self) -> bool:
        return self.exclusive or bool(self.names)


def conflicts(a: Resources, b: Resources) -> bool:
    """Whether `a` and `b` must run one after the other."""
    if EVERYTHING in a.names or EVERYTHING in b.names:
        return True
    if (a.exclusive and b.changes) or (b.exclusive and a.changes):
        return True
    return not a.names.isdisjoint(b.names)


async def run_concurrently(
    calls: Sequence[CallState],
    run: Callable[[CallState], Awaitable[None]],
    resources: Callable[[CallState], Resources],
    failed: Callable[[CallState, Exception], Awaitable[None]],
) -> None:
    """Run every call of `calls` not yet done with `run`, concurrently but for
    conflicts (in order among themselves). An exception a call's `run` raises is
    given to `failed` (which records it as the call's error result); the other
    calls go on. Returns when all are done."""
    # Each call waits only for the earlier ones it conflicts with. A call that
    # changes nothing (a read) conflicts only with a barrier (EVERYTHING), so it
    # is checked against those alone: a reply of many reads costs O(n), not the
    # O(n²) of checking every pair (issue 32). Calls already done are skipped.
    changing: list[tuple[Resources, anyio.Event]] = []
    barriers: list[anyio.Event] = []
    earlier: list[anyio.Event] = []

    async def one(call: CallState, after: list[anyio.Event], finished: anyio.Event) -> None:
        try:
            for event in after:
                await event.wait()
            try:
                await run(call)
            except Exception as exc:
                log.exception("tool call failed", tool=call.name)
                await failed(call, exc)
        finally:
            finished.set()

    async with anyio.create_task_group() as tg:
        for call in calls:
            if call.status == "done":
                continue
            need = resources(call)
            if EVERYTHING in need.names:
                after = list(earlier)
            elif need.changes:
                after = [e for n, e in changing if conflicts(need, n)]
            else:
                after = list(barriers)
            finished = anyio.Event()
            earlier.append(finished)
            if need.changes:
                changing.append((need, finished))
            if EVERYTHING in need.names:
                barriers.append(finished)
            tg.start_soon(one, call, after, finished, name=f"tool call {call.name}")
