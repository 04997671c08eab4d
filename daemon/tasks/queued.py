"""Messages that wait for a busy task: a bounded queue every client sees
(`queuedMessagesUpdated`); the next turn takes the oldest when one ends, and the
running turn takes those sent to steer it before its next model request.

The queue is stored with each change, in the transaction of its event: a daemon
that is killed loses none of it, and a task loaded again (after a restart) has
it back.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

import msgspec

from hdsp.daemon.errors import BadRequest
from hdsp.daemon.store import Write, save_queued
from hdsp.protocol import (
    Event,
    QueuedMessage,
    QueuedMessagesUpdated,
    SendMessageData,
    encode,
)

from .errors import TaskBusy

__all__ = ["MAX_QUEUED", "MessageQueue", "decode_queued"]

#: Messages that may wait for a busy task.
MAX_QUEUED = 32

_decoder = msgspec.json.Decoder(list[QueuedMessage])


def decode_queued(body: bytes | None) -> list[QueuedMessage]:
    """The queue as `save_queued` stored it (empty for None)."""
    return [] if body is None else _decoder.decode(body)


class _Emit(Protocol):
    def __call__(self, event: Event, *writes: Write) -> Awaitable[None]: ...


class MessageQueue:
    def __init__(
        self,
        task_id: str,
        emit: _Emit,
        clock: Callable[[], int],
        saved: list[QueuedMessage] | None = None,
    ) -> None:
        self.task_id = task_id
        self._emit = emit
        self._clock = clock
        self._messages: deque[QueuedMessage] = deque(saved or ())

    def __iter__(self) -> Iterator[QueuedMessage]:
        return iter(self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    async def put(self, data: SendMessageData, *, sent_by: str | None = None) -> None:
        """Queue `data` (from the TCP client `sent_by`, if it came over TCP);
        raises TaskBusy when MAX_QUEUED wait."""
        if len(self._messages) >= MAX_QUEUED:
            raise TaskBusy(
                f"Task {self.task_id} is busy and {MAX_QUEUED} messages wait already; "
                "wait for it or cancel it.",
            )
        text = data.text or ""
        message = QueuedMessage(
            timestamp=self._clock(),
            id=uuid.uuid4().hex,
            text=text,
            images=data.images,
            delivery="steer" if data.delivery == "steer" else None,
            context=data.context,
            sent_by=sent_by,
        )
        self._messages.append(message)
        await self._published()

    async def delete(self, message_id: str) -> None:
        """Take `message_id` out of the queue; raises BadRequest if it is not in it."""
        kept = [m for m in self._messages if m.id != message_id]
        if len(kept) == len(self._messages):
            raise BadRequest(f"No queued message {message_id} in task {self.task_id}.")
        self._messages = deque(kept)
        await self._published()

    async def take(self) -> tuple[SendMessageData, str | None] | None:
        """The oldest message, out of the queue, and who sent it over TCP; None
        if none waits."""
        if not self._messages:
            return None
        message = self._messages.popleft()
        await self._published()
        data = SendMessageData(text=message.text, images=message.images, context=message.context)
        return data, message.sent_by

    async def take_steered(self) -> list[tuple[SendMessageData, str | None]]:
        """The messages sent to steer the running turn, out of the queue, oldest
        first, each with who sent it over TCP."""
        steered = [m for m in self._messages if m.delivery == "steer"]
        if not steered:
            return []
        self._messages = deque(m for m in self._messages if m.delivery != "steer")
        await self._published()
        return [
            (
                SendMessageData(text=m.text, images=m.images, delivery="steer", context=m.context),
                m.sent_by,
            )
            for m in steered
        ]

    async def _published(self) -> None:
        messages = list(self._messages)
        body = encode(messages) if messages else None
        await self._emit(
            QueuedMessagesUpdated(payload=(self.task_id, messages)),
            save_queued(self.task_id, body),
        )
