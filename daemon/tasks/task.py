"""One conversation with the agent: Roo's Task.

A task holds its HistoryItem, its API history and its state. Each agent turn (model
request, tool calls, repeat) runs in its own cancel scope inside the TaskManager's
task group; cancelling the scope stops the turn wherever it is, and the turn always
ends with a final event (`taskCompleted`, `taskAborted` or `taskResumable`).

This module keeps the turn's lifecycle and its loop. The parts own their state:
:mod:`.record` (the item, its state and what the task spent), :mod:`.messages`
(UI messages), :mod:`.history` (the API history; what a request sends is
:mod:`.context`'s pure reduction of it), :mod:`.asks` (the ask box),
:mod:`.turn_run` (whether a turn runs, its cancel scope), :mod:`.open_turn` (the
open turn as stored; :mod:`.turn` its shapes), :mod:`.turn_requests` (a turn's
model requests with their retries; :mod:`.reply` the streaming reply,
:mod:`.context_fit` the fit to the context window, :mod:`.model_request` what a
request holds), :mod:`.feedback` (notes for the next request), :mod:`.calls`
(the tool calls and what a tool sees), :mod:`.queued` (messages that wait),
:mod:`.task_mode` (the mode) and :mod:`.todos` (the todo list). Its
collaborators come typed in :class:`~.deps.TaskDeps`; the task knows no
TaskManager: its owner hands it a `settle` callback, called when a turn is over.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup

from hdsp.daemon.conversation import ApiMessage, ModelRequest
from hdsp.daemon.llm import Provider
from hdsp.daemon.modes import Mode
from hdsp.protocol import (
    Ask,
    AskResponse,
    ClineMessage,
    CompletedInfo,
    Event,
    HistoryItem,
    QueuedMessage,
    Say,
    SendMessageData,
    TaskAborted,
    TaskActive,
    TaskCompleted,
    TaskResumable,
    TaskStarted,
    TaskState,
    TodoItem,
)

from .asks import AskBox
from .calls import ToolCalls
from .context_fit import ContextFit
from .deps import TaskDeps
from .errors import TaskBusy
from .feedback import Feedback
from .history import ApiHistory
from .messages import TaskMessages
from .model_request import task_request, task_system_prompt
from .open_turn import OpenTurn
from .queued import MessageQueue
from .record import TaskRecord
from .returns import returned_by
from .task_mode import TaskModes, entered, task_mode
from .todos import TaskTodos
from .turn import CallState, TurnState
from .turn_requests import TurnRequests, add_user_message
from .turn_run import TurnRun
from .waiting import WAIT_UPDATE_INTERVAL

__all__ = ["MAX_REQUESTS_PER_TURN", "WAIT_UPDATE_INTERVAL", "Task", "entered", "task_mode"]

log = structlog.get_logger("hdsp.tasks")

#: Model requests in one turn before the turn stops (a guard against loops).
MAX_REQUESTS_PER_TURN = 50


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
        self.record = TaskRecord(
            item, state, deps.journal, deps.approvals, lambda: self.calls.tool_usage
        )
        self.messages = TaskMessages(item.id, deps.store, deps.journal, deps.clock, last_ts)
        self.history = ApiHistory(item.id, api, deps.journal, self.messages.next_ts)
        self.open_turn = OpenTurn(item.id, self.history, deps.journal)
        #: Notes for the next model request (a person's feedback, among them).
        self._feedback = Feedback()
        self.modes = TaskModes(deps, self.record)
        self.todos = TaskTodos(
            self.record, self.history, self._feedback, lambda: self.turn is not None or self.busy
        )
        self.asks = AskBox(self.messages, self.record.set_state, deps.clock)
        self.calls = ToolCalls(
            deps,
            self.messages,
            self.asks,
            self.workspace,
            self.save_turn,
            mode=self.modes.mode,
            services={"modes": self.modes, "todo_list": self.todos, "agents": deps.subtasks},
            approvals_key=lambda: self.record.approvals_key,
        )
        self._run = TurnRun()
        self.queue = MessageQueue(item.id, self.messages.emit, deps.clock, queued)
        self.fit = ContextFit(
            deps.providers, self.messages, self.history, self.record, self.model_request
        )
        #: What the next request takes of the context (counted before it is sent).
        self.budget = self.fit.budget
        self.requests = TurnRequests(
            deps,
            self.messages,
            self.history,
            self.asks,
            self.queue,
            self._feedback,
            self.fit,
            self.record,
            save_turn=self.save_turn,
            cancel=self._run.cancel,
        )
        #: What the open turn returns to the caller (seed 002) once it completes.
        self._returned: str | None = None

    @property
    def item(self) -> HistoryItem:
        return self.record.item

    @item.setter
    def item(self, item: HistoryItem) -> None:
        self.record.item = item

    @property
    def state(self) -> TaskState:
        return self.record.state

    @state.setter
    def state(self, state: TaskState) -> None:
        self.record.state = state

    @property
    def context_tokens(self) -> int:
        return self.record.context_tokens

    @context_tokens.setter
    def context_tokens(self, tokens: int) -> None:
        self.record.context_tokens = tokens

    @property
    def turn(self) -> TurnState | None:
        """The open turn's saved state (None between turns)."""
        return self.open_turn.state

    @turn.setter
    def turn(self, turn: TurnState | None) -> None:
        self.open_turn.state = turn

    @property
    def id(self) -> str:
        return self.item.id

    @property
    def workspace(self) -> Path:
        return Path(self.item.workspace or ".")

    # ---- what the manager sees ------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._run.busy

    @property
    def pending_ask(self) -> ClineMessage | None:
        return self.asks.pending

    @property
    def idle(self) -> bool:
        """No turn runs or is open, nothing waits (ask, queue, feedback) and no
        message streams: all there is of the task is in the store, but for a few
        counters (a :class:`.loaded.TaskCarry`)."""
        return (
            not self.busy
            and self.asks.pending is None
            and self.turn is None
            and not self.queue
            and not self._feedback
            and not self.messages.partial
        )

    def mode(self) -> Mode:
        return self.modes.mode()

    async def switch_mode(self, slug: str) -> str:
        return await self.modes.switch_mode(slug)

    async def set_todos(self, items: list[TodoItem], *, by: str) -> None:
        await self.todos.set_todos(items, by=by)

    # ---- durable changes (the record and the open turn) ----------------------

    async def set_state(self, state: TaskState, event: Event | None = None) -> None:
        await self.record.set_state(state, event)

    async def save_turn(self) -> None:
        await self.open_turn.save()

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
        scope = self._run.begin()
        if not resume:
            self.state = TaskState.RUNNING
        tg.start_soon(
            self._run_turn, tg, scope, first, message, resume, sent_by, name=f"task {self.id}"
        )

    async def wait_turn_over(self) -> None:
        """Wait until no turn runs (one that starts meanwhile is waited for too)."""
        await self._run.wait_over()

    async def stop(self, *, as_state: TaskState = TaskState.ABORTED) -> None:
        """Cancel the running turn, if any, and wait until it has ended."""
        await self._run.stop(as_state)

    async def abandon(self) -> None:
        """Close the turn a restart left open that nothing runs: an agent's child
        whose caller was stopped before it came back for it (seed 002). As a stop
        would: its open calls are answered as cancelled, and the task is aborted."""
        if self.busy or self.turn is None:
            return
        self._run.stop_as = TaskState.ABORTED
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
            raise TaskBusy(f"Task {self.id} is working.")
        scope = self._run.begin()
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
                    usage = (self.id, self.record.usage(), self.record.tool_usage(), info)
                    await self.set_state(TaskState.COMPLETED, TaskCompleted(payload=usage))
                else:
                    await self.set_state(TaskState.ABORTED, TaskAborted(payload=(self.id,)))
            self._over()
        await self._after(tg, completed=done)
        return call

    async def _run_turn(
        self,
        tg: TaskGroup,
        scope: anyio.CancelScope,
        first: bool,
        message: SendMessageData | None,
        resume: bool,
        sent_by: str | None = None,
    ) -> None:
        structlog.contextvars.bind_contextvars(task_id=self.id)
        outcome: TaskState | None = None
        try:
            with scope:
                if not resume:
                    start: Event = (TaskStarted if first else TaskActive)(payload=(self.id,))
                    await self.set_state(TaskState.RUNNING, start)
                if message is not None:
                    await add_user_message(self.messages, self.history, message, sent_by)
                await self._loop()
                outcome = TaskState.COMPLETED
        except Exception:
            # A bug must not take the daemon down with it: the task ends aborted,
            # says so, and the log has the traceback.
            log.exception("task turn failed")
        finally:
            with anyio.move_on_after(10, shield=True):
                await self._end_turn(outcome)
            self._over()
        await self._after(tg, completed=outcome is TaskState.COMPLETED)

    def _over(self) -> None:
        """A turn (or a relayed call) has ended: nothing of it waits any more."""
        self._run.over()
        self.asks.clear()
        self.messages.tool_use_id = None

    async def _after(self, tg: TaskGroup, *, completed: bool) -> None:
        """After a turn: one that completed starts the next queued message's (unless
        the daemon is closing); then the owner may unload the task."""
        if completed and not self._deps.closing():
            queued = await self.queue.take()
            if queued is not None:
                self.start_turn(tg, message=queued[0], sent_by=queued[1])
        self._settle(self)

    async def _end_turn(self, outcome: TaskState | None) -> None:
        # A user's cancel keeps what the model said; a daemon stopping makes the
        # request again on resume instead.
        keep = outcome is None and self._run.stop_as is not TaskState.RESUMABLE
        await self.requests.close_reply(keep=keep)
        # Anything else still streaming (a retry's countdown, cut off by a cancel)
        # streams no more.
        await self.messages.finish_partial()
        if outcome is None and self._run.stop_as is TaskState.RESUMABLE:
            # The daemon is stopping: keep the open turn for the next start.
            await self.set_state(TaskState.RESUMABLE, TaskResumable(payload=(self.id,)))
            return
        await self.open_turn.close("The tool call was cancelled by the user.")
        # What the turn passed through (a big plot's 40 MB of base64) is freed by
        # now: given back before the turn's end is told.
        await self._deps.memory.settle()
        if outcome is TaskState.COMPLETED:
            is_subtask = self.item.parent_task_id is not None
            # What the task returns to its caller (seed 002), stored with its state.
            self.item = msgspec.structs.replace(self.item, result=self._returned)
            completed = TaskCompleted(
                payload=(
                    self.id,
                    self.record.usage(),
                    self.record.tool_usage(),
                    CompletedInfo(is_subtask=is_subtask),
                )
            )
            await self.set_state(TaskState.COMPLETED, completed)
            return
        if self._run.scope is not None and not self._run.cancelled:
            await self.messages.say(
                Say.ERROR, "The task stopped on an internal error; see the log."
            )
        await self.set_state(TaskState.ABORTED, TaskAborted(payload=(self.id,)))

    async def _loop(self) -> None:
        for _ in range(MAX_REQUESTS_PER_TURN):
            turn = self.turn
            if turn is None:
                turn = self.turn = TurnState()
                await self.save_turn()
            if turn.resume_ask_ts is not None:
                answer = await self.asks.wait_saved(turn.resume_ask_ts)
                if answer is not None and answer.text:
                    self._feedback.add(answer.text)
                turn.resume_ask_ts = None
                await self.save_turn()
            if turn.phase == "request":
                reply = await self.requests.make(turn)
                if not reply.tool_calls:
                    await self.history.add("assistant", reply.content())
                    self._returned = reply.text  # the text fallback (seed 002, §4)
                    return  # a reply with no tool call ends the turn
                turn.phase = "tools"
                turn.calls = reply.call_states()
                await self.open_turn.add("assistant", reply.content())
            await self.calls.run_all(turn.calls)
            await self.open_turn.close_calls("")
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
                    self._feedback.add(answer.text)
        await self.messages.say(
            Say.ERROR, f"The agent made {MAX_REQUESTS_PER_TURN} requests in one turn; stopping."
        )

    def system_prompt(self) -> str:
        """The system prompt of the task's next request (GetSystemPrompt shows it)."""
        return task_system_prompt(self._deps, self.item, self.mode())

    def model_request(self) -> ModelRequest:
        return task_request(self._deps, self.item, self.mode(), self.history.for_request())

    async def condense(self, provider: Provider, before: int, *, manual: bool = False) -> bool:
        """Condense the conversation now (see :meth:`.context_fit.ContextFit.condense`)."""
        return await self.fit.condense(provider, before, manual=manual)
