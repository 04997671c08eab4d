"""One conversation with the agent: Roo's Task.

A task holds its HistoryItem, its API history and its state. Each agent turn (model
request, tool calls, repeat) runs in its own cancel scope inside the TaskManager's
task group; cancelling the scope stops the turn wherever it is, and the turn always
ends with a final event (`taskCompleted`, `taskAborted` or `taskResumable`).

While a turn waits for a person (an ask), the task's state says so (Roo's
classification: interactive, idle, resumable) and any client may answer; the
first answer wins.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup

from hdsp.daemon.approvals import Decision
from hdsp.daemon.errors import CommandError
from hdsp.daemon.llm.errors import ProviderError
from hdsp.daemon.llm.types import (
    ApiMessage,
    Block,
    ImageBlock,
    ModelInfo,
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
from hdsp.daemon.tools import AskAnswer, ToolCategory, ToolError, ToolResult
from hdsp.protocol import (
    Ask,
    ClineMessage,
    CompletedInfo,
    ErrorCode,
    Event,
    HistoryItem,
    MessageEvent,
    MessagePayload,
    QueuedMessage,
    QueuedMessagesUpdated,
    Say,
    SendMessageData,
    TaskAborted,
    TaskActive,
    TaskAskResponded,
    TaskCompleted,
    TaskIdle,
    TaskInteractive,
    TaskResumable,
    TaskStarted,
    TaskState,
    TaskTokenUsageUpdated,
    TaskToolFailed,
    TokenUsage,
    ToolUsageEntry,
)

from .prompt import system_prompt

if TYPE_CHECKING:
    from .manager import TaskManager

__all__ = ["Task", "user_content"]

log = structlog.get_logger("hdsp.tasks")

#: Live-only partial updates of one message are sent at most this often (seconds).
PARTIAL_INTERVAL = 0.05
#: Model requests in one turn before the turn stops (a guard against loops).
MAX_REQUESTS_PER_TURN = 50
#: Messages that may wait for a busy task.
MAX_QUEUED = 32

#: Which state a waiting ask puts its task in (Roo's classification).
_ASK_STATES: dict[str, tuple[TaskState, type[TaskInteractive | TaskIdle | TaskResumable]]] = {
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

_api_encoder = msgspec.json.Encoder()


def _now_ms() -> int:
    return int(time.time() * 1000)


def user_content(text: str | None, images: list[str] | None) -> list[Block]:
    """API content of a user message: images (data URLs or bare base64), then text."""
    content: list[Block] = []
    for image in images or []:
        media_type, _, data = image.removeprefix("data:").partition(";base64,")
        if not data:
            media_type, data = "image/png", image
        content.append(ImageBlock(media_type=media_type or "image/png", data=data))
    if text:
        content.append(TextBlock(text=text))
    return content


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


@dataclass
class _PendingAsk:
    message: ClineMessage
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: AskAnswer | None = None


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
        self._pending_ask: _PendingAsk | None = None
        self._answered: deque[int] = deque(maxlen=64)
        self.queue: deque[QueuedMessage] = deque()
        self.partial: dict[int, ClineMessage] = {}
        self.tool_usage: dict[str, ToolUsageEntry] = {}
        self.context_tokens = 0

    # ---- what tools see (ToolContext) -------------------------------------------

    @property
    def id(self) -> str:
        return self.item.id

    @property
    def task_id(self) -> str:
        return self.item.id

    @property
    def workspace(self) -> Path:
        return Path(self.item.workspace or ".")

    def service(self, name: str) -> Any:
        return self._manager.services[name]

    # -------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return not self._turn_done.is_set()

    @property
    def pending_ask(self) -> ClineMessage | None:
        return self._pending_ask.message if self._pending_ask is not None else None

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

    async def _created(self, msg: ClineMessage) -> ClineMessage:
        if msg.partial:
            self.partial[msg.ts] = msg
        await self._emit(MessageEvent(payload=(MessagePayload(self.id, "created", msg),)))
        return msg

    async def say(
        self, say: str, text: str | None = None, *, partial: bool = False, **fields: Any
    ) -> ClineMessage:
        return await self._created(
            ClineMessage(
                ts=self._next_ts(),
                type="say",
                say=say,
                text=text,
                partial=partial or None,
                **fields,
            )
        )

    async def update(self, message: ClineMessage, **changes: Any) -> ClineMessage:
        new = msgspec.structs.replace(message, **changes)
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

    # ---- asks ---------------------------------------------------------------

    async def ask(self, ask: str, text: str | None = None, **fields: Any) -> AskAnswer:
        """Post an ask and wait for the first answer from any client."""
        msg = await self._created(
            ClineMessage(ts=self._next_ts(), type="ask", ask=ask, text=text, **fields)
        )
        pending = self._pending_ask = _PendingAsk(msg)
        state, event = _ASK_STATES.get(ask, (TaskState.INTERACTIVE, TaskInteractive))
        try:
            await self.set_state(state, event(payload=(self.id,)))
            await pending.answered.wait()
        finally:
            if self._pending_ask is pending:
                self._pending_ask = None
        await self.set_state(TaskState.RUNNING, TaskActive(payload=(self.id,)))
        assert pending.answer is not None
        return pending.answer

    async def respond(self, ask_ts: int, answer: AskAnswer) -> None:
        """Answer the waiting ask `ask_ts`; raises CommandError when there is none."""
        pending = self._pending_ask
        if pending is None or pending.message.ts != ask_ts:
            if ask_ts in self._answered:
                raise CommandError(
                    ErrorCode.ALREADY_ANSWERED,
                    f"The ask {ask_ts} of task {self.id} was already answered.",
                )
            raise CommandError(
                ErrorCode.INVALID_STATE,
                f"No ask {ask_ts} waits in task {self.id}"
                + (f"; the waiting one is {pending.message.ts}." if pending else "."),
            )
        # First answer wins: from here on, the ask is no longer pending.
        self._pending_ask = None
        self._answered.append(ask_ts)
        pending.answer = answer
        await self.update(pending.message, is_answered=True)
        if answer.text or answer.images:
            await self.say(Say.USER_FEEDBACK, answer.text, images=answer.images or None)
        await self._emit(TaskAskResponded(payload=(self.id,)))
        pending.answered.set()

    # ---- queued messages ------------------------------------------------------

    async def enqueue(self, data: SendMessageData) -> None:
        if len(self.queue) >= MAX_QUEUED:
            raise CommandError(
                ErrorCode.TASK_BUSY,
                f"Task {self.id} is busy and {MAX_QUEUED} messages wait already; "
                "wait for it or cancel it.",
            )
        self.queue.append(
            QueuedMessage(
                timestamp=_now_ms(), id=uuid.uuid4().hex, text=data.text or "", images=data.images
            )
        )
        await self._emit(QueuedMessagesUpdated(payload=(self.id, list(self.queue))))

    async def delete_queued(self, message_id: str) -> None:
        kept = [m for m in self.queue if m.id != message_id]
        if len(kept) == len(self.queue):
            raise CommandError(
                ErrorCode.INVALID_REQUEST, f"No queued message {message_id} in task {self.id}."
            )
        self.queue = deque(kept)
        await self._emit(QueuedMessagesUpdated(payload=(self.id, list(self.queue))))

    # ---- turns --------------------------------------------------------------

    def start_turn(
        self, tg: TaskGroup, *, first: bool = False, message: SendMessageData | None = None
    ) -> None:
        """Start an agent turn in `tg`, first recording `message` from the user.
        The caller checked that no turn is running."""
        assert not self.busy
        self._turn_done = anyio.Event()
        self._scope = anyio.CancelScope()
        self._stop_as = TaskState.ABORTED
        self.state = TaskState.RUNNING
        tg.start_soon(self._run_turn, tg, first, message, name=f"task {self.id}")

    async def stop(self, *, as_state: TaskState = TaskState.ABORTED) -> None:
        """Cancel the running turn, if any, and wait until it has ended."""
        if self._scope is not None and self.busy:
            self._stop_as = as_state
            self._scope.cancel()
        await self._turn_done.wait()

    async def _run_turn(self, tg: TaskGroup, first: bool, message: SendMessageData | None) -> None:
        assert self._scope is not None
        structlog.contextvars.bind_contextvars(task_id=self.id)
        outcome: TaskState | None = None
        try:
            with self._scope:
                start: Event = (TaskStarted if first else TaskActive)(payload=(self.id,))
                await self.set_state(TaskState.RUNNING, start)
                if message is not None:
                    await self.say(Say.USER_FEEDBACK, message.text, images=message.images)
                    await self.append_api(
                        ApiMessage(
                            role="user",
                            content=user_content(message.text, message.images),
                            ts=self._next_ts(),
                        )
                    )
                await self._loop()
                outcome = TaskState.COMPLETED
        except Exception:
            # A bug must not take the daemon down with it: the task ends aborted,
            # says so, and the log has the traceback.
            log.exception("task turn failed")
        finally:
            with anyio.move_on_after(10, shield=True):
                await self._end_turn(outcome)
            self._scope = None
            self._pending_ask = None
            self._turn_done.set()
        if outcome is TaskState.COMPLETED and self.queue and not self._manager.closing:
            queued = self.queue.popleft()
            await self._emit(QueuedMessagesUpdated(payload=(self.id, list(self.queue))))
            self.start_turn(tg, message=SendMessageData(text=queued.text, images=queued.images))

    async def _end_turn(self, outcome: TaskState | None) -> None:
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
                    content=[TextBlock(text=s.text + "\n\n[Response interrupted by the user]")],
                    ts=self._next_ts(),
                )
            )

    async def _request(self) -> _Streaming:
        """One model request, retried after a failure once a person says so."""
        manager = self._manager
        tools = manager.tools
        while True:
            provider = manager.providers.get(self.item.api_config_name)
            request = ModelRequest(
                system=system_prompt(
                    workspace=str(self.workspace),
                    mode=self.item.mode or "code",
                    tools=tools.names(),
                ),
                messages=list(self.api),
                tools=tools.specs(),
            )
            started = await self.say(
                Say.API_REQ_STARTED,
                json.dumps({"model": provider.model, "profile": self.item.api_config_name}),
            )
            s = self._streaming = _Streaming()
            try:
                async with provider.stream(request) as chunks:
                    async for chunk in chunks:
                        await self._on_chunk(s, chunk)
            except ProviderError as exc:
                await self._close_streaming(interrupted=False)
                await self.say(Say.ERROR, exc.message)
                await self.ask(Ask.API_REQ_FAILED, exc.message)
                continue  # any answer retries
            await self._close_streaming(interrupted=False)
            await self._account(started, s, provider.info())
            return s

    async def _loop(self) -> None:
        for _ in range(MAX_REQUESTS_PER_TURN):
            s = await self._request()
            content: list[Block] = []
            if s.text:
                content.append(TextBlock(text=s.text))
            content.extend(
                ToolUseBlock(id=c.id, name=c.name, input=c.arguments or {}) for c in s.tool_calls
            )
            await self.append_api(ApiMessage(role="assistant", content=content, ts=self._next_ts()))
            if not s.tool_calls:
                return  # a reply with no tool call ends the turn
            results: list[Block] = []
            completed = False
            for call in s.tool_calls:
                result = await self._run_tool(call)
                results.append(
                    ToolResultBlock(
                        tool_use_id=call.id, content=result.content, is_error=result.is_error
                    )
                )
                completed = completed or result.completes_task
            await self.append_api(ApiMessage(role="user", content=results, ts=self._next_ts()))
            if completed:
                return
        await self.say(
            Say.ERROR, f"The agent made {MAX_REQUESTS_PER_TURN} requests in one turn; stopping."
        )

    async def _run_tool(self, call: ToolCallEnd) -> ToolResult:
        registry = self._manager.tools
        tool = registry.get(call.name)
        entry = self.tool_usage.get(call.name, ToolUsageEntry(attempts=0, failures=0))
        self.tool_usage[call.name] = msgspec.structs.replace(entry, attempts=entry.attempts + 1)
        if tool is None:
            result = ToolResult.text(
                f"Error: there is no tool named {call.name!r}. "
                f"The tools are: {', '.join(registry.names())}.",
                is_error=True,
            )
        elif call.arguments is None:
            result = ToolResult.text(
                f"Error: the arguments of {call.name} are not valid JSON "
                f"({call.raw_arguments[:200]!r}). Send one JSON object that matches the "
                "tool's schema.",
                is_error=True,
            )
        elif problems := registry.validate(call.name, call.arguments):
            result = ToolResult.text(
                f"Error: invalid arguments for {call.name}:\n"
                + "\n".join(f"- {p}" for p in problems),
                is_error=True,
            )
        else:
            result = await self._approve_and_execute(tool, call.arguments)
        if result.is_error:
            entry = self.tool_usage[call.name]
            self.tool_usage[call.name] = msgspec.structs.replace(entry, failures=entry.failures + 1)
            text = " ".join(b.text for b in result.content if isinstance(b, TextBlock))
            await self._emit(TaskToolFailed(payload=(self.id, call.name, text)))
        return result

    async def _approve_and_execute(self, tool: Any, args: Mapping[str, Any]) -> ToolResult:
        verdict = self._manager.approvals.decide(tool, args, task_id=self.id)
        if verdict.decision is Decision.DENY:
            return ToolResult.text(f"Denied: {verdict.reason}", is_error=True)
        text = tool.approval_text(args)
        if verdict.decision is Decision.ASK:
            kind = {ToolCategory.COMMAND: Ask.COMMAND, ToolCategory.MCP: Ask.USE_MCP_SERVER}.get(
                tool.category, Ask.TOOL
            )
            answer = await self.ask(kind, text)
            if not answer.approved:
                feedback = f" The user said: {answer.text}" if answer.text else ""
                return ToolResult.text(f"The user denied this operation.{feedback}")
        elif tool.category is not ToolCategory.COMPLETION:
            await self.say(Say.TOOL, text)
        try:
            return await tool.execute(self, args)  # type: ignore[no-any-return]
        except ToolError as exc:
            return ToolResult.text(f"Error: {exc}", is_error=True)
        except Exception as exc:
            log.exception("tool failed", tool=tool.name)
            return ToolResult.text(
                f"Error: the tool {tool.name} failed inside hdsp ({type(exc).__name__}).",
                is_error=True,
            )

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

    async def _account(self, started: ClineMessage, s: _Streaming, info: ModelInfo) -> None:
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
