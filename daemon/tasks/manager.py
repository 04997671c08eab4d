"""The TaskManager: creates, loads, steers and stops tasks. It owns the task group
in which every agent turn runs, and recovers after a restart the turns the
daemon left open.

Each part of it owns its own state, and the manager hands each what it needs:

- :mod:`.loaded`: the tasks in memory, the lease a command holds on one, unloading;
- :mod:`.new_tasks`: starting new tasks (the user's and an agent's), their numbers;
- :mod:`.reads`: the list of tasks, a task's snapshot and its pages;
- :mod:`.edits`: rewinding, editing, deleting and forking a task's history;
- :mod:`.checkpoint_restores`: checkpoints, restores and kernel replays;
- :mod:`.relayed`: tasks without a model and the tool calls relayed into them;
- :mod:`.subtasks`: agent calls as child tasks, ListAgents, stopping a subtree.

What more than one of them checks or prepares has a module of its own:
:mod:`.workspaces`, :mod:`.mcp_offers`, :mod:`.slash_commands`, :mod:`.incoming`
and :mod:`.commits`.

The manager keeps the commands on a running task: messages, asks, stop, close,
condense, resume, mode and todo list.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import partial
from pathlib import Path

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup, TaskStatus

from hdsp.daemon.agents import AgentCatalog
from hdsp.daemon.approvals import ApprovalPolicy
from hdsp.daemon.checkpoints import CheckpointService
from hdsp.daemon.config.agents import AgentDefinition, AgentLimits
from hdsp.daemon.config.modes import ModeDefinition
from hdsp.daemon.errors import BadRequest, CommandError, ShuttingDown
from hdsp.daemon.llm.registry import Providers
from hdsp.daemon.llm.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from hdsp.daemon.modes import ModeCatalog
from hdsp.daemon.store import Journal, Store
from hdsp.daemon.tools import AskAnswer, ToolRegistry, default_tools
from hdsp.protocol import (
    Ask,
    AskResponse,
    ClineMessage,
    PromptContext,
    RespondToAskData,
    Say,
    SendMessageData,
    StartNewTaskData,
    SystemPromptText,
    TaskClosed,
    TaskRef,
    TaskResumable,
    TaskState,
    TodoItem,
)

from .checkpoint_restores import CheckpointRestores
from .commits import committed_unless_failing
from .deps import TaskDeps, TaskKernels
from .edits import HistoryEdits
from .errors import TaskBusy, TaskNotFound
from .incoming import answer_with_context, bound_context
from .loaded import MAX_IDLE_LOADED, LoadedTasks, TaskCarry
from .mcp_offers import McpOffers, offer_mcp
from .new_tasks import NewTasks
from .prompt_size import check_prompt_size
from .reads import TaskReads
from .relayed import RelayedCalls
from .slash_commands import expand_command
from .subtasks import Subtasks
from .task import Task
from .turn import TurnState, turn_decoder
from .workspaces import TaskWorkspaces

__all__ = ["MAX_IDLE_LOADED", "McpOffers", "TaskCarry", "TaskManager"]

log = structlog.get_logger("hdsp.tasks")

_message_decoder = msgspec.json.Decoder(ClineMessage)


class TaskManager:
    def __init__(
        self,
        store: Store,
        journal: Journal,
        providers: Providers,
        *,
        tools: ToolRegistry | None = None,
        approvals: ApprovalPolicy | None = None,
        retry_policy: RetryPolicy | None = None,
        kernels: TaskKernels | None = None,
        checkpoints: CheckpointService | None = None,
        default_workspace: str | None = None,
        private_dirs: Sequence[Path] = (),
        mcp_offers: McpOffers | None = None,
    ) -> None:
        #: What every task of this manager works with (one object: a change here,
        #: such as new settings, reaches them all).
        self.deps = TaskDeps(
            store=store,
            journal=journal,
            providers=providers,
            tools=tools if tools is not None else default_tools(),
            approvals=approvals if approvals is not None else ApprovalPolicy(),
            retry_policy=retry_policy or DEFAULT_RETRY_POLICY,
            kernels=kernels,
            checkpoints=checkpoints,
            closing=lambda: self._closing,
        )
        self.store = store
        self.journal = journal
        self.providers = providers
        #: Where MCP servers a client offers a task go (the daemon's MCP hub).
        self.mcp_offers = mcp_offers
        self._tg: TaskGroup | None = None
        self._closing = False
        #: The tasks in memory, and the lease a command holds on one.
        self.loaded = LoadedTasks(self.deps)
        #: The checks on a new task's workspace (the daemon's working directory
        #: for a StartNewTask that names none: an old client).
        self.workspaces = TaskWorkspaces(default_workspace, private_dirs)
        open_, tg = self._check_open, self._require_tg
        self.new_tasks = NewTasks(
            self.deps, self.loaded, self.workspaces, mcp_offers, check_open=open_, task_group=tg
        )
        number = self.new_tasks.next_number
        #: Agent calls: child tasks (seed 002).
        self.subtasks = Subtasks(self.new_tasks, self.loaded, store, journal, self.deps.agents)
        self.deps.subtasks = self.subtasks
        self.reads = TaskReads(store, journal, self.loaded)
        self.edits = HistoryEdits(
            store, journal, self.loaded, providers, check_open=open_, next_number=number
        )
        self.checkpoints = CheckpointRestores(
            store, self.loaded, self.edits, checkpoints, check_open=open_, task_group=tg
        )
        self.relayed = RelayedCalls(
            self.deps,
            self.loaded,
            self.workspaces,
            check_open=open_,
            next_number=number,
            task_group=tg,
        )

    @property
    def tools(self) -> ToolRegistry:
        return self.deps.tools

    @property
    def approvals(self) -> ApprovalPolicy:
        return self.deps.approvals

    @property
    def retry_policy(self) -> RetryPolicy:
        return self.deps.retry_policy

    @retry_policy.setter
    def retry_policy(self, policy: RetryPolicy) -> None:
        self.deps.retry_policy = policy

    @property
    def max_idle_loaded(self) -> int:
        """Idle tasks beyond this many are unloaded, the least recently used first."""
        return self.loaded.max_idle_loaded

    @max_idle_loaded.setter
    def max_idle_loaded(self, limit: int) -> None:
        self.loaded.max_idle_loaded = limit

    def apply_mode_settings(
        self, custom_modes: Sequence[ModeDefinition], custom_instructions: str
    ) -> None:
        """The settings' custom modes and global instructions, for every task."""
        self.deps.modes = ModeCatalog(custom_modes)
        self.deps.custom_instructions = custom_instructions

    def apply_agent_settings(self, agents: Sequence[AgentDefinition], limits: AgentLimits) -> None:
        """The settings' agents and tree limits, for every task."""
        catalog = AgentCatalog(agents, limits)
        self.deps.agents = catalog
        self.subtasks.agents = catalog

    @property
    def mistake_limit(self) -> int:
        """Consecutive tool errors before a task asks mistake_limit_reached."""
        return self.deps.mistake_limit

    @mistake_limit.setter
    def mistake_limit(self, limit: int) -> None:
        self.deps.mistake_limit = limit

    # ---- lifetime -----------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self.new_tasks.number = await self.store.read(self.store.db.max_task_number)
        async with anyio.create_task_group() as tg:
            self._tg = self.loaded.task_group = tg
            replays = await self.checkpoints.pending()
            await self._recover(tg, replaying={p.task_id for p in replays})
            await self.checkpoints.recover(tg, replays)
            task_status.started()
            await anyio.sleep_forever()

    async def _recover(self, tg: TaskGroup, replaying: Collection[str] = ()) -> None:
        """Pick up every turn the daemon left open when it stopped or crashed.

        A turn that waited on an ask keeps waiting on it (answering it goes on
        where the turn stood). A turn that was working becomes resumable: the task
        asks `resume_task`, as Roo does on load, and answering it (or ResumeTask)
        goes on where the turn stood. A task whose restore waited for the
        approval of its kernel replay (`replaying`) waits for it again.
        """
        rows = await self.store.read(self.store.db.open_turns)
        for row, turn_body in rows:
            task = await self.loaded.load_row(row)
            for ts in await task.messages.finish_left_streaming():
                log.info("finished a message left streaming", task_id=task.id, ts=ts)
            turn = turn_decoder.decode(turn_body) if turn_body is not None else None
            if turn is None:
                if not task.history.awaits_reply or task.id in replaying:
                    # Nothing was in flight; only the state was stale.
                    await task.set_state(TaskState.IDLE)
                    self.loaded.settle(task)
                    continue
                turn = TurnState()
            task.turn = turn
            if not await self._waits_on_ask(task, turn) and task.item.parent_task_id is not None:
                # An agent's child task goes on when its caller's call attaches to it
                # again (after the tree's root is resumed), not on an ask of its own.
                await task.set_state(TaskState.RESUMABLE, TaskResumable(payload=(task.id,)))
                await task.save_turn()
                log.info("child task waits for its caller", task_id=task.id)
                continue
            if not await self._waits_on_ask(task, turn):
                await task.set_state(TaskState.RESUMABLE, TaskResumable(payload=(task.id,)))
                ask = await task.asks.post(Ask.RESUME_TASK)
                turn.resume_ask_ts = ask.ts
                await task.save_turn()
            task.start_turn(tg, resume=True)
            log.info("task picked up after restart", task_id=task.id)
        await self.journal.flush_for_read()

    async def _waits_on_ask(self, task: Task, turn: TurnState) -> bool:
        """Whether the open turn stood at an ask that is still unanswered."""
        waiting = [turn.resume_ask_ts, turn.ask_ts, *(c.ask_ts for c in turn.calls)]
        for ts in waiting:
            if ts is None:
                continue
            body = await self.store.read(self.store.db.ui_message, task.id, ts)
            if body is not None and not _message_decoder.decode(body).is_answered:
                return True
        return False

    @property
    def closing(self) -> bool:
        return self._closing

    async def shutdown(self) -> None:
        """Stop every running turn, saving its task as resumable."""
        self._closing = True
        async with anyio.create_task_group() as tg:
            for task in self.loaded:
                if task.busy:
                    tg.start_soon(partial(task.stop, as_state=TaskState.RESUMABLE))

    # ---- queries ------------------------------------------------------------

    def statistics(self) -> dict[str, int]:
        return self.loaded.statistics()

    def is_busy(self, task_id: str) -> bool:
        """Whether `task_id` is working now (a turn runs); False for a task not loaded."""
        return self.loaded.is_busy(task_id)

    def is_loaded(self, task_id: str) -> bool:
        """Whether `task_id` is in memory now (not only in the store)."""
        return task_id in self.loaded

    def kernel_choice(self, task_id: str) -> tuple[str | None, str | None]:
        """Where the task wants its kernels (its configuration's provider, or
        None) and its profile, for the kernel service; (None, None) for a task
        not loaded."""
        return self.loaded.kernel_choice(task_id)

    async def note_kernel(self, task_id: str, kind: Say, note: str) -> None:
        """Record in the task's history what befell a kernel it used (`kind`:
        kernel_culled, shut down for idling; notebook_kernel, the notebook's
        kernel restarted where it runs, or gone and detached from)."""
        if self.closing:
            return
        try:
            task = await self.loaded.load(task_id)
        except CommandError:
            return  # closed or gone meanwhile
        with self.loaded.settling(task):
            await task.messages.say(kind, note)

    # ---- commands -----------------------------------------------------------

    async def start_task(self, data: StartNewTaskData, *, sender: str | None = None) -> TaskRef:
        """StartNewTask (see :meth:`.new_tasks.NewTasks.start_task`)."""
        return await self.new_tasks.start_task(data, sender=sender)

    async def send_message(
        self,
        task_id: str,
        data: SendMessageData,
        *,
        by: str | None = None,
        sender: str | None = None,
    ) -> TaskRef:
        """A message from the user: it answers a waiting ask, waits in the queue of
        a busy task, or starts the next turn. `by` names the client (who answered
        an ask); `sender`, over TCP, the name its key is authorised under, kept on
        the message."""
        self._check_open()
        if not (data.text or "").strip() and not data.images:
            raise BadRequest("The message has no text and no images.")
        async with self.loaded.lease(task_id) as task:
            check_prompt_size(data.text, self.providers, task.item.api_config_name)
            offer_mcp(self.mcp_offers, task_id, str(task.workspace), data.mcp_servers)
            if data.text:
                text, mode = await expand_command(
                    self.deps.slash_commands,
                    self.deps.modes,
                    data.text,
                    task.workspace,
                    task.mode(),
                )
                if mode is not None and mode != task.item.mode:
                    await task.switch_mode(mode)
                data = msgspec.structs.replace(data, text=text)
            if data.context is not None:
                context = await bound_context(
                    data.context, task.id, task.workspace, self.deps.kernels
                )
                data = msgspec.structs.replace(data, context=context)
            ask = task.pending_ask
            if ask is not None:
                answer = answer_with_context(
                    AskResponse.MESSAGE, data.text, data.images, data.context, by, sender
                )
                await task.asks.respond(ask.ts, answer)
                return TaskRef(task_id=task_id, state=TaskState.RUNNING)
            if task.busy:
                # Queued, or, to steer, taken by the running turn before its next request.
                await task.queue.put(data, sent_by=sender)
                # A reply that says queued is a promise: a crash must not break it.
                await committed_unless_failing(self.store, self.journal)
                return TaskRef(task_id=task_id, state=task.state, queued=True)
            task.start_turn(self._require_tg(), message=data, sent_by=sender)
            return TaskRef(task_id=task_id, state=TaskState.RUNNING)

    async def switch_mode(self, task_id: str, slug: str) -> TaskRef:
        """SwitchMode: the task's next request uses mode `slug`."""
        async with self.loaded.lease(task_id) as task:
            await task.switch_mode(slug)
        return TaskRef(task_id=task_id, state=task.state)

    async def update_todo_list(self, task_id: str, todos: list[TodoItem]) -> TaskRef:
        """UpdateTodoList: a person's edit, told to the model."""
        async with self.loaded.lease(task_id) as task:
            await task.set_todos(todos, by="user")
        return TaskRef(task_id=task_id, state=task.state)

    async def system_prompt(self, task_id: str) -> SystemPromptText:
        async with self.loaded.lease(task_id) as task:
            return SystemPromptText(text=task.system_prompt(), mode=task.mode().slug)

    async def respond_to_ask(
        self,
        task_id: str,
        data: RespondToAskData,
        *,
        by: str | None = None,
        sender: str | None = None,
    ) -> TaskRef:
        task = self.loaded.get(task_id)
        if task is None:
            # Not loaded, so no turn runs and no ask waits (a waiting ask keeps
            # its task loaded): say whether the ask was answered already.
            raise await self.reads.why_no_ask(task_id, data.ask_ts)
        context = None
        if data.context is not None and (data.text or data.images):
            # (The context checked, its kernel bound, as a message's.)
            context = await bound_context(data.context, task.id, task.workspace, self.deps.kernels)
        answer = answer_with_context(
            AskResponse(data.response), data.text, data.images, context, by, sender
        )
        await task.asks.respond(data.ask_ts, answer)
        return TaskRef(task_id=task_id, state=task.state)

    async def delete_queued_message(self, task_id: str, message_id: str) -> TaskRef:
        async with self.loaded.lease(task_id) as task:
            await task.queue.delete(message_id)
            return TaskRef(task_id=task_id, state=task.state)

    async def cancel(self, task_id: str) -> TaskRef:
        task = self.loaded.get(task_id)
        if task is None:
            row = await self.store.read(self.store.db.get_task, task_id)
            if row is None:
                raise TaskNotFound(task_id)
            return TaskRef(task_id=task_id, state=TaskState(row[3]))
        await task.stop()
        if task.item.parent_task_id is not None:
            await task.abandon()  # a child a restart left waiting for its caller
        await self.subtasks.stop_below(task)
        return TaskRef(task_id=task_id, state=task.state)

    async def close(self, task_id: str) -> TaskRef:
        """Stop the task and forget what the daemon keeps of it beside its history
        (loaded or not: an idle task may have been unloaded already)."""
        ref = await self.cancel(task_id)
        self.loaded.forget(task_id)
        self.approvals.forget(task_id)
        if self.mcp_offers is not None:
            self.mcp_offers.forget_task(task_id)
        if self.deps.kernels is not None:
            await self.deps.kernels.release_task(task_id)
        await self.journal.emit(TaskClosed(payload=(task_id,)))
        return ref

    async def condense(self, task_id: str) -> TaskRef:
        """Condense the task's conversation now (CondenseTask): not while it works."""
        self._check_open()
        async with self.loaded.lease(task_id) as task:
            if task.busy or task.turn is not None:
                raise TaskBusy(
                    f"Task {task_id} is working; condense it when its turn is over "
                    "(it condenses by itself when its context fills up).",
                )
            provider = self.providers.get(task.item.api_config_name)
            before = await task.budget.count(provider, task.model_request())
            await task.condense(provider, before.tokens, manual=True)
            return TaskRef(task_id=task_id, state=task.state)

    async def edit_message(
        self,
        task_id: str,
        ts: int,
        text: str,
        images: list[str] | None,
        context: PromptContext | None = None,
    ) -> TaskRef:
        """Replace the user's message `ts` and go on from there (EditMessage)."""
        edited = await self.edits.rewind_for_edit(task_id, ts, text, images, context)
        return await self.send_message(task_id, edited)

    async def resume(self, task_id: str) -> TaskRef:
        """Continue a task: answer its resume ask, make an unanswered request
        again, or ask how to go on (resume_task, or resume_completed_task)."""
        self._check_open()
        async with self.loaded.lease(task_id) as task:
            return await self._resume(task)

    async def _resume(self, task: Task) -> TaskRef:
        task_id = task.id
        ask = task.pending_ask
        if ask is not None and ask.ask in (Ask.RESUME_TASK, Ask.RESUME_COMPLETED_TASK):
            await task.asks.respond(ask.ts, AskAnswer(AskResponse.YES, by="resume"))
            return TaskRef(task_id=task_id, state=TaskState.RUNNING)
        if task.busy:
            what = "waits for an answer to its ask" if ask is not None else "is running"
            raise TaskBusy(f"Task {task_id} {what}.")
        tg = self._require_tg()
        if task.history.awaits_reply:
            # The last request was never answered (cancelled, or the daemon stopped).
            task.start_turn(tg)
            return TaskRef(task_id=task_id, state=TaskState.RUNNING)
        kind = Ask.RESUME_COMPLETED_TASK if task.state is TaskState.COMPLETED else Ask.RESUME_TASK
        task.turn = TurnState()
        task.turn.resume_ask_ts = (await task.asks.post(kind)).ts
        await task.save_turn()
        task.start_turn(tg, resume=True)
        return TaskRef(task_id=task_id, state=task.state)

    # ---- helpers ------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closing:
            raise ShuttingDown("The daemon is shutting down.")

    def _require_tg(self) -> TaskGroup:
        if self._tg is None:
            raise ShuttingDown("The task manager is not running.")
        return self._tg
