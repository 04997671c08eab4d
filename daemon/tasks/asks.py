"""A task's ask box: the asks that wait for a person (several at once when
concurrent tool calls of one reply each ask for approval: they are asked
together and answered one by one), the asks answered lately, and `respond`, by
which any client answers; the first answer wins. While an ask waits, the task is
in the state Roo gives that kind of ask (interactive, idle or resumable).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio

from hdsp.daemon.errors import WrongState
from hdsp.daemon.tools import AskAnswer, ToolError
from hdsp.protocol import (
    Ask,
    AskResponse,
    ClineMessage,
    Event,
    Say,
    TaskActive,
    TaskAskResponded,
    TaskIdle,
    TaskInteractive,
    TaskResumable,
    TaskState,
)

from .errors import AskAnswered
from .messages import TaskMessages

__all__ = ["ANSWERED_KEPT", "ASK_STATES", "AskBox"]

#: Which state a waiting ask puts its task in (Roo's classification).
ASK_STATES: dict[str, tuple[TaskState, type[TaskInteractive | TaskIdle | TaskResumable]]] = {
    **{
        a: (TaskState.INTERACTIVE, TaskInteractive)
        for a in (Ask.FOLLOWUP, Ask.COMMAND, Ask.TOOL, Ask.USE_MCP_SERVER)
    },
    **{
        a: (TaskState.IDLE, TaskIdle)
        for a in (
            Ask.COMPLETION_RESULT,
            Ask.API_REQ_FAILED,
            Ask.RESUME_COMPLETED_TASK,
            Ask.MISTAKE_LIMIT_REACHED,
            Ask.AUTO_APPROVAL_MAX_REQ_REACHED,
        )
    },
    Ask.RESUME_TASK: (TaskState.RESUMABLE, TaskResumable),
}

#: Answered asks remembered, so that a late second answer hears "already answered".
ANSWERED_KEPT = 64

#: Sets the task's state, publishing `event` with it.
SetState = Callable[[TaskState, Event], Awaitable[None]]


@dataclass
class _PendingAsk:
    message: ClineMessage
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: AskAnswer | None = None


#: While a tool runs (in its own context): its AskBox and (seconds, answer on
#: timeout or None to fail) for its asks.
_tool_timeout: ContextVar[tuple[object, tuple[float, AskAnswer | None]] | None] = ContextVar(
    "tool_timeout", default=None
)


class AskBox:
    def __init__(
        self, messages: TaskMessages, set_state: SetState, clock: Callable[[], int]
    ) -> None:
        self._messages = messages
        self._set_state = set_state
        self._clock = clock
        #: The asks that wait, oldest first, by ts.
        self._waiting: dict[int, _PendingAsk] = {}
        #: Asks answered lately, by ts, oldest first.
        self._answered: OrderedDict[int, _PendingAsk] = OrderedDict()

    @property
    def timeout(self) -> tuple[float, AskAnswer | None] | None:
        """While a tool runs: (seconds, answer on timeout or None to fail) for its
        asks. Per running call (a context variable): concurrent calls each have theirs."""
        found = _tool_timeout.get()
        return found[1] if found is not None and found[0] is self else None

    @timeout.setter
    def timeout(self, value: tuple[float, AskAnswer | None] | None) -> None:
        _tool_timeout.set(None if value is None else (self, value))

    @property
    def task_id(self) -> str:
        return self._messages.task_id

    @property
    def pending(self) -> ClineMessage | None:
        """The oldest ask that waits for an answer, if one does."""
        for waiting in self._waiting.values():
            return waiting.message
        return None

    @property
    def waiting(self) -> list[ClineMessage]:
        """Every ask that waits for an answer, oldest first."""
        return [w.message for w in self._waiting.values()]

    def clear(self) -> None:
        """The turn is over: no ask waits any more (nor a tool's time limit)."""
        self._waiting.clear()
        self.timeout = None

    async def ask(self, ask: str, text: str | None = None, **fields: Any) -> AskAnswer:
        """Post an ask and wait for the first answer from any client (within the
        time the approval policy gives the running tool's asks, if any)."""
        message = await self.post(ask, text, **fields)
        if self.timeout is None:
            return await self.wait(message)
        seconds, on_timeout = self.timeout
        fallback = on_timeout or AskAnswer(AskResponse.NO, by="timeout")
        answer = await self.wait(
            message, deadline_ms=message.ts + int(seconds * 1000), on_timeout=fallback
        )
        if on_timeout is None and answer is fallback:
            raise ToolError(f"No answer within {seconds:g} s.")
        return answer

    async def post(self, ask: str, text: str | None = None, **fields: Any) -> ClineMessage:
        """Post an ask; it is answerable from this moment (an answer that comes
        before `wait` is kept for it)."""
        message = self._messages.new("ask", ask=ask, text=text, **fields)
        self._waiting[message.ts] = _PendingAsk(message)
        return await self._messages.create(message)

    async def wait(
        self,
        message: ClineMessage,
        *,
        deadline_ms: int | None = None,
        on_timeout: AskAnswer | None = None,
    ) -> AskAnswer:
        """Wait for the answer to the ask `message` (posted now or before a restart),
        with the task in the state Roo gives that kind of ask. At `deadline_ms` the
        ask is answered with `on_timeout`, as if a client had, so everyone sees it."""
        last = self._answered.get(message.ts)
        if last is not None and last.answer is not None:
            return last.answer  # answered between posting and waiting
        pending = self._waiting.get(message.ts)
        if pending is None:
            pending = self._waiting[message.ts] = _PendingAsk(message)
        try:
            await self._show_state()
            if deadline_ms is None:
                await pending.answered.wait()
            else:
                with anyio.move_on_after(max(0.0, (deadline_ms - self._clock()) / 1000)):
                    await pending.answered.wait()
                if pending.answer is None and on_timeout is not None:
                    await self.respond(message.ts, on_timeout)
        finally:
            if self._waiting.get(message.ts) is pending:
                del self._waiting[message.ts]
        await self._show_state()
        assert pending.answer is not None
        return pending.answer

    async def wait_saved(self, ts: int) -> AskAnswer | None:
        """Wait for the answer to the ask `ts` posted before (None: it is answered)."""
        ask = await self._messages.saved(ts)
        return None if ask is None or ask.is_answered else await self.wait(ask)

    async def _show_state(self) -> None:
        """The state the oldest waiting ask gives the task; running when none waits."""
        oldest = self.pending
        if oldest is None:
            await self._set_state(TaskState.RUNNING, TaskActive(payload=(self.task_id,)))
            return
        state, event = ASK_STATES.get(oldest.ask or "", (TaskState.INTERACTIVE, TaskInteractive))
        await self._set_state(state, event(payload=(self.task_id,)))

    async def respond(self, ask_ts: int, answer: AskAnswer) -> None:
        """Answer the waiting ask `ask_ts`; raises WrongState when there is none
        (AskAnswered when it was answered)."""
        pending = self._waiting.get(ask_ts)
        if pending is None:
            if ask_ts in self._answered:
                raise AskAnswered(ask_ts, self.task_id)
            waiting = ", ".join(str(ts) for ts in self._waiting)
            raise WrongState(
                f"No ask {ask_ts} waits in task {self.task_id}"
                + (f"; the waiting ones: {waiting}." if waiting else "."),
            )
        # First answer wins: from here on, the ask is no longer pending.
        del self._waiting[ask_ts]
        self._answered[ask_ts] = pending
        while len(self._answered) > ANSWERED_KEPT:
            self._answered.popitem(last=False)
        pending.answer = answer
        await self._messages.update(
            pending.message, is_answered=True, answer=answer.response, answered_by=answer.by
        )
        if answer.text or answer.images:
            await self._messages.say(
                Say.USER_FEEDBACK,
                answer.text,
                images=answer.images or None,
                context=answer.context,
                sent_by=answer.sent_by,
            )
        await self._messages.emit(TaskAskResponded(payload=(self.task_id,)))
        pending.answered.set()
