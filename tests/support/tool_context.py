"""A small real `ToolContext` for unit tests of tools: it stands in for the task.

It keeps every say/ask/update as the task would (messages keyed by `ts`, updates
replacing them), lets a test wait until a message satisfies a condition (no
sleeps), and answers asks from a scripted list, failing loudly on an ask the test
did not expect.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import anyio
import msgspec

from hdsp.daemon.tools import AskAnswer, ToolContextBase
from hdsp.protocol import ClineMessage

__all__ = ["RecordingContext"]


class RecordingContext(ToolContextBase):
    def __init__(
        self,
        workspace: Path,
        *,
        answers: Iterable[AskAnswer] = (),
        task_id: str = "task-test",
        services: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(task_id, workspace)
        self._answers = deque(answers)
        self._services = services or {}
        self._ts = 1_000
        self._changed = anyio.Condition()
        #: ("created" | "updated", message), in order.
        self.events: list[tuple[str, ClineMessage]] = []
        #: The latest version of every message, by ts.
        self.messages: dict[int, ClineMessage] = {}

    # ---- ToolContext -------------------------------------------------------------

    async def say(
        self, say: str, text: str | None = None, *, partial: bool = False, **fields: Any
    ) -> ClineMessage:
        self._ts += 1
        message = ClineMessage(
            ts=self._ts, type="say", say=say, text=text, partial=partial or None, **fields
        )
        await self._record("created", message)
        return message

    async def update(self, message: ClineMessage, **changes: Any) -> ClineMessage:
        new = msgspec.structs.replace(message, **changes)
        await self._record("updated", new)
        return new

    async def ask(self, ask: str, text: str | None = None, **fields: Any) -> AskAnswer:
        self._ts += 1
        await self._record("created", ClineMessage(ts=self._ts, type="ask", ask=ask, text=text))
        if not self._answers:
            raise AssertionError(f"unexpected ask {ask!r}: {text}")
        return self._answers.popleft()

    def service(self, name: str) -> Any:
        return self._services[name]

    # ---- for tests ------------------------------------------------------------------

    async def _record(self, action: str, message: ClineMessage) -> None:
        self.events.append((action, message))
        self.messages[message.ts] = message
        async with self._changed:
            self._changed.notify_all()

    def of_kind(self, kind: str) -> list[ClineMessage]:
        """The latest version of every message whose say or ask is `kind`."""
        return [m for m in self.messages.values() if kind in (m.say, m.ask)]

    def updates_of(self, ts: int) -> list[ClineMessage]:
        """Every version of message `ts` sent after it was created."""
        return [m for action, m in self.events if action == "updated" and m.ts == ts]

    async def wait_for(self, condition: Callable[[ClineMessage], bool]) -> ClineMessage:
        """The first message (latest version) that meets `condition`, once there is one."""
        async with self._changed:
            while True:
                for message in self.messages.values():
                    if condition(message):
                        return message
                await self._changed.wait()
