"""A task's open turn as the store keeps it: the :class:`~.turn.TurnState` of
the turn that runs or that a restart left (None between turns), saved on each
step so that a restart goes on where the turn stood, and saved with the API
messages that change it in one transaction (a crash never leaves them
disagreeing).
"""

from __future__ import annotations

from typing import Literal

from hdsp.daemon.conversation import Block
from hdsp.daemon.store import Journal

from .history import ApiHistory
from .turn import TurnState, tool_results, turn_write

__all__ = ["OpenTurn"]


class OpenTurn:
    """The open turn of task `task_id`, stored through `journal` and `history`."""

    def __init__(self, task_id: str, history: ApiHistory, journal: Journal) -> None:
        self._task_id = task_id
        self._history = history
        self._journal = journal
        #: The open turn's saved state (None between turns).
        self.state: TurnState | None = None
        #: Whether the last turn state queued for the store was an open turn.
        self._saved_open = False

    async def save(self) -> None:
        is_open = self.state is not None
        await self._journal.write(turn_write(self._task_id, self.state))
        self._saved_open = is_open

    async def add(self, role: Literal["user", "assistant"], content: list[Block]) -> None:
        """Append to the API history and save the turn state in the same
        transaction."""
        is_open = self.state is not None
        await self._history.add(role, content, turn_write(self._task_id, self.state))
        self._saved_open = is_open

    async def close_calls(self, reason: str) -> None:
        """Answer every tool call of the open turn, so that the API history stays
        valid (each tool_use needs its tool_result), and close the turn's tool phase
        in the same transaction."""
        assert self.state is not None
        calls, self.state = self.state.calls, None
        await self.add("user", tool_results(calls, reason))

    async def close(self, reason: str) -> None:
        """Close the turn that ends: its open calls are answered with `reason`;
        the store keeps no open turn."""
        if self.state is not None and self.state.phase == "tools":
            await self.close_calls(reason)
        elif self.state is not None or self._saved_open:
            self.state = None
            await self.save()
