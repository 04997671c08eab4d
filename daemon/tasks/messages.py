"""A task's UI messages (Roo's ClineMessage) as it writes them: each new message
gets a fresh `ts`, every change is a `message` event through the journal, and a
message still streaming (`partial`) is kept here, newest version first, for
snapshots, with its text stored now and then so that a crash loses little.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Literal

import msgspec

from hdsp.daemon.store import Journal, Store, Write, save_ui_message
from hdsp.protocol import ClineMessage, Event, MessageEvent, MessagePayload, Say, encode

__all__ = ["PARTIAL_SAVE_INTERVAL", "TOOL_OUTPUT_KEPT", "TaskMessages"]

#: A message still streaming has its text stored (no event) at most this often.
PARTIAL_SAVE_INTERVAL = 1.0

#: How much of an interrupted tool's output `tool_output` returns (characters).
TOOL_OUTPUT_KEPT = 4000

_decoder = msgspec.json.Decoder(ClineMessage)

#: The running tool call's (messages object, tool_use_id): per context, so that
#: the concurrent calls of one reply (each in a task of its own) each label their
#: messages with their own id, and a child task started from a call is not labelled.
_running_call: ContextVar[tuple[object, str] | None] = ContextVar("running_call", default=None)


class TaskMessages:
    def __init__(
        self,
        task_id: str,
        store: Store,
        journal: Journal,
        clock: Callable[[], int],
        last_ts: int = 0,
    ) -> None:
        self.task_id = task_id
        self._store = store
        self._journal = journal
        self._clock = clock
        self._last_ts = last_ts
        #: Messages still streaming, by ts: newer here than in the store.
        self.partial: dict[int, ClineMessage] = {}
        self._partial_saved: dict[int, float] = {}

    @property
    def tool_use_id(self) -> str | None:
        """Set while a tool runs (in its own context): messages it creates carry it."""
        running = _running_call.get()
        return running[1] if running is not None and running[0] is self else None

    @tool_use_id.setter
    def tool_use_id(self, value: str | None) -> None:
        _running_call.set(None if value is None else (self, value))

    def next_ts(self) -> int:
        """A ts for a new message (or API message): now, and after every one before."""
        self._last_ts = max(self._clock(), self._last_ts + 1)
        return self._last_ts

    async def emit(self, event: Event, *writes: Write) -> None:
        await self._journal.emit(event, *writes)

    async def create(self, message: ClineMessage) -> ClineMessage:
        """Publish a new message (it is stored with its event)."""
        if message.partial:
            self.partial[message.ts] = message
        await self.emit(MessageEvent(payload=(MessagePayload(self.task_id, "created", message),)))
        return message

    def new(self, type: Literal["ask", "say"], **fields: Any) -> ClineMessage:
        """A new message of this task (not yet published), with the running tool's id."""
        if self.tool_use_id is not None:
            fields.setdefault("tool_use_id", self.tool_use_id)
        return ClineMessage(ts=self.next_ts(), type=type, **fields)

    async def say(
        self, say: str, text: str | None = None, *, partial: bool = False, **fields: Any
    ) -> ClineMessage:
        return await self.create(
            self.new("say", say=say, text=text, partial=partial or None, **fields)
        )

    async def update(self, message: ClineMessage, **changes: Any) -> ClineMessage:
        """Publish a new version of `message`; a final one (not partial) is stored."""
        new = msgspec.structs.replace(message, **changes)
        writes = []
        if new.partial:
            self.partial[new.ts] = new
            now = time.monotonic()
            if now - self._partial_saved.get(new.ts, 0.0) >= PARTIAL_SAVE_INTERVAL:
                # Now and then, what a crash would otherwise take: the text so far.
                self._partial_saved[new.ts] = now
                writes.append(save_ui_message(self.task_id, new.ts, encode(new)))
        else:
            self.partial.pop(new.ts, None)
            self._partial_saved.pop(new.ts, None)
        await self.emit(
            MessageEvent(payload=(MessagePayload(self.task_id, "updated", new),)), *writes
        )
        return new

    async def finish_partial(self) -> None:
        """Finish every message still streaming (a countdown cut off by a cancel)
        as it stands."""
        for message in list(self.partial.values()):
            await self.update(message, partial=False)

    async def finish_left_streaming(self) -> list[int]:
        """Messages that were streaming when the daemon stopped stream no more:
        finish them as they were saved (a durable update every client sees), or
        they would show as streaming for ever. Their ts."""
        finished = []
        for body in await self._store.read(self._store.db.partial_ui_messages, self.task_id):
            message = _decoder.decode(body)
            if message.partial:
                await self.update(message, partial=False)
                finished.append(message.ts)
        return finished

    async def saved(self, ts: int) -> ClineMessage | None:
        """The message `ts` as stored (after what is queued for the store)."""
        await self._journal.flush()  # it may have been posted a moment ago
        body = await self._store.read(self._store.db.ui_message, self.task_id, ts)
        return None if body is None else _decoder.decode(body)

    async def tool_output(self, tool_use_id: str) -> str:
        """The output a tool had streamed (its messages), the last TOOL_OUTPUT_KEPT
        characters of it: what an interruption leaves of it."""
        await self._journal.flush()
        bodies = await self._store.read(self._store.db.ui_messages, self.task_id)
        texts = []
        for body in bodies:
            m = _decoder.decode(body)
            if (
                m.tool_use_id == tool_use_id
                and m.type == "say"
                and m.say not in (Say.TOOL, Say.TOOL_RESULT)
                and m.text
            ):
                texts.append(m.text)
        text = "\n".join(texts)
        return text if len(text) <= TOOL_OUTPUT_KEPT else "...\n" + text[-TOOL_OUTPUT_KEPT:]
