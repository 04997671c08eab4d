"""Whether one of a task's turns runs now: the cancel scope that stops it, the
event set once it is over, and the state a stop asks it to end in (aborted, or
resumable when the daemon stops).
"""

from __future__ import annotations

import anyio

from hdsp.protocol import TaskState

__all__ = ["TurnRun"]


class TurnRun:
    """The run of a task's current turn; none runs until `begin`."""

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self._done = anyio.Event()
        self._done.set()
        #: The state a stop asked the turn to end in.
        self.stop_as: TaskState = TaskState.ABORTED

    @property
    def busy(self) -> bool:
        return not self._done.is_set()

    def begin(self) -> anyio.CancelScope:
        """A turn runs from now, in the scope returned."""
        self._done = anyio.Event()
        scope = self.scope = anyio.CancelScope()
        self.stop_as = TaskState.ABORTED
        return scope

    def over(self) -> None:
        """The turn has ended: whoever waits for it goes on."""
        self.scope = None
        self._done.set()

    def cancel(self) -> None:
        if self.scope is not None:
            self.scope.cancel()

    @property
    def cancelled(self) -> bool:
        """Whether the running turn was cancelled (a stop, or its own doing)."""
        return self.scope is not None and self.scope.cancel_called

    async def wait_over(self) -> None:
        """Wait until no turn runs (one that starts meanwhile is waited for too)."""
        while self.busy:
            await self._done.wait()

    async def stop(self, as_state: TaskState) -> None:
        """Cancel the running turn, if any, to end as `as_state`; wait until it
        has ended."""
        if self.scope is not None and self.busy:
            self.stop_as = as_state
            self.scope.cancel()
        await self._done.wait()
