"""One conversation with the agent: Roo's Task.

A task holds its HistoryItem, its API history and its state. Each agent turn (model
request, tool calls, repeat) runs in its own cancel scope inside the TaskManager's
task group; cancelling the scope stops the turn wherever it is, and the turn always
ends with a final event (`taskCompleted`, `taskAborted` or `taskResumable`).

This module keeps the turn's lifecycle, its loop and the model request. The
parts own their state: :mod:`.messages` (UI messages), :mod:`.history` (the API
history; what a request sends is :mod:`.context`'s pure reduction of it),
:mod:`.asks` (the ask box), :mod:`.reply` (the streaming reply), :mod:`.calls`
(the tool calls and what a tool sees), :mod:`.queued` (messages that wait) and
:mod:`.turn` (what a turn stores). Its collaborators come typed in
:class:`~.deps.TaskDeps`; the task knows no TaskManager: its owner hands it a
`settle` callback, called when a turn is over.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup

from hdsp.daemon.agents import UnknownAgent, agent_prompt, agents_section
from hdsp.daemon.conversation import (
    ApiMessage,
    Block,
    ModelInfo,
    ModelRequest,
    TextBlock,
    TextDelta,
    UsageChunk,
)
from hdsp.daemon.errors import CommandError
from hdsp.daemon.llm import Provider
from hdsp.daemon.llm.errors import ContextWindowExceeded, ProviderError
from hdsp.daemon.llm.images import image_refused
from hdsp.daemon.modes import (
    BUILT_IN_MODES,
    DEFAULT_MODE,
    Mode,
    UnknownMode,
    group_names,
    instruction_sources,
    instructions_text,
)
from hdsp.daemon.store import update_task
from hdsp.daemon.tools import AskAnswer
from hdsp.daemon.tools.todo_list import render_todo_markdown
from hdsp.protocol import (
    Ask,
    AskResponse,
    ClineMessage,
    CompletedInfo,
    ErrorCode,
    Event,
    HistoryItem,
    QueuedMessage,
    Say,
    SendMessageData,
    TaskAborted,
    TaskActive,
    TaskCompleted,
    TaskModeSwitched,
    TaskResumable,
    TaskStarted,
    TaskState,
    TaskTodoListUpdated,
    TaskTokenUsageUpdated,
    TodoItem,
    TokenUsage,
)

from .asks import AskBox
from .budget import SUMMARY_PROMPT, ContextBudget, RequestCount
from .calls import ToolCalls
from .deps import TaskDeps
from .history import ApiHistory
from .messages import TaskMessages
from .prompt import system_prompt
from .queued import MessageQueue
from .reply import INTERRUPTED_NOTE, StreamedReply
from .returns import returned_by
from .turn import CallState, TurnState, tool_results, turn_write, user_content
from .waiting import WAIT_UPDATE_INTERVAL, ReplyWait, count_down, show_wait

__all__ = ["MAX_REQUESTS_PER_TURN", "WAIT_UPDATE_INTERVAL", "Task"]

log = structlog.get_logger("hdsp.tasks")

#: Model requests in one turn before the turn stops (a guard against loops).
MAX_REQUESTS_PER_TURN = 50


def task_mode(deps: TaskDeps, item: HistoryItem) -> Mode:
    """The mode of the task `item` (an agent's task: its agent's) as the
    settings and workspace define it now, held to the limits the task entered it
    with (`entered`): a workspace modes file that changes while the task runs
    (kernel or shell code can write it) never gives the task more than it had.
    A mode that no longer exists falls back to the built-in read-only `ask`,
    never to more than was given."""
    workspace = Path(item.workspace or ".")
    try:
        if item.agent is not None:
            agents = deps.agents
            mode = agents.mode_of(agents.get(item.agent), deps.modes, workspace)
        else:
            mode = deps.modes.get(item.mode or DEFAULT_MODE, workspace)
    except (UnknownMode, UnknownAgent):
        log.warning("task mode unknown; using ask", mode=item.mode)
        return BUILT_IN_MODES[0]
    if item.mode_groups is None or mode.source != "project":
        return mode
    held = mode.held_to(item.mode_groups, item.mode_file_regex)
    if held is not mode:
        log.warning("task mode widened by the workspace; held", mode=mode.slug, task_id=item.id)
    return held


def entered(item: HistoryItem, mode: Mode) -> HistoryItem:
    """`item` with `mode`'s limits recorded as the most it may get from its mode."""
    return msgspec.structs.replace(
        item, mode_groups=group_names(mode), mode_file_regex=mode.definition.file_regex
    )


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
        queued: list[QueuedMessage] | None = None,
    ) -> None:
        self._deps = deps
        #: Called when a turn is over: the owner may unload an idle task.
        self._settle = settle
        self.item = item
        self.state = state
        self.messages = TaskMessages(item.id, deps.store, deps.journal, deps.clock, last_ts)
        self.history = ApiHistory(item.id, api, deps.journal, self.messages.next_ts)
        self.asks = AskBox(self.messages, self.set_state, deps.clock)
        self.calls = ToolCalls(
            deps,
            self.messages,
            self.asks,
            self.workspace,
            self.save_turn,
            mode=self.mode,
            services={"modes": self, "todo_list": self, "agents": deps.subtasks},
            approvals_key=lambda: self.approvals_key,
        )
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
        self.queue = MessageQueue(item.id, self.messages.emit, deps.clock, queued)
        self.context_tokens = 0
        self.budget = ContextBudget()
        #: What the open turn returns to the caller (seed 002) once it completes.
        self._returned: str | None = None

    @property
    def id(self) -> str:
        return self.item.id

    @property
    def workspace(self) -> Path:
        return Path(self.item.workspace or ".")

    @property
    def approvals_key(self) -> str:
        """Whose approval settings and counts the task uses: a tree of agents
        shares its root's, so that its caps count the whole tree."""
        return self.item.root_task_id or self.id

    # ---- what the manager sees ------------------------------------------------

    @property
    def busy(self) -> bool:
        return not self._turn_done.is_set()

    @property
    def pending_ask(self) -> ClineMessage | None:
        return self.asks.pending

    @property
    def idle(self) -> bool:
        """No turn runs or is open, nothing waits (ask, queue, feedback) and no
        message streams: all there is of the task is in the store, but for a few
        counters (the manager's TaskCarry)."""
        return (
            not self.busy
            and self.asks.pending is None
            and self.turn is None
            and not self.queue
            and not self._feedback
            and not self.messages.partial
        )

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

    # ---- mode and todo list ---------------------------------------------------

    def mode(self) -> Mode:
        """The task's mode (see `task_mode`)."""
        return task_mode(self._deps, self.item)

    async def switch_mode(self, slug: str) -> str:
        """Put the task in mode `slug` (raises UnknownMode, a ValueError); every
        client gets taskModeSwitched."""
        mode = self._deps.modes.get(slug, self.workspace)
        self.item = entered(msgspec.structs.replace(self.item, mode=mode.slug), mode)
        await self._deps.journal.emit(
            TaskModeSwitched(payload=(self.id, mode.slug)), update_task(self.item)
        )
        return mode.name

    async def set_todos(self, items: list[TodoItem], *, by: str) -> None:
        """Replace the todo list, stored with the task; every client gets
        taskTodoListUpdated. A person's edit is told to the model: before the
        open turn's next request, or as a message in its history."""
        self.item = msgspec.structs.replace(self.item, todos=list(items))
        await self._deps.journal.emit(
            TaskTodoListUpdated(payload=(self.id, list(items), by)), update_task(self.item)
        )
        if by != "user":
            return
        note = (
            "The user edited the todo list. It is now:\n"
            + (render_todo_markdown(items) or "(empty)")
            + "\nWork from this list from now on."
        )
        if self.turn is not None or self.busy:
            self._feedback.append(note)
        else:
            await self.history.add("user", [TextBlock(text=note)])

    # ---- durable changes ----------------------------------------------------

    async def set_state(self, state: TaskState, event: Event | None = None) -> None:
        self.state = state
        self.item = msgspec.structs.replace(self.item, state=state)
        if event is None:
            await self._deps.journal.write(update_task(self.item))
        else:
            await self._deps.journal.emit(event, update_task(self.item))

    async def _add_with_turn(
        self, role: Literal["user", "assistant"], content: list[Block]
    ) -> None:
        """Append to the API history and save the turn state in the same
        transaction (so a crash never leaves them disagreeing)."""
        is_open = self.turn is not None
        await self.history.add(role, content, turn_write(self.id, self.turn))
        self._open_turn_saved = is_open

    async def save_turn(self) -> None:
        is_open = self.turn is not None
        await self._deps.journal.write(turn_write(self.id, self.turn))
        self._open_turn_saved = is_open

    # ---- turns --------------------------------------------------------------

    def start_turn(
        self,
        tg: TaskGroup,
        *,
        first: bool = False,
        message: SendMessageData | None = None,
        resume: bool = False,
        sent_by: str | None = None,
    ) -> None:
        """Start an agent turn in `tg`: record `message` from the user first (from
        the TCP client `sent_by`, if it came over TCP), or, with `resume`, go on
        from the saved `self.turn`. The caller checked that no turn is running."""
        assert not self.busy
        self._returned = None
        self._turn_done = anyio.Event()
        self._scope = anyio.CancelScope()
        self._stop_as = TaskState.ABORTED
        if not resume:
            self.state = TaskState.RUNNING
        tg.start_soon(self._run_turn, tg, first, message, resume, sent_by, name=f"task {self.id}")

    async def wait_turn_over(self) -> None:
        """Wait until no turn runs (one that starts meanwhile is waited for too)."""
        while self.busy:
            await self._turn_done.wait()

    async def stop(self, *, as_state: TaskState = TaskState.ABORTED) -> None:
        """Cancel the running turn, if any, and wait until it has ended."""
        if self._scope is not None and self.busy:
            self._stop_as = as_state
            self._scope.cancel()
        await self._turn_done.wait()

    async def abandon(self) -> None:
        """Close the turn a restart left open that nothing runs: an agent's child
        whose caller was stopped before it came back for it (seed 002). As a stop
        would: its open calls are answered as cancelled, and the task is aborted."""
        if self.busy or self.turn is None:
            return
        self._stop_as = TaskState.ABORTED
        await self._end_turn(None)
        self._settle(self)

    async def run_relayed_call(
        self, tg: TaskGroup, name: str, arguments: dict[str, Any]
    ) -> CallState:
        """Run one tool call relayed from another agent (CallTool, issue 23) as a
        turn of its own: the task is busy meanwhile (a message waits in the
        queue), `stop` cancels it (interrupting its kernel), and it ends with
        taskCompleted or taskAborted as a turn does. The call takes the path of
        the model's calls (schema, mode, approval policy, checkpoint, messages).
        It is not added to the API history, and not resumed after a restart."""
        if self.busy:
            raise CommandError(ErrorCode.TASK_BUSY, f"Task {self.id} is working.")
        self._turn_done = anyio.Event()
        scope = self._scope = anyio.CancelScope()
        self._stop_as = TaskState.ABORTED
        call = CallState(id=f"relayed_{uuid.uuid4().hex}", name=name, arguments=dict(arguments))
        done = False
        try:
            with scope:
                await self.set_state(TaskState.RUNNING, TaskActive(payload=(self.id,)))
                await self.calls.run(call)
                done = True
        finally:
            with anyio.move_on_after(10, shield=True):
                await self.messages.finish_partial()
                if done:
                    info = CompletedInfo(is_subtask=False)
                    usage = (self.id, self.usage(), dict(self.calls.tool_usage), info)
                    await self.set_state(TaskState.COMPLETED, TaskCompleted(payload=usage))
                else:
                    await self.set_state(TaskState.ABORTED, TaskAborted(payload=(self.id,)))
            self._scope = None
            self.asks.clear()
            self.messages.tool_use_id = None
            self._turn_done.set()
        if done and not self._deps.closing():
            queued = await self.queue.take()
            if queued is not None:
                self.start_turn(tg, message=queued[0], sent_by=queued[1])
        self._settle(self)
        return call

    async def _run_turn(
        self,
        tg: TaskGroup,
        first: bool,
        message: SendMessageData | None,
        resume: bool,
        sent_by: str | None = None,
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
                    await self.messages.say(
                        Say.USER_FEEDBACK,
                        message.text,
                        images=message.images,
                        context=message.context,
                        sent_by=sent_by,
                    )
                    await self.history.add(
                        "user", user_content(message.text, message.images, message.context)
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
        if outcome is TaskState.COMPLETED and not self._deps.closing():
            queued = await self.queue.take()
            if queued is not None:
                self.start_turn(tg, message=queued[0], sent_by=queued[1])
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
            # What the task returns to its caller (seed 002), stored with its state.
            self.item = msgspec.structs.replace(self.item, result=self._returned)
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
            await self.messages.say(
                Say.ERROR, "The task stopped on an internal error; see the log."
            )
        await self.set_state(TaskState.ABORTED, TaskAborted(payload=(self.id,)))

    async def _close_calls(self, reason: str) -> None:
        """Answer every tool call of the open turn, so that the API history stays
        valid (each tool_use needs its tool_result), and close the turn's tool phase
        in the same transaction."""
        assert self.turn is not None
        calls, self.turn = self.turn.calls, None
        await self._add_with_turn("user", tool_results(calls, reason))

    async def _close_reply(self, *, interrupted: bool) -> None:
        """Finish messages left partial and keep what the model said so far."""
        reply, self._reply = self._reply, None
        if reply is None:
            return
        await reply.finish()
        if interrupted and reply.text and self._stop_as is not TaskState.RESUMABLE:
            # A user's cancel keeps what the model said; a daemon stopping makes the
            # request again on resume instead.
            await self.history.add("assistant", [TextBlock(text=reply.text + INTERRUPTED_NOTE)])

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
                if not reply.tool_calls:
                    await self.history.add("assistant", reply.content())
                    self._returned = reply.text  # the text fallback (seed 002, §4)
                    return  # a reply with no tool call ends the turn
                turn.phase = "tools"
                turn.calls = reply.call_states()
                await self._add_with_turn("assistant", reply.content())
            await self.calls.run_all(turn.calls)
            await self._close_calls("")
            if any(c.completes_task for c in turn.calls):
                self._returned = returned_by(turn.calls)
                return
            if self.calls.mistakes >= self._deps.mistake_limit:
                answer = await self.asks.ask(
                    Ask.MISTAKE_LIMIT_REACHED,
                    f"The agent made {self.calls.mistakes} mistakes in a row (tool errors). "
                    "Guidance from you may help it; or stop the task here.",
                )
                self.calls.mistakes = 0
                if answer.response == AskResponse.NO:
                    return
                if answer.text:
                    self._feedback.append(answer.text)
        await self.messages.say(
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
        # Tools that come from elsewhere (MCP servers) get ready first: a server
        # starts when a task first needs it (bounded by its startup timeout).
        await deps.tools.prepare(self.workspace, self.id)
        while True:
            if turn.ask_ts is not None:
                # Resumed while an api_req_failed ask waited: it still waits.
                await self._wait_saved_ask(turn.ask_ts)
                turn.ask_ts = None
                await self.save_turn()
            if self._feedback:
                text, self._feedback = "\n\n".join(self._feedback), []
                await self.history.add("user", [TextBlock(text=text)])
            for steer, sender in await self.queue.take_steered():
                # Where it lands in the turn is where every client sees it.
                await self.messages.say(
                    Say.USER_FEEDBACK,
                    steer.text,
                    images=steer.images,
                    context=steer.context,
                    sent_by=sender,
                )
                await self.history.add(
                    "user", user_content(steer.text, steer.images, steer.context)
                )
            provider = deps.providers.get(self.item.api_config_name)
            request = await self._fitted_request(provider)
            started = await self.messages.say(
                Say.API_REQ_STARTED,
                json.dumps({"model": provider.model, "profile": self.item.api_config_name}),
            )
            # A retry replaces what the broken attempt showed, not adds to it.
            reply = self._reply = StreamedReply(self.messages, previous)
            try:
                await reply.stream(provider, request)
            except ProviderError as exc:
                await self._close_reply(interrupted=False)
                failure: dict[str, Any] = {"error": exc.message}
                if reply.text:
                    # A retry replaces the text on screen: what this attempt had
                    # said stays in its request's message.
                    failure["partialText"] = reply.text
                await self.messages.update(started, text=json.dumps(failure))
                previous = reply
                attempt += 1
                if isinstance(exc, ContextWindowExceeded) and reductions < 3:
                    reductions += 1
                    if await self._reduce_context():
                        continue
                if image_refused(exc) and self.history.refuse_images():
                    await self._say_images_left_out(exc)
                    continue
                delay = deps.retry_policy.delay(exc, attempt)
                if delay is not None:
                    await count_down(self.messages, exc.message, attempt, delay)
                    continue
                await self.messages.say(Say.ERROR, exc.message)
                failed = await self.asks.post(Ask.API_REQ_FAILED, exc.message)
                turn.ask_ts = failed.ts
                await self.save_turn()
                attempt = 0
                continue  # the loop waits for the answer; any answer retries
            await self._close_reply(interrupted=False)
            if previous is not None:
                await reply.blank_unused(previous)
            await self._account(started, reply, provider)
            return reply

    def system_prompt(self) -> str:
        """The system prompt of the task's next request (GetSystemPrompt shows it)."""
        mode = self.mode()
        tools = self._deps.tools.scoped(self.workspace, self.id)
        kernels = self._deps.kernels
        sources = instruction_sources(
            workspace=self.workspace,
            mode=mode,
            global_instructions=self._deps.custom_instructions,
            task_instructions=self.item.custom_instructions,
        )
        return system_prompt(
            workspace=str(self.workspace),
            mode=f"{mode.slug} ({mode.name})",
            tools=[n for n in tools.names() if mode.allows(tools[n])],
            kernel=kernels.describe_for_task(self.id, self.workspace) if kernels else None,
            role=self._agent_role(mode) or mode.definition.role_definition,
            instructions=instructions_text(sources),
        )

    def _agent_role(self, mode: Mode) -> str | None:
        """An agent's task: the agent's part of the prompt (seed 002, §7); a task
        of a mode that may call agents: its role and the agents."""
        agents = self._deps.agents
        if self.item.agent is None:
            call_agent = self._deps.tools.get("call_agent")
            if call_agent is None or not mode.allows(call_agent):
                return None
            return mode.definition.role_definition + "\n\n" + agents_section(agents.all())
        try:
            return agent_prompt(agents.get(self.item.agent), agents.all())
        except UnknownAgent:
            return None

    def model_request(self) -> ModelRequest:
        mode = self.mode()
        tools = self._deps.tools.scoped(self.workspace, self.id)
        return ModelRequest(
            system=self.system_prompt(),
            messages=self.history.for_request(),
            tools=[spec for spec in tools.specs() if mode.allows(tools[spec.name])],
        )

    async def _say_images_left_out(self, exc: ProviderError) -> None:
        """Tell the model and every client why the images are gone."""
        note = (
            f"The model provider refused an image ({exc.message}); hdsp left the "
            "images out of the conversation and sent it again."
        )
        await self.messages.say(Say.ERROR, note)
        self._feedback.append(
            note + " If you need what an image showed, describe it in text or make a smaller one."
        )

    async def _reduce_context(self, before: int | None = None) -> bool:
        """Hide the oldest part of the conversation and say so, with the request's
        tokens `before` and after if known; False if none can go."""
        truncated = await self.history.truncate()
        if truncated is None:
            return False
        removed: dict[str, Any] = {"truncationId": truncated[0], "messagesRemoved": truncated[1]}
        if before is not None:
            provider = self._deps.providers.get(self.item.api_config_name)
            after = await self.budget.count(provider, self.model_request())
            removed |= {"prevContextTokens": before, "newContextTokens": after.tokens}
        await self.messages.say(
            Say.SLIDING_WINDOW_TRUNCATION, json.dumps(removed), context_truncation=removed
        )
        return True

    async def _fitted_request(self, provider: Provider) -> ModelRequest:
        """The next request, counted first: past the profile's threshold the
        conversation is condensed (a summary replaces its older part), or, when
        that is not possible, truncated, until it fits (seeds 001/004)."""
        request = self.model_request()
        options = self._deps.providers.options(self.item.api_config_name)
        threshold, allowed = ContextBudget.limits(provider.info(), options)
        count = await self._first_count(provider, request)
        if count.tokens <= threshold:
            return request
        log.info("context over threshold", tokens=count.tokens, threshold=threshold)
        condensed = options.auto_condense and await self.condense(provider, count.tokens)
        if not condensed and await self._reduce_context(count.tokens):
            request = self.model_request()
            count = await self.budget.count(provider, request)
        elif condensed:
            request = self.model_request()
            count = self.budget.last or count
        while count.tokens > allowed and await self._reduce_context(count.tokens):
            request = self.model_request()
            count = await self.budget.count(provider, request)
        return request

    async def _first_count(self, provider: Provider, request: ModelRequest) -> RequestCount:
        """A turn's first count may wait for the provider's SDK to load (the first
        request after a start): every client sees that wait as it sees a model's."""
        wait = ReplyWait(started=anyio.current_time(), preparing=True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(show_wait, self.messages, wait, name="wait for the request")
            try:
                count = await self.budget.count(provider, request)
            except BaseException:
                wait.end("stopped")
                raise
            wait.end("ready")
        return count

    async def condense(self, provider: Provider, before: int, *, manual: bool = False) -> bool:
        """Ask the model for a summary of the conversation and let it replace
        the older messages (tagged, never deleted); say how it went, with the
        request's tokens before and after. False if it could not be done."""
        if not self.history.can_condense():
            if manual:
                await self.messages.say(
                    Say.CONDENSE_CONTEXT_ERROR,
                    "Nothing to condense: too few messages since the start or the last summary.",
                )
            return False
        shown = await self.messages.say(Say.CONDENSE_CONTEXT, partial=True)
        base = self.model_request()
        ask = ApiMessage(role="user", content=[TextBlock(text=SUMMARY_PROMPT)], ts=0)
        request = ModelRequest(
            system=base.system, messages=[*self.history.to_condense(), ask], tools=base.tools
        )
        text, usage, failure = "", UsageChunk(), None
        try:
            async with provider.stream(request) as chunks:
                async for chunk in chunks:
                    if isinstance(chunk, TextDelta):
                        text += chunk.text
                    elif isinstance(chunk, UsageChunk):
                        usage = chunk
        except ProviderError as exc:
            failure = exc.message
        if failure is None and not text.strip():
            failure = "the model's summary was empty"
        cost = _cost(usage, provider.info())
        self.item = _charged(self.item, usage, cost)
        self._deps.approvals.add_cost(self.approvals_key, cost)
        if failure is not None:
            await self.messages.update(
                shown,
                say=Say.CONDENSE_CONTEXT_ERROR,
                text=f"Condensing the conversation failed: {failure}",
                partial=False,
            )
            await self._deps.journal.write(update_task(self.item))
            return False
        condense_id, hidden = await self.history.condense(text.strip())
        after = await self.budget.count(provider, self.model_request())
        info: dict[str, Any] = {
            "condenseId": condense_id,
            "prevContextTokens": before,
            "newContextTokens": after.tokens,
            "messagesCondensed": hidden,
            "cost": cost,
            "summary": text.strip(),
        }
        await self.messages.update(
            shown, text=json.dumps(info), context_condense=info, partial=False
        )
        usage_event = (self.id, self.usage(), dict(self.calls.tool_usage))
        await self._deps.journal.emit(
            TaskTokenUsageUpdated(payload=usage_event), update_task(self.item)
        )
        return True

    async def _account(
        self, started: ClineMessage, reply: StreamedReply, provider: Provider
    ) -> None:
        self.budget.observe(reply.usage)
        cost = reply.cost(provider.info())
        self.item = reply.charged(self.item, cost)
        self._deps.approvals.add_cost(self.approvals_key, cost)
        self.context_tokens = reply.context_tokens()
        await self.messages.update(started, text=reply.request_info(started.text, cost))
        usage = (self.id, self.usage(), dict(self.calls.tool_usage))
        await self._deps.journal.emit(TaskTokenUsageUpdated(payload=usage), update_task(self.item))


def _cost(usage: UsageChunk, info: ModelInfo) -> float:
    """What a request cost in dollars, at `info`'s prices (per million tokens)."""
    return (
        usage.input_tokens * info.input_price
        + usage.output_tokens * info.output_price
        + usage.cache_read_tokens * info.cache_read_price
        + usage.cache_write_tokens * info.cache_write_price
    ) / 1_000_000


def _charged(item: HistoryItem, usage: UsageChunk, cost: float) -> HistoryItem:
    return msgspec.structs.replace(
        item,
        tokens_in=item.tokens_in + usage.input_tokens,
        tokens_out=item.tokens_out + usage.output_tokens,
        cache_reads=(item.cache_reads or 0) + usage.cache_read_tokens,
        cache_writes=(item.cache_writes or 0) + usage.cache_write_tokens,
        total_cost=item.total_cost + cost,
    )
