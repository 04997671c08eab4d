"""Text a person gave a task for its next model request (while resuming it, an
edit of its todo list, guidance after too many mistakes) and what hdsp tells the
model itself (images left out): it goes into the API history, in one user
message, before the next request is made.
"""

from __future__ import annotations

__all__ = ["Feedback"]


class Feedback:
    """Notes for the next model request, in the order they came."""

    def __init__(self) -> None:
        self._notes: list[str] = []

    def __bool__(self) -> bool:
        return bool(self._notes)

    def add(self, note: str) -> None:
        self._notes.append(note)

    def take(self) -> str:
        """The notes as one text (empty if there are none); none are left."""
        text, self._notes = "\n\n".join(self._notes), []
        return text
