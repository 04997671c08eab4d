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

import hashlib
import json
import os
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup

from hdsp.daemon.approvals import Decision
from hdsp.daemon.errors import CommandError
from hdsp.daemon.llm import Provider
from hdsp.daemon.llm.errors import ContextWindowExceeded, ProviderError
from hdsp.daemon.llm.images import (
    fit_image,
    image_block,
    image_refused,
    recent_images_only,
    without_images,
)
from hdsp.daemon.llm.types import (
    ApiMessage,
    Block,
    ImageBlock,
    ModelInfo,
    ModelRequest,
    ReasoningBlock,
    ReasoningDelta,
    StopChunk,
    TextBlock,
    TextDelta,
    ToolCallEnd,
    ToolResultBlock,
    ToolUseBlock,
    UsageChunk,
)
from hdsp.daemon.scrubber import scrubber
from hdsp.daemon.store import append_api_message, save_turn, save_ui_message, update_task
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

__all__ = ["CallState", "Task", "TaskCarry", "TurnState", "turn_decoder", "user_content"]

log = structlog.get_logger("hdsp.tasks")

#: Live-only partial updates of one message are sent at most this often (seconds).
PARTIAL_INTERVAL = 0.05
#: A message still streaming has its text stored (no event) at most this often.
PARTIAL_SAVE_INTERVAL = 1.0
#: Model requests in one turn before the turn stops (a guard against loops).
MAX_REQUESTS_PER_TURN = 50
#: Images a model request carries: the most recent ones; older images become a
#: short text in the request (the stored history keeps them).
MAX_REQUEST_IMAGES = 4
#: Messages that may wait for a busy task.
MAX_QUEUED = 32
#: The same call with the same arguments this many times in a row is refused.
REPETITION_LIMIT = 3
#: A model request whose reply has not begun after this long (seconds) gets an
#: `api_req_waiting` message, so that no one stares at silence...
WAIT_NOTICE_AFTER = 2.0
#: ...updated this often (seconds) with the time waited, until the reply begins.
WAIT_UPDATE_INTERVAL = 5.0
#: How much of arguments that are not valid JSON a message quotes (characters).
RAW_ARGUMENTS_SHOWN = 1000

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

#: Tools whose only effects are messages of their own task, which the journal
#: commits after the saved turn state anyway: they need no flush before they run.
_EFFECTS_IN_HISTORY = frozenset({ToolCategory.COMPLETION, ToolCategory.FOLLOWUP})

_api_encoder = msgspec.json.Encoder()


def _replace_lone_surrogates(value: Any) -> Any:
    """`value` (builtins) with each lone surrogate, which no JSON encoder takes (a
    file name or text that was not UTF-8, let through by a tool), as U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, list):
        return [_replace_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_lone_surrogates(k): _replace_lone_surrogates(v) for k, v in value.items()}
    return value


def _encodable_text(result: ToolResult) -> ToolResult:
    """`result`, with lone surrogates in its text replaced: a tool result is
    untrusted text, and one the store cannot encode must not end the daemon."""
    for block in result.content:
        if isinstance(block, TextBlock):
            try:
                block.text.encode("utf-8")
            except UnicodeEncodeError:
                break
    else:
        return result
    content = [
        TextBlock(text=_replace_lone_surrogates(b.text)) if isinstance(b, TextBlock) else b
        for b in result.content
    ]
    return ToolResult(content, is_error=result.is_error, completes_task=result.completes_task)


def _now_ms() -> int:
    return int(time.time() * 1000)


def user_content(text: str | None, images: list[str] | None) -> list[Block]:
    """API content of a user message: images (data URLs or bare base64), then text."""
    content: list[Block] = [fit_image(image_block(image)) for image in images or []]
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
    #: Signatures of the reasoning blocks (Anthropic thinking), to send back.
    signatures: list[str] = field(default_factory=list)
    last_partial: float = 0.0
    tool_calls: list[ToolCallEnd] = field(default_factory=list)
    usage: UsageChunk = field(default_factory=UsageChunk)
    stop_reason: str | None = None


@dataclass
class _Wait:
    """How long the current model request has waited for its reply to begin."""

    started: float
    #: The server's response began (the provider's stream was entered).
    accepted: bool = False
    #: How the wait ended: "began" (a first chunk), "failed", "stopped".
    outcome: str | None = None
    over: anyio.Event = field(default_factory=anyio.Event)

    def end(self, outcome: str) -> None:
        if self.outcome is None:
            self.outcome = outcome
            self.over.set()

    def text(self) -> str:
        waited = anyio.current_time() - self.started
        if self.outcome == "began":
            return f"The model began its reply after {waited:.0f} s."
        if self.outcome == "failed":
            return f"The request ended after {waited:.0f} s without a reply."
        if self.outcome == "stopped":
            return f"Stopped waiting for the model after {waited:.0f} s."
        if self.accepted:
            return f"The model server answered; waiting {waited:.0f} s for the reply to begin."
        return f"Waiting for the model server to answer: {waited:.0f} s so far."


@dataclass
class _PendingAsk:
    message: ClineMessage
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: AskAnswer | None = None


class CallState(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One tool call of the open turn: pending -> asking -> approved -> running -> done."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str = ""
    status: Literal["pending", "asking", "approved", "running", "done"] = "pending"
    #: The approval ask, while one waits.
    ask_ts: int | None = None
    #: When a waiting approval gives up (ms since the epoch; from the ask's ts, so
    #: a restart does not restart the clock), and whether it then approves.
    ask_deadline: int | None = None
    approve_on_timeout: bool = False
    #: The approval was the request cap's (auto_approval_max_req_reached).
    cap_reached: bool = False
    result: list[TextBlock | ImageBlock] | None = None
    is_error: bool = False
    completes_task: bool = False


class TurnState(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Where an unfinished turn stands, saved at every step, so that a daemon that
    stopped or crashed resumes the turn instead of starting it over: a model
    request in flight is made again, approved tool calls run, a tool that was
    running is reported as interrupted, and a waiting ask keeps waiting."""

    phase: Literal["request", "tools"] = "request"
    #: An api_req_failed ask the request waits on.
    ask_ts: int | None = None
    #: A resume_task ask the turn waits on before it goes on (after a restart).
    resume_ask_ts: int | None = None
    calls: list[CallState] = []


