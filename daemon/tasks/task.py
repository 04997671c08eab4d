"""One conversation with the agent: Roo's Task.

A task holds its HistoryItem, its API history and its state. Each agent turn (model
request, tool calls, repeat) runs in its own cancel scope inside the TaskManager's
task group; cancelling the scope stops the turn wherever it is, and the turn always
ends with a final event (`taskCompleted`, `taskAborted`, `taskResumable`, or an
`api_req_failed` ask followed by `taskIdle`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup

from hdsp.daemon.llm.errors import ProviderError
from hdsp.daemon.llm.types import (
    ApiMessage,
    Block,
    ModelRequest,
    ReasoningDelta,
    StopChunk,
    TextBlock,
    TextDelta,
    ToolCallEnd,
    ToolResultBlock,
    ToolUseBlock,
    UsageChunk,
)
from hdsp.daemon.store import append_api_message, update_task
from hdsp.protocol import (
    Ask,
    ClineMessage,
    CompletedInfo,
    Event,
    HistoryItem,
    MessageEvent,
    MessagePayload,
    Say,
    TaskAborted,
    TaskActive,
    TaskCompleted,
    TaskIdle,
    TaskResumable,
    TaskStarted,
    TaskState,
    TaskTokenUsageUpdated,
    TokenUsage,
    ToolUsageEntry,
)

from .prompt import system_prompt

if TYPE_CHECKING:
    from .manager import TaskManager

__all__ = ["Task"]

log = structlog.get_logger("hdsp.tasks")

#: Live-only partial updates of one message are sent at most this often (seconds).
PARTIAL_INTERVAL = 0.05
#: Model requests in one turn before the turn stops (a guard against loops).
MAX_REQUESTS_PER_TURN = 50
_api_encoder = msgspec.json.Encoder()


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Streaming:
    """What the current model request has produced so far."""

    text: str = ""
    text_msg: ClineMessage | None = None
    reasoning: str = ""
    reasoning_msg: ClineMessage | None = None
    last_partial: float = 0.0
    tool_calls: list[ToolCallEnd] = field(default_factory=list)
    usage: UsageChunk = field(default_factory=UsageChunk)
    stop_reason: str | None = None


class Task:
    def __init__(
        self,
        manager: TaskManager,
        item: HistoryItem,
        api: list[ApiMessage],
        state: TaskState,
        last_ts: int = 0,
    ) -> None:
        self._manager = manager
        self.item = item
        self.api = api
        self.state = state
        self._last_ts = last_ts
        self._scope: anyio.CancelScope | None = None
        self._turn_done = anyio.Event()
        self._turn_done.set()
        self._stop_as: TaskState = TaskState.ABORTED
        self._streaming: _Streaming | None = None
        self.partial: dict[int, ClineMessage] = {}
        self.tool_usage: dict[str, ToolUsageEntry] = {}
        self.context_tokens = 0

    @property
    def id(self) -> str:
        return self.item.id

    @property
    def busy(self) -> bool:
        return not self._turn_done.is_set()

    def usage(self) -> TokenUsage:
        i = self.item
        return TokenUsage(
            total_tokens_in=i.tokens_in,
            total_tokens_out=i.tokens_out,
            total_cost=i.total_cost,
            context_tokens=self.context_tokens,
            total_cache_writes=i.cache_writes,
            total_cache_reads=i.cache_reads,
        )

    # ---- durable changes ----------------------------------------------------

    def _next_ts(self) -> int:
        self._last_ts = max(_now_ms(), self._last_ts + 1)
        return self._last_ts

    async def _emit(self, event: Event, *writes: Any) -> None:
        await self._manager.journal.emit(event, *writes)

    async def say(
        self, say: str, text: str | None = None, *, partial: bool = False, **fields: Any
    ) -> ClineMessage:
        msg = ClineMessage(
            ts=self._next_ts(), type="say", say=say, text=text, partial=partial or None, **fields
        )
        if partial:
            self.partial[msg.ts] = msg
        await self._emit(MessageEvent(payload=(MessagePayload(self.id, "created", msg),)))
        return msg

    async def ask(self, ask: str, text: str | None = None) -> ClineMessage:
        msg = ClineMessage(ts=self._next_ts(), type="ask", ask=ask, text=text)
        await self._emit(MessageEvent(payload=(MessagePayload(self.id, "created", msg),)))
        return msg

    async def update(self, msg: ClineMessage, **changes: Any) -> ClineMessage:
        new = msgspec.structs.replace(msg, **changes)
        if new.partial:
            self.partial[new.ts] = new
        else:
            self.partial.pop(new.ts, None)
        await self._emit(MessageEvent(payload=(MessagePayload(self.id, "updated", new),)))
        return new

    async def set_state(self, state: TaskState, event: Event | None = None) -> None:
        self.state = state
        self.item = msgspec.structs.replace(self.item, state=state)
        if event is None:
            await self._manager.journal.write(update_task(self.item))
        else:
            await self._emit(event, update_task(self.item))

    async def append_api(self, message: ApiMessage) -> None:
        self.api.append(message)
        await self._manager.journal.write(
            append_api_message(self.id, len(self.api) - 1, _api_encoder.encode(message))
        )

    # ---- turns --------------------------------------------------------------

    def start_turn(self, tg: TaskGroup, *, first: bool = False) -> None:
        """Start an agent turn in `tg`. The caller checked that none is running."""
        assert not self.busy
        self._turn_done = anyio.Event()
        self._scope = anyio.CancelScope()
        self._stop_as = TaskState.ABORTED
        self.state = TaskState.RUNNING
        tg.start_soon(self._run_turn, first, name=f"task {self.id}")

    async def stop(self, *, as_state: TaskState = TaskState.ABORTED) -> None:
        """Cancel the running turn, if any, and wait until it has ended."""
        if self._scope is not None and self.busy:
            self._stop_as = as_state
            self._scope.cancel()
        await self._turn_done.wait()

    async def _run_turn(self, first: bool) -> None:
        assert self._scope is not None
        structlog.contextvars.bind_contextvars(task_id=self.id)
        outcome: TaskState | None = None
        error: ProviderError | None = None
        try:
            with self._scope:
                start_event: Event = (
                    TaskStarted(payload=(self.id,)) if first else TaskActive(payload=(self.id,))
                )
                await self.set_state(TaskState.RUNNING, start_event)
                try:
                    await self._loop()
                    outcome = TaskState.COMPLETED
                except ProviderError as exc:
                    error = exc
                    outcome = TaskState.IDLE
        except Exception:
            # A bug must not take the daemon down with it: the task ends aborted,
            # says so, and the log has the traceback.
            log.exception("task turn failed")
            outcome = None
        finally:
            with anyio.move_on_after(10, shield=True):
                await self._end_turn(outcome, error)
            self._scope = None
            self._turn_done.set()

    async def _end_turn(self, outcome: TaskState | None, error: ProviderError | None) -> None:
        await self._close_streaming(interrupted=outcome is None)
        if outcome is TaskState.COMPLETED:
            await self.set_state(
                TaskState.COMPLETED,
                TaskCompleted(
                    payload=(
                        self.id,
                        self.usage(),
                        dict(self.tool_usage),
                        CompletedInfo(is_subtask=self.item.parent_task_id is not None),
                    )
                ),
            )
        elif outcome is TaskState.IDLE and error is not None:
            await self.say(Say.ERROR, str(error))
            await self.ask(Ask.API_REQ_FAILED, str(error))
            await self.set_state(TaskState.IDLE, TaskIdle(payload=(self.id,)))
        elif self._stop_as is TaskState.RESUMABLE:
            await self.set_state(TaskState.RESUMABLE, TaskResumable(payload=(self.id,)))
        else:
            if self._scope is not None and not self._scope.cancel_called:
                await self.say(Say.ERROR, "The task stopped on an internal error; see the log.")
            await self.set_state(TaskState.ABORTED, TaskAborted(payload=(self.id,)))

    async def _close_streaming(self, *, interrupted: bool) -> None:
        """Finish messages left partial and keep what the model said so far."""
        s, self._streaming = self._streaming, None
        if s is None:
            return
        if s.reasoning_msg is not None and s.reasoning_msg.partial:
            await self.update(s.reasoning_msg, text=s.reasoning, partial=False)
        if s.text_msg is not None and s.text_msg.partial:
            await self.update(s.text_msg, text=s.text, partial=False)
        if interrupted and s.text and self._stop_as is not TaskState.RESUMABLE:
            # A user's cancel keeps what the model said; a daemon stopping makes the
            # request again on resume instead.
            await self.append_api(
                ApiMessage(
                    role="assistant",
                    content=[TextBlock(text=s.text + "\n\n[Response interrupted]")],
                    ts=self._next_ts(),
                )
            )

    async def _loop(self) -> None:
        manager = self._manager
        provider = manager.providers.get(self.item.api_config_name)
        for _ in range(MAX_REQUESTS_PER_TURN):
            request = ModelRequest(
                system=system_prompt(
                    workspace=self.item.workspace or ".", mode=self.item.mode or "code", tools=[]
                ),
                messages=list(self.api),
            )
            started = await self.say(
                Say.API_REQ_STARTED,
                json.dumps({"model": provider.model, "profile": self.item.api_config_name}),
            )
            s = self._streaming = _Streaming()
            async with provider.stream(request) as chunks:
                async for chunk in chunks:
                    await self._on_chunk(s, chunk)
            await self._close_streaming(interrupted=False)
            await self._account(started, s, provider.info())
            content: list[Block] = []
            if s.text:
                content.append(TextBlock(text=s.text))
            content.extend(
                ToolUseBlock(id=c.id, name=c.name, input=c.arguments or {}) for c in s.tool_calls
            )
            await self.append_api(ApiMessage(role="assistant", content=content, ts=self._next_ts()))
            if not s.tool_calls:
                return
            results: list[Block] = [
                ToolResultBlock(
                    tool_use_id=c.id,
                    content=[TextBlock(text=f"Error: there is no tool named {c.name!r}.")],
                    is_error=True,
                )
                for c in s.tool_calls
            ]
            await self.append_api(ApiMessage(role="user", content=results, ts=self._next_ts()))

    async def _on_chunk(self, s: _Streaming, chunk: object) -> None:
        match chunk:
            case TextDelta(text=delta):
                if s.reasoning_msg is not None and s.reasoning_msg.partial:
                    # Reasoning is over once the answer begins.
                    s.reasoning_msg = await self.update(
                        s.reasoning_msg, text=s.reasoning, partial=False
                    )
                s.text += delta
                if s.text_msg is None:
                    s.text_msg = await self.say(Say.TEXT, s.text, partial=True)
                    s.last_partial = time.monotonic()
                elif time.monotonic() - s.last_partial >= PARTIAL_INTERVAL:
                    s.text_msg = await self.update(s.text_msg, text=s.text)
                    s.last_partial = time.monotonic()
            case ReasoningDelta(text=delta):
                s.reasoning += delta
                if s.reasoning_msg is None:
                    s.reasoning_msg = await self.say(Say.REASONING, s.reasoning, partial=True)
                    s.last_partial = time.monotonic()
                elif time.monotonic() - s.last_partial >= PARTIAL_INTERVAL:
                    s.reasoning_msg = await self.update(s.reasoning_msg, text=s.reasoning)
                    s.last_partial = time.monotonic()
            case ToolCallEnd():
                s.tool_calls.append(chunk)
            case UsageChunk():
                s.usage = chunk
            case StopChunk(reason=reason):
                s.stop_reason = reason

    async def _account(self, started: ClineMessage, s: _Streaming, info: Any) -> None:
        u = s.usage
        cost = (
            u.input_tokens * info.input_price
            + u.output_tokens * info.output_price
            + u.cache_read_tokens * info.cache_read_price
            + u.cache_write_tokens * info.cache_write_price
        ) / 1_000_000
        i = self.item
        self.item = msgspec.structs.replace(
            i,
            tokens_in=i.tokens_in + u.input_tokens,
            tokens_out=i.tokens_out + u.output_tokens,
            cache_reads=(i.cache_reads or 0) + u.cache_read_tokens,
            cache_writes=(i.cache_writes or 0) + u.cache_write_tokens,
            total_cost=i.total_cost + cost,
        )
        # Providers report input split into uncached, cache-read and cache-written.
        self.context_tokens = (
            u.input_tokens + u.cache_read_tokens + u.cache_write_tokens + u.output_tokens
        )
        info_text = json.loads(started.text or "{}")
        info_text.update(
            tokensIn=u.input_tokens,
            tokensOut=u.output_tokens,
            cacheReads=u.cache_read_tokens,
            cacheWrites=u.cache_write_tokens,
            cost=cost,
        )
        await self.update(started, text=json.dumps(info_text))
        await self._emit(
            TaskTokenUsageUpdated(payload=(self.id, self.usage(), dict(self.tool_usage))),
            update_task(self.item),
        )
