"""One conversation with the agent: Roo's Task.

A task holds its HistoryItem, its API history and its state. Each agent turn (model
request, tool calls, repeat) runs in its own cancel scope inside the TaskManager's
task group; cancelling the scope stops the turn wherever it is, and the turn always
ends with a final event (`taskCompleted`, `taskAborted` or `taskResumable`).

This module keeps the turn's lifecycle, its loop and the model request; the parts
own their state: :mod:`.messages` (UI messages), :mod:`.asks` (the ask box),
:mod:`.reply` (the streaming reply), :mod:`.calls` (the tool calls), :mod:`.turn`
(what a turn stores) and :mod:`.context` (what a request sends). The collaborators
come typed in :class:`~.deps.TaskDeps`.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup

from hdsp.daemon.errors import CommandError
from hdsp.daemon.llm import Provider
from hdsp.daemon.llm.errors import ContextWindowExceeded, ProviderError
from hdsp.daemon.llm.images import image_refused
from hdsp.daemon.llm.types import ApiMessage, Block, ModelRequest, TextBlock
from hdsp.daemon.store import Write, update_task
from hdsp.daemon.tools import AskAnswer
from hdsp.protocol import (
    Ask,
    AskResponse,
    ClineMessage,
    CompletedInfo,
    ErrorCode,
    Event,
    HistoryItem,
    QueuedMessage,
    QueuedMessagesUpdated,
    Say,
    SendMessageData,
    TaskAborted,
    TaskActive,
    TaskCompleted,
    TaskResumable,
    TaskStarted,
    TaskState,
    TaskTokenUsageUpdated,
    TokenUsage,
    ToolUsageEntry,
)

from .asks import AskBox
from .calls import ToolCalls
from .context import request_messages, truncate_oldest
from .deps import TaskDeps
from .messages import TaskMessages
from .prompt import system_prompt
from .reply import INTERRUPTED_NOTE, StreamedReply
from .turn import TurnState, api_write, tool_results, turn_write, user_content
from .waiting import WAIT_UPDATE_INTERVAL, ReplyWait, count_down, show_wait

__all__ = ["MAX_QUEUED", "MAX_REQUESTS_PER_TURN", "WAIT_UPDATE_INTERVAL", "Task", "TaskCarry"]

log = structlog.get_logger("hdsp.tasks")

#: Model requests in one turn before the turn stops (a guard against loops).
MAX_REQUESTS_PER_TURN = 50
#: Messages that may wait for a busy task.
MAX_QUEUED = 32


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
        deps: TaskDeps,
        item: HistoryItem,
        api: list[ApiMessage],
        state: TaskState,
        last_ts: int = 0,
        *,
        settle: Callable[[Task], None] = lambda task: None,
    ) -> None:
        self._deps = deps
        #: Called when a turn is over: the owner may unload an idle task.
        self._settle = settle
        self.item = item
        self.api = api
        self.state = state
        self.messages = TaskMessages(item.id, deps.store, deps.journal, deps.clock, last_ts)
        self.asks = AskBox(self.messages, self.set_state, deps.clock)
        self.calls = ToolCalls(self, deps, self.messages, self.asks, self.save_turn)
        self._scope: anyio.CancelScope | None = None
        self._turn_done = anyio.Event()
        self._turn_done.set()
        self._stop_as: TaskState = TaskState.ABORTED
        self._reply: StreamedReply | None = None
        #: The open turn's saved state (None between turns).
        self.turn: TurnState | None = None
        #: Whether the last turn state queued for the store was an open turn.
        self._open_turn_saved = False
        #: Text a person gave while resuming, for the next model request.
        self._feedback: list[str] = []
        self.queue: deque[QueuedMessage] = deque()
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
        if name == "kernels" and self._deps.kernels is not None:
            return self._deps.kernels
        raise KeyError(name)

    async def say(
        self, say: str, text: str | None = None, *, partial: bool = False, **fields: Any
    ) -> ClineMessage:
        return await self.messages.say(say, text, partial=partial, **fields)

    async def update(self, message: ClineMessage, **changes: Any) -> ClineMessage:
        return await self.messages.update(message, **changes)

    async def ask(self, ask: str, text: str | None = None, **fields: Any) -> AskAnswer:
        return await self.asks.ask(ask, text, **fields)

    # ---- what the manager sees ------------------------------------------------

    @property
    def busy(self) -> bool:
        return not self._turn_done.is_set()

    @property
    def pending_ask(self) -> ClineMessage | None:
        return self.asks.pending

    @property
    def partial(self) -> dict[int, ClineMessage]:
        """Messages still streaming, by ts (newer than the store's)."""
        return self.messages.partial

    @property
    def idle(self) -> bool:
        """No turn runs or is open, nothing waits (ask, queue, feedback) and no
        message streams: all there is of the task is in the store, but for what
        `carry` keeps."""
        return (
            not self.busy
            and self.asks.pending is None
            and self.turn is None
            and not self.queue
            and not self._feedback
            and not self.messages.partial
        )

    def carry(self) -> TaskCarry | None:
        """What to keep of this task when it is unloaded; None: nothing."""
        c = self.calls
        carry = TaskCarry(
            tool_usage=c.tool_usage,
            context_tokens=self.context_tokens,
            mistakes=c.mistakes,
            last_call=c.last_call,
            repeats=c.repeats,
        )
        return None if carry == _NOTHING_CARRIED else carry

    def restore(self, carry: TaskCarry) -> None:
        """Take back what `carry` kept when the task was unloaded."""
        self.context_tokens = carry.context_tokens
        c = self.calls
        c.tool_usage, c.mistakes = carry.tool_usage, carry.mistakes
        c.last_call, c.repeats = carry.last_call, carry.repeats

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

    async def post_ask(self, ask: str, text: str | None = None, **fields: Any) -> ClineMessage:
        return await self.asks.post(ask, text, **fields)

    async def respond(self, ask_ts: int, answer: AskAnswer) -> None:
        await self.asks.respond(ask_ts, answer)

    # ---- durable changes ----------------------------------------------------

    async def set_state(self, state: TaskState, event: Event | None = None) -> None:
        self.state = state
        self.item = msgspec.structs.replace(self.item, state=state)
        if event is None:
            await self._deps.journal.write(update_task(self.item))
        else:
            await self._deps.journal.emit(event, update_task(self.item))

    async def append_api(self, message: ApiMessage, *, with_turn: bool = False) -> None:
        """Append to the API history; `with_turn` saves the turn state in the same
        transaction (so a crash never leaves them disagreeing)."""
        message, write = api_write(self.id, len(self.api), message)
        self.api.append(message)
        writes = [write, turn_write(self.id, self.turn)] if with_turn else [write]
        is_open = self.turn is not None
        await self._deps.journal.write(*writes)
        if with_turn:
            self._open_turn_saved = is_open

    async def save_turn(self) -> None:
        is_open = self.turn is not None
        await self._deps.journal.write(turn_write(self.id, self.turn))
        self._open_turn_saved = is_open

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
                timestamp=self._deps.clock(),
                id=uuid.uuid4().hex,
                text=data.text or "",
                images=data.images,
            )
        )
        await self.messages.emit(QueuedMessagesUpdated(payload=(self.id, list(self.queue))))

    async def delete_queued(self, message_id: str) -> None:
        kept = [m for m in self.queue if m.id != message_id]
        if len(kept) == len(self.queue):
            raise CommandError(
                ErrorCode.INVALID_REQUEST, f"No queued message {message_id} in task {self.id}."
            )
        self.queue = deque(kept)
        await self.messages.emit(QueuedMessagesUpdated(payload=(self.id, list(self.queue))))

    # ---- turns --------------------------------------------------------------

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
                    content = user_content(message.text, message.images)
                    await self.append_api(
                        ApiMessage(role="user", content=content, ts=self.messages.next_ts())
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
            self.asks.clear()
            self.messages.tool_use_id = None
            self._turn_done.set()
        if outcome is TaskState.COMPLETED and self.queue and not self._deps.closing():
            queued = self.queue.popleft()
            await self.messages.emit(QueuedMessagesUpdated(payload=(self.id, list(self.queue))))
            self.start_turn(tg, message=SendMessageData(text=queued.text, images=queued.images))
        self._settle(self)

    async def _end_turn(self, outcome: TaskState | None) -> None:
        await self._close_reply(interrupted=outcome is None)
        # Anything else still streaming (a retry's countdown, cut off by a cancel)
        # streams no more.
        await self.messages.finish_partial()
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
            is_subtask = self.item.parent_task_id is not None
            completed = TaskCompleted(
                payload=(
                    self.id,
                    self.usage(),
                    dict(self.calls.tool_usage),
                    CompletedInfo(is_subtask=is_subtask),
                )
            )
            await self.set_state(TaskState.COMPLETED, completed)
            return
        if self._scope is not None and not self._scope.cancel_called:
            await self.say(Say.ERROR, "The task stopped on an internal error; see the log.")
        await self.set_state(TaskState.ABORTED, TaskAborted(payload=(self.id,)))

    async def _close_calls(self, reason: str) -> None:
        """Answer every tool call of the open turn, so that the API history stays
        valid (each tool_use needs its tool_result), and close the turn's tool phase
        in the same transaction."""
        assert self.turn is not None
        calls, self.turn = self.turn.calls, None
        content = tool_results(calls, reason)
        await self.append_api(
            ApiMessage(role="user", content=content, ts=self.messages.next_ts()), with_turn=True
        )

    async def _close_reply(self, *, interrupted: bool) -> None:
        """Finish messages left partial and keep what the model said so far."""
        reply, self._reply = self._reply, None
        if reply is None:
            return
        await reply.finish()
        if interrupted and reply.text and self._stop_as is not TaskState.RESUMABLE:
            # A user's cancel keeps what the model said; a daemon stopping makes the
            # request again on resume instead.
            content: list[Block] = [TextBlock(text=reply.text + INTERRUPTED_NOTE)]
            await self.append_api(
                ApiMessage(role="assistant", content=content, ts=self.messages.next_ts())
            )

    async def _wait_saved_ask(self, ts: int) -> AskAnswer | None:
        """Wait for the answer to the ask `ts` posted before (None: it is answered)."""
        ask = await self.messages.saved(ts)
        return None if ask is None or ask.is_answered else await self.asks.wait(ask)

    async def _loop(self) -> None:
        for _ in range(MAX_REQUESTS_PER_TURN):
            turn = self.turn
            if turn is None:
                turn = self.turn = TurnState()
                await self.save_turn()
            if turn.resume_ask_ts is not None:
                answer = await self._wait_saved_ask(turn.resume_ask_ts)
                if answer is not None and answer.text:
                    self._feedback.append(answer.text)
                turn.resume_ask_ts = None
                await self.save_turn()
            if turn.phase == "request":
                reply = await self._request(turn)
                message = ApiMessage(
                    role="assistant", content=reply.content(), ts=self.messages.next_ts()
                )
                if not reply.tool_calls:
                    await self.append_api(message)
                    return  # a reply with no tool call ends the turn
                turn.phase = "tools"
                turn.calls = reply.call_states()
                await self.append_api(message, with_turn=True)
            for call in turn.calls:
                if call.status != "done":
                    await self.calls.run(call)
            await self._close_calls("")
            if any(c.completes_task for c in turn.calls):
                return
            if self.calls.mistakes >= self._deps.mistake_limit:
                answer = await self.ask(
                    Ask.MISTAKE_LIMIT_REACHED,
                    f"The agent made {self.calls.mistakes} mistakes in a row (tool errors). "
                    "Guidance from you may help it; or stop the task here.",
                )
                self.calls.mistakes = 0
                if answer.response == AskResponse.NO:
                    return
                if answer.text:
                    self._feedback.append(answer.text)
        await self.say(
            Say.ERROR, f"The agent made {MAX_REQUESTS_PER_TURN} requests in one turn; stopping."
        )

    # ---- the model request ------------------------------------------------------

    async def _request(self, turn: TurnState) -> StreamedReply:
        """One model request. Transient failures are retried after a backoff that
        every client sees (api_req_retry_delayed, api_req_retried); a context window
        that overflows is reduced (non-destructively, at most 3 times); anything
        else asks api_req_failed, and any answer retries."""
        deps = self._deps
        attempt = 0
        reductions = 0
        previous: StreamedReply | None = None
        while True:
            if turn.ask_ts is not None:
                # Resumed while an api_req_failed ask waited: it still waits.
                await self._wait_saved_ask(turn.ask_ts)
                turn.ask_ts = None
                await self.save_turn()
            if self._feedback:
                text, self._feedback = "\n\n".join(self._feedback), []
                await self.append_api(
                    ApiMessage(
                        role="user", content=[TextBlock(text=text)], ts=self.messages.next_ts()
                    )
                )
            provider = deps.providers.get(self.item.api_config_name)
            request = self._model_request()
            started = await self.say(
                Say.API_REQ_STARTED,
                json.dumps({"model": provider.model, "profile": self.item.api_config_name}),
            )
            # A retry replaces what the broken attempt showed, not adds to it.
            reply = self._reply = StreamedReply(self.messages, previous)
            try:
                await self._stream_reply(provider, request, reply)
            except ProviderError as exc:
                await self._close_reply(interrupted=False)
                failure: dict[str, Any] = {"error": exc.message}
                if reply.text:
                    # A retry replaces the text on screen: what this attempt had
                    # said stays in its request's message.
                    failure["partialText"] = reply.text
                await self.update(started, text=json.dumps(failure))
                previous = reply
                attempt += 1
                if isinstance(exc, ContextWindowExceeded) and reductions < 3:
                    reductions += 1
                    if await self._reduce_context():
                        continue
                if image_refused(exc) and self._images_refused_upto < self.api[-1].ts:
                    await self._leave_out_images(exc)
                    continue
                delay = deps.retry_policy.delay(exc, attempt)
                if delay is not None:
                    await count_down(self.messages, exc.message, attempt, delay)
                    continue
                await self.say(Say.ERROR, exc.message)
                failed = await self.post_ask(Ask.API_REQ_FAILED, exc.message)
                turn.ask_ts = failed.ts
                await self.save_turn()
                attempt = 0
                continue  # the loop waits for the answer; any answer retries
            await self._close_reply(interrupted=False)
            if previous is not None:
                await reply.blank_unused(previous)
            await self._account(started, reply, provider)
            return reply

    def _model_request(self) -> ModelRequest:
        tools = self._deps.tools
        kernels = self._deps.kernels
        return ModelRequest(
            system=system_prompt(
                workspace=str(self.workspace),
                mode=self.item.mode or "code",
                tools=tools.names(),
                kernel=kernels.describe_for_task(self.id, self.workspace) if kernels else None,
            ),
            messages=request_messages(self.api, images_refused_upto=self._images_refused_upto),
            tools=tools.specs(),
        )

    async def _stream_reply(
        self, provider: Provider, request: ModelRequest, reply: StreamedReply
    ) -> None:
        """Stream one reply into `reply`; while it has not begun, say that the task
        waits, and for how long (:func:`.waiting.show_wait`). Raises ProviderError."""
        wait = ReplyWait(started=anyio.current_time())
        error: ProviderError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(show_wait, self.messages, wait, name="wait for the model")
            try:
                async with provider.stream(request) as chunks:
                    wait.accepted = True
                    async for chunk in chunks:
                        if wait.outcome is None:
                            wait.end("began")
                        await reply.on_chunk(chunk)
            except ProviderError as exc:
                error = exc  # raised outside the task group, not in an ExceptionGroup
            finally:
                wait.end("failed" if error is not None else "stopped")
        if error is not None:
            raise error

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

    async def _reduce_context(self) -> bool:
        """Hide the oldest quarter of the conversation (:func:`.context.truncate_oldest`)
        and say so. False when nothing is left to hide."""
        truncation = truncate_oldest(self.api, uuid.uuid4().hex)
        if truncation is None:
            return False
        writes: list[Write] = []
        for index, message in truncation.hidden.items():
            self.api[index], write = api_write(self.id, index, message)
            writes.append(write)
        await self._deps.journal.write(*writes)
        removed = {"truncationId": truncation.truncation_id, "messagesRemoved": len(writes)}
        await self.say(
            Say.SLIDING_WINDOW_TRUNCATION, json.dumps(removed), context_truncation=removed
        )
        return True

    async def _account(
        self, started: ClineMessage, reply: StreamedReply, provider: Provider
    ) -> None:
        u, cost = reply.usage, reply.cost(provider.info())
        i = self.item
        self.item = msgspec.structs.replace(
            i,
            tokens_in=i.tokens_in + u.input_tokens,
            tokens_out=i.tokens_out + u.output_tokens,
            cache_reads=(i.cache_reads or 0) + u.cache_read_tokens,
            cache_writes=(i.cache_writes or 0) + u.cache_write_tokens,
            total_cost=i.total_cost + cost,
        )
        self.context_tokens = reply.context_tokens()
        info_text = json.loads(started.text or "{}")
        info_text.update(
            tokensIn=u.input_tokens,
            tokensOut=u.output_tokens,
            cacheReads=u.cache_read_tokens,
            cacheWrites=u.cache_write_tokens,
            cost=cost,
        )
        await self.update(started, text=json.dumps(info_text))
        usage = (self.id, self.usage(), dict(self.calls.tool_usage))
        await self._deps.journal.emit(TaskTokenUsageUpdated(payload=usage), update_task(self.item))
