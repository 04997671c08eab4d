"""A task's API history (what the model has been sent and said) as the task owns
it: appended to in the store in the same transaction as what goes with it,
reduced without deleting (:mod:`.context`), and what the next request sends.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Literal

from hdsp.daemon.conversation import ApiMessage, Block
from hdsp.daemon.store import Journal, Write

from .context import condensable, condensing, request_messages, truncate_oldest
from .turn import api_write

__all__ = ["ApiHistory"]


class ApiHistory:
    def __init__(
        self,
        task_id: str,
        messages: list[ApiMessage],
        journal: Journal,
        next_ts: Callable[[], int],
    ) -> None:
        self.task_id = task_id
        self.messages = messages
        self._journal = journal
        self._next_ts = next_ts
        #: A provider refused an image: no request sends the images of messages
        #: up to this ts again.
        self.images_refused_upto = 0

    @property
    def awaits_reply(self) -> bool:
        """The last message is the user's: a request was never answered."""
        return bool(self.messages) and self.messages[-1].role == "user"

    async def append(self, message: ApiMessage, *writes: Write) -> None:
        """Append `message`, stored in one transaction with `writes`."""
        message, write = api_write(self.task_id, len(self.messages), message)
        self.messages.append(message)
        await self._journal.write(write, *writes)

    async def add(
        self, role: Literal["user", "assistant"], content: list[Block], *writes: Write
    ) -> None:
        """Append a new message of `role` with `content` (see :meth:`append`)."""
        await self.append(ApiMessage(role=role, content=content, ts=self._next_ts()), *writes)

    def for_request(self) -> list[ApiMessage]:
        """What the next model request sends (:func:`.context.request_messages`)."""
        return request_messages(self.messages, images_refused_upto=self.images_refused_upto)

    def refuse_images(self) -> bool:
        """A provider refused an image: leave out every image sent so far. False
        if that was done already (the refused image is a new one's)."""
        if not self.messages or self.images_refused_upto >= self.messages[-1].ts:
            return False
        self.images_refused_upto = self.messages[-1].ts
        return True

    def can_condense(self) -> bool:
        """Whether enough messages came since the last summary to condense."""
        return bool(condensable(self.messages))

    def to_condense(self) -> list[ApiMessage]:
        """The messages a summary would replace, as a request sends them (the
        task's first message before them: what the summary is asked about)."""
        chosen = condensable(self.messages)
        if not chosen:
            return []
        first = request_messages(self.messages)[0]
        picked = request_messages([self.messages[i] for i in chosen])
        return [first, *picked]

    async def condense(self, summary: str) -> tuple[str, int]:
        """Append `summary` as a summary message and hide what it replaces (tagged
        with its id, never deleted), in one transaction: its id and how many
        messages it hid."""
        made = condensing(self.messages, uuid.uuid4().hex, summary, self._next_ts())
        writes: list[Write] = []
        for index, message in made.hidden.items():
            self.messages[index], write = api_write(self.task_id, index, message)
            writes.append(write)
        await self.append(made.summary, *writes)
        return made.condense_id, len(made.hidden)

    async def truncate(self) -> tuple[str, int] | None:
        """Hide the oldest quarter of the conversation (:func:`.context.truncate_oldest`):
        the truncation's id and how many messages it hid; None if nothing can go."""
        truncation = truncate_oldest(self.messages, uuid.uuid4().hex)
        if truncation is None:
            return None
        writes: list[Write] = []
        for index, message in truncation.hidden.items():
            self.messages[index], write = api_write(self.task_id, index, message)
            writes.append(write)
        await self._journal.write(*writes)
        return truncation.truncation_id, len(writes)
