"""How many tool calls run (issue 32): of one model reply at most
`max_per_reply`, of one task at most `max_concurrent_per_task` at once, of the
whole daemon at most `max_concurrent` at once (`tool_calls` in the settings).

One :class:`CallLimits` per daemon (the TaskManager's, in :class:`~.deps.TaskDeps`)
owns the daemon-wide :class:`anyio.CapacityLimiter`; each task takes a
:class:`TaskSlots` of it, with its own limiter. A call holds a slot of both
while it is decided (checks, the policy, its preview) and while it runs (its
checkpoint, the tool, its result), never while it waits for a person (an
approval) and never for the tools that wait on a person or a child task
(questions, agent calls, completion): a slot held by such a wait could starve
every other task. (A kernel's `input()` inside a run keeps its slot meanwhile.)
A call past the per-reply cap is not run: its result says so, for the model to
ask again in a later reply.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from hdsp.daemon.config.tool_calls import ToolCallLimits
from hdsp.daemon.conversation import TextBlock

from .turn import CallState

__all__ = ["CallLimits", "TaskSlots", "not_run"]


class CallLimits:
    """The daemon's limits on tool calls, and its slots for running ones."""

    def __init__(self, limits: ToolCallLimits | None = None) -> None:
        self.limits = limits or ToolCallLimits()
        self._daemon = anyio.CapacityLimiter(self.limits.max_concurrent)
        self._tasks: list[TaskSlots] = []

    def apply(self, limits: ToolCallLimits) -> None:
        """New settings: the limiters change size at once (calls running beyond
        a smaller size finish; no new one starts until there is room)."""
        self.limits = limits
        self._daemon.total_tokens = limits.max_concurrent

    def for_task(self) -> TaskSlots:
        """Slots for one task's calls (sized by the settings when it runs)."""
        return TaskSlots(self)

    @property
    def daemon_limiter(self) -> anyio.CapacityLimiter:
        return self._daemon

    @property
    def per_reply(self) -> int:
        return self.limits.max_per_reply


class TaskSlots:
    """One task's slots: its own limiter, then the daemon's."""

    def __init__(self, owner: CallLimits) -> None:
        self._owner = owner
        self._task = anyio.CapacityLimiter(owner.limits.max_concurrent_per_task)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot of the task and one of the daemon while the block runs
        (waiting for them first: back-pressure)."""
        size = self._owner.limits.max_concurrent_per_task
        if self._task.total_tokens != size:
            self._task.total_tokens = size
        async with self._task, self._owner.daemon_limiter:
            yield


def not_run(call: CallState, cap: int, asked: int) -> None:
    """Make `call` (past the reply's first `cap` of `asked` calls) done, not
    run: its result tells the model why and what to do."""
    call.status = "done"
    call.ask_ts = None
    call.is_error = True
    call.result = [
        TextBlock(
            text=(
                f"Not run: hdsp runs only the first {cap} tool calls of one reply, and "
                f"this reply had {asked}. This call and the others after the first "
                f"{cap} were not run: ask for them again in a later reply (at most "
                f"{cap} in each)."
            )
        )
    ]