_turn_encoder = msgspec.json.Encoder()
turn_decoder = msgspec.json.Decoder(TurnState)


def _command_cwd(workspace: Path, given: Any) -> str:
    """The directory a command ask names, as the model asked for it (absolute,
    normalised but not resolved: a way out of the workspace shows as one)."""
    return os.path.normpath(os.path.join(workspace, str(given or ".")))


class TaskCarry(msgspec.Struct, kw_only=True, gc=False):
    """What an unloaded task keeps in memory: the counters the store has no place
    for, which a user sees (tool usage, context size in `taskCompleted` and
    `taskTokenUsageUpdated`) or which guard the next turn (mistakes, repetition)."""

    tool_usage: dict[str, ToolUsageEntry] = {}
    context_tokens: int = 0
    mistakes: int = 0
    #: The last tool call: its name and a digest of its arguments.
    last_call: tuple[str, bytes] | None = None
    repeats: int = 0


_NOTHING_CARRIED = TaskCarry()


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
        self._last_answered: _PendingAsk | None = None
        #: The open turn's saved state (None between turns).
        self.turn: TurnState | None = None
        #: Whether the last turn state queued for the store was an open turn.
        self._open_turn_saved = False
        #: Set while a tool runs: messages it creates carry its tool_use_id.
        self._tool_use_id: str | None = None
        #: Text a person gave while resuming, for the next model request.
        self._feedback: list[str] = []
        #: While a tool runs: (seconds, answer on timeout or None to fail) for its asks.
        self._ask_timeout: tuple[float, AskAnswer | None] | None = None
        #: Consecutive tool errors, and the last call (name, digest of the
        #: arguments) with its count.
        self.mistakes = 0
        self._last_call: tuple[str, bytes] | None = None
        self._repeats = 0
        self.queue: deque[QueuedMessage] = deque()
        self.partial: dict[int, ClineMessage] = {}
        self._partial_saved: dict[int, float] = {}
        self.tool_usage: dict[str, ToolUsageEntry] = {}
        self.context_tokens = 0
        #: A provider refused an image: no request sends the images of API
        #: messages up to this ts again.
        self._images_refused_upto = 0

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

    def _kernel_line(self) -> str | None:
        """Which kernel this task's code runs in, for the system prompt."""
        kernels = self._manager.services.get("kernels")
        if kernels is None:
            return None
        line: str = kernels.describe_for_task(self.id, self.workspace)
        return line

    # -------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return not self._turn_done.is_set()

    @property
    def pending_ask(self) -> ClineMessage | None:
        return self._pending_ask.message if self._pending_ask is not None else None

    @property
    def idle(self) -> bool:
        """No turn runs or is open, nothing waits (ask, queue, feedback) and no
        message streams: all there is of the task is in the store, but for what
        `carry` keeps."""
        return (
            not self.busy
            and self._pending_ask is None
            and self.turn is None
            and not self.queue
            and not self._feedback
            and not self.partial
        )

    def carry(self) -> TaskCarry | None:
        """What to keep of this task when it is unloaded; None: nothing."""
        carry = TaskCarry(
            tool_usage=self.tool_usage,
            context_tokens=self.context_tokens,
            mistakes=self.mistakes,
            last_call=self._last_call,
            repeats=self._repeats,
        )
        return None if carry == _NOTHING_CARRIED else carry

    def restore(self, carry: TaskCarry) -> None:
        """Take back what `carry` kept when the task was unloaded."""
        self.tool_usage = carry.tool_usage
        self.context_tokens = carry.context_tokens
        self.mistakes = carry.mistakes
        self._last_call = carry.last_call
        self._repeats = carry.repeats

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
        if self._tool_use_id is not None:
            fields.setdefault("tool_use_id", self._tool_use_id)
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
        writes = []
        if new.partial:
            self.partial[new.ts] = new
            now = time.monotonic()
            if now - self._partial_saved.get(new.ts, 0.0) >= PARTIAL_SAVE_INTERVAL:
                # Now and then, what a crash would otherwise take: the text so far.
                self._partial_saved[new.ts] = now
                writes.append(save_ui_message(self.id, new.ts, _api_encoder.encode(new)))
        else:
            self.partial.pop(new.ts, None)
            self._partial_saved.pop(new.ts, None)
        await self._emit(MessageEvent(payload=(MessagePayload(self.id, "updated", new),)), *writes)
        return new

    async def set_state(self, state: TaskState, event: Event | None = None) -> None:
        self.state = state
        self.item = msgspec.structs.replace(self.item, state=state)
        if event is None:
            await self._manager.journal.write(update_task(self.item))
        else:
            await self._emit(event, update_task(self.item))

    async def append_api(self, message: ApiMessage, *, with_turn: bool = False) -> None:
        """Append to the API history; `with_turn` saves the turn state in the same
        transaction (so a crash never leaves them disagreeing)."""
        try:
            body = _api_encoder.encode(message)
        except UnicodeEncodeError:
            clean = _replace_lone_surrogates(msgspec.to_builtins(message))
            message = msgspec.convert(clean, type(message))
            body = _api_encoder.encode(message)
        self.api.append(message)
        writes = [append_api_message(self.id, len(self.api) - 1, body)]
        if with_turn:
            writes.append(self._turn_write())
            is_open = self.turn is not None
        await self._manager.journal.write(*writes)
        if with_turn:
            self._open_turn_saved = is_open

    # ---- asks ---------------------------------------------------------------

    async def ask(self, ask: str, text: str | None = None, **fields: Any) -> AskAnswer:
        """Post an ask and wait for the first answer from any client (within the
        time the approval policy gives the running tool's asks, if any)."""
        message = await self.post_ask(ask, text, **fields)
        if self._ask_timeout is None:
            return await self.wait_answer(message)
        seconds, on_timeout = self._ask_timeout
        fallback = on_timeout or AskAnswer("noButtonClicked", by="timeout")
        answer = await self.wait_answer(
            message, deadline_ms=message.ts + int(seconds * 1000), on_timeout=fallback
        )
        if on_timeout is None and answer is fallback:
            raise ToolError(f"No answer within {seconds:g} s.")
        return answer

    async def post_ask(self, ask: str, text: str | None = None, **fields: Any) -> ClineMessage:
        """Post an ask; it is answerable from this moment (an answer that comes
        before `wait_answer` is kept for it)."""
        if self._tool_use_id is not None:
            fields.setdefault("tool_use_id", self._tool_use_id)
        message = ClineMessage(ts=self._next_ts(), type="ask", ask=ask, text=text, **fields)
        self._pending_ask = _PendingAsk(message)
        return await self._created(message)

    async def wait_answer(
        self,
        message: ClineMessage,
        *,
        deadline_ms: int | None = None,
        on_timeout: AskAnswer | None = None,
    ) -> AskAnswer:
        """Wait for the answer to the ask `message` (posted now or before a restart),
        with the task in the state Roo gives that kind of ask. At `deadline_ms` the
        ask is answered with `on_timeout`, as if a client had, so everyone sees it."""
        last = self._last_answered
        if last is not None and last.message.ts == message.ts and last.answer is not None:
            return last.answer  # answered between posting and waiting
        pending = self._pending_ask
        if pending is None or pending.message.ts != message.ts:
            pending = self._pending_ask = _PendingAsk(message)
        state, event = _ASK_STATES.get(message.ask or "", (TaskState.INTERACTIVE, TaskInteractive))
        try:
            await self.set_state(state, event(payload=(self.id,)))
            if deadline_ms is None:
                await pending.answered.wait()
            else:
                with anyio.move_on_after(max(0.0, (deadline_ms - _now_ms()) / 1000)):
                    await pending.answered.wait()
                if pending.answer is None and on_timeout is not None:
                    await self.respond(message.ts, on_timeout)
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
        self._last_answered = pending
        self._answered.append(ask_ts)
        pending.answer = answer
        await self.update(
            pending.message, is_answered=True, answer=answer.response, answered_by=answer.by
        )
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

    def _turn_write(self) -> Any:
        body = None if self.turn is None else _turn_encoder.encode(self.turn)
        return save_turn(self.id, body)

    async def save_turn(self) -> None:
        is_open = self.turn is not None
        await self._manager.journal.write(self._turn_write())
        self._open_turn_saved = is_open

    def start_turn(
        self,
        tg: TaskGroup,
        *,
        first: bool = False,
        message: SendMessageData | None = None,
        resume: bool = False,
    ) -> None:
        """Start an agent turn in `tg`: record `message` from the user first, or,
        with `resume`, go on from the saved `self.turn`. The caller checked that no
        turn is running."""
        assert not self.busy
        self._turn_done = anyio.Event()
        self._scope = anyio.CancelScope()
        self._stop_as = TaskState.ABORTED
        if not resume:
            self.state = TaskState.RUNNING
        tg.start_soon(self._run_turn, tg, first, message, resume, name=f"task {self.id}")

    async def stop(self, *, as_state: TaskState = TaskState.ABORTED) -> None:
        """Cancel the running turn, if any, and wait until it has ended."""
        if self._scope is not None and self.busy:
            self._stop_as = as_state
            self._scope.cancel()
        await self._turn_done.wait()

    async def _run_turn(
        self, tg: TaskGroup, first: bool, message: SendMessageData | None, resume: bool
    ) -> None:
        assert self._scope is not None
        structlog.contextvars.bind_contextvars(task_id=self.id)
        outcome: TaskState | None = None
        try:
            with self._scope:
                if not resume:
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
            self._tool_use_id = None
            self._turn_done.set()
        if outcome is TaskState.COMPLETED and self.queue and not self._manager.closing:
            queued = self.queue.popleft()
            await self._emit(QueuedMessagesUpdated(payload=(self.id, list(self.queue))))
            self.start_turn(tg, message=SendMessageData(text=queued.text, images=queued.images))
        self._manager.settle(self)

    async def _end_turn(self, outcome: TaskState | None) -> None:
        await self._close_streaming(interrupted=outcome is None)
        for message in list(self.partial.values()):
            # Anything else still streaming (a retry's countdown, cut off by a
            # cancel) streams no more: finish it as it stands.
            await self.update(message, partial=False)
        if outcome is None and self._stop_as is TaskState.RESUMABLE:
            # The daemon is stopping: keep the open turn for the next start.
            await self.set_state(TaskState.RESUMABLE, TaskResumable(payload=(self.id,)))
            return
        if self.turn is not None and self.turn.phase == "tools":
            await self._close_calls("The tool call was cancelled by the user.")
        elif self.turn is not None or self._open_turn_saved:
            self.turn = None
            await self.save_turn()
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
            return
        if self._scope is not None and not self._scope.cancel_called:
            await self.say(Say.ERROR, "The task stopped on an internal error; see the log.")
        await self.set_state(TaskState.ABORTED, TaskAborted(payload=(self.id,)))

    async def _close_calls(self, reason: str) -> None:
        """Answer every tool call of the open turn, so that the API history stays
        valid (each tool_use needs its tool_result), and close the turn's tool phase
        in the same transaction."""
        assert self.turn is not None
        calls = self.turn.calls
        self.turn = None
        results: list[Block] = []
        for call in calls:
            if call.status == "done" and call.result is not None:
                content, is_error = call.result, call.is_error
            else:
                content, is_error = [TextBlock(text=reason)], True
            results.append(ToolResultBlock(tool_use_id=call.id, content=content, is_error=is_error))
        await self.append_api(
            ApiMessage(role="user", content=results, ts=self._next_ts()), with_turn=True
        )

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

    async def _saved_message(self, ts: int) -> ClineMessage | None:
        store = self._manager.store
        await self._manager.journal.flush()  # it may have been posted a moment ago
        body = await store.read(store.db.ui_message, self.id, ts)
        return None if body is None else msgspec.json.decode(body, type=ClineMessage)

    async def _request(self, turn: TurnState) -> _Streaming:
        """One model request. Transient failures are retried after a backoff that
        every client sees (api_req_retry_delayed, api_req_retried); a context window
        that overflows is reduced (non-destructively, at most 3 times); anything
        else asks api_req_failed, and any answer retries."""
        manager = self._manager
        tools = manager.tools
        attempt = 0
        reductions = 0
        previous: _Streaming | None = None
        while True:
            if turn.ask_ts is not None:
                # Resumed while an api_req_failed ask waited: it still waits.
                failed = await self._saved_message(turn.ask_ts)
                if failed is not None and not failed.is_answered:
                    await self.wait_answer(failed)
                turn.ask_ts = None
                await self.save_turn()
            if self._feedback:
                text, self._feedback = "\n\n".join(self._feedback), []
                await self.append_api(
                    ApiMessage(role="user", content=[TextBlock(text=text)], ts=self._next_ts())
                )
            provider = manager.providers.get(self.item.api_config_name)
            request = ModelRequest(
                system=system_prompt(
                    workspace=str(self.workspace),
                    mode=self.item.mode or "code",
                    tools=tools.names(),
                    kernel=self._kernel_line(),
                ),
                messages=self._request_messages(),
                tools=tools.specs(),
            )
            started = await self.say(
                Say.API_REQ_STARTED,
                json.dumps({"model": provider.model, "profile": self.item.api_config_name}),
            )
            s = self._streaming = _Streaming()
            if previous is not None:
                # A retry replaces what the broken attempt showed, not adds to it.
                s.text_msg, s.reasoning_msg = previous.text_msg, previous.reasoning_msg
            try:
                await self._stream_reply(provider, request, s)
            except ProviderError as exc:
                await self._close_streaming(interrupted=False)
                failure: dict[str, Any] = {"error": exc.message}
                if s.text:
                    # A retry replaces the text on screen: what this attempt had
                    # said stays in its request's message.
                    failure["partialText"] = s.text
                await self.update(started, text=json.dumps(failure))
                previous = s
                attempt += 1
                if isinstance(exc, ContextWindowExceeded) and reductions < 3:
                    reductions += 1
                    if await self._reduce_context():
                        continue
                if image_refused(exc) and self._images_refused_upto < self.api[-1].ts:
                    await self._leave_out_images(exc)
                    continue
                delay = manager.retry_policy.delay(exc, attempt)
                if delay is not None:
                    await self._wait_before_retry(exc, attempt, delay)
                    continue
                await self.say(Say.ERROR, exc.message)
                failed = await self.post_ask(Ask.API_REQ_FAILED, exc.message)
                turn.ask_ts = failed.ts
                await self.save_turn()
                attempt = 0
                continue  # the loop waits for the answer; any answer retries
            await self._close_streaming(interrupted=False)
            if previous is not None:
                # Messages of a broken attempt that this one did not reuse.
                if previous.text_msg is not None and not s.text:
                    await self.update(previous.text_msg, text="", partial=False)
                if previous.reasoning_msg is not None and not s.reasoning:
                    await self.update(previous.reasoning_msg, text="", partial=False)
            await self._account(started, s, provider.info())
            return s

    async def _stream_reply(self, provider: Provider, request: ModelRequest, s: _Streaming) -> None:
        """Stream one reply into `s`; while it has not begun, say that the task
        waits, and for how long (:meth:`_show_wait`). Raises ProviderError."""
        wait = _Wait(started=anyio.current_time())
        error: ProviderError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._show_wait, wait, name="wait for the model")
            try:
                async with provider.stream(request) as chunks:
                    wait.accepted = True
                    async for chunk in chunks:
                        if wait.outcome is None:
                            wait.end("began")
                        await self._on_chunk(s, chunk)
            except ProviderError as exc:
                error = exc  # raised outside the task group, not in an ExceptionGroup
            finally:
                wait.end("failed" if error is not None else "stopped")
        if error is not None:
            raise error

    async def _show_wait(self, wait: _Wait) -> None:
        """An `api_req_waiting` message every client sees, once the reply has not
        begun for WAIT_NOTICE_AFTER s: updated every WAIT_UPDATE_INTERVAL s with
        the time waited, final when the wait ends (or the task is cancelled)."""
        with anyio.move_on_after(WAIT_NOTICE_AFTER):
            await wait.over.wait()
        if wait.outcome is not None:
            return
        message = await self.say(Say.API_REQ_WAITING, wait.text(), partial=True)
        try:
            while wait.outcome is None:
                with anyio.move_on_after(WAIT_UPDATE_INTERVAL):
                    await wait.over.wait()
                if wait.outcome is None:
                    message = await self.update(message, text=wait.text())
        finally:
            wait.end("stopped")
            with anyio.move_on_after(5, shield=True):
                await self.update(message, text=wait.text(), partial=False)

    def _request_messages(self) -> list[ApiMessage]:
        """The history a request sends: what is not truncated, with only the most
        recent images, and none a provider refused."""
        messages = [m for m in self.api if m.truncation_parent is None]
        if self._images_refused_upto:
            cut = sum(1 for m in messages if m.ts <= self._images_refused_upto)
            messages = without_images(messages[:cut]) + messages[cut:]
        return recent_images_only(messages, MAX_REQUEST_IMAGES)

    async def _leave_out_images(self, exc: ProviderError) -> None:
        """The provider refused an image: retry without the images sent so far,
        and tell the model and every client why they are gone."""
        self._images_refused_upto = self.api[-1].ts
        note = (
            f"The model provider refused an image ({exc.message}); hdsp left the "
            "images out of the conversation and sent it again."
        )
        await self.say(Say.ERROR, note)
        self._feedback.append(
            note + " If you need what an image showed, describe it in text or make a smaller one."
        )

    async def _wait_before_retry(self, exc: ProviderError, attempt: int, delay: float) -> None:
        """Wait `delay` seconds (cancellable: the task's scope), counting down in a
        message every client sees."""
        deadline = anyio.current_time() + delay
        msg = await self.say(
            Say.API_REQ_RETRY_DELAYED,
            f"{exc.message}\nRetry {attempt} in {delay:.0f} s.",
            partial=True,
        )
        while (left := deadline - anyio.current_time()) > 0:
            await anyio.sleep(min(1.0, left))
            remaining = max(0.0, deadline - anyio.current_time())
            msg = await self.update(
                msg, text=f"{exc.message}\nRetry {attempt} in {remaining:.0f} s."
            )
        await self.update(msg, text=f"{exc.message}\nRetried (attempt {attempt}).", partial=False)
        await self.say(Say.API_REQ_RETRIED, json.dumps({"attempt": attempt, "delay": delay}))

    async def _reduce_context(self) -> bool:
        """The forced reduction of seed 004: hide the oldest quarter of the visible
        conversation (never the task's first message), tagging messages instead of
        deleting them. False when nothing is left to hide."""
        visible = [i for i, m in enumerate(self.api) if m.truncation_parent is None]
        if len(visible) < 4:
            return False
        want = max(1, (len(visible) - 1) // 4)
        # Cut before an assistant message, so that every tool result kept has its
        # tool call, and the conversation still starts with the user's task.
        cut = want + 1
        while cut < len(visible) and self.api[visible[cut]].role != "assistant":
            cut += 1
        if cut >= len(visible) - 1:
            return False
        truncation_id = uuid.uuid4().hex
        hidden = visible[1:cut]
        writes = []
        for index in hidden:
            self.api[index] = msgspec.structs.replace(
                self.api[index], truncation_parent=truncation_id
            )
            writes.append(append_api_message(self.id, index, _api_encoder.encode(self.api[index])))
        await self._manager.journal.write(*writes)
        await self.say(
            Say.SLIDING_WINDOW_TRUNCATION,
            json.dumps({"truncationId": truncation_id, "messagesRemoved": len(hidden)}),
            context_truncation={"truncationId": truncation_id, "messagesRemoved": len(hidden)},
        )
        return True

    async def _loop(self) -> None:
        for _ in range(MAX_REQUESTS_PER_TURN):
            turn = self.turn
            if turn is None:
                turn = self.turn = TurnState()
                await self.save_turn()
            if turn.resume_ask_ts is not None:
                resume_ask = await self._saved_message(turn.resume_ask_ts)
                if resume_ask is not None and not resume_ask.is_answered:
                    answer = await self.wait_answer(resume_ask)
                    if answer.text:
                        self._feedback.append(answer.text)
                turn.resume_ask_ts = None
                await self.save_turn()
            if turn.phase == "request":
                s = await self._request(turn)
                content: list[Block] = []
                if s.reasoning and s.signatures:
                    # Anthropic needs its signed thinking back with the tool calls.
                    content.append(ReasoningBlock(text=s.reasoning, signature=s.signatures[-1]))
                if s.text:
                    content.append(TextBlock(text=s.text))
                content.extend(
                    ToolUseBlock(
                        id=c.id,
                        name=c.name,
                        input=c.arguments or {},
                        # Not JSON: the history keeps what the model sent.
                        raw_input=c.raw_arguments if c.arguments is None else None,
                    )
                    for c in s.tool_calls
                )
                if not s.tool_calls:
                    await self.append_api(
                        ApiMessage(role="assistant", content=content, ts=self._next_ts())
                    )
                    return  # a reply with no tool call ends the turn
                turn.phase = "tools"
                turn.calls = [
                    CallState(
                        id=c.id, name=c.name, arguments=c.arguments, raw_arguments=c.raw_arguments
                    )
                    for c in s.tool_calls
                ]
                await self.append_api(
                    ApiMessage(role="assistant", content=content, ts=self._next_ts()),
                    with_turn=True,
                )
            for call in turn.calls:
                if call.status != "done":
                    await self._run_call(call)
            await self._close_calls("")
            if any(c.completes_task for c in turn.calls):
                return
            if self.mistakes >= self._manager.mistake_limit:
                answer = await self.ask(
                    Ask.MISTAKE_LIMIT_REACHED,
                    f"The agent made {self.mistakes} mistakes in a row (tool errors). "
                    "Guidance from you may help it; or stop the task here.",
                )
                self.mistakes = 0
                if answer.response == "noButtonClicked":
                    return
                if answer.text:
                    self._feedback.append(answer.text)
        await self.say(
            Say.ERROR, f"The agent made {MAX_REQUESTS_PER_TURN} requests in one turn; stopping."
        )

    async def _finish_call(self, call: CallState, result: ToolResult) -> None:
        result = _encodable_text(result)
        self.mistakes = self.mistakes + 1 if result.is_error else 0
        call.status = "done"
        call.ask_ts = None
        # Tool and kernel output is foreign text: no known key or key-shaped string
        # reaches the model or the history (hdsp.daemon.scrubber).
        call.result = [
            TextBlock(text=scrubber.scrub(b.text)) if isinstance(b, TextBlock) else b
            for b in result.content
        ]
        call.is_error = result.is_error
        call.completes_task = result.completes_task
        await self.save_turn()
        if result.is_error:
            entry = self.tool_usage.get(call.name, ToolUsageEntry(attempts=0, failures=0))
            self.tool_usage[call.name] = msgspec.structs.replace(entry, failures=entry.failures + 1)
            text = " ".join(b.text for b in call.result if isinstance(b, TextBlock))
            await self._emit(TaskToolFailed(payload=(self.id, call.name, text)))

    async def _run_call(self, call: CallState) -> None:
        registry = self._manager.tools
        tool = registry.get(call.name)
        if call.status == "running":
            # It was running when the daemon stopped: what it did is unknown.
            output = await self._known_output(call.id)
            await self._finish_call(
                call,
                ToolResult.text(
                    "The tool call was interrupted by a restart of hdsp before it finished; "
                    "check its effects before repeating it. Output seen so far:\n"
                    + (output or "(none)"),
                    is_error=True,
                ),
            )
            return
        if call.status == "pending":
            entry = self.tool_usage.get(call.name, ToolUsageEntry(attempts=0, failures=0))
            self.tool_usage[call.name] = msgspec.structs.replace(entry, attempts=entry.attempts + 1)
            problem = self._check_call(call) or self._check_repetition(call)
            if problem is not None:
                # Every client sees why the call did not run, as the model does.
                text = " ".join(b.text for b in problem.content if isinstance(b, TextBlock))
                await self.say(Say.ERROR, text.removeprefix("Error: "), tool_use_id=call.id)
                await self._finish_call(call, problem)
                return
            assert tool is not None and call.arguments is not None
            verdict = self._manager.approvals.decide(
                tool, call.arguments, task_id=self.id, workspace=self.workspace
            )
            if verdict.decision is Decision.DENY:
                await self._finish_call(
                    call, ToolResult.text(f"Denied: {verdict.reason}", is_error=True)
                )
                return
            text = await tool.preview(self, call.arguments)
            if verdict.decision is Decision.ASK:
                extra: dict[str, Any] = {}
                if verdict.cap_reached:
                    kind, text = Ask.AUTO_APPROVAL_MAX_REQ_REACHED, verdict.reason
                elif tool.category is ToolCategory.COMMAND:
                    kind, text = Ask.COMMAND, str(call.arguments.get("command", text))
                    # Where it runs, as asked for: a cwd outside the workspace shows
                    # as such here, and the tool refuses it.
                    extra["cwd"] = _command_cwd(self.workspace, call.arguments.get("cwd"))
                elif tool.category is ToolCategory.MCP:
                    kind = Ask.USE_MCP_SERVER
                else:
                    kind = Ask.TOOL
                ask = await self.post_ask(
                    kind, text, tool_use_id=call.id, is_protected=verdict.protected or None, **extra
                )
                call.status, call.ask_ts = "asking", ask.ts
                call.cap_reached = verdict.cap_reached
                if verdict.timeout is not None:
                    call.ask_deadline = ask.ts + int(verdict.timeout * 1000)
                    call.approve_on_timeout = verdict.on_timeout is Decision.APPROVE
                await self.save_turn()
            else:
                if tool.category not in (ToolCategory.COMPLETION, ToolCategory.FOLLOWUP):
                    await self.say(Say.TOOL, text, tool_use_id=call.id)
                if verdict.timeout is not None:
                    on_timeout = (
                        AskAnswer("messageResponse", verdict.default_answer, by="timeout")
                        if verdict.on_timeout is Decision.APPROVE
                        else None
                    )
                    self._ask_timeout = (verdict.timeout, on_timeout)
                call.status = "approved"
        if call.status == "asking":
            assert call.ask_ts is not None
            ask_message = await self._saved_message(call.ask_ts)
            if ask_message is None:
                call.status = "pending"
                return await self._run_call(call)
            timed_out = AskAnswer(
                "yesButtonClicked" if call.approve_on_timeout else "noButtonClicked",
                "(no answer in time)",
                by="timeout",
            )
            answer = await self.wait_answer(
                ask_message, deadline_ms=call.ask_deadline, on_timeout=timed_out
            )
            if not answer.approved:
                feedback = f" The user said: {answer.text}" if answer.text else ""
                if answer is timed_out:
                    feedback = " Nobody answered the approval request in time."
                await self._finish_call(
                    call, ToolResult.text(f"The user denied this operation.{feedback}")
                )
                return
            if call.cap_reached:
                self._manager.approvals.reset_count(self.id)
            call.status = "approved"
        assert call.status == "approved" and tool is not None and call.arguments is not None
        call.status = "running"
        await self.save_turn()
        if tool.category not in _EFFECTS_IN_HISTORY:
            # Durable before the tool acts: after a crash, "running" means it may have.
            await self._manager.journal.flush()
        self._tool_use_id = call.id
        try:
            result = await tool.execute(self, call.arguments)
        except ToolError as exc:
            result = ToolResult.text(f"Error: {exc}", is_error=True)
        except Exception as exc:
            log.exception("tool failed", tool=tool.name)
            result = ToolResult.text(
                f"Error: the tool {tool.name} failed inside hdsp ({type(exc).__name__}).",
                is_error=True,
            )
        finally:
            self._tool_use_id = None
            self._ask_timeout = None
        await self._finish_call(call, result)

    def _check_repetition(self, call: CallState) -> ToolResult | None:
        """Stop the same call with the same arguments from looping."""
        arguments = json.dumps(call.arguments, sort_keys=True).encode()
        signature = (call.name, hashlib.blake2b(arguments, digest_size=16).digest())
        self._repeats = self._repeats + 1 if signature == self._last_call else 1
        self._last_call = signature
        if self._repeats < REPETITION_LIMIT:
            return None
        return ToolResult.text(
            f"Error: {call.name} was called with the same arguments {self._repeats} times in "
            "a row. It will not run again like this: use what it returned, change the "
            "arguments, or try another approach.",
            is_error=True,
        )

    def _check_call(self, call: CallState) -> ToolResult | None:
        """An error result for a call that cannot run as the model sent it."""
        registry = self._manager.tools
        if registry.get(call.name) is None:
            return ToolResult.text(
                f"Error: there is no tool named {call.name!r}. "
                f"The tools are: {', '.join(registry.names())}.",
                is_error=True,
            )
        if call.arguments is None:
            raw = call.raw_arguments
            shown = raw if len(raw) <= RAW_ARGUMENTS_SHOWN else raw[:RAW_ARGUMENTS_SHOWN] + "..."
            return ToolResult.text(
                f"Error: the arguments of {call.name} are not valid JSON, or not a JSON "
                f"object: {shown!r}. The call did not run. Send one JSON object that "
                "matches the tool's schema.",
                is_error=True,
            )
        if problems := registry.validate(call.name, call.arguments):
            return ToolResult.text(
                f"Error: invalid arguments for {call.name}:\n"
                + "\n".join(f"- {p}" for p in problems),
                is_error=True,
            )
        return None

    async def _known_output(self, tool_use_id: str) -> str:
        """The output a tool had streamed before an interruption (its messages)."""
        store = self._manager.store
        await self._manager.journal.flush()
        bodies = await store.read(store.db.ui_messages, self.id)
        texts = []
        for body in bodies:
            m = msgspec.json.decode(body, type=ClineMessage)
            if m.tool_use_id == tool_use_id and m.type == "say" and m.say != Say.TOOL and m.text:
                texts.append(m.text)
        text = "\n".join(texts)
        return text if len(text) <= 4000 else "...\n" + text[-4000:]

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
                elif not s.text_msg.partial:  # a retry takes over the broken attempt's
                    s.text_msg = await self.update(s.text_msg, text=s.text, partial=True)
                    s.last_partial = time.monotonic()
                elif time.monotonic() - s.last_partial >= PARTIAL_INTERVAL:
                    s.text_msg = await self.update(s.text_msg, text=s.text)
                    s.last_partial = time.monotonic()
            case ReasoningDelta(text=delta, signature=signature):
                if signature:
                    s.signatures.append(signature)
                if not delta:
                    return
                s.reasoning += delta
                if s.reasoning_msg is None:
                    s.reasoning_msg = await self.say(Say.REASONING, s.reasoning, partial=True)
                    s.last_partial = time.monotonic()
                elif not s.reasoning_msg.partial:
                    s.reasoning_msg = await self.update(
                        s.reasoning_msg, text=s.reasoning, partial=True
                    )
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
